#include "tools/loftctl/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <numbers>
#include <sstream>
#include <utility>
#include <vector>

#include "core/cluster_spec.h"
#include "scheduler/plan.h"
#include "scheduler/run_recorder.h"
#include "sim/allreduce_model.h"
#include "sim/simulator.h"

using namespace loft;
using namespace loft::ctl;

namespace {

const char* kSpec = R"(dataset: {name: fashion-mnist, samples: 6000, sample_bytes: 784}
placement: {kind: explicit, shares: [3, 1, 1], seed: 11}
training: {global_batch: 256, min_batch: 8, iterations: 40, overlap: false, model: mlp,
           aggregation: trimmed_mean, learning_rate: 0.1, lr_schedule: {kind: cosine, warmup_steps: 5}}
nodes:
  - name: big
    compute: {fixed_ms: 2, per_sample_ms: 0.05, jitter: 0.1, cpu_cores: 0.5}
    slowdowns: [{at_s: 3, factor: 2.5, for_s: 4}]
    disk: {read_mbps: 400}
    link: {up_mbps: 40, down_mbps: 50, latency_ms: 5}
    max_batch: 200
    failures: [{at_s: 10, down_s: 2}]
  - name: edge
    count: 2
    link: {up_mbps: 5, down_mbps: 10, latency_ms: 20}
    byzantine: sign_flip
    byzantine_scale: 3
agent: {cpu_ms_per_partition: 0.9, cpu_ms_per_sample: 0.003, cpu_ms_per_request: 0.2, cpu_ms_per_fetched_sample: 0.007,
       cpu_ms_per_allreduce_mb: 4.5, idle_cores: 0.01}
)";

ClusterSpec Spec(const std::string& text = kSpec) {
  auto s = ParseClusterSpec(text, "cal.yaml");
  REQUIRE(s.ok());
  return *s;
}

nlohmann::json Profile(const sched::CostParams& c) {
  return {{"compute_fixed_ms", c.compute_fixed_ms},
          {"compute_per_sample_ms", c.compute_per_sample_ms},
          {"local_fixed_ms", c.local_fixed_ms},
          {"local_per_sample_ms", c.local_per_sample_ms},
          {"remote_fixed_ms", c.remote_fixed_ms},
          {"remote_per_sample_ms", c.remote_per_sample_ms},
          {"uplink_per_sample_ms", c.uplink_per_sample_ms}};
}

}  // namespace

TEST_CASE("ClusterSpecToYaml keeps training.exchange") {
  for (const std::string ex :
       {"{period: 4, compression: int8}", "{period: auto, max_period: 8, drift: 0.5}"}) {
    INFO(ex);
    std::string text = kSpec;
    const std::string key = "lr_schedule: {kind: cosine, warmup_steps: 5}}";
    text.replace(text.find(key), key.size(),
                 "lr_schedule: {kind: cosine, warmup_steps: 5}, exchange: " + ex + "}");
    const ClusterSpec a = Spec(text);
    auto b = ParseClusterSpec(ClusterSpecToYaml(a), "back.yaml");
    REQUIRE(b.ok());
    CHECK(b->training.exchange.period == a.training.exchange.period);
    CHECK(b->training.exchange.period_auto == a.training.exchange.period_auto);
    CHECK(b->training.exchange.max_period == a.training.exchange.max_period);
    CHECK(b->training.exchange.drift == a.training.exchange.drift);
    CHECK(b->training.exchange.compression == a.training.exchange.compression);
    CHECK(b->training.exchange.overlap == a.training.exchange.overlap);
  }
}

TEST_CASE("ClusterSpecToYaml keeps dataset.encoding and augment, and writes nothing new for raw") {
  const std::string key = "sample_bytes: 784}";
  std::string text = kSpec;
  text.replace(text.find(key), key.size(),
               "sample_bytes: 784, encoding: jpeg, image_size: 64, jpeg_quality: 80, augment: crop_flip}");
  const ClusterSpec a = Spec(text);
  auto b = ParseClusterSpec(ClusterSpecToYaml(a), "back.yaml");
  REQUIRE(b.ok());
  CHECK(b->dataset.encoding == DatasetEncoding::kJpeg);
  CHECK(b->dataset.image_size == 64);
  CHECK(b->dataset.jpeg_quality == 80);
  CHECK(b->dataset.augment == AugmentKind::kCropFlip);
  CHECK(ClusterSpecToYaml(Spec()).find(
            "dataset: {name: fashion-mnist, samples: 6000, sample_bytes: 784}\n") == 0);
  CHECK(ClusterSpecToYaml(Spec()).find("decode") == std::string::npos);
}

TEST_CASE("ClusterSpecToYaml keeps record_bytes, decode_placement and nodes' decode costs") {
  const std::string key = "sample_bytes: 784}";
  std::string text = kSpec;
  text.replace(text.find(key), key.size(),
               "sample_bytes: 784, encoding: jpeg, record_bytes: 1699.5, decode_placement: auto}");
  ClusterSpec a = Spec(text);
  a.nodes[1].decode.per_kb_ms = 0.5;
  auto b = ParseClusterSpec(ClusterSpecToYaml(a), "back.yaml");
  INFO(ClusterSpecToYaml(a));
  REQUIRE(b.ok());
  CHECK(b->dataset.record_bytes == 1699.5);
  CHECK(b->dataset.decode_placement == DecodePlacementKind::kAuto);
  CHECK(b->nodes[1].decode.per_kb_ms == 0.5);
  CHECK(b->nodes[1].decode.per_sample_ms == a.nodes[1].decode.per_sample_ms);
  CHECK(b->nodes[0].decode.per_kb_ms == DecodeSpec{}.per_kb_ms);
}

