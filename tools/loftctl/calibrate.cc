#include "tools/loftctl/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

#include "core/csv.h"
#include "scheduler/cost_profile.h"
#include "sim/allreduce_model.h"
#include "sim/simulator.h"

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

// A numeric field of an iterations.csv row: the whole field (surrounding
// blanks aside) must be a finite number >= 0. The error names the file,
// the line, the column and the text.
StatusOr<double> CsvNumber(const std::string& source, int64_t lineno, std::string_view column,
                           std::string_view text) {
  std::string_view t = text;
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t' || t.back() == '\r')) t.remove_suffix(1);
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v) || v < 0)
    return InvalidArgument(
        fmt::format("{}:{}: {} '{}' is not a finite number >= 0", source, lineno, column, text));
  return v;
}

// The median of `xs` (the mean of the middle two for an even count); xs non-empty.
double Median(std::vector<double> xs) {
  const size_t mid = xs.size() / 2;
  std::nth_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(mid), xs.end());
  const double hi = xs[mid];
  if (xs.size() % 2 == 1) return hi;
  return (hi + *std::max_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
}

// The mean of the values of `xs` up to 3× its median: a failure's stalled
// rings (seconds, against a typical 0.15) are left out, the spread of the
// others is kept. xs non-empty.
double TypicalMean(std::vector<double> xs) {
  const double cut = 3 * Median(xs);
  double sum = 0;
  int64_t n = 0;
  for (double x : xs) {
    if (x > cut) continue;
    sum += x;
    ++n;
  }
  return sum / static_cast<double>(n);
}

bool Same(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max({1.0, std::abs(a), std::abs(b)});
}

}  // namespace

