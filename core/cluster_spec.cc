#include "core/cluster_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

namespace loft {

// The median ack_ms (1,584 rows) of two synthetic testbed runs without
// plan-ahead (examples/clusters/edge-drain.yaml, loft and uniform, 100
// iterations each, 2026-11-27, load average 10-14 on the 2-core
// development machine), where every row's ack_ms is the assignment's
// delivery, the agent's thread wake-ups and the report's way back
// (docs/testbed.md "Control-path hand-off": the commands to re-measure).
double DefaultHandoffMs() {
  return 5.9;
}

double JitterFactor(double jitter, JitterKind kind, double z) {
  if (jitter <= 0) return 1.0;
  if (kind == JitterKind::kLognormal) {
    const double s2 = std::log1p(jitter * jitter);
    return std::exp(std::sqrt(s2) * z - s2 / 2);
  }
  return std::max(0.05, 1.0 + jitter * z);
}

std::string_view JitterKindName(JitterKind kind) {
  return kind == JitterKind::kLognormal ? "lognormal" : "normal";
}

double LinkBurstBytes(const NetworkSpec& network, double mbps) {
  const double bytes_per_ms = mbps * 1e6 / 8.0 / 1000.0;
  return std::max(network.burst_min_bytes, network.burst_ms * bytes_per_ms);
}

int64_t CfsPeriodUs(double cpu_cores) {
  if (!(cpu_cores > 0)) return kCfsPeriodUs;
  return std::clamp<int64_t>(std::llround(std::ceil(1000.0 / cpu_cores)), kCfsPeriodUs, 1000000);
}

namespace {

// Walks a YAML tree, remembering the source name so each error says
// "<file>:<line>: <field path> <problem>".
class SpecReader {
 public:
  explicit SpecReader(std::string source) : source_(std::move(source)) {}

  Status Error(const YAML::Node& at, const std::string& field, const std::string& problem) const {
    int line = at.IsDefined() && at.Mark().line >= 0 ? at.Mark().line + 1 : 0;
    std::ostringstream os;
    os << source_;
    if (line > 0) os << ":" << line;
    os << ": " << field << " " << problem;
    return InvalidArgument(os.str());
  }

  // Rejects keys that are not in `allowed` (typos must not be silently ignored).
  Status CheckKeys(const YAML::Node& map, const std::string& path,
                   std::initializer_list<const char*> allowed) const {
    if (!map.IsMap()) return Error(map, path, "must be a mapping");
    for (const auto& kv : map) {
      std::string key = kv.first.as<std::string>();
      bool ok = false;
      for (const char* a : allowed) ok = ok || key == a;
      if (!ok) {
        std::string list;
        for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
        return Error(kv.first, path.empty() ? key : path + "." + key,
                     "is not a known field (expected one of: " + list + ")");
      }
    }
    return OkStatus();
  }

  template <typename T>
  Status Get(const YAML::Node& map, const char* key, const std::string& path, T* out) const {
    YAML::Node n = map[key];
    if (!n.IsDefined() || n.IsNull()) return OkStatus();  // keep default
    std::string field = path.empty() ? key : path + "." + key;
    if (!n.IsScalar()) return Error(n, field, "must be a scalar");
    try {
      *out = n.as<T>();
    } catch (const YAML::Exception&) {
      return Error(n, field, "has an invalid value '" + n.Scalar() + "'");
    }
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(*out)) return Error(n, field, "must be a finite number");
    }
    return OkStatus();
  }

  // A string field's value must be one of `names`: its position in
  // them, or the error "FIELD must be one of A, B (got 'X')" at `at`.
  StatusOr<size_t> OneOf(const YAML::Node& at, const std::string& field, const std::string& value,
                         std::initializer_list<std::string_view> names) const {
    std::string list;
    size_t k = 0;
    for (std::string_view name : names) {
      if (value == name) return k;
      list += std::string(list.empty() ? "" : ", ") + std::string(name);
      ++k;
    }
    return Error(at, field, "must be one of " + list + " (got '" + value + "')");
  }

  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

#define RET(expr) LOFT_RETURN_IF_ERROR(expr)

Status Positive(const SpecReader& r, const YAML::Node& parent, const char* key, const std::string& path,
                double v) {
  if (!(v > 0))
    return r.Error(parent[key].IsDefined() ? parent[key] : parent, path + "." + key, "must be > 0");
  return OkStatus();
}

Status NonNegative(const SpecReader& r, const YAML::Node& parent, const char* key, const std::string& path,
                   double v) {
  if (!(v >= 0))
    return r.Error(parent[key].IsDefined() ? parent[key] : parent, path + "." + key, "must be >= 0");
  return OkStatus();
}

// training.eval: {test_samples, relative_cost} (loft-sim's evaluation cost).
Status ParseEval(const SpecReader& r, const YAML::Node& ev, TrainingSpec::Eval* e) {
  const std::string p = "training.eval";
  RET(r.CheckKeys(ev, p, {"test_samples", "relative_cost"}));
  RET(r.Get(ev, "test_samples", p, &e->test_samples));
  RET(r.Get(ev, "relative_cost", p, &e->relative_cost));
  if (e->test_samples < 0) return r.Error(ev["test_samples"], p + ".test_samples", "must be >= 0");
  if (!(e->relative_cost >= 0) || !std::isfinite(e->relative_cost))
    return r.Error(ev["relative_cost"], p + ".relative_cost", "must be a finite number >= 0");
  return OkStatus();
}

// training.exchange: {period: 1 | N | auto, max_period, drift, compression: none | int8, overlap}.
Status ParseExchange(const SpecReader& r, const YAML::Node& ex, TrainingSpec::Exchange* e) {
  const std::string p = "training.exchange";
  RET(r.CheckKeys(ex, p, {"period", "max_period", "drift", "compression", "overlap"}));
  if (YAML::Node pn = ex["period"]; pn.IsDefined() && !pn.IsNull()) {
    if (pn.IsScalar() && pn.Scalar() == "auto") {
      e->period_auto = true;
    } else {
      RET(r.Get(ex, "period", p, &e->period));
      if (e->period < 1)
        return r.Error(pn, p + ".period", "must be auto or an integer >= 1 (got " + pn.Scalar() + ")");
    }
  }
  RET(r.Get(ex, "max_period", p, &e->max_period));
  if (e->max_period < 1 || e->max_period > 1024)
    return r.Error(ex["max_period"], p + ".max_period", "must be in [1, 1024]");
  RET(r.Get(ex, "drift", p, &e->drift));
  if (!(e->drift > 0) || e->drift > 100)
    return r.Error(ex["drift"], p + ".drift", "must be a number in (0, 100]");
  if (!e->period_auto && e->period > 1024) return r.Error(ex["period"], p + ".period", "must be <= 1024");
  if (e->period_auto) e->period = 1;  // the first round's, until the scheduler has measurements
  RET(r.Get(ex, "compression", p, &e->compression));
  RET(r.OneOf(ex["compression"], p + ".compression", e->compression, {"none", "int8"}).status());
  RET(r.Get(ex, "overlap", p, &e->overlap));
  return OkStatus();
}

}  // namespace

