#include "edge_agent/agent_flags.h"

namespace loft::agent {

AgentFlags::AgentFlags(CLI::App& app) {
  auto str = [&](const char* name, std::string AgentConfig::*field, const char* help) {
    flags_.emplace_back(app.add_option(name, values_.*field, help),
                        [this, field](AgentConfig& c) { c.*field = values_.*field; });
  };
  auto num = [&](const char* name, int AgentConfig::*field, const char* help) {
    flags_.emplace_back(app.add_option(name, values_.*field, help),
                        [this, field](AgentConfig& c) { c.*field = values_.*field; });
  };
  str("--node-name", &AgentConfig::node_name, "node name (as expanded in the cluster spec)");
  str("--cluster-spec", &AgentConfig::cluster_spec, "cluster spec YAML");
  str("--cache-dir", &AgentConfig::cache_dir, "this node's SampleCache directory");
  str("--manifest", &AgentConfig::manifest,
      "the dataset manifest file (MANIFEST.loft); the scheduler then sends only its root");
  str("--scheduler", &AgentConfig::scheduler_endpoint, "scheduler endpoint");
  str("--peer-bind", &AgentConfig::peer_bind, "peer-fetch bind endpoint");
  str("--peer-advertise", &AgentConfig::peer_advertise, "peer endpoint announced to others");
  str("--consumer-endpoint", &AgentConfig::consumer_endpoint,
      "compute_mode external: ROUTER for the C API consumer (ipc:// or loopback tcp://)");
  str("--keys-dir", &AgentConfig::keys_dir, "CURVE key directory");
  str("--compute-mode", &AgentConfig::compute_mode, "synthetic | external");
  str("--metrics-address", &AgentConfig::metrics_address, "metrics HTTP address");
  str("--log-level", &AgentConfig::log_level, "trace|debug|info|warn|error|off");
  str("--ring-bind", &AgentConfig::ring_bind, "all-reduce ROUTER bind endpoint (training)");
  str("--ring-advertise", &AgentConfig::ring_advertise, "all-reduce endpoint announced to others");
  num("--credits", &AgentConfig::credits, "partition window");
  num("--metrics-port", &AgentConfig::metrics_port, "Prometheus port; 0 = off (-1 also means off)");
  num("--consumer-timeout-ms", &AgentConfig::consumer_timeout_ms,
      "compute_mode external: deadline for a consumer and its report, per partition");
  num("--heartbeat-interval-ms", &AgentConfig::heartbeat_interval_ms, "heartbeat period");
  num("--scheduler-timeout-ms", &AgentConfig::scheduler_timeout_ms, "re-register after");
  num("--fetch-timeout-ms", &AgentConfig::fetch_timeout_ms, "peer fetch deadline");
  num("--fetch-batch", &AgentConfig::fetch_batch, "ids per fetch request");
  num("--preprocess-threads", &AgentConfig::preprocess_threads,
      "preprocessing threads (decode, augment, resize; dataset.encoding jpeg)");
  num("--request-tos", &AgentConfig::request_tos,
      "IP type of service of requests (16 = low delay, 0 = unmarked)");
  num("--ring-timeout-ms", &AgentConfig::ring_timeout_ms, "one all-reduce attempt's deadline (training)");
  auto* insecure = app.add_flag("--insecure", insecure_, "no CURVE (loopback endpoints only)");
  flags_.emplace_back(insecure, [this](AgentConfig& c) { c.insecure = insecure_; });
  auto* link = app.add_flag("--link-emulation", link_emulation_, "emulate the spec's link rates");
  flags_.emplace_back(link, [this](AgentConfig& c) { c.link_emulation = link_emulation_; });
  auto* disk = app.add_flag("--disk-emulation", disk_emulation_, "emulate the spec's disk read rate");
  flags_.emplace_back(disk, [this](AgentConfig& c) { c.disk_emulation = disk_emulation_; });
}

void AgentFlags::ApplyTo(AgentConfig& cfg) const {
  for (const auto& [opt, apply] : flags_) {
    if (opt->count() > 0) apply(cfg);
  }
}

}  // namespace loft::agent
