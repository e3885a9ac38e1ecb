#include "tools/loftctl/calibrate.h"

#include <fmt/format.h>

#include <cmath>

namespace loft::ctl {
namespace {

std::string Num(double v) {
  return fmt::format("{}", v);
}

// ms per sample of `sample_bytes` at `mbps` (scheduler/plan.h) and back.
double MsPerSample(int64_t sample_bytes, double mbps) {
  return static_cast<double>(sample_bytes) * 8.0 / (mbps * 1000.0);
}
double MbpsFor(int64_t sample_bytes, double ms_per_sample) {
  return static_cast<double>(sample_bytes) * 8.0 / (ms_per_sample * 1000.0);
}

bool Same(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max({1.0, std::abs(a), std::abs(b)});
}

}  // namespace

std::string ClusterSpecToYaml(const ClusterSpec& spec) {
  std::string y;
  const auto& d = spec.dataset;
  y += fmt::format("dataset: {{name: {}, samples: {}, sample_bytes: {}}}\n", d.name, d.samples,
                   d.sample_bytes);
  const auto& p = spec.placement;
  y += fmt::format("placement: {{kind: {}, replication: {}, skew: {}, seed: {}", PlacementKindName(p.kind),
                   p.replication, Num(p.skew), p.seed);
  if (p.kind == PlacementKind::kExplicit) {
    std::string shares;
    for (double s : p.shares) shares += (shares.empty() ? "" : ", ") + Num(s);
    y += ", shares: [" + shares + "]";
  }
  y += "}\n";
  const auto& t = spec.training;
  const auto& ls = t.lr_schedule;
  y += fmt::format(
      "training:\n  global_batch: {}\n  min_batch: {}\n  iterations: {}\n  overlap: {}\n  seed: {}\n"
      "  model: {}\n  aggregation: {}\n  learning_rate: {}\n  momentum: {}\n"
      "  lr_schedule: {{kind: {}, step_every: {}, gamma: {}, total_steps: {}, min_learning_rate: {}, "
      "warmup_steps: {}}}\n",
      t.global_batch, t.min_batch, t.iterations, t.overlap ? "true" : "false", t.seed, t.model, t.aggregation,
      Num(t.learning_rate), Num(t.momentum), ls.kind, ls.step_every, Num(ls.gamma), ls.total_steps,
      Num(ls.min_learning_rate), ls.warmup_steps);
  y += "nodes:\n";
  for (const auto& n : spec.nodes) {
    y += fmt::format("  - name: {}\n", n.name);
    y += fmt::format("    compute: {{fixed_ms: {}, per_sample_ms: {}, jitter: {}", Num(n.compute.fixed_ms),
                     Num(n.compute.per_sample_ms), Num(n.compute.jitter));
    if (n.compute.cpu_cores > 0) y += ", cpu_cores: " + Num(n.compute.cpu_cores);
    y += "}\n";
    if (!n.slowdowns.empty()) {
      y += "    slowdowns:\n";
      for (const auto& s : n.slowdowns)
        y += fmt::format("      - {{at_s: {}, factor: {}, for_s: {}}}\n", Num(s.at_s), Num(s.factor),
                         Num(s.for_s));
    }
    y += fmt::format("    disk: {{read_mbps: {}}}\n", Num(n.disk.read_mbps));
    y += fmt::format("    link: {{up_mbps: {}, down_mbps: {}, latency_ms: {}}}\n", Num(n.link.up_mbps),
                     Num(n.link.down_mbps), Num(n.link.latency_ms));
    if (n.max_batch > 0) y += fmt::format("    max_batch: {}\n", n.max_batch);
    if (!n.failures.empty()) {
      y += "    failures:\n";
      for (const auto& f : n.failures)
        y += fmt::format("      - {{at_s: {}, down_s: {}}}\n", Num(f.at_s), Num(f.down_s));
    }
    if (n.byzantine != ByzantineKind::kNone) {
      y += fmt::format("    byzantine: {}\n    byzantine_scale: {}\n", ByzantineKindName(n.byzantine),
                       Num(n.byzantine_scale));
    }
  }
  return y;
}

StatusOr<Calibration> CalibrateSpec(const ClusterSpec& spec, const nlohmann::json& status,
                                    const std::string& source) {
  if (!status.is_object() || !status.contains("workers") || !status["workers"].is_array())
    return InvalidArgument(source + ": no \"workers\" list (is it a scheduler status document?)");
  ClusterSpec out = spec;
  Calibration cal;
  std::vector<bool> seen(spec.num_nodes(), false);
  const int64_t s = spec.dataset.sample_bytes;
  for (const auto& w : status["workers"]) {
    const std::string name = w.value("name", "");
    const int i = spec.FindNode(name);
    if (i < 0)
      return InvalidArgument(
          fmt::format("{}: worker '{}' is not a node of {} (wrong spec?)", source, name, spec.source));
    seen[i] = true;
    if (!w.contains("profile") || !w["profile"].is_object()) {
      cal.notes.push_back(name + ": no fitted profile in the run; kept the spec's constants");
      continue;
    }
    const auto& p = w["profile"];
    auto get = [&](const char* k) -> StatusOr<double> {
      if (!p.contains(k) || !p[k].is_number())
        return InvalidArgument(fmt::format("{}: workers[{}].profile.{} is missing", source, name, k));
      return p[k].get<double>();
    };
    LOFT_ASSIGN_OR_RETURN(double c0, get("compute_fixed_ms"));
    LOFT_ASSIGN_OR_RETURN(double c1, get("compute_per_sample_ms"));
    LOFT_ASSIGN_OR_RETURN(double l0, get("local_fixed_ms"));
    LOFT_ASSIGN_OR_RETURN(double l1, get("local_per_sample_ms"));
    LOFT_ASSIGN_OR_RETURN(double a, get("remote_fixed_ms"));
    LOFT_ASSIGN_OR_RETURN(double r1, get("remote_per_sample_ms"));
    LOFT_ASSIGN_OR_RETURN(double u, get("uplink_per_sample_ms"));
    NodeSpec& n = out.nodes[i];
    const NodeSpec& prior = spec.nodes[i];
    std::vector<std::string> kept;
    n.compute.fixed_ms = std::max(0.0, c0);
    if (c1 > 0)
      n.compute.per_sample_ms = c1;
    else
      kept.push_back("compute.per_sample_ms (fitted 0)");
    // A rate whose per-sample cost still equals the spec's prior was not
    // observed (the RLS starts at the prior): keep the spec's value exactly.
    auto rate = [&](double ms, double prior_mbps, const char* field, double* dst) {
      if (Same(ms, MsPerSample(s, prior_mbps)))
        kept.push_back(std::string(field) + " (not observed)");
      else if (ms > 0)
        *dst = MbpsFor(s, ms);
      else
        kept.push_back(std::string(field) + " (fitted 0)");
    };
    rate(l1, prior.disk.read_mbps, "disk.read_mbps", &n.disk.read_mbps);
    rate(r1, prior.link.down_mbps, "link.down_mbps", &n.link.down_mbps);
    rate(u, prior.link.up_mbps, "link.up_mbps", &n.link.up_mbps);
    if (Same(a, prior.link.latency_ms) && Same(r1, MsPerSample(s, prior.link.down_mbps)))
      kept.push_back("link.latency_ms (not observed)");
    else
      n.link.latency_ms = std::max(0.0, a);
    std::string note = fmt::format("{}: {} observations", name, w.value("observations", int64_t{0}));
    if (!kept.empty()) {
      note += "; kept from the spec:";
      for (const auto& k : kept) note += " " + k + ";";
    }
    if (std::abs(l0) > 1e-9)
      note += fmt::format(" local read intercept {:.4g} ms has no spec field (dropped)", l0);
    cal.notes.push_back(note);
  }
  for (int i = 0; i < spec.num_nodes(); ++i)
    if (!seen[i])
      cal.notes.push_back(spec.nodes[i].name + ": not in the run's status; kept the spec's constants");
  cal.yaml = ClusterSpecToYaml(out);
  // The result must load: a calibrated value the loader rejects is a bug here.
  auto check = ParseClusterSpec(cal.yaml, "calibrated spec");
  if (!check.ok()) return Internal("the calibrated spec does not load: " + check.status().message());
  return cal;
}

}  // namespace loft::ctl