std::string ClusterSpecToYaml(const ClusterSpec& spec) {
  std::string y;
  const auto& d = spec.dataset;
  y += fmt::format("dataset: {{name: {}, samples: {}, sample_bytes: {}", d.name, d.samples, d.sample_bytes);
  if (d.encoding == DatasetEncoding::kJpeg)
    y += fmt::format(", encoding: jpeg, image_size: {}, jpeg_quality: {}", d.image_size, d.jpeg_quality);
  if (d.encoding == DatasetEncoding::kJpeg && d.record_bytes > 0)
    y += ", record_bytes: " + Num(d.record_bytes);
  if (d.encoding == DatasetEncoding::kJpeg && d.decode_placement == DecodePlacementKind::kAuto)
    y += ", decode_placement: auto";
  if (d.augment != AugmentKind::kNone) y += fmt::format(", augment: {}", AugmentKindName(d.augment));
  y += "}\n";
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
      "  model: {}\n  aggregation: {}\n  byzantine_tolerance: {}\n  learning_rate: {}\n  momentum: {}\n"
      "  lr_schedule: {{kind: {}, step_every: {}, gamma: {}, total_steps: {}, min_learning_rate: {}, "
      "warmup_steps: {}}}\n",
      t.global_batch, t.min_batch, t.iterations, t.overlap ? "true" : "false", t.seed, t.model, t.aggregation,
      t.byzantine_tolerance, Num(t.learning_rate), Num(t.momentum), ls.kind, ls.step_every, Num(ls.gamma),
      ls.total_steps, Num(ls.min_learning_rate), ls.warmup_steps);
  const auto& ar = t.allreduce;
  y += fmt::format(
      "  allreduce: {{parameters: {}, step_latency_ms: {}, reduce_ns_per_element: {}, fixed_ms: {}, links: "
      "{}}}\n",
      ar.parameters, Num(ar.step_latency_ms), Num(ar.reduce_ns_per_element), Num(ar.fixed_ms),
      ar.links ? "true" : "false");
  const auto& ex = t.exchange;
  y += fmt::format("  exchange: {{period: {}, max_period: {}, drift: {}, compression: {}, overlap: {}}}\n",
                   ex.period_auto ? std::string("auto") : std::to_string(ex.period), ex.max_period,
                   Num(ex.drift), ex.compression, ex.overlap ? "true" : "false");
  y += fmt::format("  eval: {{test_samples: {}, relative_cost: {}}}\n", t.eval.test_samples,
                   Num(t.eval.relative_cost));
  y += fmt::format(
      "scheduler: {{overhead_ms: {}, heartbeat_interval_ms: {}, heartbeat_timeout_ms: {}, handoff_ms: {}, "
      "holder_wait_s: {}}}\n",
      Num(spec.scheduler.overhead_ms), Num(spec.scheduler.heartbeat_interval_ms),
      Num(spec.scheduler.heartbeat_timeout_ms), Num(spec.scheduler.handoff_ms),
      Num(spec.scheduler.holder_wait_s));
  y += fmt::format(
      "network: {{packet_efficiency: {}, record_overhead_bytes: {}, burst_ms: {}, burst_min_bytes: {}, "
      "request_overhead_ms: {},\n          ack_bytes_per_byte: {}, request_bytes: {}, report_bytes: {}, "
      "assignment_bytes: {}}}\n",
      Num(spec.network.packet_efficiency), Num(spec.network.record_overhead_bytes),
      Num(spec.network.burst_ms), Num(spec.network.burst_min_bytes), Num(spec.network.request_overhead_ms),
      Num(spec.network.ack_bytes_per_byte), Num(spec.network.request_bytes), Num(spec.network.report_bytes),
      Num(spec.network.assignment_bytes));
  y += fmt::format(
      "agent: {{cpu_ms_per_partition: {}, cpu_ms_per_sample: {}, cpu_ms_per_request: {}, "
      "cpu_ms_per_fetched_sample: {}, cpu_ms_per_allreduce_mb: {}, idle_cores: {}}}\n",
      Num(spec.agent.cpu_ms_per_partition), Num(spec.agent.cpu_ms_per_sample),
      Num(spec.agent.cpu_ms_per_request), Num(spec.agent.cpu_ms_per_fetched_sample),
      Num(spec.agent.cpu_ms_per_allreduce_mb), Num(spec.agent.idle_cores));
  y += "nodes:\n";
  for (const auto& n : spec.nodes) {
    y += fmt::format("  - name: {}\n", n.name);
    y += fmt::format("    compute: {{fixed_ms: {}, per_sample_ms: {}, jitter: {}", Num(n.compute.fixed_ms),
                     Num(n.compute.per_sample_ms), Num(n.compute.jitter));
    if (n.compute.jitter_kind != JitterKind::kNormal)
      y += fmt::format(", jitter_kind: {}", JitterKindName(n.compute.jitter_kind));
    if (n.compute.jitter_shared > 0) y += fmt::format(", jitter_shared: {}", Num(n.compute.jitter_shared));
    if (n.compute.cpu_cores > 0) y += ", cpu_cores: " + Num(n.compute.cpu_cores);
    y += "}\n";
    if (!n.slowdowns.empty()) {
      y += "    slowdowns:\n";
      for (const auto& s : n.slowdowns)
        y += fmt::format("      - {{at_s: {}, factor: {}, for_s: {}}}\n", Num(s.at_s), Num(s.factor),
                         Num(s.for_s));
    }
    y += fmt::format("    disk: {{read_mbps: {}}}\n", Num(n.disk.read_mbps));
    if (n.decode.per_sample_ms != DecodeSpec{}.per_sample_ms || n.decode.per_kb_ms != DecodeSpec{}.per_kb_ms)
      y += fmt::format("    decode: {{per_sample_ms: {}, per_kb_ms: {}}}\n", Num(n.decode.per_sample_ms),
                       Num(n.decode.per_kb_ms));
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

double TypicalRingSpanMs(const std::vector<sched::IterationRecord>& iterations) {
  std::vector<double> spans;
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  for (const auto& it : iterations) {
    // As CalibrateIterationTail: an iteration with a failed row is left out.
    if (std::any_of(it.workers.begin(), it.workers.end(), [](const auto& w) { return w.failed; })) continue;
    double end = kNone, start = kNone;
    for (const auto& w : it.workers) {
      if (w.allreduce_ms <= 0) continue;
      end = std::max(end, w.own_ms);
      start = std::max(start, w.own_ms - w.allreduce_ms);
    }
    if (end == kNone || end - start <= 0) continue;
    spans.push_back(end - start);
  }
  return spans.empty() ? -1 : TypicalMean(std::move(spans));
}

// MatchSimulatedRing's loft-sim passes at most, and the difference from
// the measured ring at which it stops.
constexpr int kRingMatchPasses = 5;
constexpr double kRingMatchToleranceMs = 0.2;

Status MatchSimulatedRing(const RingMeasure& measured, ClusterSpec* spec, std::vector<std::string>* notes) {
  if (measured.ring_ms <= 0 || measured.iterations <= 0 || spec->training.model == "none") return OkStatus();
  auto& ar = spec->training.allreduce;
  if (ar.reduce_ns_per_element < 0)
    ar.reduce_ns_per_element = sim::PriorReduceNsPerElement(spec->training.aggregation);
  const double before = ar.reduce_ns_per_element;
  double simulated = -1, first = -1, last_x = -1, last_y = -1;
  int passes = 0;
  for (int pass = 0; pass < kRingMatchPasses; ++pass) {
    sim::SimOptions o;
    o.policy = measured.policy;
    o.iterations = measured.iterations;
    o.trace_iterations = 0;
    auto r = sim::RunPolicy(*spec, o);
    if (!r.ok())
      return r.status().WithContext(
          fmt::format("calibrate: loft-sim of the calibrated spec ({}, {} iterations)", measured.policy,
                      measured.iterations));
    ++passes;
    simulated = TypicalRingSpanMs(r->iterations);
    if (pass == 0) first = simulated;
    if (simulated <= 0 || std::abs(measured.ring_ms - simulated) <= kRingMatchToleranceMs) break;
    // The members of the simulated rings (distinct nodes), to spread the
    // difference over.
    double members = 0;
    int64_t rings = 0;
    for (const auto& it : r->iterations) {
      std::vector<int32_t> k;
      for (const auto& w : it.workers)
        if (!w.failed && w.allreduce_ms > 0) k.push_back(w.node);
      std::sort(k.begin(), k.end());
      k.erase(std::unique(k.begin(), k.end()), k.end());
      if (!k.empty()) {
        members += static_cast<double>(k.size());
        ++rings;
      }
    }
    const double elements = rings > 0 ? sim::AllreduceModel(*spec).ReduceElements(static_cast<size_t>(
                                            std::lround(members / static_cast<double>(rings))))
                                      : 0;
    if (elements <= 0) break;
    // Secant steps: ms of simulated ring per ns per element is elements/1e6
    // at one core; a member with a CPU quota runs its reducer at cpu_cores
    // (sim/simulator_agent.cc), so after the first pass the slope is the
    // one the passes measured (never below a tenth of one core's).
    const double x = ar.reduce_ns_per_element;
    double slope = elements / 1e6;
    if (last_x >= 0 && std::abs(x - last_x) > 1e-9)
      slope = std::max(slope / 10, (simulated - last_y) / (x - last_x));
    last_x = x;
    last_y = simulated;
    ar.reduce_ns_per_element = std::max(0.0, x + (measured.ring_ms - simulated) / slope);
  }
  if (first <= 0) {
    notes->push_back("training.allreduce: loft-sim of the calibrated spec ran no ring; not matched");
    return OkStatus();
  }
  notes->push_back(fmt::format(
      "training.allreduce: loft-sim ran {}'s ring in {:.4g} ms against the measured {:.4g} (means of the "
      "rings up to 3x the median; the contention with the next reads, which loft-sim adds itself); "
      "reduce_ns_per_element {:.4g} -> {:.4g} ({} passes, the last at {:.4g} ms)",
      measured.policy, first, measured.ring_ms, before, ar.reduce_ns_per_element, passes, simulated));
  if (ar.reduce_ns_per_element == 0 && simulated > measured.ring_ms + kRingMatchToleranceMs)
    notes->push_back(fmt::format(
        "training.allreduce: WARNING loft-sim's ring stays {:.4g} ms slower than the measured one with a "
        "free reducer: the spec charges the ring more than this run paid (its links, or on nodes with "
        "compute.cpu_cores agent.cpu_ms_per_allreduce_mb = {:.4g})",
        simulated - measured.ring_ms, spec->agent.cpu_ms_per_allreduce_mb));
  return OkStatus();
}

StatusOr<Calibration> CalibrateSpec(const ClusterSpec& spec, const nlohmann::json& status,
                                    const std::string& source, const std::string* iterations_csv,
                                    const std::string& csv_source, bool fit_links, bool match_ring,
                                    const std::string* training_csv, const std::string& training_source) {
  if (!status.is_object() || !status.contains("workers") || !status["workers"].is_array())
    return InvalidArgument(source + ": no \"workers\" list (is it a scheduler status document?)");
  ClusterSpec out = spec;
  Calibration cal;
  std::vector<bool> seen(spec.num_nodes(), false);
  std::vector<bool> refit_fixed(spec.num_nodes(), false);
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
    LOFT_ASSIGN_OR_RETURN(
        const sched::CostParams fit,
        sched::CostFromJson(w["profile"], fmt::format("{}: workers[{}].profile", source, name)));
    const double c0 = fit.compute_fixed_ms, c1 = fit.compute_per_sample_ms, l0 = fit.local_fixed_ms,
                 l1 = fit.local_per_sample_ms, a = fit.remote_fixed_ms, r1 = fit.remote_per_sample_ms,
                 u = fit.uplink_per_sample_ms;
    NodeSpec& n = out.nodes[i];
    const NodeSpec& prior = spec.nodes[i];
    std::vector<std::string> kept;
    n.compute.fixed_ms = std::max(0.0, c0);
    if (c1 > 0) {
      n.compute.per_sample_ms = c1;
    } else {
      kept.push_back("compute.per_sample_ms (fitted 0)");
      refit_fixed[i] = true;  // fixed_ms holds the per-sample part too: CalibrateIterationTail
    }
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
    if (!fit_links) {
      if (n.link.down_mbps != prior.link.down_mbps || n.link.up_mbps != prior.link.up_mbps ||
          n.link.latency_ms != prior.link.latency_ms)
        kept.push_back(
            fmt::format("link (enforced at the spec's rates; fitted down {:.4g}, up {:.4g} Mbit/s, "
                        "latency {:.4g} ms, contention included)",
                        n.link.down_mbps, n.link.up_mbps, n.link.latency_ms));
      n.link = prior.link;
    }
    std::string note = fmt::format("{}: {} observations", name, w.value("observations", int64_t{0}));
    if (!kept.empty()) {
      note += "; kept from the spec:";
      for (const auto& k : kept) note += " " + k + ";";
    }
    if (std::abs(l0) > 1e-9)
      note += fmt::format(" local read intercept {:.4g} ms has no spec field (dropped)", l0);
    cal.notes.push_back(note);
  }
  if (fit_links && spec.network.request_overhead_ms > 0) {
    // A fitted latency is the whole fixed cost of a remote read, the
    // request's own cost included: loft-sim must not add it again. (A
    // latency kept from the spec, of a node that never read remotely,
    // stays the spec's: the calibrated priors are the fitted profiles.)
    out.network.request_overhead_ms = 0;
    cal.notes.push_back(fmt::format(
        "network.request_overhead_ms 0 (spec: {:.4g} ms): the fitted link latencies hold each request's own "
        "cost",
        spec.network.request_overhead_ms));
  }
  for (int i = 0; i < spec.num_nodes(); ++i)
    if (!seen[i])
      cal.notes.push_back(spec.nodes[i].name + ": not in the run's status; kept the spec's constants");
  if (iterations_csv != nullptr) {
    RingMeasure ring;
    LOFT_RETURN_IF_ERROR(
        CalibrateIterationTail(*iterations_csv, csv_source, &out, &cal.notes, &refit_fixed, &ring));
    if (training_csv != nullptr)
      LOFT_RETURN_IF_ERROR(
          CalibrateEvalCost(*iterations_csv, *training_csv, training_source, &out, &cal.notes));
    if (match_ring) LOFT_RETURN_IF_ERROR(MatchSimulatedRing(ring, &out, &cal.notes));
  }
  cal.yaml = ClusterSpecToYaml(out);
  // The result must load: a calibrated value the loader rejects is a bug here.
  auto check = ParseClusterSpec(cal.yaml, "calibrated spec");
  if (!check.ok()) return Internal("the calibrated spec does not load: " + check.status().message());
  return cal;
}