TEST_CASE("ClusterSpecToYaml reads back to the same spec, nodes expanded") {
  ClusterSpec a = Spec();
  auto b = ParseClusterSpec(ClusterSpecToYaml(a), "back.yaml");
  REQUIRE(b.ok());
  REQUIRE(b->num_nodes() == 3);
  CHECK(b->nodes[1].name == "edge-0");
  CHECK(b->nodes[2].name == "edge-1");
  CHECK(b->placement.kind == PlacementKind::kExplicit);
  CHECK(b->placement.shares == a.placement.shares);
  CHECK(b->placement.seed == 11);
  CHECK(b->training.overlap == false);
  CHECK(b->training.lr_schedule.kind == "cosine");
  CHECK(b->training.lr_schedule.warmup_steps == 5);
  CHECK(b->training.learning_rate == 0.1);
  CHECK(b->training.exchange.is_default());
  CHECK(b->nodes[0].compute.cpu_cores == 0.5);
  CHECK(b->agent.cpu_ms_per_partition == 0.9);
  CHECK(b->agent.cpu_ms_per_sample == 0.003);
  CHECK(b->agent.cpu_ms_per_request == 0.2);
  CHECK(b->agent.cpu_ms_per_fetched_sample == 0.007);
  CHECK(b->agent.cpu_ms_per_allreduce_mb == 4.5);
  CHECK(b->agent.idle_cores == 0.01);
  CHECK(b->nodes[0].slowdowns.size() == 1);
  CHECK(b->nodes[0].slowdowns[0].factor == 2.5);
  CHECK(b->nodes[0].failures[0].down_s == 2);
  CHECK(b->nodes[0].max_batch == 200);
  CHECK(b->nodes[2].byzantine == ByzantineKind::kSignFlip);
  CHECK(b->nodes[2].byzantine_scale == 3);
  CHECK(ClusterSpecToYaml(*b) == ClusterSpecToYaml(a));
}

TEST_CASE("calibrate: the calibrated spec's priors are the fitted profiles") {
  ClusterSpec spec = Spec();
  // "Fitted" models: the priors of a spec with other constants.
  ClusterSpec truth = spec;
  truth.nodes[0].compute = {3.5, 0.08, 0.1, 0.5};
  truth.nodes[0].disk.read_mbps = 123;
  truth.nodes[0].link = {7, 9, 2.5};
  truth.nodes[1].compute.per_sample_ms = 0.2;
  truth.nodes[1].link.down_mbps = 4;
  nlohmann::json status = {{"policy", "uniform"}, {"workers", nlohmann::json::array()}};
  for (int i = 0; i < truth.num_nodes(); ++i) {
    sched::CostParams c = sched::PriorFromSpec(truth, i);
    status["workers"].push_back(
        {{"name", truth.nodes[i].name}, {"observations", 50}, {"profile", Profile(c)}});
  }
  auto cal = CalibrateSpec(spec, status, "status.json");
  REQUIRE(cal.ok());
  auto out = ParseClusterSpec(cal->yaml, "calibrated.yaml");
  REQUIRE(out.ok());
  for (int i = 0; i < truth.num_nodes(); ++i) {
    sched::CostParams want = sched::PriorFromSpec(truth, i), got = sched::PriorFromSpec(*out, i);
    CHECK(got.compute_fixed_ms == Approx(want.compute_fixed_ms));
    CHECK(got.compute_per_sample_ms == Approx(want.compute_per_sample_ms));
    CHECK(got.local_per_sample_ms == Approx(want.local_per_sample_ms));
    CHECK(got.remote_fixed_ms == Approx(want.remote_fixed_ms));
    CHECK(got.remote_per_sample_ms == Approx(want.remote_per_sample_ms));
    CHECK(got.uplink_per_sample_ms == Approx(want.uplink_per_sample_ms));
  }
  CHECK(out->nodes[0].link.up_mbps == Approx(7));
  CHECK(out->nodes[0].disk.read_mbps == Approx(123));
  CHECK(out->nodes[1].link.down_mbps == Approx(4));
  // What the run did not change stays exactly the spec's (not observed).
  CHECK(out->nodes[2].link.up_mbps == 5);
  CHECK(out->nodes[0].failures.size() == 1);
  CHECK(out->nodes[0].compute.cpu_cores == 0.5);
}

