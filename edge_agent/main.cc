// loft-agent: the edge agent daemon. See edge_agent/README.md.
#include <google/protobuf/stubs/logging.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>

#include "core/clock.h"
#include "core/logging.h"
#include "core/metrics.h"
#include "edge_agent/agent_config.h"
#include "edge_agent/zmq_agent_server.h"

namespace {
std::atomic<bool> g_interrupted{false};
void OnSignal(int) {
  g_interrupted = true;
}
// Garbage from the network makes protobuf log parse complaints; keep them
// at debug level so a hostile peer cannot flood the log.
void ProtobufLog(google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
  if (level >= google::protobuf::LOGLEVEL_FATAL) {
    spdlog::critical("protobuf {}:{}: {}", file, line, message);
  } else {
    spdlog::debug("protobuf {}:{}: {}", file, line, message);
  }
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"loft-agent: serves this node's sample cache and runs its partitions"};
  std::string config_path;
  app.add_option("--config", config_path, "agent config YAML (see edge_agent/README.md)");
  loft::agent::AgentConfig f;  // flag values; applied only when given
  std::vector<std::pair<CLI::Option*, std::function<void(loft::agent::AgentConfig&)>>> flags;
  auto str = [&](const char* name, std::string loft::agent::AgentConfig::*field, const char* help) {
    flags.emplace_back(app.add_option(name, f.*field, help), [field, &f](auto& c) { c.*field = f.*field; });
  };
  auto num = [&](const char* name, int loft::agent::AgentConfig::*field, const char* help) {
    flags.emplace_back(app.add_option(name, f.*field, help), [field, &f](auto& c) { c.*field = f.*field; });
  };
  str("--node-name", &loft::agent::AgentConfig::node_name, "node name (as expanded in the cluster spec)");
  str("--cluster-spec", &loft::agent::AgentConfig::cluster_spec, "cluster spec YAML");
  str("--cache-dir", &loft::agent::AgentConfig::cache_dir, "this node's SampleCache directory");
  str("--scheduler", &loft::agent::AgentConfig::scheduler_endpoint, "scheduler endpoint");
  str("--peer-bind", &loft::agent::AgentConfig::peer_bind, "peer-fetch bind endpoint");
  str("--peer-advertise", &loft::agent::AgentConfig::peer_advertise, "peer endpoint announced to others");
  str("--consumer-endpoint", &loft::agent::AgentConfig::consumer_endpoint, "reserved (C API consumer)");
  str("--keys-dir", &loft::agent::AgentConfig::keys_dir, "CURVE key directory");
  str("--compute-mode", &loft::agent::AgentConfig::compute_mode, "synthetic");
  str("--metrics-address", &loft::agent::AgentConfig::metrics_address, "metrics HTTP address");
  str("--log-level", &loft::agent::AgentConfig::log_level, "trace|debug|info|warn|error|off");
  num("--credits", &loft::agent::AgentConfig::credits, "partition window");
  num("--metrics-port", &loft::agent::AgentConfig::metrics_port, "-1 off, 0 any");
  num("--heartbeat-interval-ms", &loft::agent::AgentConfig::heartbeat_interval_ms, "heartbeat period");
  num("--scheduler-timeout-ms", &loft::agent::AgentConfig::scheduler_timeout_ms, "re-register after");
  num("--fetch-timeout-ms", &loft::agent::AgentConfig::fetch_timeout_ms, "peer fetch deadline");
  num("--fetch-batch", &loft::agent::AgentConfig::fetch_batch, "ids per fetch request");
  bool insecure = false, link_emulation = false;
  auto* insecure_opt = app.add_flag("--insecure", insecure, "no CURVE (loopback endpoints only)");
  auto* link_opt = app.add_flag("--link-emulation", link_emulation, "emulate the spec's link rates");
  CLI11_PARSE(app, argc, argv);

  loft::agent::AgentConfig cfg;
  if (!config_path.empty()) {
    auto loaded = loft::agent::LoadAgentConfigFile(config_path);
    if (!loaded.ok()) {
      std::fprintf(stderr, "loft-agent: %s\n", loaded.status().ToString().c_str());
      return 2;
    }
    cfg = *loaded;
  }
  for (auto& [opt, apply] : flags) {
    if (opt->count() > 0) apply(cfg);
  }
  if (insecure_opt->count() > 0) cfg.insecure = insecure;
  if (link_opt->count() > 0) cfg.link_emulation = link_emulation;
  if (auto st = loft::InitLogging(cfg.log_level, "loft-agent"); !st.ok()) {
    std::fprintf(stderr, "loft-agent: %s\n", st.ToString().c_str());
    return 2;
  }
  google::protobuf::SetLogHandler(&ProtobufLog);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  loft::metrics::Registry registry;
  auto server = loft::agent::ZmqAgentServer::Create(cfg, loft::SystemClock::Default(), &registry);
  if (!server.ok()) {
    spdlog::error("cannot start: {}", server.status().ToString());
    return 1;
  }
  std::printf("{\"peer_endpoint\": \"%s\", \"metrics_port\": %d}\n", (*server)->peer_endpoint().c_str(),
              (*server)->metrics_port());
  std::fflush(stdout);
  auto st = (*server)->Run(&g_interrupted);
  if (!st.ok()) {
    spdlog::error("stopped: {}", st.ToString());
    return 1;
  }
  return 0;
}