void CalibrateComputeJitter(const std::map<int32_t, std::vector<std::pair<double, double>>>& computes,
                            const std::string& policy, ClusterSpec* spec, std::vector<std::string>* notes) {
  for (const auto& [node, xs] : computes) {
    ComputeSpec& c = spec->nodes[static_cast<size_t>(node)].compute;
    if (xs.size() < kMinJitterRows) continue;
    // ln(compute_ms / (fixed_ms + per_sample_ms·batch)): its spread s,
    // robustly (1.4826·MAD, a normal's std-dev): the rare long stalls of
    // a starved process would otherwise make it far too wide. Written as
    // a lognormal jitter of that s (relative std-dev sqrt(e^(s²) − 1)):
    // agents sharing cores are seldom much faster than their law and
    // often much slower, and the normal's clipped left tail made loft-sim's
    // LB-BSP see throughputs up to 20× too high (compute-hetero training,
    // node four: real compute per sample p5 0.016 ms, the normal's 0.002).
    std::vector<double> r;
    for (const auto& [batch, ms] : xs) {
      const double x = ms / std::max(1e-6, c.fixed_ms + c.per_sample_ms * batch);
      if (x > 0) r.push_back(std::log(x));
    }
    if (r.size() < kMinJitterRows) continue;
    auto median = [](std::vector<double> v) {
      std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
      return v[v.size() / 2];
    };
    const double med = median(r);
    std::vector<double> dev;
    for (double x : r) dev.push_back(std::abs(x - med));
    const double s = 1.4826 * median(dev);
    c.jitter = std::sqrt(std::expm1(s * s));
    c.jitter_kind = JitterKind::kLognormal;
    notes->push_back(fmt::format(
        "{}: compute.jitter {:.3g}, lognormal (robust std-dev {:.3g} of ln(compute_ms / the fitted law), {} "
        "rows of {})",
        spec->nodes[static_cast<size_t>(node)].name, c.jitter, s, r.size(), policy));
  }
}