double EstimatedJpegRecordBytes(int image_size) {
  return 0.19 * static_cast<double>(image_size) * static_cast<double>(image_size);
}

double SampleWireBytes(const DatasetSpec& d) {
  if (d.encoding == DatasetEncoding::kRaw) return static_cast<double>(d.sample_bytes);
  return d.record_bytes > 0 ? d.record_bytes : EstimatedJpegRecordBytes(d.image_size);
}

double DecodedWireBytes(const DatasetSpec& d) {
  return static_cast<double>(d.sample_bytes);
}

namespace {

// dataset: {name, samples, sample_bytes, encoding, image_size, jpeg_quality, augment}.
Status ParseDataset(const SpecReader& r, const YAML::Node& root, ClusterSpec& spec) {
  if (YAML::Node d = root["dataset"]; d.IsDefined()) {
    RET(r.CheckKeys(d, "dataset",
                    {"name", "samples", "sample_bytes", "encoding", "image_size", "jpeg_quality", "augment",
                     "record_bytes", "decode_placement"}));
    auto& ds = spec.dataset;
    RET(r.Get(d, "name", "dataset", &ds.name));
    RET(r.Get(d, "samples", "dataset", &ds.samples));
    RET(r.Get(d, "sample_bytes", "dataset", &ds.sample_bytes));
    if (ds.samples <= 0) return r.Error(d["samples"], "dataset.samples", "must be > 0");
    // Placement, sampler and ledger keep per-sample tables in memory
    // (~20 bytes a sample): a typo must not become an uncaught bad_alloc.
    if (ds.samples > kMaxDatasetSamples)
      return r.Error(d["samples"], "dataset.samples",
                     "must be <= " + std::to_string(kMaxDatasetSamples) +
                         " (loft keeps per-sample tables in memory; got " + std::to_string(ds.samples) + ")");
    if (ds.sample_bytes <= 0) return r.Error(d["sample_bytes"], "dataset.sample_bytes", "must be > 0");

    std::string encoding(DatasetEncodingName(ds.encoding));
    RET(r.Get(d, "encoding", "dataset", &encoding));
    LOFT_ASSIGN_OR_RETURN(const size_t enc,
                          r.OneOf(d["encoding"], "dataset.encoding", encoding, {"raw", "jpeg"}));
    ds.encoding = enc == 0 ? DatasetEncoding::kRaw : DatasetEncoding::kJpeg;
    for (const char* key : {"image_size", "jpeg_quality", "record_bytes", "decode_placement"}) {
      if (ds.encoding == DatasetEncoding::kRaw && d[key].IsDefined() && !d[key].IsNull())
        return r.Error(d[key], std::string("dataset.") + key, "applies only with encoding: jpeg");
    }
    RET(r.Get(d, "image_size", "dataset", &ds.image_size));
    if (ds.image_size < kMinImageSize || ds.image_size > kMaxImageSize)
      return r.Error(d["image_size"], "dataset.image_size",
                     "must be in [" + std::to_string(kMinImageSize) + ", " + std::to_string(kMaxImageSize) +
                         "] (got " + std::to_string(ds.image_size) + ")");
    RET(r.Get(d, "jpeg_quality", "dataset", &ds.jpeg_quality));
    if (ds.jpeg_quality < 1 || ds.jpeg_quality > 100)
      return r.Error(d["jpeg_quality"], "dataset.jpeg_quality",
                     "must be in [1, 100] (got " + std::to_string(ds.jpeg_quality) + ")");

    RET(r.Get(d, "record_bytes", "dataset", &ds.record_bytes));
    if (!std::isfinite(ds.record_bytes) || ds.record_bytes < 0)
      return r.Error(d["record_bytes"], "dataset.record_bytes",
                     "must be a number >= 0 (0: estimated from image_size)");
    std::string placement = ds.decode_placement == DecodePlacementKind::kAuto ? "auto" : "trainer";
    RET(r.Get(d, "decode_placement", "dataset", &placement));
    LOFT_ASSIGN_OR_RETURN(const size_t dp, r.OneOf(d["decode_placement"], "dataset.decode_placement",
                                                   placement, {"trainer", "auto"}));
    ds.decode_placement = dp == 0 ? DecodePlacementKind::kTrainer : DecodePlacementKind::kAuto;

    std::string augment(AugmentKindName(ds.augment));
    RET(r.Get(d, "augment", "dataset", &augment));
    LOFT_ASSIGN_OR_RETURN(const size_t aug,
                          r.OneOf(d["augment"], "dataset.augment", augment, {"none", "crop_flip"}));
    ds.augment = aug == 0 ? AugmentKind::kNone : AugmentKind::kCropFlip;
  }
  return OkStatus();
}

// training, with its lr_schedule, allreduce and exchange.
Status ParseTraining(const SpecReader& r, const YAML::Node& root, ClusterSpec& spec) {
  if (YAML::Node t = root["training"]; t.IsDefined()) {
    RET(r.CheckKeys(t, "training",
                    {"global_batch", "min_batch", "iterations", "overlap", "seed", "model", "aggregation",
                     "learning_rate", "momentum", "lr_schedule", "byzantine_tolerance", "allreduce",
                     "exchange", "eval"}));
    auto& tr = spec.training;
    RET(r.Get(t, "global_batch", "training", &tr.global_batch));
    RET(r.Get(t, "min_batch", "training", &tr.min_batch));
    RET(r.Get(t, "iterations", "training", &tr.iterations));
    RET(r.Get(t, "overlap", "training", &tr.overlap));
    RET(r.Get(t, "seed", "training", &tr.seed));
    RET(r.Get(t, "model", "training", &tr.model));
    RET(r.Get(t, "aggregation", "training", &tr.aggregation));
    RET(r.Get(t, "learning_rate", "training", &tr.learning_rate));
    RET(r.Get(t, "momentum", "training", &tr.momentum));
    tr.byzantine_tolerance_set = t["byzantine_tolerance"].IsDefined();
    RET(r.Get(t, "byzantine_tolerance", "training", &tr.byzantine_tolerance));
    if (tr.byzantine_tolerance < 0)
      return r.Error(t["byzantine_tolerance"], "training.byzantine_tolerance", "must be >= 0");
    // The verified ring's limit (models/ring_allreduce.h AllReduceOptions).
    if (tr.byzantine_tolerance > kMaxByzantineTolerance)
      return r.Error(t["byzantine_tolerance"], "training.byzantine_tolerance",
                     "must be <= " + std::to_string(kMaxByzantineTolerance) +
                         " (the verified ring's limit; got " + std::to_string(tr.byzantine_tolerance) + ")");
    if (tr.global_batch <= 0) return r.Error(t["global_batch"], "training.global_batch", "must be > 0");
    if (tr.min_batch < 0) return r.Error(t["min_batch"], "training.min_batch", "must be >= 0");
    if (tr.iterations < 0) return r.Error(t["iterations"], "training.iterations", "must be >= 0");
    RET(r.OneOf(t["model"], "training.model", tr.model, {"none", "softmax", "mlp", "external"}).status());
    RET(r.OneOf(t["aggregation"], "training.aggregation", tr.aggregation,
                {"mean", "weighted_mean", "median", "trimmed_mean", "krum", "centered_clip"})
            .status());
    if (!(tr.learning_rate > 0)) return r.Error(t["learning_rate"], "training.learning_rate", "must be > 0");
    if (!(tr.momentum >= 0 && tr.momentum < 1))
      return r.Error(t["momentum"], "training.momentum", "must be in [0, 1)");
    if (YAML::Node ls = t["lr_schedule"]; ls.IsDefined() && !ls.IsNull()) {
      const std::string p = "training.lr_schedule";
      RET(r.CheckKeys(ls, p,
                      {"kind", "step_every", "gamma", "total_steps", "min_learning_rate", "warmup_steps"}));
      auto& s = tr.lr_schedule;
      RET(r.Get(ls, "kind", p, &s.kind));
      RET(r.Get(ls, "step_every", p, &s.step_every));
      RET(r.Get(ls, "gamma", p, &s.gamma));
      RET(r.Get(ls, "total_steps", p, &s.total_steps));
      RET(r.Get(ls, "min_learning_rate", p, &s.min_learning_rate));
      RET(r.Get(ls, "warmup_steps", p, &s.warmup_steps));
      RET(r.OneOf(ls["kind"], p + ".kind", s.kind, {"constant", "step", "cosine"}).status());
      if (s.step_every <= 0) return r.Error(ls["step_every"], p + ".step_every", "must be > 0");
      if (!(s.gamma > 0 && s.gamma <= 1)) return r.Error(ls["gamma"], p + ".gamma", "must be in (0, 1]");
      if (s.total_steps < 0) return r.Error(ls["total_steps"], p + ".total_steps", "must be >= 0");
      if (!(s.min_learning_rate >= 0 && s.min_learning_rate <= tr.learning_rate))
        return r.Error(ls["min_learning_rate"], p + ".min_learning_rate",
                       "must be in [0, training.learning_rate]");
      if (s.warmup_steps < 0) return r.Error(ls["warmup_steps"], p + ".warmup_steps", "must be >= 0");
      if (s.kind == "cosine" && s.total_steps == 0 && tr.iterations == 0)
        return r.Error(ls, p + ".total_steps", "must be > 0 for cosine when training.iterations is 0");
    }
    if (YAML::Node ar = t["allreduce"]; ar.IsDefined() && !ar.IsNull()) {
      const std::string p = "training.allreduce";
      RET(r.CheckKeys(ar, p,
                      {"parameters", "step_latency_ms", "reduce_ns_per_element", "fixed_ms", "links"}));
      auto& a = tr.allreduce;
      RET(r.Get(ar, "parameters", p, &a.parameters));
      RET(r.Get(ar, "step_latency_ms", p, &a.step_latency_ms));
      RET(r.Get(ar, "reduce_ns_per_element", p, &a.reduce_ns_per_element));
      RET(r.Get(ar, "fixed_ms", p, &a.fixed_ms));
      RET(r.Get(ar, "links", p, &a.links));
      if (a.parameters < 0) return r.Error(ar["parameters"], p + ".parameters", "must be >= 0");
      if (!(a.fixed_ms >= 0)) return r.Error(ar["fixed_ms"], p + ".fixed_ms", "must be >= 0");
      if (std::isnan(a.step_latency_ms) || std::isnan(a.reduce_ns_per_element))
        return r.Error(ar, p, "step_latency_ms and reduce_ns_per_element must be numbers");
    }
    if (YAML::Node ev = t["eval"]; ev.IsDefined() && !ev.IsNull()) RET(ParseEval(r, ev, &tr.eval));
    if (YAML::Node ex = t["exchange"]; ex.IsDefined() && !ex.IsNull()) {
      RET(ParseExchange(r, ex, &tr.exchange));
      // Reading ahead during the exchange is reading while the compute
      // stage works (core/read_ahead.h), which training.overlap false forbids.
      if (tr.exchange.overlap && !tr.overlap)
        return r.Error(
            ex["overlap"], "training.exchange.overlap",
            "true needs training.overlap true (reads during the exchange overlap the compute stage)");
    }
  }
  return OkStatus();
}

// scheduler.partition_timeout_ms when the spec does not set it: the
// field's default (30000), or 60000 when it trains a model (a training
// partition includes the all-reduce, which waits for the slowest member,
// and on one agent the test-set evaluation). The daemon and `loftctl
// cluster run` take the spec's value unless told one.
double DefaultPartitionTimeoutMs(const TrainingSpec& training) {
  return training.model == "none" ? SchedulerSpec{}.partition_timeout_ms : 60000;
}

Status ParseScheduler(const SpecReader& r, const YAML::Node& root, ClusterSpec& spec) {
  if (YAML::Node sc = root["scheduler"]; sc.IsDefined() && !sc.IsNull()) {
    RET(r.CheckKeys(sc, "scheduler",
                    {"overhead_ms", "heartbeat_interval_ms", "heartbeat_timeout_ms", "handoff_ms",
                     "holder_wait_s", "partition_timeout_ms"}));
    RET(r.Get(sc, "overhead_ms", "scheduler", &spec.scheduler.overhead_ms));
    if (!(spec.scheduler.overhead_ms >= 0))
      return r.Error(sc["overhead_ms"], "scheduler.overhead_ms", "must be >= 0");
    RET(r.Get(sc, "heartbeat_interval_ms", "scheduler", &spec.scheduler.heartbeat_interval_ms));
    if (!(spec.scheduler.heartbeat_interval_ms > 0))
      return r.Error(sc["heartbeat_interval_ms"], "scheduler.heartbeat_interval_ms", "must be > 0");
    RET(r.Get(sc, "heartbeat_timeout_ms", "scheduler", &spec.scheduler.heartbeat_timeout_ms));
    if (!(spec.scheduler.heartbeat_timeout_ms >= 0))
      return r.Error(sc["heartbeat_timeout_ms"], "scheduler.heartbeat_timeout_ms", "must be >= 0");
    RET(r.Get(sc, "handoff_ms", "scheduler", &spec.scheduler.handoff_ms));
    if (!(spec.scheduler.handoff_ms >= 0) || !std::isfinite(spec.scheduler.handoff_ms))
      return r.Error(sc["handoff_ms"], "scheduler.handoff_ms", "must be a number >= 0");
    RET(r.Get(sc, "partition_timeout_ms", "scheduler", &spec.scheduler.partition_timeout_ms));
    if (!(spec.scheduler.partition_timeout_ms >= 0) || !std::isfinite(spec.scheduler.partition_timeout_ms))
      return r.Error(sc["partition_timeout_ms"], "scheduler.partition_timeout_ms", "must be a number >= 0");
    RET(r.Get(sc, "holder_wait_s", "scheduler", &spec.scheduler.holder_wait_s));
    if (!(spec.scheduler.holder_wait_s >= 0) || !std::isfinite(spec.scheduler.holder_wait_s))
      return r.Error(sc["holder_wait_s"], "scheduler.holder_wait_s", "must be a number >= 0");
  }
  // Absent: the default for this spec (ParseTraining ran before).
  const YAML::Node sc = root["scheduler"];
  if (!sc.IsDefined() || sc.IsNull() || !sc["partition_timeout_ms"].IsDefined() ||
      sc["partition_timeout_ms"].IsNull())
    spec.scheduler.partition_timeout_ms = DefaultPartitionTimeoutMs(spec.training);
  return OkStatus();
}

Status ParseNetwork(const SpecReader& r, const YAML::Node& root, ClusterSpec& spec) {
  if (YAML::Node nw = root["network"]; nw.IsDefined() && !nw.IsNull()) {
    RET(r.CheckKeys(
        nw, "network",
        {"packet_efficiency", "record_overhead_bytes", "burst_ms", "burst_min_bytes", "request_overhead_ms",
         "ack_bytes_per_byte", "request_bytes", "report_bytes", "assignment_bytes"}));
    RET(r.Get(nw, "packet_efficiency", "network", &spec.network.packet_efficiency));
    if (!(spec.network.packet_efficiency > 0 && spec.network.packet_efficiency <= 1))
      return r.Error(nw["packet_efficiency"], "network.packet_efficiency",
                     "must be in (0, 1] (payload bytes per link byte)");
    // Every other network key: a finite number >= 0, checked in this order.
    for (const auto& [key, field] : {std::pair{"record_overhead_bytes", &spec.network.record_overhead_bytes},
                                     std::pair{"burst_ms", &spec.network.burst_ms},
                                     std::pair{"burst_min_bytes", &spec.network.burst_min_bytes},
                                     std::pair{"request_overhead_ms", &spec.network.request_overhead_ms},
                                     std::pair{"ack_bytes_per_byte", &spec.network.ack_bytes_per_byte},
                                     std::pair{"request_bytes", &spec.network.request_bytes},
                                     std::pair{"report_bytes", &spec.network.report_bytes},
                                     std::pair{"assignment_bytes", &spec.network.assignment_bytes}}) {
      RET(r.Get(nw, key, "network", field));
      if (!(*field >= 0) || !std::isfinite(*field))
        return r.Error(nw[key], std::string("network.") + key, "must be a number >= 0");
    }
  }
  return OkStatus();
}

Status ParseAgent(const SpecReader& r, const YAML::Node& root, ClusterSpec& spec) {
  if (YAML::Node ag = root["agent"]; ag.IsDefined() && !ag.IsNull()) {
    RET(r.CheckKeys(ag, "agent",
                    {"cpu_ms_per_partition", "cpu_ms_per_sample", "cpu_ms_per_request",
                     "cpu_ms_per_fetched_sample", "cpu_ms_per_allreduce_mb", "idle_cores"}));
    for (auto [key, field] : {std::pair{"cpu_ms_per_partition", &spec.agent.cpu_ms_per_partition},
                              std::pair{"cpu_ms_per_sample", &spec.agent.cpu_ms_per_sample},
                              std::pair{"cpu_ms_per_request", &spec.agent.cpu_ms_per_request},
                              std::pair{"cpu_ms_per_fetched_sample", &spec.agent.cpu_ms_per_fetched_sample},
                              std::pair{"cpu_ms_per_allreduce_mb", &spec.agent.cpu_ms_per_allreduce_mb},
                              std::pair{"idle_cores", &spec.agent.idle_cores}}) {
      const std::string path = std::string("agent.") + key;
      RET(r.Get(ag, key, "agent", field));
      if (!(*field >= 0) || !std::isfinite(*field)) return r.Error(ag[key], path, "must be a number >= 0");
    }
  }
  return OkStatus();
}

// nodes[].byzantine by name.
Status ParseByzantine(const SpecReader& r, const YAML::Node& n, const std::string& path, ByzantineKind* out) {
  std::string byz = "none";
  RET(r.Get(n, "byzantine", path, &byz));
  static const std::pair<const char*, ByzantineKind> kKinds[] = {
      {"none", ByzantineKind::kNone},
      {"sign_flip", ByzantineKind::kSignFlip},
      {"random", ByzantineKind::kRandom},
      {"nan", ByzantineKind::kNaN},
      {"chunk_garbage", ByzantineKind::kChunkGarbage},
      {"chunk_scale", ByzantineKind::kChunkScale},
      {"phantom_round", ByzantineKind::kPhantomRound},
      {"poison_serve", ByzantineKind::kPoisonServe},
      {"poison_decoded", ByzantineKind::kPoisonDecoded}};
  std::string names;
  for (const auto& [name, kind] : kKinds) {
    if (byz == name) {
      *out = kind;
      return OkStatus();
    }
    names += std::string(names.empty() ? "" : ", ") + name;
  }
  return r.Error(n["byzantine"], path + ".byzantine", "must be one of " + names + " (got '" + byz + "')");
}

// nodes[].compute, at `p`.
Status ParseCompute(const SpecReader& r, const YAML::Node& c, const std::string& p, ComputeSpec* compute) {
  RET(r.CheckKeys(c, p,
                  {"fixed_ms", "per_sample_ms", "jitter", "jitter_kind", "jitter_shared", "cpu_cores"}));
  RET(r.Get(c, "fixed_ms", p, &compute->fixed_ms));
  RET(r.Get(c, "per_sample_ms", p, &compute->per_sample_ms));
  RET(r.Get(c, "jitter", p, &compute->jitter));
  RET(NonNegative(r, c, "fixed_ms", p, compute->fixed_ms));
  RET(Positive(r, c, "per_sample_ms", p, compute->per_sample_ms));
  RET(NonNegative(r, c, "jitter", p, compute->jitter));
  if (c["jitter_kind"].IsDefined()) {
    std::string kind;
    RET(r.Get(c, "jitter_kind", p, &kind));
    if (kind == "normal")
      compute->jitter_kind = JitterKind::kNormal;
    else if (kind == "lognormal")
      compute->jitter_kind = JitterKind::kLognormal;
    else
      return r.Error(c["jitter_kind"], p + ".jitter_kind",
                     "must be normal or lognormal (got '" + kind + "')");
  }
  RET(r.Get(c, "jitter_shared", p, &compute->jitter_shared));
  if (!(compute->jitter_shared >= 0 && compute->jitter_shared <= 1))
    return r.Error(c["jitter_shared"], p + ".jitter_shared", "must be in [0, 1]");
  if (c["cpu_cores"].IsDefined()) {
    RET(r.Get(c, "cpu_cores", p, &compute->cpu_cores));
    RET(Positive(r, c, "cpu_cores", p, compute->cpu_cores));
  }
  return OkStatus();
}

// One nodes[] entry at `path` into `base` (its name, not yet expanded) and
// its `count`.
Status ParseNode(const SpecReader& r, const YAML::Node& n, const std::string& path, NodeSpec* base,
                 int64_t* count) {
  base->line = n.Mark().line + 1;
  RET(r.Get(n, "name", path, &base->name));
  if (base->name.empty()) return r.Error(n, path + ".name", "is required");
  // Names become directory and key file names: no ".", "..", hidden files.
  if (!std::isalnum(static_cast<unsigned char>(base->name[0])))
    return r.Error(n["name"], path + ".name", "must start with a letter or digit (got '" + base->name + "')");
  for (char c : base->name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return r.Error(n["name"], path + ".name",
                     "may contain only letters, digits, '-', '_' and '.' (got '" + base->name + "')");
  }
  base->group = base->name;
  RET(r.Get(n, "count", path, count));
  if (*count < 1) return r.Error(n["count"], path + ".count", "must be >= 1");
  if (*count > 1000000) return r.Error(n["count"], path + ".count", "must be <= 1000000");

  if (YAML::Node c = n["compute"]; c.IsDefined()) RET(ParseCompute(r, c, path + ".compute", &base->compute));
  if (YAML::Node sl = n["slowdowns"]; sl.IsDefined()) {
    if (!sl.IsSequence()) return r.Error(sl, path + ".slowdowns", "must be a list");
    for (size_t k = 0; k < sl.size(); ++k) {
      std::string p = path + ".slowdowns[" + std::to_string(k) + "]";
      SlowdownSpec s;
      RET(r.CheckKeys(sl[k], p, {"at_s", "factor", "for_s"}));
      RET(r.Get(sl[k], "at_s", p, &s.at_s));
      RET(r.Get(sl[k], "factor", p, &s.factor));
      RET(r.Get(sl[k], "for_s", p, &s.for_s));
      RET(NonNegative(r, sl[k], "at_s", p, s.at_s));
      RET(Positive(r, sl[k], "factor", p, s.factor));
      RET(Positive(r, sl[k], "for_s", p, s.for_s));
      base->slowdowns.push_back(s);
    }
  }
  if (YAML::Node d = n["disk"]; d.IsDefined()) {
    std::string p = path + ".disk";
    RET(r.CheckKeys(d, p, {"read_mbps"}));
    RET(r.Get(d, "read_mbps", p, &base->disk.read_mbps));
    RET(Positive(r, d, "read_mbps", p, base->disk.read_mbps));
  }
  if (YAML::Node dc = n["decode"]; dc.IsDefined()) {
    std::string p = path + ".decode";
    RET(r.CheckKeys(dc, p, {"per_sample_ms", "per_kb_ms"}));
    RET(r.Get(dc, "per_sample_ms", p, &base->decode.per_sample_ms));
    RET(r.Get(dc, "per_kb_ms", p, &base->decode.per_kb_ms));
    for (const char* key : {"per_sample_ms", "per_kb_ms"}) {
      const double v =
          std::string_view(key) == "per_kb_ms" ? base->decode.per_kb_ms : base->decode.per_sample_ms;
      if (!std::isfinite(v) || v < 0) return r.Error(dc[key], p + "." + key, "must be a finite number >= 0");
    }
  }
  if (YAML::Node l = n["link"]; l.IsDefined()) {
    std::string p = path + ".link";
    RET(r.CheckKeys(l, p, {"up_mbps", "down_mbps", "latency_ms"}));
    RET(r.Get(l, "up_mbps", p, &base->link.up_mbps));
    RET(r.Get(l, "down_mbps", p, &base->link.down_mbps));
    RET(r.Get(l, "latency_ms", p, &base->link.latency_ms));
    RET(Positive(r, l, "up_mbps", p, base->link.up_mbps));
    RET(Positive(r, l, "down_mbps", p, base->link.down_mbps));
    RET(NonNegative(r, l, "latency_ms", p, base->link.latency_ms));
  }
  RET(r.Get(n, "max_batch", path, &base->max_batch));
  if (base->max_batch < 0) return r.Error(n["max_batch"], path + ".max_batch", "must be >= 0");
  if (YAML::Node f = n["failures"]; f.IsDefined()) {
    if (!f.IsSequence()) return r.Error(f, path + ".failures", "must be a list");
    for (size_t k = 0; k < f.size(); ++k) {
      std::string p = path + ".failures[" + std::to_string(k) + "]";
      FailureSpec fs;
      RET(r.CheckKeys(f[k], p, {"at_s", "down_s"}));
      RET(r.Get(f[k], "at_s", p, &fs.at_s));
      RET(r.Get(f[k], "down_s", p, &fs.down_s));
      RET(NonNegative(r, f[k], "at_s", p, fs.at_s));
      RET(NonNegative(r, f[k], "down_s", p, fs.down_s));
      base->failures.push_back(fs);
    }
  }
  RET(ParseByzantine(r, n, path, &base->byzantine));
  RET(r.Get(n, "byzantine_scale", path, &base->byzantine_scale));
  RET(Positive(r, n, "byzantine_scale", path, base->byzantine_scale));
  return OkStatus();
}

// nodes, each entry expanded `count` times.
Status ParseNodes(const SpecReader& r, const YAML::Node& root, ClusterSpec& spec) {
  YAML::Node nodes = root["nodes"];
  if (!nodes.IsDefined() || nodes.IsNull()) return r.Error(root, "nodes", "is required");
  if (!nodes.IsSequence() || nodes.size() == 0) return r.Error(nodes, "nodes", "must be a non-empty list");
  std::set<std::string> names;
  for (size_t i = 0; i < nodes.size(); ++i) {
    YAML::Node n = nodes[i];
    std::string path = "nodes[" + std::to_string(i) + "]";
    RET(r.CheckKeys(n, path,
                    {"name", "count", "compute", "slowdowns", "disk", "decode", "link", "max_batch",
                     "failures", "byzantine", "byzantine_scale"}));
    NodeSpec base;
    int64_t count = 1;
    RET(ParseNode(r, n, path, &base, &count));
    for (int64_t k = 0; k < count; ++k) {
      NodeSpec ns = base;
      if (count > 1) ns.name = base.name + "-" + std::to_string(k);
      if (!names.insert(ns.name).second)
        return r.Error(n["name"], path + ".name", "duplicates node name '" + ns.name + "'");
      // keys_dir/<name>.key: these two are the scheduler's and the operator's keys.
      if (ns.name == "scheduler" || ns.name == "loftctl")
        return r.Error(n["name"], path + ".name",
                       "'" + ns.name + "' is reserved (keys_dir/" + ns.name + ".key is the " +
                           (ns.name == "scheduler" ? "scheduler's" : "operator's") + " CURVE key)");
      spec.nodes.push_back(std::move(ns));
    }
  }
  return OkStatus();
}

// placement (after nodes: explicit shares are per expanded node).
Status ParsePlacement(const SpecReader& r, const YAML::Node& root, ClusterSpec& spec) {
  spec.placement.seed = spec.training.seed;
  if (YAML::Node p = root["placement"]; p.IsDefined()) {
    RET(r.CheckKeys(p, "placement", {"kind", "replication", "skew", "shares", "seed"}));
    std::string kind = "shards";
    RET(r.Get(p, "kind", "placement", &kind));
    static constexpr PlacementKind kKinds[] = {PlacementKind::kShards, PlacementKind::kZipf,
                                               PlacementKind::kExplicit};
    LOFT_ASSIGN_OR_RETURN(const size_t k,
                          r.OneOf(p["kind"], "placement.kind", kind, {"shards", "zipf", "explicit"}));
    spec.placement.kind = kKinds[k];
    RET(r.Get(p, "replication", "placement", &spec.placement.replication));
    RET(r.Get(p, "skew", "placement", &spec.placement.skew));
    if (p["seed"].IsDefined()) {
      RET(r.Get(p, "seed", "placement", &spec.placement.seed));
    }
    if (spec.placement.replication < 1)
      return r.Error(p["replication"], "placement.replication", "must be >= 1");
    if (spec.placement.replication > spec.num_nodes())
      return r.Error(p["replication"], "placement.replication",
                     "must be <= the number of nodes (" + std::to_string(spec.num_nodes()) + ")");
    if (spec.placement.skew < 0) return r.Error(p["skew"], "placement.skew", "must be >= 0");
    if (YAML::Node s = p["shares"]; s.IsDefined()) {
      if (spec.placement.kind != PlacementKind::kExplicit)
        return r.Error(s, "placement.shares", "is only allowed with kind: explicit");
      if (!s.IsSequence()) return r.Error(s, "placement.shares", "must be a list of numbers");
      for (size_t k = 0; k < s.size(); ++k) {
        double v = 0;
        std::string f = "placement.shares[" + std::to_string(k) + "]";
        try {
          v = s[k].as<double>();
        } catch (const YAML::Exception&) {
          return r.Error(s[k], f, "must be a number");
        }
        if (!(v >= 0) || !std::isfinite(v)) return r.Error(s[k], f, "must be >= 0");
        spec.placement.shares.push_back(v);
      }
    }
    if (spec.placement.kind == PlacementKind::kExplicit) {
      if (static_cast<int>(spec.placement.shares.size()) != spec.num_nodes())
        return r.Error(p, "placement.shares",
                       "must list one share per node (" + std::to_string(spec.num_nodes()) +
                           " nodes after count expansion, got " +
                           std::to_string(spec.placement.shares.size()) + ")");
      double sum = 0;
      for (double v : spec.placement.shares) sum += v;
      if (!(sum > 0)) return r.Error(p["shares"], "placement.shares", "must not all be 0");
    }
  }
  return OkStatus();
}

// What no single section can check alone.
Status CheckAcrossSections(const SpecReader& r, const YAML::Node& root, ClusterSpec& spec) {
  const YAML::Node nodes = root["nodes"];
  auto& tr = spec.training;
  // A robust rule implies a verified ring wherever one fits (2f+1 nodes):
  // the plain ring lets one member replace a whole reduced chunk.
  if (!tr.byzantine_tolerance_set && RobustAggregation(tr.aggregation) && spec.num_nodes() >= 3)
    tr.byzantine_tolerance = 1;
  if (tr.byzantine_tolerance > 0 && spec.num_nodes() < 2 * tr.byzantine_tolerance + 1) {
    return r.Error(root["training"]["byzantine_tolerance"], "training.byzantine_tolerance",
                   std::to_string(tr.byzantine_tolerance) + " needs at least " +
                       std::to_string(2 * tr.byzantine_tolerance + 1) + " nodes (2f+1), the spec has " +
                       std::to_string(spec.num_nodes()));
  }
  // min_batch * nodes > global_batch, without the product (it can overflow).
  if (tr.min_batch > tr.global_batch / spec.num_nodes()) {
    return r.Error(root["training"], "training.min_batch",
                   "times the number of nodes (" + std::to_string(tr.min_batch) + " x " +
                       std::to_string(spec.num_nodes()) + ") exceeds training.global_batch (" +
                       std::to_string(tr.global_batch) + ")");
  }
  int64_t cap = 0;
  for (int i = 0; i < spec.num_nodes(); ++i) {
    const int64_t mb = spec.MaxBatch(i);
    cap = cap > std::numeric_limits<int64_t>::max() - mb ? std::numeric_limits<int64_t>::max() : cap + mb;
    if (spec.nodes[i].max_batch > 0 && spec.nodes[i].max_batch < tr.min_batch) {
      return r.Error(nodes, "nodes[" + std::to_string(i) + "].max_batch",
                     "(" + std::to_string(spec.nodes[i].max_batch) + ") is below training.min_batch (" +
                         std::to_string(tr.min_batch) + ")");
    }
  }
  if (cap < tr.global_batch) {
    return r.Error(root["training"], "training.global_batch",
                   "(" + std::to_string(tr.global_batch) + ") exceeds the sum of the nodes' max_batch (" +
                       std::to_string(cap) + ")");
  }
  if (tr.global_batch > spec.dataset.samples) {
    return r.Error(root["training"], "training.global_batch",
                   "exceeds dataset.samples (" + std::to_string(spec.dataset.samples) + ")");
  }
  return OkStatus();
}

StatusOr<ClusterSpec> Parse(const YAML::Node& root, const std::string& source) {
  SpecReader r(source);
  ClusterSpec spec;
  spec.source = source;
  if (!root.IsDefined() || root.IsNull()) return r.Error(root, "spec", "is empty");
  RET(r.CheckKeys(root, "", {"dataset", "placement", "training", "scheduler", "network", "agent", "nodes"}));
  RET(ParseDataset(r, root, spec));
  RET(ParseTraining(r, root, spec));
  RET(ParseScheduler(r, root, spec));
  RET(ParseNetwork(r, root, spec));
  RET(ParseAgent(r, root, spec));
  RET(ParseNodes(r, root, spec));
  RET(ParsePlacement(r, root, spec));
  RET(CheckAcrossSections(r, root, spec));
  return spec;
}

}  // namespace