TEST_CASE("calibrate: a worker the spec lacks is an error, a missing worker keeps the spec") {
  ClusterSpec spec = Spec();
  nlohmann::json status = {
      {"workers", {{{"name", "nope"}, {"profile", Profile(sched::PriorFromSpec(spec, 0))}}}}};
  auto bad = CalibrateSpec(spec, status, "status.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "status.json: worker 'nope' is not a node of cal.yaml (wrong spec?)");
  nlohmann::json one = {
      {"workers", {{{"name", "big"}, {"profile", Profile(sched::PriorFromSpec(spec, 0))}}}}};
  auto cal = CalibrateSpec(spec, one, "status.json");
  REQUIRE(cal.ok());
  CHECK(cal->notes.back() == "edge-1: not in the run's status; kept the spec's constants");
  nlohmann::json partial = {{"workers", {{{"name", "big"}, {"profile", {{"compute_fixed_ms", 1}}}}}}};
  auto missing = CalibrateSpec(spec, partial, "status.json");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() == "status.json: workers[big].profile.compute_per_sample_ms is missing");
}

namespace {

const char* kFastSpec = R"(dataset: {name: fashion-mnist, samples: 6000, sample_bytes: 784}
training: {global_batch: 96, min_batch: 8, iterations: 40, model: mlp}
nodes:
  - name: n
    count: 3
    link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 0.1}
)";

// iterations.csv rows (the run recorder's header): three iterations of
// three workers, allreduce_ms 30/25/ring and makespan 40; the third has a
// failed row and is left out.
std::string Csv(double ring) {
  std::string c = std::string(sched::kIterationsCsvHeader) + "\n";
  for (int it = 0; it < 3; ++it) {
    for (int w = 0; w < 3; ++w) {
      const double ar = w == 0 ? 30 : w == 1 ? 25 : ring;
      const bool failed = it == 2 && w == 1;
      c += fmt::format("uniform,{},0,n-{},32,30,2,{},{},5,0,40,0.1,0.2,0.3,{},40,{},0.05\n", it, w,
                       w == 2 ? 2.0 : 1.0, 1.0, ar, failed ? 1 : 0);
    }
  }
  return c;
}

}  // namespace

TEST_CASE("calibrate: fitted latencies hold the per-request cost, enforced links keep the spec's") {
  ClusterSpec spec = Spec();
  spec.network.request_overhead_ms = 0.8;
  nlohmann::json status = {{"workers", nlohmann::json::array()}};
  for (int i = 0; i < spec.num_nodes(); ++i) {
    sched::CostParams c = sched::PriorFromSpec(spec, i);
    c.remote_fixed_ms += 0.8;  // what the run's remote reads showed
    status["workers"].push_back(
        {{"name", spec.nodes[i].name}, {"observations", 50}, {"profile", Profile(c)}});
  }
  auto fitted = CalibrateSpec(spec, status, "status.json");
  REQUIRE(fitted.ok());
  auto out = ParseClusterSpec(fitted->yaml, "calibrated.yaml");
  REQUIRE(out.ok());
  CHECK(out->network.request_overhead_ms == 0);
  // The prior's fixed cost already holds the spec's 0.8 (scheduler/plan.cc
  // PriorFromSpec); the run showed 0.8 more: the fitted latency holds both.
  CHECK(out->nodes[0].link.latency_ms == Approx(spec.nodes[0].link.latency_ms + 0.8 + 0.8));
  CHECK(std::any_of(fitted->notes.begin(), fitted->notes.end(), [](const std::string& n) {
    return n.find("network.request_overhead_ms 0 (spec: 0.8 ms)") != std::string::npos;
  }));
  auto enforced = CalibrateSpec(spec, status, "status.json", nullptr, "iterations.csv", /*fit_links=*/false);
  REQUIRE(enforced.ok());
  auto kept = ParseClusterSpec(enforced->yaml, "calibrated.yaml");
  REQUIRE(kept.ok());
  CHECK(kept->network.request_overhead_ms == 0.8);
  CHECK(kept->nodes[0].link.latency_ms == spec.nodes[0].link.latency_ms);
}

TEST_CASE("the run's iterations.csv gives the all-reduce and the scheduler overhead") {
  for (double ring : {20.0, 5.0, 0.2}) {  // 0.2 ms: less than the 4 steps' 0.1 ms latencies
    ClusterSpec s = Spec(kFastSpec);
    std::vector<std::string> notes;
    REQUIRE(CalibrateIterationTail(Csv(ring), "iterations.csv", &s, &notes).ok());
    // overhead = plan_ms + journal_ms (0.1 + 0.05 in every row).
    CHECK(s.scheduler.overhead_ms == Approx(0.15));
    CHECK(s.training.allreduce.parameters == 235146);
    // The calibrated model gives back the measured ring at the run's members.
    sim::AllreduceModel m(s);
    std::vector<int32_t> all{0, 1, 2};
    CHECK(m.RingMs(all) == Approx(ring).epsilon(1e-6));
    // 20 ms is slower than 1 Gbit/s links allow: links stay; 5 ms is faster.
    CHECK(s.training.allreduce.links == (ring == 20.0));
    CHECK((s.training.allreduce.step_latency_ms == 0) == (ring == 0.2));
    // And the spec written reads back with them.
    auto back = ParseClusterSpec(ClusterSpecToYaml(s), "back.yaml");
    REQUIRE(back.ok());
    CHECK(back->scheduler.overhead_ms == Approx(s.scheduler.overhead_ms));
    CHECK(back->scheduler.heartbeat_timeout_ms == s.scheduler.heartbeat_timeout_ms);
    CHECK(back->scheduler.heartbeat_interval_ms == s.scheduler.heartbeat_interval_ms);
    CHECK(back->training.allreduce.reduce_ns_per_element ==
          Approx(s.training.allreduce.reduce_ns_per_element));
    CHECK(back->training.allreduce.links == s.training.allreduce.links);
  }
}