// scheduler.handoff_ms = the median ack_ms of the rows not planned ahead
// (every row without plan-ahead, training.overlap false; with it, those
// sent after their iteration started, e.g. an epoch's first), at least
// kMinHandoffRows of them.
void CalibrateHandoff(std::vector<double> acks, const std::string& policy, ClusterSpec* spec,
                      std::vector<std::string>* notes) {
  if (acks.size() < kMinHandoffRows) {
    notes->push_back(
        fmt::format("scheduler.handoff_ms kept at {} ({} rows of {} not planned ahead, fewer than {})",
                    spec->scheduler.handoff_ms, acks.size(), policy, kMinHandoffRows));
    return;
  }
  std::sort(acks.begin(), acks.end());
  const size_t n = acks.size();
  spec->scheduler.handoff_ms = n % 2 == 1 ? acks[n / 2] : (acks[n / 2 - 1] + acks[n / 2]) / 2;
  notes->push_back(
      fmt::format("scheduler.handoff_ms {:.4g} (median ack_ms of the {} rows of {} not planned ahead)",
                  spec->scheduler.handoff_ms, n, policy));
}

namespace {

// One iteration of iterations.csv, merged over its rows.
struct It {
  double makespan = 0, work = 0, ring = -1, sched = 0;
  // With own_ms: the latest member's ring end and the latest ring start
  // (own − allreduce), relative to the iteration's start.
  double ring_end = -1, ring_start = -1;
  std::vector<int32_t> members;
  bool failed = false;
};

// The rows of iterations.csv of one policy (the first row's).
struct IterationTable {
  std::map<int64_t, It> its;
  std::map<int32_t, std::vector<std::pair<double, double>>> computes;  // node -> (batch, compute_ms)
  std::vector<double> handoffs;  // ack_ms of rows sent after their iteration started
  std::string policy;
  // Every row with a batch and no failure: (iteration, node, batch, compute_ms).
  struct Compute {
    int64_t iteration;
    int32_t node;
    double batch, compute_ms;
  };
  std::vector<Compute> rows;
};

// Reads iterations.csv (`source` in errors, with the line) into a table.
StatusOr<IterationTable> ReadIterations(const std::string& csv_text, const std::string& source,
                                        const ClusterSpec& spec) {
  std::istringstream in(csv_text);
  std::string line;
  if (!std::getline(in, line)) return InvalidArgument(source + " is empty");
  const std::vector<std::string> head = SplitCsvLine(line);
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < head.size(); ++i) col[head[i]] = i;
  for (const char* c : {"policy", "iteration", "worker", "batch", "fetch_local_ms", "fetch_remote_ms",
                        "compute_ms", "makespan_ms", "allreduce_ms", "failed"})
    if (!col.count(c)) return InvalidArgument(fmt::format("{}: no column '{}'", source, c));
  std::map<int64_t, It> its;
  std::map<int32_t, std::vector<std::pair<double, double>>> computes;  // node -> (batch, compute_ms)
  std::vector<double> handoffs;  // ack_ms of rows sent after their iteration started
  std::vector<IterationTable::Compute> rows;
  std::string policy;
  int64_t lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    const auto f = SplitCsvLine(line);
    if (f.size() < head.size())
      return InvalidArgument(
          fmt::format("{}:{}: {} fields, the header has {}", source, lineno, f.size(), head.size()));
    if (policy.empty()) policy = f[col["policy"]];
    if (f[col["policy"]] != policy) continue;
    auto number = [&](const char* column) { return CsvNumber(source, lineno, column, f[col.at(column)]); };
    double v[6];
    const char* names[6] = {"fetch_local_ms", "fetch_remote_ms", "compute_ms",
                            "makespan_ms",    "allreduce_ms",    "batch"};
    for (int k = 0; k < 6; ++k) {
      LOFT_ASSIGN_OR_RETURN(v[k], number(names[k]));
    }
    // The columns older runs lack, checked in every row they are in.
    std::optional<double> plan, journal, stream, ack, own;
    for (auto [c, out] :
         {std::pair{"plan_ms", &plan}, std::pair{"journal_ms", &journal}, std::pair{"stream_ms", &stream},
          std::pair{"ack_ms", &ack}, std::pair{"own_ms", &own}}) {
      if (!col.count(c)) continue;
      LOFT_ASSIGN_OR_RETURN(*out, number(c));
    }
    int64_t iteration = -1;
    {
      const std::string& x = f[col["iteration"]];
      const auto [end, ec] = std::from_chars(x.data(), x.data() + x.size(), iteration);
      if (ec != std::errc() || end != x.data() + x.size() || iteration < 0)
        return InvalidArgument(
            fmt::format("{}:{}: iteration '{}' is not an integer >= 0", source, lineno, x));
    }
    It& it = its[iteration];
    it.makespan = v[3];
    // The scheduler's own time before the iteration's partitions leave:
    // planning and the journal append (the same for every row).
    it.sched = std::max(it.sched, plan.value_or(0) + journal.value_or(0));
    if (f[col["failed"]] == "1") it.failed = true;
    if (v[5] <= 0) continue;
    // The hand-off: a partition not planned ahead (every one without
    // plan-ahead; with it, one sent after its iteration started) spends
    // ack_ms = own − read − compute − all-reduce in the control path (its
    // delivery and wake-ups, the report's way back).
    if (stream && ack && f[col["failed"]] != "1" && iteration > 0 && (*stream > 0 || !spec.training.overlap))
      handoffs.push_back(*ack);
    it.work = std::max(it.work, std::max(v[0], v[1]) + v[2]);
    const int node = spec.FindNode(f[col["worker"]]);
    if (node < 0)
      return InvalidArgument(
          fmt::format("{}:{}: worker '{}' is not a node of the spec", source, lineno, f[col["worker"]]));
    it.members.push_back(node);
    if (f[col["failed"]] != "1" && iteration > 0) computes[node].emplace_back(v[5], v[2]);
    if (f[col["failed"]] != "1") rows.push_back({iteration, node, v[5], v[2]});
    if (v[4] > 0) {
      it.ring = it.ring < 0 ? v[4] : std::min(it.ring, v[4]);
      if (own) {
        it.ring_end = std::max(it.ring_end, *own);
        it.ring_start = std::max(it.ring_start, *own - v[4]);
      }
    }
  }
  return IterationTable{std::move(its), std::move(computes), std::move(handoffs), std::move(policy),
                        std::move(rows)};
}