int64_t ModelParameterCount(const std::string& model, int64_t input_dim) {
  constexpr int64_t kClasses = 10;
  if (model == "softmax") return input_dim * kClasses + kClasses;
  if (model == "mlp") {
    // models::ModelSpec's default hidden layers {256, 128}.
    return input_dim * 256 + 256 + 256 * 128 + 128 + 128 * kClasses + kClasses;
  }
  return 0;
}

bool RobustAggregation(const std::string& aggregation) {
  return aggregation == "median" || aggregation == "trimmed_mean" || aggregation == "krum" ||
         aggregation == "centered_clip";
}

std::vector<std::string> SpecWarnings(const ClusterSpec& spec) {
  std::vector<std::string> out;
  const auto& tr = spec.training;
  if (!RobustAggregation(tr.aggregation) || tr.byzantine_tolerance > 0 || tr.model == "none") return out;
  const std::string why = tr.byzantine_tolerance_set ? "training.byzantine_tolerance is set to 0"
                                                     : "the spec has " + std::to_string(spec.num_nodes()) +
                                                           " nodes (a verified ring needs 2f+1 = 3)";
  out.push_back(
      spec.source + ": training.aggregation " + tr.aggregation + " with byzantine_tolerance 0 (" + why +
      "): the reducer bounds each member's gradient, but the plain ring trusts every chunk's owner, so "
      "one Byzantine member can replace the reduced result of its chunk (1/N of the model) for "
      "everyone and nobody detects it. Leave "
      "byzantine_tolerance out (1 with a robust rule) or set it >= 1 to verify every chunk");
  return out;
}

