#include "server/options.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "core/curve.h"
#include "scheduler/iteration_gate.h"

namespace loft::server {
namespace {

Status FieldError(const std::string& source, const YAML::Node& n, const std::string& field,
                  const std::string& problem) {
  std::ostringstream os;
  os << source;
  if (n.IsDefined() && n.Mark().line >= 0) os << ":" << n.Mark().line + 1;
  os << ": " << field << " " << problem;
  return InvalidArgument(os.str());
}

template <typename T>
Status Read(const std::string& source, const YAML::Node& root, const char* key, T* out) {
  YAML::Node n = root[key];
  if (!n.IsDefined() || n.IsNull()) return OkStatus();
  if (!n.IsScalar()) return FieldError(source, n, key, "must be a scalar");
  try {
    *out = n.as<T>();
  } catch (const YAML::Exception&) {
    return FieldError(source, n, key, "has an invalid value '" + n.Scalar() + "'");
  }
  return OkStatus();
}

}  // namespace

Status SchedulerOptions::TakeSpecDefaults(const SchedulerSpec& spec) {
  if (heartbeat_interval_ms == 0)
    heartbeat_interval_ms = static_cast<int64_t>(std::ceil(spec.heartbeat_interval_ms));
  if (heartbeat_timeout_ms == 0)
    heartbeat_timeout_ms = static_cast<int64_t>(std::ceil(spec.heartbeat_timeout_ms));
  // The spec's 0 stays 0: partitions never time out.
  if (partition_timeout_ms == 0)
    partition_timeout_ms = static_cast<int64_t>(std::ceil(spec.partition_timeout_ms));
  if (heartbeat_interval_ms <= 0)
    return InvalidArgument(
        "heartbeat_interval_ms must be > 0 (the cluster spec's scheduler.heartbeat_interval_ms is " +
        std::to_string(spec.heartbeat_interval_ms) + ")");
  if (heartbeat_timeout_ms <= heartbeat_interval_ms)
    return InvalidArgument("heartbeat_timeout_ms " + std::to_string(heartbeat_timeout_ms) +
                           " must be > heartbeat_interval_ms " + std::to_string(heartbeat_interval_ms) +
                           " (0 in the options takes the cluster spec's scheduler.heartbeat_*)");
  return OkStatus();
}

Status SchedulerOptions::Validate() const {
  if (cluster_spec.empty()) return InvalidArgument("cluster_spec is required");
  if (policy.empty()) return InvalidArgument("policy must not be empty");
  if (bind.empty()) return InvalidArgument("bind must not be empty");
  if (journal_dir.empty()) return InvalidArgument("journal_dir must not be empty");
  if (heartbeat_interval_ms < 0) return InvalidArgument("heartbeat_interval_ms must be > 0 (0 = the spec's)");
  if (heartbeat_timeout_ms < 0) return InvalidArgument("heartbeat_timeout_ms must be > 0 (0 = the spec's)");
  if (heartbeat_interval_ms > 0 && heartbeat_timeout_ms > 0 &&
      heartbeat_timeout_ms <= heartbeat_interval_ms) {
    return InvalidArgument("heartbeat_timeout_ms must be > heartbeat_interval_ms");
  }
  if (partition_timeout_ms < 0) return InvalidArgument("partition_timeout_ms must be >= 0 (0 = the spec's)");
  if (metrics_port < 0 || metrics_port > 65535) return InvalidArgument("metrics_port must be in 0..65535");
  if (iterations < 0) return InvalidArgument("iterations must be >= 0");
  if (min_workers < 0) return InvalidArgument("min_workers must be >= 0");
  if (plan_ahead < -1 || plan_ahead > sched::kMaxPlanAhead)
    return InvalidArgument("plan_ahead must be auto or 0..3");
  if (max_message_bytes < 1024) return InvalidArgument("max_message_bytes must be >= 1024");
  if (std::string p = TosProblem(control_tos); !p.empty()) return InvalidArgument("control_tos " + p);
  if (journal_snapshot_every < 0) {
    return InvalidArgument("journal_snapshot_every must be >= 0 (0 = never snapshot the journal)");
  }
  if (insecure) {
    LOFT_RETURN_IF_ERROR(CheckInsecureAllowed({bind}));
  } else if (keys_dir.empty()) {
    return InvalidArgument(
        "keys_dir is required (CURVE authentication is on by default); "
        "run `loftctl keygen --out DIR`, or set insecure on a loopback bind");
  }
  return OkStatus();
}

Status ParseSchedulerOptions(const std::string& yaml_text, const std::string& source,
                             SchedulerOptions* opts) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": not valid YAML: " + e.what());
  }
  if (root.IsNull()) return OkStatus();
  if (!root.IsMap()) return InvalidArgument(source + ": must be a mapping of option: value");
  static const std::set<std::string> kKeys = {"cluster_spec",
                                              "policy",
                                              "bind",
                                              "journal_dir",
                                              "heartbeat_interval_ms",
                                              "heartbeat_timeout_ms",
                                              "partition_timeout_ms",
                                              "keys_dir",
                                              "insecure",
                                              "metrics_port",
                                              "metrics_address",
                                              "iterations",
                                              "min_workers",
                                              "start_when_ready",
                                              "start_peers_wait_ms",
                                              "journal_sync",
                                              "journal_snapshot_every",
                                              "plan_ahead",
                                              "epoch_overlap",
                                              "log_level",
                                              "max_message_bytes",
                                              "manifest",
                                              "control_tos"};
  for (const auto& kv : root) {
    std::string key = kv.first.as<std::string>();
    if (!kKeys.count(key)) return FieldError(source, kv.first, key, "is not a known option");
  }
  LOFT_RETURN_IF_ERROR(Read(source, root, "cluster_spec", &opts->cluster_spec));
  LOFT_RETURN_IF_ERROR(Read(source, root, "policy", &opts->policy));
  LOFT_RETURN_IF_ERROR(Read(source, root, "bind", &opts->bind));
  LOFT_RETURN_IF_ERROR(Read(source, root, "journal_dir", &opts->journal_dir));
  LOFT_RETURN_IF_ERROR(Read(source, root, "heartbeat_interval_ms", &opts->heartbeat_interval_ms));
  LOFT_RETURN_IF_ERROR(Read(source, root, "heartbeat_timeout_ms", &opts->heartbeat_timeout_ms));
  LOFT_RETURN_IF_ERROR(Read(source, root, "partition_timeout_ms", &opts->partition_timeout_ms));
  LOFT_RETURN_IF_ERROR(Read(source, root, "keys_dir", &opts->keys_dir));
  LOFT_RETURN_IF_ERROR(Read(source, root, "insecure", &opts->insecure));
  LOFT_RETURN_IF_ERROR(Read(source, root, "metrics_port", &opts->metrics_port));
  LOFT_RETURN_IF_ERROR(Read(source, root, "metrics_address", &opts->metrics_address));
  LOFT_RETURN_IF_ERROR(Read(source, root, "iterations", &opts->iterations));
  LOFT_RETURN_IF_ERROR(Read(source, root, "min_workers", &opts->min_workers));
  LOFT_RETURN_IF_ERROR(Read(source, root, "start_when_ready", &opts->start_when_ready));
  LOFT_RETURN_IF_ERROR(Read(source, root, "start_peers_wait_ms", &opts->start_peers_wait_ms));
  if (opts->start_peers_wait_ms < 0)
    return FieldError(source, root["start_peers_wait_ms"], "start_peers_wait_ms", "must be >= 0");
  LOFT_RETURN_IF_ERROR(Read(source, root, "journal_sync", &opts->journal_sync));
  LOFT_RETURN_IF_ERROR(Read(source, root, "journal_snapshot_every", &opts->journal_snapshot_every));
  if (opts->journal_snapshot_every < 0) {
    return FieldError(
        source, root["journal_snapshot_every"], "journal_snapshot_every",
        "must be >= 0 entries (0 = never snapshot), got " + std::to_string(opts->journal_snapshot_every));
  }
  if (YAML::Node n = root["plan_ahead"]; n.IsDefined() && n.IsScalar() && n.Scalar() == "auto") {
    opts->plan_ahead = -1;
  } else if (n.IsDefined() && !n.IsNull()) {
    LOFT_RETURN_IF_ERROR(Read(source, root, "plan_ahead", &opts->plan_ahead));
    if (opts->plan_ahead < 0 || opts->plan_ahead > sched::kMaxPlanAhead) {
      return FieldError(source, n, "plan_ahead", "must be auto or 0..3");
    }
  }
  LOFT_RETURN_IF_ERROR(Read(source, root, "epoch_overlap", &opts->epoch_overlap));
  LOFT_RETURN_IF_ERROR(Read(source, root, "log_level", &opts->log_level));
  LOFT_RETURN_IF_ERROR(Read(source, root, "max_message_bytes", &opts->max_message_bytes));
  LOFT_RETURN_IF_ERROR(Read(source, root, "manifest", &opts->manifest));
  LOFT_RETURN_IF_ERROR(Read(source, root, "control_tos", &opts->control_tos));
  if (std::string p = TosProblem(opts->control_tos); !p.empty())
    return FieldError(source, root["control_tos"], "control_tos", p);
  return OkStatus();
}