// compute.jitter_shared: the share of the compute jitter's (log) variance
// that every node has in common in a step. Each row's r = ln(compute_ms /
// law) less its node's median; a step's mean over its n members has
// variance ρ·s² + (1 − ρ)·s²/n, so ρ = (v − s²/n̄)/(s²·(1 − 1/n̄)), with s²
// and v robust (1.4826·MAD)², clamped to [0, 1]. Written to every node
// whose jitter was fitted.
void CalibrateSharedJitter(const std::vector<IterationTable::Compute>& rows, const std::string& policy,
                           ClusterSpec* spec, std::vector<std::string>* notes) {
  std::map<int32_t, std::vector<std::pair<int64_t, double>>> by_node;
  for (const auto& r : rows) {
    if (r.iteration <= 0 || r.batch <= 0) continue;
    const ComputeSpec& c = spec->nodes[static_cast<size_t>(r.node)].compute;
    const double x = r.compute_ms / std::max(1e-6, c.fixed_ms + c.per_sample_ms * r.batch);
    if (x > 0) by_node[r.node].emplace_back(r.iteration, std::log(x));
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  auto robust_var = [&](const std::vector<double>& v) {
    const double m = median(v);
    std::vector<double> dev;
    for (double x : v) dev.push_back(std::abs(x - m));
    const double s = 1.4826 * median(dev);
    return s * s;
  };
  std::map<int64_t, std::vector<double>> by_step;
  std::vector<double> all;
  for (auto& [node, xs] : by_node) {
    if (xs.size() < kMinJitterRows) continue;
    std::vector<double> v;
    for (const auto& [t, x] : xs) v.push_back(x);
    const double med = median(v);
    for (const auto& [t, x] : xs) {
      by_step[t].push_back(x - med);
      all.push_back(x - med);
    }
  }
  std::vector<double> means;
  double members = 0;
  for (const auto& [t, v] : by_step) {
    if (v.size() < 2) continue;
    double sum = 0;
    for (double x : v) sum += x;
    means.push_back(sum / static_cast<double>(v.size()));
    members += static_cast<double>(v.size());
  }
  if (means.size() < kMinJitterRows) return;
  const double n = members / static_cast<double>(means.size());
  const double s2 = robust_var(all), v = robust_var(means);
  if (!(s2 > 0)) return;
  const double rho = std::clamp((v - s2 / n) / (s2 * (1 - 1 / n)), 0.0, 1.0);
  for (auto& node : spec->nodes)
    if (node.compute.jitter > 0 && node.compute.jitter_kind == JitterKind::kLognormal)
      node.compute.jitter_shared = rho;
  notes->push_back(fmt::format(
      "compute.jitter_shared {:.3g}: the share of the compute jitter's variance common to a step's members "
      "({} steps of {} with {:.3g} members on average: per-step mean's variance {:.3g}, rows' {:.3g})",
      rho, means.size(), policy, n, v, s2));
}

// compute.fixed_ms of each node `refit_fixed` marks: its mean compute_ms
// less the spec's per-sample part.
void RefitFixedCompute(const std::map<int32_t, std::vector<std::pair<double, double>>>& computes,
                       const std::vector<bool>& refit_fixed, const std::string& policy, ClusterSpec* spec,
                       std::vector<std::string>* notes) {
  for (const auto& [node, xs] : computes) {
    if (static_cast<size_t>(node) >= refit_fixed.size() || !refit_fixed[node] || xs.empty()) continue;
    ComputeSpec& c = spec->nodes[static_cast<size_t>(node)].compute;
    double sum = 0;
    for (const auto& [batch, ms] : xs) sum += ms - c.per_sample_ms * batch;
    const double before = c.fixed_ms;
    c.fixed_ms = std::max(0.0, sum / static_cast<double>(xs.size()));
    notes->push_back(fmt::format(
        "{}: compute.fixed_ms {:.4g} -> {:.4g} (mean compute_ms - {:.4g}·batch over {} rows of {}: the fit "
        "gave the per-sample part 0, the spec's is kept)",
        spec->nodes[static_cast<size_t>(node)].name, before, c.fixed_ms, c.per_sample_ms, xs.size(), policy));
  }
}

// training.allreduce fitted to the mean ring span m over `rings` (each
// iteration's members): the links, the step latency and the per-element
// rest. Returns the mean transfer + latency the spec's links charge.
double FitAllreduce(const std::vector<std::vector<int32_t>>& rings, double m, ClusterSpec* spec,
                    std::vector<std::string>* notes) {
  auto& ar = spec->training.allreduce;
  if (ar.parameters <= 0)
    ar.parameters = sim::ModelParameterCount(spec->training.model, spec->dataset.sample_bytes);
  ar.fixed_ms = 0;
  ar.links = true;
  ar.reduce_ns_per_element = 0;
  sim::AllreduceModel with_links(*spec);
  // Means over the iterations of what the model charges at each one's
  // members (a run whose membership changed, e.g. a node down for a while,
  // fits the per-element rest over rings of both sizes).
  double moved = 0, latency = 0, elements = 0;
  for (const auto& mem : rings) {
    moved += with_links.TransferMs(mem) + with_links.LatencyMs(mem);
    latency += with_links.LatencyMs(mem);
    elements += with_links.ReduceElements(mem.size());
  }
  const double n_rings = static_cast<double>(rings.size());
  moved /= n_rings;
  latency /= n_rings;
  elements /= n_rings;
  double rest = m - moved;
  if (rest < 0) {
    ar.links = false;
    rest = m - latency;
    notes->push_back(
        fmt::format("the ring ({:.4g} ms) ran faster than the spec's links allow ({:.4g} ms): "
                    "training.allreduce.links false",
                    m, moved));
  }
  if (rest < 0) {
    // Even the step latencies (the calibrated link.latency_ms, fitted on
    // data reads) exceed the ring: the ring's own time is all per element.
    ar.step_latency_ms = 0;
    rest = m;
    notes->push_back(
        fmt::format("the ring ({:.4g} ms) took less than its step latencies ({:.4g} ms): "
                    "training.allreduce.step_latency_ms 0",
                    m, latency));
  }
  ar.reduce_ns_per_element = elements > 0 ? std::max(0.0, rest) / elements * 1e6 : 0.0;
  return moved;
}

}  // namespace

