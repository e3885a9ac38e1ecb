#include "edge_agent/agent_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <type_traits>
#include <variant>
#include <vector>

#include "cache/sample_cache.h"

namespace loft::agent {

Status AgentConfig::Validate() const {
  if (node_name.empty()) return InvalidArgument("node_name is required");
  if (cache_dir.empty()) return InvalidArgument("cache_dir is required");
  if (peer_bind.empty()) return InvalidArgument("peer_bind is required");
  if (!insecure && keys_dir.empty()) return InvalidArgument("keys_dir is required unless insecure: true");
  if (credits < 1) return InvalidArgument(fmt::format("credits must be >= 1 (got {})", credits));
  if (!cache::ParseBlockCacheKind(block_cache).ok())
    return InvalidArgument("block_cache must be 'hyper_clock' or 'lru' (got '" + block_cache + "')");
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
  if (disk_emulation && cluster_spec.empty()) return InvalidArgument("disk_emulation needs cluster_spec");
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
  if (preprocess_threads < 1 || preprocess_threads > 256)
    return InvalidArgument(fmt::format("preprocess_threads must be 1 … 256 (got {})", preprocess_threads));
  if (max_message_bytes < 1024) return InvalidArgument("max_message_bytes must be >= 1024");
  if (max_grants < 1) return InvalidArgument("max_grants must be >= 1");
  if (std::string p = TosProblem(request_tos); !p.empty()) return InvalidArgument("request_tos " + p);
  if (ring_bind.empty()) return InvalidArgument("ring_bind is required");
  if (eval_every < 0) return InvalidArgument(fmt::format("eval_every must be >= 0 (got {})", eval_every));
  if (last_iteration < -1) return InvalidArgument("last_iteration must be >= -1");
  if (ring_timeout_ms < 1) return InvalidArgument("ring_timeout_ms must be >= 1");
  return OkStatus();
}

namespace {

// Every key of the YAML form, in AgentConfig's order: the one list that
// ParseAgentConfig reads and AgentConfigToYaml writes.
using FieldPtr = std::variant<std::string AgentConfig::*, bool AgentConfig::*, int AgentConfig::*,
                              int64_t AgentConfig::*, uint64_t AgentConfig::*>;
struct Field {
  const char* key;
  FieldPtr ptr;
};

const std::vector<Field>& Fields() {
  static const std::vector<Field> kFields = {
      {"node_name", &AgentConfig::node_name},
      {"cluster_spec", &AgentConfig::cluster_spec},
      {"cache_dir", &AgentConfig::cache_dir},
      {"block_cache", &AgentConfig::block_cache},
      {"manifest", &AgentConfig::manifest},
      {"check_cache", &AgentConfig::check_cache},
      {"scheduler_endpoint", &AgentConfig::scheduler_endpoint},
      {"peer_bind", &AgentConfig::peer_bind},
      {"peer_advertise", &AgentConfig::peer_advertise},
      {"consumer_endpoint", &AgentConfig::consumer_endpoint},
      {"consumer_timeout_ms", &AgentConfig::consumer_timeout_ms},
      {"consumer_token", &AgentConfig::consumer_token},
      {"keys_dir", &AgentConfig::keys_dir},
      {"insecure", &AgentConfig::insecure},
      {"credits", &AgentConfig::credits},
      {"compute_mode", &AgentConfig::compute_mode},
      {"link_emulation", &AgentConfig::link_emulation},
      {"link_rate_emulation", &AgentConfig::link_rate_emulation},
      {"disk_emulation", &AgentConfig::disk_emulation},
      {"metrics_port", &AgentConfig::metrics_port},
      {"metrics_address", &AgentConfig::metrics_address},
      {"log_level", &AgentConfig::log_level},
      {"heartbeat_interval_ms", &AgentConfig::heartbeat_interval_ms},
      {"scheduler_timeout_ms", &AgentConfig::scheduler_timeout_ms},
      {"fetch_timeout_ms", &AgentConfig::fetch_timeout_ms},
      {"fetch_batch", &AgentConfig::fetch_batch},
      {"preprocess_threads", &AgentConfig::preprocess_threads},
      {"max_message_bytes", &AgentConfig::max_message_bytes},
      {"max_grants", &AgentConfig::max_grants},
      {"request_tos", &AgentConfig::request_tos},
      {"seed", &AgentConfig::seed},
      {"ring_bind", &AgentConfig::ring_bind},
      {"ring_advertise", &AgentConfig::ring_advertise},
      {"test_data_dir", &AgentConfig::test_data_dir},
      {"eval_every", &AgentConfig::eval_every},
      {"last_iteration", &AgentConfig::last_iteration},
      {"ring_timeout_ms", &AgentConfig::ring_timeout_ms},
  };
  return kFields;
}

}  // namespace

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
    const auto& fields = Fields();
    auto it = std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return key == f.key; });
    if (it == fields.end())
      return InvalidArgument(fmt::format("{}:{}: unknown agent setting '{}'", source, line, key));
    try {
      std::visit([&](auto ptr) { c.*ptr = v.as<std::remove_reference_t<decltype(c.*ptr)>>(); }, it->ptr);
    } catch (const YAML::Exception&) {
      return InvalidArgument(fmt::format("{}:{}: {} has the wrong type", source, line, key));
    }
  }
  return c;
}

std::string AgentConfigToYaml(const AgentConfig& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const Field& f : Fields()) {
    out << YAML::Key << f.key << YAML::Value;
    std::visit([&](auto ptr) { out << c.*ptr; }, f.ptr);
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

StatusOr<AgentConfig> LoadAgentConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open agent config " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseAgentConfig(ss.str(), path);
}

}  // namespace loft::agent