int ClusterSpec::FindNode(const std::string& name) const {
  for (int i = 0; i < num_nodes(); ++i)
    if (nodes[i].name == name) return i;
  return -1;
}

int64_t ClusterSpec::MaxBatch(int i) const {
  int64_t m = nodes[i].max_batch;
  return m > 0 ? std::min(m, training.global_batch) : training.global_batch;
}

StatusOr<ClusterSpec> ParseClusterSpec(const std::string& yaml_text, const std::string& source_name) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    return InvalidArgument(source_name + ":" + std::to_string(e.mark.line + 1) +
                           ": YAML syntax error: " + e.msg);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source_name + ": YAML error: " + e.what());
  }
  try {
    return Parse(root, source_name);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source_name + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

StatusOr<ClusterSpec> LoadClusterSpecFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open cluster spec '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string base = path;
  if (auto pos = base.find_last_of('/'); pos != std::string::npos) base = base.substr(pos + 1);
  return ParseClusterSpec(ss.str(), base);
}

std::string_view DatasetEncodingName(DatasetEncoding e) {
  return e == DatasetEncoding::kJpeg ? "jpeg" : "raw";
}

std::string_view AugmentKindName(AugmentKind a) {
  return a == AugmentKind::kCropFlip ? "crop_flip" : "none";
}

std::string_view PlacementKindName(PlacementKind k) {
  switch (k) {
    case PlacementKind::kShards: return "shards";
    case PlacementKind::kZipf: return "zipf";
    case PlacementKind::kExplicit: return "explicit";
  }
  return "?";
}

std::string_view ByzantineKindName(ByzantineKind k) {
  switch (k) {
    case ByzantineKind::kNone: return "none";
    case ByzantineKind::kSignFlip: return "sign_flip";
    case ByzantineKind::kRandom: return "random";
    case ByzantineKind::kNaN: return "nan";
    case ByzantineKind::kChunkGarbage: return "chunk_garbage";
    case ByzantineKind::kChunkScale: return "chunk_scale";
    case ByzantineKind::kPhantomRound: return "phantom_round";
    case ByzantineKind::kPoisonServe: return "poison_serve";
    case ByzantineKind::kPoisonDecoded: return "poison_decoded";
  }
  return "?";
}

}  // namespace loft