Status CalibrateEvalCost(const std::string& iterations_csv, const std::string& training_csv,
                         const std::string& source, ClusterSpec* spec, std::vector<std::string>* notes) {
  if (spec->training.model == "none" || spec->training.eval.test_samples <= 0) return OkStatus();
  // The evaluated steps: training.csv's rows with a test_accuracy.
  std::istringstream in(training_csv);
  std::string line;
  if (!std::getline(in, line)) return InvalidArgument(source + " is empty");
  const std::vector<std::string> head = SplitCsvLine(line);
  const auto it_col = std::find(head.begin(), head.end(), "iteration");
  const auto acc_col = std::find(head.begin(), head.end(), "test_accuracy");
  if (it_col == head.end() || acc_col == head.end())
    return InvalidArgument(source + ": no columns 'iteration' and 'test_accuracy'");
  std::set<int64_t> evaluated;
  int64_t lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    const auto f = SplitCsvLine(line);
    const auto ic = static_cast<size_t>(it_col - head.begin()),
               ac = static_cast<size_t>(acc_col - head.begin());
    if (f.size() <= std::max(ic, ac) || f[ac].empty()) continue;
    int64_t t = -1;
    const auto [end, ec] = std::from_chars(f[ic].data(), f[ic].data() + f[ic].size(), t);
    if (ec != std::errc() || end != f[ic].data() + f[ic].size() || t < 0)
      return InvalidArgument(
          fmt::format("{}:{}: iteration '{}' is not an integer >= 0", source, lineno, f[ic]));
    evaluated.insert(t);
  }
  LOFT_ASSIGN_OR_RETURN(IterationTable table, ReadIterations(iterations_csv, "iterations.csv", *spec));
  // Each node's compute over its law at the steps nobody evaluated: its
  // typical residual (the median), so that only the evaluation is left.
  std::map<int32_t, std::vector<double>> normal;
  auto law = [&](int32_t node, double batch) {
    const ComputeSpec& c = spec->nodes[static_cast<size_t>(node)].compute;
    return c.fixed_ms + c.per_sample_ms * batch;
  };
  for (const auto& r : table.rows)
    if (!evaluated.count(r.iteration)) normal[r.node].push_back(r.compute_ms - law(r.node, r.batch));
  std::map<int32_t, double> typical;
  for (auto& [node, v] : normal) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    typical[node] = v[v.size() / 2];
  }
  // At an evaluated step the evaluator is the member whose compute most
  // exceeds its typical one; the excess over test_samples · per_sample_ms.
  std::map<int64_t, std::pair<double, int32_t>> excess;  // iteration -> (ms, node)
  for (const auto& r : table.rows) {
    if (!evaluated.count(r.iteration) || !typical.count(r.node)) continue;
    const double x = r.compute_ms - law(r.node, r.batch) - typical[r.node];
    auto [e, fresh] = excess.try_emplace(r.iteration, x, r.node);
    if (!fresh && x > e->second.first) e->second = {x, r.node};
  }
  std::vector<double> costs;
  for (const auto& [t, e] : excess) {
    const double per_sample = spec->nodes[static_cast<size_t>(e.second)].compute.per_sample_ms;
    if (per_sample > 0 && e.first > 0)
      costs.push_back(e.first / (static_cast<double>(spec->training.eval.test_samples) * per_sample));
  }
  if (costs.size() < 2) {
    notes->push_back(fmt::format("training.eval.relative_cost kept at {:.3g} ({} evaluated steps measured)",
                                 spec->training.eval.relative_cost, costs.size()));
    return OkStatus();
  }
  std::nth_element(costs.begin(), costs.begin() + static_cast<std::ptrdiff_t>(costs.size() / 2), costs.end());
  const double before = spec->training.eval.relative_cost;
  spec->training.eval.relative_cost = costs[costs.size() / 2];
  notes->push_back(
      fmt::format("training.eval.relative_cost {:.3g} (was {:.3g}): the median over {} evaluated steps of "
                  "the evaluator's "
                  "compute over its typical one, per test sample and per_sample_ms (loft-sim charges it with "
                  "--eval-every)",
                  spec->training.eval.relative_cost, before, costs.size()));
  return OkStatus();
}