TEST_CASE("the ring is fitted from the last member's compute end to the last member's ring end") {
  // Members end their ring at different times; the iteration ends with the
  // last. own_ms 40/45/38, allreduce_ms 30/25/20: the last compute ends at
  // 45 - 25 = 20, the last ring at 45, so the ring loft-sim must charge is
  // 25 ms, not the smallest allreduce_ms (20).
  std::string c = std::string(sched::kIterationsCsvHeader) + "\n";
  for (int it = 0; it < 3; ++it) {
    const double own[] = {40, 45, 38}, ar[] = {30, 25, 20};
    for (int w = 0; w < 3; ++w)
      c += fmt::format("uniform,{},0,n-{},32,30,2,1,1,5,0,45,0.1,0.2,0.3,{},{},0,0.05\n", it, w, ar[w],
                       own[w]);
  }
  ClusterSpec s = Spec(kFastSpec);
  std::vector<std::string> notes;
  REQUIRE(CalibrateIterationTail(c, "iterations.csv", &s, &notes).ok());
  sim::AllreduceModel m(s);
  const std::vector<int32_t> all{0, 1, 2};
  CHECK(m.RingMs(all) == Approx(25.0).epsilon(1e-6));
}

TEST_CASE("a compute fit with no per-sample part keeps the spec's and refits the fixed part from the rows") {
  // Every row: batch 32, compute_ms 5. A fit that put it all in fixed_ms
  // (5) plus the spec's per-sample 0.05 would charge 6.6 at batch 32.
  ClusterSpec s = Spec(kFastSpec);
  for (auto& n : s.nodes) {
    n.compute.fixed_ms = 5.0;
    n.compute.per_sample_ms = 0.05;
  }
  std::vector<std::string> notes;
  const std::vector<bool> refit{true, false, false};
  REQUIRE(CalibrateIterationTail(Csv(20), "iterations.csv", &s, &notes, &refit).ok());
  CHECK(s.nodes[0].compute.fixed_ms == Approx(5.0 - 0.05 * 32));
  CHECK(s.nodes[0].compute.per_sample_ms == 0.05);
  CHECK(s.nodes[1].compute.fixed_ms == 5.0);  // not marked: as fitted
}

TEST_CASE("a bad iterations.csv is named") {
  ClusterSpec s = Spec(kFastSpec);
  std::vector<std::string> notes;
  auto st = CalibrateIterationTail("policy,iteration\nuniform,0\n", "run/iterations.csv", &s, &notes);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("run/iterations.csv") != std::string::npos);
  std::string bad =
      std::string(sched::kIterationsCsvHeader) + "\nuniform,0,0,n-0,32,30,2,x,1,5,0,40,0,0,0,3,40,0,0\n";
  st = CalibrateIterationTail(bad, "run/iterations.csv", &s, &notes);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("fetch_local_ms") != std::string::npos);
  // A bad iteration number is an error naming the file, line and value,
  // not an exception out of the parser.
  for (const char* it : {"x", "1.5", "-2", ""}) {
    std::string row = std::string(sched::kIterationsCsvHeader) + "\nuniform," + it +
                      ",0,n-0,32,30,2,1,1,5,0,40,0,0,0,3,40,0,0\n";
    st = CalibrateIterationTail(row, "run/iterations.csv", &s, &notes);
    REQUIRE_FALSE(st.ok());
    CHECK(st.message().find("run/iterations.csv:2: iteration '" + std::string(it) + "'") !=
          std::string::npos);
  }
}

TEST_CASE("a malformed number in any numeric column of iterations.csv names the file, line and column") {
  auto split = [](const std::string& line) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    if (!line.empty() && line.back() == ',') f.emplace_back();
    return f;
  };
  auto join = [](const std::vector<std::string>& f) {
    std::string line;
    for (const auto& x : f) line += (line.empty() ? "" : ",") + x;
    return line;
  };
  const std::string head = std::string(sched::kIterationsCsvHeader);
  const std::vector<std::string> columns = split(head);
  // A good row, then the same row with one field replaced (line 3).
  const std::string good = "uniform,1,0,n-0,32,30,2,1,1,5,0,40,0.1,0.4,0.5,3,40,0,0.05";
  for (const char* column : {"batch", "fetch_local_ms", "fetch_remote_ms", "compute_ms", "makespan_ms",
                             "plan_ms", "stream_ms", "ack_ms", "allreduce_ms", "own_ms", "journal_ms"}) {
    const auto k = static_cast<size_t>(std::find(columns.begin(), columns.end(), column) - columns.begin());
    REQUIRE(k < columns.size());
    for (const char* bad : {"x", "1.5ms", "-1", "nan", "inf", "1e999", ""}) {
      std::vector<std::string> fields = split(good);
      fields[k] = bad;
      ClusterSpec s = Spec(kFastSpec);
      std::vector<std::string> notes;
      const Status st = CalibrateIterationTail(head + "\n" + good + "\n" + join(fields) + "\n",
                                               "run/iterations.csv", &s, &notes);
      INFO(column << " = '" << bad << "'");
      REQUIRE_FALSE(st.ok());
      CHECK(st.message() ==
            fmt::format("run/iterations.csv:3: {} '{}' is not a finite number >= 0", column, bad));
    }
  }
  // The hand-off's columns are checked in every row, not only in the rows
  // whose ack_ms it takes (not iteration 0).
  ClusterSpec s = Spec(kFastSpec);
  std::vector<std::string> notes;
  Status st = CalibrateIterationTail(head + "\nuniform,0,0,n-0,32,30,2,1,1,5,0,40,0.1,0.4,x,3,40,0,0.05\n",
                                     "run/iterations.csv", &s, &notes);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message() == "run/iterations.csv:2: ack_ms 'x' is not a finite number >= 0");
  // Blanks around a number are fine.
  st = CalibrateIterationTail(head + "\nuniform,1,0,n-0, 32,30,2,1 ,1,5,0,40,0.1,0.4,0.5,3,40,0,0.05\n",
                              "run/iterations.csv", &s, &notes);
  CHECK(st.ok());
}

