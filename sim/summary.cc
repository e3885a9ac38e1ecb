#include "sim/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <vector>

namespace loft::sim {

std::string SummaryToJson(const SummaryFile& summary) {
  nlohmann::ordered_json root;
  nlohmann::ordered_json policies = nlohmann::ordered_json::object();
  for (const auto& [name, p] : summary.policies) {
    nlohmann::ordered_json j;
    j["mean_iteration_ms"] = p.mean_iteration_ms;
    j["p95_iteration_ms"] = p.p95_iteration_ms;
    j["total_s"] = p.total_s;
    j["straggler_wait_ms"] = p.straggler_wait_ms;
    j["local_bytes"] = p.local_bytes;
    j["remote_bytes"] = p.remote_bytes;
    if (p.final_accuracy) j["final_accuracy"] = *p.final_accuracy;
    j["iterations"] = p.iterations;
    j["epochs_completed"] = p.epochs_completed;
    if (p.policy_failures) j["policy_failures"] = *p.policy_failures;
    if (p.last_decile_iteration_ms) j["last_decile_iteration_ms"] = *p.last_decile_iteration_ms;
    policies[name] = std::move(j);
  }
  root["policies"] = std::move(policies);
  if (summary.bound_mean_iteration_ms) {
    root["bound_mean_iteration_ms"] = *summary.bound_mean_iteration_ms;
  } else {
    root["bound_mean_iteration_ms"] = nullptr;
  }
  if (summary.bound_epoch_mean_iteration_ms) {
    root["bound_epoch_mean_iteration_ms"] = *summary.bound_epoch_mean_iteration_ms;
  }
  return root.dump(2) + "\n";
}

Status WriteSummaryJson(const SummaryFile& summary, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return IOError("cannot open " + path + " for writing");
  out << SummaryToJson(summary);
  out.close();
  if (!out) return IOError("error writing " + path);
  return OkStatus();
}

StatusOr<SummaryFile> ParseSummaryJson(const std::string& text) {
  nlohmann::json root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return InvalidArgument("summary.json: not a JSON object");
  if (!root.contains("policies") || !root["policies"].is_object()) {
    return InvalidArgument("summary.json: missing object \"policies\"");
  }
  SummaryFile s;
  for (const auto& item : root["policies"].items()) {
    // Not a structured binding: clang 14 (the fuzz build) cannot capture one in `num`.
    const std::string& name = item.key();
    const nlohmann::json& j = item.value();
    PolicySummary p;
    auto num = [&](const char* key, double* dst) -> Status {
      if (!j.contains(key) || !j[key].is_number()) {
        return InvalidArgument(fmt::format("summary.json: policies.{}.{} must be a number", name, key));
      }
      *dst = j[key].get<double>();
      return OkStatus();
    };
    double lb = 0, rb = 0;
    LOFT_RETURN_IF_ERROR(num("mean_iteration_ms", &p.mean_iteration_ms));
    LOFT_RETURN_IF_ERROR(num("p95_iteration_ms", &p.p95_iteration_ms));
    LOFT_RETURN_IF_ERROR(num("total_s", &p.total_s));
    LOFT_RETURN_IF_ERROR(num("straggler_wait_ms", &p.straggler_wait_ms));
    LOFT_RETURN_IF_ERROR(num("local_bytes", &lb));
    LOFT_RETURN_IF_ERROR(num("remote_bytes", &rb));
    p.local_bytes = static_cast<int64_t>(lb);
    p.remote_bytes = static_cast<int64_t>(rb);
    if (j.contains("final_accuracy") && j["final_accuracy"].is_number()) {
      p.final_accuracy = j["final_accuracy"].get<double>();
    }
    if (j.contains("iterations") && j["iterations"].is_number())
      p.iterations = j["iterations"].get<int64_t>();
    if (j.contains("epochs_completed") && j["epochs_completed"].is_number()) {
      p.epochs_completed = j["epochs_completed"].get<int64_t>();
    }
    if (j.contains("policy_failures") && j["policy_failures"].is_number()) {
      p.policy_failures = j["policy_failures"].get<int64_t>();
    }
    if (j.contains("last_decile_iteration_ms") && j["last_decile_iteration_ms"].is_number()) {
      p.last_decile_iteration_ms = j["last_decile_iteration_ms"].get<double>();
    }
    s.policies[name] = p;
  }
  if (root.contains("bound_mean_iteration_ms") && root["bound_mean_iteration_ms"].is_number()) {
    s.bound_mean_iteration_ms = root["bound_mean_iteration_ms"].get<double>();
  }
  if (root.contains("bound_epoch_mean_iteration_ms") && root["bound_epoch_mean_iteration_ms"].is_number()) {
    s.bound_epoch_mean_iteration_ms = root["bound_epoch_mean_iteration_ms"].get<double>();
  }
  return s;
}

std::string SummaryTable(const SummaryFile& summary) {
  std::string out =
      fmt::format("{:<12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12}\n", "policy", "mean_ms", "p95_ms",
                  "last10%_ms", "total_s", "wait_ms", "local_MB", "remote_MB");
  for (const auto& [name, p] : summary.policies) {
    // "-" when the run did not measure a last decile (loftctl cluster run).
    const std::string last_decile =
        p.last_decile_iteration_ms ? fmt::format("{:.3f}", *p.last_decile_iteration_ms) : std::string("-");
    out += fmt::format("{:<12} {:>10.3f} {:>10.3f} {:>10} {:>10.2f} {:>10.3f} {:>12.2f} {:>12.2f}\n", name,
                       p.mean_iteration_ms, p.p95_iteration_ms, last_decile, p.total_s, p.straggler_wait_ms,
                       static_cast<double>(p.local_bytes) / 1e6, static_cast<double>(p.remote_bytes) / 1e6);
  }
  if (summary.bound_mean_iteration_ms) {
    out += fmt::format(
        "{:<12} {:>10.3f}   (per-iteration bound on the states of the first run; epoch-aware plans can beat "
        "it)\n",
        "bound", *summary.bound_mean_iteration_ms);
  }
  if (summary.bound_epoch_mean_iteration_ms) {
    out += fmt::format("{:<12} {:>10.3f}   (bound-epoch: best stationary drain, mean over epochs)\n",
                       "bound-epoch", *summary.bound_epoch_mean_iteration_ms);
  }
  return out;
}

}  // namespace loft::sim
