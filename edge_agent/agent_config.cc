#include "edge_agent/agent_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

namespace loft::agent {

Status AgentConfig::Validate() const {
  if (node_name.empty()) return InvalidArgument("node_name is required");
  if (cache_dir.empty()) return InvalidArgument("cache_dir is required");
  if (peer_bind.empty()) return InvalidArgument("peer_bind is required");
  if (!insecure && keys_dir.empty()) return InvalidArgument("keys_dir is required unless insecure: true");
  if (credits < 1) return InvalidArgument(fmt::format("credits must be >= 1 (got {})", credits));
  if (compute_mode != "synthetic" && compute_mode != "external") {
    return InvalidArgument("compute_mode must be 'synthetic' or 'external' (got '" + compute_mode + "')");
  }
  if (compute_mode == "external" && consumer_endpoint.empty()) {
    return InvalidArgument("compute_mode external needs consumer_endpoint (ipc:// or loopback tcp://)");
  }
  if (consumer_timeout_ms < 1) return InvalidArgument("consumer_timeout_ms must be >= 1");
  if (compute_mode == "synthetic" && cluster_spec.empty()) {
    return InvalidArgument("compute_mode synthetic needs cluster_spec (the node's compute constants)");
  }
  if (link_emulation && cluster_spec.empty()) return InvalidArgument("link_emulation needs cluster_spec");
  if (metrics_port < -1 || metrics_port > 65535) {
    return InvalidArgument(fmt::format(
        "metrics_port must be 0 (off) or a port 1..65535 (got {}; -1 is accepted as a legacy 'off')",
        metrics_port));
  }
  if (heartbeat_interval_ms < 1) return InvalidArgument("heartbeat_interval_ms must be >= 1");
  if (scheduler_timeout_ms <= heartbeat_interval_ms) {
    return InvalidArgument("scheduler_timeout_ms must be > heartbeat_interval_ms");
  }
  if (fetch_timeout_ms < 1) return InvalidArgument("fetch_timeout_ms must be >= 1");
  if (fetch_batch < 1 || fetch_batch > 4096) return InvalidArgument("fetch_batch must be 1 … 4096");
  if (max_message_bytes < 1024) return InvalidArgument("max_message_bytes must be >= 1024");
  if (max_grants < 1) return InvalidArgument("max_grants must be >= 1");
  if (ring_bind.empty()) return InvalidArgument("ring_bind is required");
  if (eval_every < 0) return InvalidArgument(fmt::format("eval_every must be >= 0 (got {})", eval_every));
  if (last_iteration < -1) return InvalidArgument("last_iteration must be >= -1");
  if (ring_timeout_ms < 1) return InvalidArgument("ring_timeout_ms must be >= 1");
  return OkStatus();
}

StatusOr<AgentConfig> ParseAgentConfig(const std::string& yaml_text, const std::string& source) {
  AgentConfig c;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("{}:{}: {}", source, e.mark.line + 1, e.msg));
  }
  if (root.IsNull()) return c;
  if (!root.IsMap()) return InvalidArgument(source + ": expected a map of agent settings");
  for (const auto& kv : root) {
    std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    int line = v.Mark().line + 1;
    try {
      if (key == "node_name")
        c.node_name = v.as<std::string>();
      else if (key == "cluster_spec")
        c.cluster_spec = v.as<std::string>();
      else if (key == "cache_dir")
        c.cache_dir = v.as<std::string>();
      else if (key == "check_cache")
        c.check_cache = v.as<bool>();
      else if (key == "scheduler_endpoint")
        c.scheduler_endpoint = v.as<std::string>();
      else if (key == "peer_bind")
        c.peer_bind = v.as<std::string>();
      else if (key == "peer_advertise")
        c.peer_advertise = v.as<std::string>();
      else if (key == "consumer_endpoint")
        c.consumer_endpoint = v.as<std::string>();
      else if (key == "consumer_timeout_ms")
        c.consumer_timeout_ms = v.as<int>();
      else if (key == "consumer_token")
        c.consumer_token = v.as<std::string>();
      else if (key == "keys_dir")
        c.keys_dir = v.as<std::string>();
      else if (key == "insecure")
        c.insecure = v.as<bool>();
      else if (key == "credits")
        c.credits = v.as<int>();
      else if (key == "compute_mode")
        c.compute_mode = v.as<std::string>();
      else if (key == "link_emulation")
        c.link_emulation = v.as<bool>();
      else if (key == "link_rate_emulation")
        c.link_rate_emulation = v.as<bool>();
      else if (key == "metrics_port")
        c.metrics_port = v.as<int>();
      else if (key == "metrics_address")
        c.metrics_address = v.as<std::string>();
      else if (key == "log_level")
        c.log_level = v.as<std::string>();
      else if (key == "heartbeat_interval_ms")
        c.heartbeat_interval_ms = v.as<int>();
      else if (key == "scheduler_timeout_ms")
        c.scheduler_timeout_ms = v.as<int>();
      else if (key == "fetch_timeout_ms")
        c.fetch_timeout_ms = v.as<int>();
      else if (key == "fetch_batch")
        c.fetch_batch = v.as<int>();
      else if (key == "max_message_bytes")
        c.max_message_bytes = v.as<int64_t>();
      else if (key == "max_grants")
        c.max_grants = v.as<int>();
      else if (key == "seed")
        c.seed = v.as<uint64_t>();
      else if (key == "ring_bind")
        c.ring_bind = v.as<std::string>();
      else if (key == "ring_advertise")
        c.ring_advertise = v.as<std::string>();
      else if (key == "test_data_dir")
        c.test_data_dir = v.as<std::string>();
      else if (key == "eval_every")
        c.eval_every = v.as<int>();
      else if (key == "last_iteration")
        c.last_iteration = v.as<int64_t>();
      else if (key == "ring_timeout_ms")
        c.ring_timeout_ms = v.as<int>();
      else
        return InvalidArgument(fmt::format("{}:{}: unknown agent setting '{}'", source, line, key));
    } catch (const YAML::Exception&) {
      return InvalidArgument(fmt::format("{}:{}: {} has the wrong type", source, line, key));
    }
  }
  return c;
}

StatusOr<AgentConfig> LoadAgentConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open agent config " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseAgentConfig(ss.str(), path);
}

}  // namespace loft::agent