TEST_CASE("compute.jitter is the robust lognormal spread of the run's compute times around the fitted law") {
  ClusterSpec s = Spec(kFastSpec);
  for (auto& n : s.nodes) {
    n.compute.fixed_ms = 2.0;
    n.compute.per_sample_ms = 0.25;  // 10 ms at a batch of 32
    n.compute.jitter = 0.05;
  }
  std::map<int32_t, std::vector<std::pair<double, double>>> rows;
  // Node 0: 8, 10 and 12 ms in equal parts (log deviations from the
  // median ln 1: ln 0.8, 0, ln 1.2) and two stalls of 100 ms a starved
  // process shows: the median |deviation| is ln 1.2, s = 1.4826 · ln 1.2,
  // and the lognormal's relative std-dev sqrt(e^(s²) − 1).
  for (int k = 0; k < 30; ++k) rows[0].emplace_back(32, 8.0 + 2.0 * (k % 3));
  rows[0].emplace_back(32, 100.0);
  rows[0].emplace_back(32, 100.0);
  // Node 1: too few rows, the spec's jitter stays.
  for (int k = 0; k < 5; ++k) rows[1].emplace_back(32, 20.0);
  std::vector<std::string> notes;
  CalibrateComputeJitter(rows, "uniform", &s, &notes);
  const double sd = 1.4826 * std::log(1.2);
  CHECK(s.nodes[0].compute.jitter == Approx(std::sqrt(std::exp(sd * sd) - 1)));
  CHECK(s.nodes[0].compute.jitter_kind == JitterKind::kLognormal);
  CHECK(s.nodes[1].compute.jitter_kind == JitterKind::kNormal);
  CHECK(s.nodes[1].compute.jitter == 0.05);
  CHECK(s.nodes[2].compute.jitter == 0.05);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("n-0: compute.jitter") == 0);
  // The spec written reads back with it.
  auto back = ParseClusterSpec(ClusterSpecToYaml(s), "back.yaml");
  REQUIRE(back.ok());
  CHECK(back->nodes[0].compute.jitter == Approx(s.nodes[0].compute.jitter));
  CHECK(back->nodes[0].compute.jitter_kind == JitterKind::kLognormal);
  CHECK(back->nodes[1].compute.jitter_kind == JitterKind::kNormal);
}

TEST_CASE("the ring is fitted at each iteration's distinct members") {
  // Iterations 0-1: three members, ring 20 ms; iteration 2: node n-2 has
  // two rows (a retried child) and node n-1 none: two members, ring 12 ms.
  std::string c = std::string(sched::kIterationsCsvHeader) + "\n";
  auto row = [&](int it, int w, double ar) {
    c += fmt::format("uniform,{},0,n-{},32,30,2,1,1,5,0,40,0.1,0.2,0.3,{},40,0,0.05\n", it, w, ar);
  };
  for (int it = 0; it < 2; ++it)
    for (int w = 0; w < 3; ++w) row(it, w, 20.0);
  row(2, 0, 12.0);
  row(2, 2, 12.0);
  row(2, 2, 12.0);
  ClusterSpec s = Spec(kFastSpec);
  std::vector<std::string> notes;
  REQUIRE(CalibrateIterationTail(c, "iterations.csv", &s, &notes).ok());
  sim::AllreduceModel m(s);
  std::vector<int32_t> three{0, 1, 2}, two{0, 2};
  // One per-element cost for both sizes: sum(ring - links) / sum(elements).
  const double ns = s.training.allreduce.reduce_ns_per_element;
  const double fit3 = m.RingMs(three), fit2 = m.RingMs(two);
  const double moved3 = fit3 - m.ReduceElements(3) * ns * 1e-6;
  const double moved2 = fit2 - m.ReduceElements(2) * ns * 1e-6;
  CHECK(ns == Approx((2 * (20.0 - moved3) + (12.0 - moved2)) /
                     (2 * m.ReduceElements(3) + m.ReduceElements(2)) * 1e6));
  // The mean of the fitted rings over the run's iterations is the measured mean.
  CHECK((2 * fit3 + fit2) / 3 == Approx((2 * 20.0 + 12.0) / 3));
  // Duplicates would have made it a "four-member" ring: the note says 2.67 members.
  CHECK(notes.back().find("at 2.67 members") != std::string::npos);
}