Status CalibrateIterationTail(const std::string& csv_text, const std::string& source, ClusterSpec* spec,
                              std::vector<std::string>* notes, const std::vector<bool>* refit_fixed,
                              RingMeasure* measured) {
  LOFT_ASSIGN_OR_RETURN(IterationTable table, ReadIterations(csv_text, source, *spec));
  std::map<int64_t, It>& its = table.its;
  const std::string& policy = table.policy;
  // The ring as loft-sim runs it: it starts when the last member has
  // computed and ends for all at once. Real members finish at different
  // times, and the iteration ends with the last: the span from the last
  // start to the last end (edge-bandwidth with training: 3,694 ms mean
  // where the smallest member's allreduce_ms, used before, averaged 3,092
  // and the iterations 3,727). Without own_ms: that smallest allreduce_ms.
  for (auto& [i, it] : its) {
    if (it.ring > 0 && it.ring_end >= 0 && it.ring_end - it.ring_start > 0)
      it.ring = it.ring_end - it.ring_start;
  }
  if (refit_fixed != nullptr) RefitFixedCompute(table.computes, *refit_fixed, policy, spec, notes);
  CalibrateComputeJitter(table.computes, policy, spec, notes);
  CalibrateSharedJitter(table.rows, policy, spec, notes);
  CalibrateHandoff(table.handoffs, policy, spec, notes);
  double ring_sum = 0, over_sum = 0, members_sum = 0;
  int64_t n_ring = 0, n_over = 0;
  // Each iteration's ring members: the nodes with a batch, once each (a
  // node with two partitions of one iteration, e.g. a retried child, is
  // one member), in node order.
  std::vector<std::vector<int32_t>> rings;
  std::vector<double> spans;  // each iteration's ring
  for (auto& [i, it] : its) {
    if (it.failed || it.members.empty()) continue;
    over_sum += it.sched;
    ++n_over;
    if (it.ring > 0) {
      std::sort(it.members.begin(), it.members.end());
      it.members.erase(std::unique(it.members.begin(), it.members.end()), it.members.end());
      ring_sum += it.ring;
      spans.push_back(it.ring);
      members_sum += static_cast<double>(it.members.size());
      ++n_ring;
      rings.push_back(it.members);
    }
  }
  if (n_over == 0) {
    notes->push_back(source +
                     ": no iteration without a failure; scheduler overhead and all-reduce not fitted");
    return OkStatus();
  }
  spec->scheduler.overhead_ms = over_sum / static_cast<double>(n_over);
  notes->push_back(
      fmt::format("scheduler.overhead_ms {:.4g} (mean plan_ms + journal_ms over {} iterations of {})",
                  spec->scheduler.overhead_ms, n_over, policy));
  auto& ar = spec->training.allreduce;
  if (spec->training.model == "none" || n_ring == 0) {
    notes->push_back("no all-reduce in the run (training.model none or no allreduce_ms); not fitted");
    return OkStatus();
  }
  const double m = ring_sum / static_cast<double>(n_ring);
  const double moved = FitAllreduce(rings, m, spec, notes);
  if (measured != nullptr) {
    measured->policy = policy;
    measured->iterations = its.empty() ? 0 : its.rbegin()->first + 1;
    measured->ring_ms = TypicalMean(std::move(spans));
  }
  notes->push_back(fmt::format(
      "training.allreduce: mean ring {:.4g} ms over {} iterations at {:.3g} members ({} parameters); "
      "transfer + latency {:.4g} ms, the rest {:.4g} ns per element",
      m, n_ring, members_sum / static_cast<double>(n_ring), ar.parameters, ar.links ? moved : 0.0,
      ar.reduce_ns_per_element));
  return OkStatus();
}

}  // namespace loft::ctl