std::string SchedulerOptionsToYaml(const SchedulerOptions& o) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "cluster_spec" << YAML::Value << o.cluster_spec;
  out << YAML::Key << "policy" << YAML::Value << o.policy;
  out << YAML::Key << "bind" << YAML::Value << o.bind;
  out << YAML::Key << "journal_dir" << YAML::Value << o.journal_dir;
  out << YAML::Key << "heartbeat_interval_ms" << YAML::Value << o.heartbeat_interval_ms;
  out << YAML::Key << "heartbeat_timeout_ms" << YAML::Value << o.heartbeat_timeout_ms;
  out << YAML::Key << "partition_timeout_ms" << YAML::Value << o.partition_timeout_ms;
  out << YAML::Key << "keys_dir" << YAML::Value << o.keys_dir;
  out << YAML::Key << "insecure" << YAML::Value << o.insecure;
  out << YAML::Key << "metrics_port" << YAML::Value << o.metrics_port;
  out << YAML::Key << "metrics_address" << YAML::Value << o.metrics_address;
  out << YAML::Key << "iterations" << YAML::Value << o.iterations;
  out << YAML::Key << "min_workers" << YAML::Value << o.min_workers;
  out << YAML::Key << "start_when_ready" << YAML::Value << o.start_when_ready;
  out << YAML::Key << "start_peers_wait_ms" << YAML::Value << o.start_peers_wait_ms;
  out << YAML::Key << "journal_sync" << YAML::Value << o.journal_sync;
  out << YAML::Key << "journal_snapshot_every" << YAML::Value << o.journal_snapshot_every;
  out << YAML::Key << "plan_ahead" << YAML::Value;
  if (o.plan_ahead < 0) {
    out << "auto";
  } else {
    out << o.plan_ahead;
  }
  out << YAML::Key << "epoch_overlap" << YAML::Value << o.epoch_overlap;
  out << YAML::Key << "log_level" << YAML::Value << o.log_level;
  out << YAML::Key << "max_message_bytes" << YAML::Value << o.max_message_bytes;
  if (!o.manifest.empty()) out << YAML::Key << "manifest" << YAML::Value << o.manifest;
  out << YAML::Key << "control_tos" << YAML::Value << o.control_tos;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

Status LoadSchedulerOptionsFile(const std::string& path, SchedulerOptions* opts) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open scheduler config '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseSchedulerOptions(ss.str(), path, opts);
}

}  // namespace loft::server