TEST_CASE("scheduler.handoff_ms is the median ack_ms of the rows not planned ahead") {
  // 12 iterations of 3 workers. Rows planned ahead (stream_ms 0) carry
  // ack_ms 0 or a queueing delay and are left out; rows sent after their
  // iteration started (stream_ms 0.4) carry ack_ms 0.5, 0.9, 1.3 in turn.
  auto csv = [](int iterations) {
    std::string c = std::string(sched::kIterationsCsvHeader) + "\n";
    for (int it = 0; it < iterations; ++it) {
      for (int w = 0; w < 3; ++w) {
        const bool after_start = w != 2;
        const double ack = after_start ? 0.5 + 0.4 * ((it + w) % 3) : 7.0;
        c += fmt::format("uniform,{},0,n-{},32,30,2,1,1,5,0,20,0.1,{},{},0,15,0,0.05\n", it, w,
                         after_start ? 0.4 : 0.0, ack);
      }
    }
    return c;
  };
  ClusterSpec s = Spec(kFastSpec);
  s.training.model = "none";
  std::vector<std::string> notes;
  REQUIRE(CalibrateIterationTail(csv(12), "iterations.csv", &s, &notes).ok());
  CHECK(s.scheduler.handoff_ms == Approx(0.9));  // iteration 0 left out: 22 rows, median 0.9
  bool named = false;
  for (const auto& n : notes) named |= n.find("scheduler.handoff_ms 0.9 (median ack_ms of the 22 rows") == 0;
  // Without plan-ahead every row is one: 11 iterations x 3 rows, median 1.3 (with the 7 ms rows).
  ClusterSpec bsp = Spec(kFastSpec);
  bsp.training.model = "none";
  bsp.training.overlap = false;
  std::vector<std::string> bsp_notes;
  REQUIRE(CalibrateIterationTail(csv(12), "iterations.csv", &bsp, &bsp_notes).ok());
  CHECK(bsp.scheduler.handoff_ms == Approx(1.3));
  CHECK(named);
  auto back = ParseClusterSpec(ClusterSpecToYaml(s), "back.yaml");
  REQUIRE(back.ok());
  CHECK(back->scheduler.handoff_ms == Approx(0.9));
  CHECK(back->network.packet_efficiency == Approx(s.network.packet_efficiency));
  CHECK(back->network.record_overhead_bytes == Approx(s.network.record_overhead_bytes));
  // The small packets' sizes pass through (they are not fitted).
  ClusterSpec sized = s;
  sized.network.ack_bytes_per_byte = 0.03;
  sized.network.request_bytes = 111;
  sized.network.report_bytes = 222;
  sized.network.assignment_bytes = 333;
  auto sized_back = ParseClusterSpec(ClusterSpecToYaml(sized), "back.yaml");
  REQUIRE(sized_back.ok());
  CHECK(sized_back->network.ack_bytes_per_byte == Approx(0.03));
  CHECK(sized_back->network.request_bytes == 111);
  CHECK(sized_back->network.report_bytes == 222);
  CHECK(sized_back->network.assignment_bytes == 333);
  // Too few such rows: the spec's hand-off is kept, and said so.
  ClusterSpec few = Spec(kFastSpec);
  few.training.model = "none";
  few.scheduler.handoff_ms = 1.7;
  notes.clear();
  REQUIRE(CalibrateIterationTail(csv(5), "iterations.csv", &few, &notes).ok());
  CHECK(few.scheduler.handoff_ms == 1.7);
  bool kept = false;
  for (const auto& n : notes) kept |= n.find("scheduler.handoff_ms kept at 1.7 (8 rows") == 0;
  CHECK(kept);
}

namespace {

// Three nodes whose reads of t+1 share the links with t's ring.
const char* kRingSpec = R"(dataset: {name: fashion-mnist, samples: 6000, sample_bytes: 784}
placement: {kind: shards, replication: 1}
training: {global_batch: 96, min_batch: 8, iterations: 30, model: mlp, overlap: true,
           allreduce: {reduce_ns_per_element: 50}}
nodes:
  - name: n
    count: 3
    link: {up_mbps: 20, down_mbps: 20, latency_ms: 1}
)";

double SimulatedRing(const ClusterSpec& spec) {
  sim::SimOptions o;
  o.policy = "uniform";
  o.iterations = 30;
  auto r = sim::RunPolicy(spec, o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return TypicalRingSpanMs(r->iterations);
}

sched::WorkerIteration Row(double own, double allreduce, bool failed = false) {
  sched::WorkerIteration w;
  w.own_ms = own;
  w.allreduce_ms = allreduce;
  w.failed = failed;
  return w;
}

}  // namespace

TEST_CASE("TypicalRingSpanMs: the latest end less the latest start, rings over 3x the median left out") {
  std::vector<sched::IterationRecord> its(4);
  // Spans 100, 110, 120 and a stalled 1000 (median 115: cut at 345).
  its[0].workers = {Row(150, 120), Row(160, 100)};  // ends 160, starts max(30, 60) = 60
  its[1].workers = {Row(200, 110), Row(190, 100)};
  its[2].workers = {Row(220, 120)};
  its[3].workers = {Row(1100, 1000)};
  CHECK(TypicalRingSpanMs(its) == Approx(110));
  // An iteration with a failed row is left out whole, as the run's are.
  std::vector<sched::IterationRecord> with_failed = its;
  with_failed.push_back({});
  with_failed.back().workers = {Row(150, 20), Row(160, 10, /*failed=*/true)};
  CHECK(TypicalRingSpanMs(with_failed) == Approx(110));
  // Ring starts before the iteration's start (own_ms − allreduce_ms < 0).
  std::vector<sched::IterationRecord> early(1);
  early[0].workers = {Row(10, 50), Row(12, 40)};  // ends 12, starts max(-40, -28) = -28
  CHECK(TypicalRingSpanMs(early) == Approx(40));
  std::vector<sched::IterationRecord> none(2);
  none[0].workers = {Row(10, 0)};
  CHECK(TypicalRingSpanMs(none) == -1);
}

TEST_CASE("MatchSimulatedRing moves the reducer's cost until loft-sim's ring is the measured one") {
  ClusterSpec spec = Spec(kRingSpec);
  const double simulated = SimulatedRing(spec);
  REQUIRE(simulated > 100);
  RingMeasure measured{"uniform", 30, simulated + 10};
  std::vector<std::string> notes;
  REQUIRE(MatchSimulatedRing(measured, &spec, &notes).ok());
  CHECK(spec.training.allreduce.reduce_ns_per_element > 50);
  CHECK(SimulatedRing(spec) == Approx(simulated + 10).margin(0.5));
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("training.allreduce: loft-sim ran uniform's ring in") == 0);
  // A measured ring faster than loft-sim can run it: the reducer is free,
  // never negative.
  ClusterSpec fast = Spec(kRingSpec);
  notes.clear();
  REQUIRE(MatchSimulatedRing({"uniform", 30, simulated / 2}, &fast, &notes).ok());
  CHECK(fast.training.allreduce.reduce_ns_per_element == 0);
  // ... and says that the spec charges the ring more than the run paid.
  REQUIRE(notes.size() == 2);
  CHECK(notes[1].find("WARNING loft-sim's ring stays") != std::string::npos);
  CHECK(notes[1].find("agent.cpu_ms_per_allreduce_mb") != std::string::npos);
  // Nothing fitted, or no model: unchanged, no note.
  ClusterSpec same = Spec(kRingSpec);
  notes.clear();
  REQUIRE(MatchSimulatedRing({"uniform", 30, -1}, &same, &notes).ok());
  CHECK(same.training.allreduce.reduce_ns_per_element == 50);
  same.training.model = "none";
  REQUIRE(MatchSimulatedRing({"uniform", 30, simulated}, &same, &notes).ok());
  CHECK(same.training.allreduce.reduce_ns_per_element == 50);
  CHECK(notes.empty());
  // A member with a CPU quota runs the reducer at its cpu_cores: one ns per
  // element is then several ns of ring, and the secant steps still match.
  ClusterSpec quota = Spec(kRingSpec);
  quota.nodes[0].compute.cpu_cores = 0.2;
  const double quota_ring = SimulatedRing(quota);
  notes.clear();
  REQUIRE(MatchSimulatedRing({"uniform", 30, quota_ring + 10}, &quota, &notes).ok());
  CHECK(SimulatedRing(quota) == Approx(quota_ring + 10).margin(0.5));
  CHECK(quota.training.allreduce.reduce_ns_per_element > 50);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("passes") != std::string::npos);
  // An unknown policy is loft-sim's error, named.
  auto bad = MatchSimulatedRing({"nosuch", 30, simulated}, &spec, &notes);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message().find("nosuch") != std::string::npos);
}

TEST_CASE("training.eval.relative_cost is fitted from the evaluator's extra compute at the evaluated steps") {
  auto spec = ParseClusterSpec(
      "dataset: {name: d, samples: 6000, sample_bytes: 784}\n"
      "training: {global_batch: 64, iterations: 10, model: mlp, eval: {test_samples: 1000}}\n"
      "nodes:\n"
      "  - {name: a, compute: {fixed_ms: 2, per_sample_ms: 0.1}}\n"
      "  - {name: b, compute: {fixed_ms: 1, per_sample_ms: 0.2}}\n",
      "s.yaml");
  REQUIRE(spec.ok());
  // a evaluates after steps 4 and 9: 0.4 · 1000 · 0.1 = 40 ms more; b's
  // compute is 3 ms over its law everywhere (its typical residual), and
  // a's 1 ms.
  std::string csv =
      "policy,iteration,worker,batch,fetch_local_ms,fetch_remote_ms,compute_ms,makespan_ms,allreduce_ms,"
      "failed\n";
  for (int t = 0; t < 10; ++t) {
    const double a = 2 + 0.1 * 32 + 1 + (t == 4 || t == 9 ? 40 : 0);
    csv += fmt::format("loft,{},a,32,1,0,{},50,5,0\n", t, a);
    csv += fmt::format("loft,{},b,32,1,0,{},50,5,0\n", t, 1 + 0.2 * 32 + 3);
  }
  const std::string training = "iteration,wall_s,loss,test_accuracy\n3,1,2,\n4,1.2,1.9,0.5\n9,2,1.5,0.7\n";
  std::vector<std::string> notes;
  ClusterSpec s = *spec;
  REQUIRE(CalibrateEvalCost(csv, training, "training.csv", &s, &notes).ok());
  CHECK(s.training.eval.relative_cost == Approx(0.4).epsilon(1e-9));
  CHECK(s.training.eval.test_samples == 1000);
  REQUIRE(!notes.empty());
  CHECK(notes.back().find("2 evaluated steps") != std::string::npos);
  // It reads back from the calibrated spec.
  auto back = ParseClusterSpec(ClusterSpecToYaml(s), "back.yaml");
  REQUIRE(back.ok());
  CHECK(back->training.eval.relative_cost == Approx(0.4).epsilon(1e-6));
  // One evaluated step is too few: kept, with a note.
  ClusterSpec one = *spec;
  notes.clear();
  REQUIRE(CalibrateEvalCost(csv, "iteration,test_accuracy\n4,0.5\n", "t.csv", &one, &notes).ok());
  CHECK(one.training.eval.relative_cost == Approx(1.0 / 3));
  CHECK(notes.back().find("kept") != std::string::npos);
  // A training.csv without the columns, or with a bad iteration, is named.
  auto bad = CalibrateEvalCost(csv, "iteration,loss\n1,2\n", "t.csv", &one, &notes);
  CHECK(bad.message().find("t.csv: no columns 'iteration' and 'test_accuracy'") != std::string::npos);
  auto bad_it = CalibrateEvalCost(csv, "iteration,test_accuracy\nx,0.5\n", "u.csv", &one, &notes);
  CHECK(bad_it.message().find("u.csv:2: iteration 'x'") != std::string::npos);
}

TEST_CASE("training.eval is checked: a negative test set or cost is refused, naming the key") {
  auto neg = ParseClusterSpec(
      "dataset: {name: d, samples: 60, sample_bytes: 4}\ntraining: {eval: {test_samples: -1}}\nnodes: "
      "[{name: a}]\n",
      "n.yaml");
  REQUIRE(!neg.ok());
  CHECK(neg.status().message().find("training.eval.test_samples") != std::string::npos);
  auto cost = ParseClusterSpec(
      "dataset: {name: d, samples: 60, sample_bytes: 4}\ntraining: {eval: {relative_cost: -0.5}}\nnodes: "
      "[{name: a}]\n",
      "c.yaml");
  REQUIRE(!cost.ok());
  CHECK(cost.status().message().find("training.eval.relative_cost") != std::string::npos);
  auto key = ParseClusterSpec(
      "dataset: {name: d, samples: 60, sample_bytes: 4}\ntraining: {eval: {every: 5}}\nnodes: [{name: a}]\n",
      "k.yaml");
  REQUIRE(!key.ok());
  CHECK(key.status().message().find("every") != std::string::npos);
}

TEST_CASE("compute.jitter_shared is the share of the compute jitter a step's members have in common") {
  auto spec = ParseClusterSpec(
      "dataset: {name: d, samples: 6000, sample_bytes: 784}\n"
      "training: {global_batch: 64, iterations: 200, model: mlp}\n"
      "nodes:\n  - name: a\n    count: 4\n    compute: {fixed_ms: 0, per_sample_ms: 1}\n",
      "s.yaml");
  REQUIRE(spec.ok());
  // ln(compute / law) = √ρ·z_step + √(1−ρ)·z_node, s = 0.4, from a fixed
  // stream of standard normal draws (Box–Muller on a LCG).
  auto fit = [&](double rho) {
    uint64_t state = 12345;
    auto uniform = [&] {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      return (static_cast<double>(state >> 11) + 0.5) * 0x1.0p-53;
    };
    auto normal = [&] {
      return std::sqrt(-2 * std::log(uniform())) * std::cos(2 * std::numbers::pi * uniform());
    };
    std::string csv =
        "policy,iteration,worker,batch,fetch_local_ms,fetch_remote_ms,compute_ms,makespan_ms,allreduce_ms,"
        "failed\n";
    for (int t = 0; t < 400; ++t) {
      const double zs = normal();
      for (int n = 0; n < 4; ++n) {
        const double z = std::sqrt(rho) * zs + std::sqrt(1 - rho) * normal();
        csv += fmt::format("loft,{},a-{},32,1,0,{},50,0,0\n", t, n, 32 * std::exp(0.4 * z));
      }
    }
    ClusterSpec s = *spec;
    std::vector<std::string> notes;
    REQUIRE(CalibrateIterationTail(csv, "iterations.csv", &s, &notes).ok());
    for (const auto& n : s.nodes) CHECK(n.compute.jitter_kind == JitterKind::kLognormal);
    return s.nodes[0].compute.jitter_shared;
  };
  const double f0 = fit(0.0), f5 = fit(0.5), f9 = fit(0.9);
  INFO("fitted " << f0 << ", " << f5 << ", " << f9);
  CHECK(f0 < 0.1);
  CHECK(f5 == Approx(0.5).margin(0.15));
  CHECK(f9 > 0.65);
  CHECK(f9 > f5);
}
