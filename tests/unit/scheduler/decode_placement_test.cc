// Decode placement (plan.h "Encoded samples", README-planning.md "Decode
// placement"): the coded cost model, the per-pair choice, the folded and
// relaxed requests, the lower bound including the choice, the spec's
// priors, and that a raw request plans as before.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "core/cluster_spec.h"
#include "core/placement.h"
#include "scheduler/bound.h"
#include "scheduler/cost_model.h"
#include "scheduler/flow_control.h"
#include "scheduler/plan.h"
#include "scheduler/policies/loft.h"
#include "scheduler/scheduler_state.h"
#include "scheduler/testing/random_instances.h"

namespace loft::sched {
namespace {

// Two nodes: a holder (0) with every sample and a trainer (1) with none.
// Costs per encoded sample; decoded samples weigh rho of them.
PlanRequest HolderTrainer(double rho, double delta_holder, double delta_trainer, DecodePlacement placement) {
  PlanRequest req;
  req.global_batch = 100;
  req.overlap = false;
  req.unconsumed_in_epoch = 1000;
  req.coding.encoded = true;
  req.coding.encoded_bytes = 1024;
  req.coding.decoded_bytes = 1024 * rho;
  req.coding.placement = placement;
  for (int i = 0; i < 2; ++i) {
    WorkerInput w;
    w.node = i;
    w.cost.compute_fixed_ms = 1;
    w.cost.compute_per_sample_ms = 0.1;
    w.cost.local_per_sample_ms = 0.01;
    w.cost.remote_fixed_ms = 2;
    w.cost.remote_per_sample_ms = 0.05;
    w.cost.uplink_per_sample_ms = 0.02;
    w.min_batch = 0;
    w.max_batch = 100;
    w.local_available = i == 0 ? 1000 : 0;
    w.decode.per_sample_ms = i == 0 ? delta_holder : delta_trainer;  // per_kb 0: δ = per_sample
    req.workers.push_back(w);
  }
  return req;
}

Plan FixedPlan(int64_t holder_local, int64_t trainer_remote, bool decoded) {
  Plan plan;
  plan.policy = "test";
  WorkerPlan h;
  h.node = 0;
  h.batch = h.local = holder_local;
  WorkerPlan t;
  t.node = 1;
  t.batch = t.remote = trainer_remote;
  t.remote_from = {{0, trainer_remote}};
  if (decoded) t.decoded_from = {0};
  plan.workers = {h, t};
  return plan;
}

TEST_CASE("decode placement: the coded model charges decode where the plan says", "[decode]") {
  const PlanRequest req = HolderTrainer(4.0, 0.2, 0.5, DecodePlacement::kAuto);
  SECTION("encoded: the trainer decodes, the link carries encoded bytes") {
    Plan plan = FixedPlan(60, 40, false);
    EvaluateLocalityPlan(req, plan);
    // holder: read 60·0.01 + decode 60·0.2 + compute 1 + 60·0.1
    CHECK(plan.workers[0].predicted_ms == Approx(0.6 + 12 + 1 + 6));
    // trainer: read 2 + 40·0.05 + decode 40·0.5 + compute 1 + 4; uplink floor 40·0.02
    CHECK(plan.workers[1].predicted_ms == Approx(4 + 20 + 5));
  }
  SECTION("decoded: the holder decodes on its CPU, the links carry rho times the bytes") {
    Plan plan = FixedPlan(60, 40, true);
    EvaluateLocalityPlan(req, plan);
    // holder: its own 60 and the 40 it serves decoded
    CHECK(plan.workers[0].predicted_ms == Approx(0.6 + 0.2 * 100 + 1 + 6));
    // trainer: read 2 + 40·4·0.05, no decode; floor: 40·0.2 + 40·4·0.02 = 11.2 < 13
    CHECK(plan.workers[1].predicted_ms == Approx(2 + 8 + 5));
  }
  SECTION("the serving holder's decode and uplink are a floor for its trainer") {
    PlanRequest slow = req;
    slow.workers[0].decode.per_sample_ms = 1.0;
    Plan plan = FixedPlan(60, 40, true);
    EvaluateLocalityPlan(slow, plan);
    CHECK(plan.workers[1].predicted_ms == Approx(40 * 1.0 + 40 * 4 * 0.02));
  }
  SECTION("overlap: decode is on the read stage, compute overlaps it") {
    PlanRequest ov = req;
    ov.overlap = true;
    Plan plan = FixedPlan(60, 40, false);
    EvaluateLocalityPlan(ov, plan);
    CHECK(plan.workers[1].predicted_ms == Approx(std::max(4.0 + 20.0, 5.0)));
  }
}

TEST_CASE("decode placement: a slow-decoding trainer gets decoded samples, a fast one encoded", "[decode]") {
  SECTION("trainer CPU slow, holder fast") {
    const PlanRequest req = HolderTrainer(2.0, 0.01, 1.0, DecodePlacement::kAuto);
    Plan plan = FixedPlan(60, 40, false);
    ChooseDecodePlacement(req, plan);
    REQUIRE(plan.workers[1].decoded_from == std::vector<int32_t>{0});
    Plan enc = FixedPlan(60, 40, false);
    EvaluateLocalityPlan(req, enc);
    CHECK(plan.makespan_ms < enc.makespan_ms);
  }
  SECTION("trainer CPU fast: decoded bytes only cost link time") {
    const PlanRequest req = HolderTrainer(6.0, 0.01, 0.01, DecodePlacement::kAuto);
    Plan plan = FixedPlan(60, 40, false);
    ChooseDecodePlacement(req, plan);
    CHECK(plan.workers[1].decoded_from.empty());
  }
  SECTION("placement trainer never decodes at the holder") {
    const PlanRequest req = HolderTrainer(2.0, 0.01, 1.0, DecodePlacement::kTrainer);
    Plan plan = FixedPlan(60, 40, true);
    ChooseDecodePlacement(req, plan);
    CHECK(plan.workers[1].decoded_from.empty());
  }
}

TEST_CASE("decode placement: loft chooses and never does worse than decoding at the trainer", "[decode]") {
  LoftPolicy loft;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    testing::InstanceOptions opt;
    opt.max_workers = 12;
    opt.overlap = seed % 2 == 0;
    PlanRequest req = testing::RandomInstance(seed, opt);
    req.coding.encoded = true;
    req.coding.encoded_bytes = 784;
    req.coding.decoded_bytes = 784 * (seed % 3 == 0 ? 0.5 : 3.0);
    for (size_t i = 0; i < req.workers.size(); ++i) {
      req.workers[i].decode.per_sample_ms = (i % 3 == 0) ? 0.5 : 0.005;
      req.workers[i].decode.per_kb_ms = 0.01;
    }
    INFO("seed " << seed);
    req.coding.placement = DecodePlacement::kTrainer;
    auto trainer = loft.PlanIteration(req);
    REQUIRE(trainer.ok());
    for (const WorkerPlan& wp : trainer->workers) CHECK(wp.decoded_from.empty());
    req.coding.placement = DecodePlacement::kAuto;
    auto chosen = loft.PlanIteration(req);
    REQUIRE(chosen.ok());
    CHECK(chosen->makespan_ms <= trainer->makespan_ms + 1e-9);
    // predicted_ms follows the coded model, and every decoded pair is a real one.
    Plan again = *chosen;
    EvaluateLocalityPlan(req, again);
    CHECK(again.makespan_ms == Approx(chosen->makespan_ms));
    for (const WorkerPlan& wp : chosen->workers) {
      for (int32_t peer : wp.decoded_from) {
        bool found = false;
        for (const auto& [p, c] : wp.remote_from) found = found || (p == peer && c > 0);
        CHECK(found);
      }
    }
    // The bound includes the choice: below both plans.
    auto bound = LowerBoundMs(req);
    REQUIRE(bound.ok());
    CHECK(bound.value() <= chosen->makespan_ms * (1 + 1e-9));
    req.coding.placement = DecodePlacement::kTrainer;
    auto bound_trainer = LowerBoundMs(req);
    REQUIRE(bound_trainer.ok());
    CHECK(bound_trainer.value() <= trainer->makespan_ms * (1 + 1e-9));
    CHECK(bound.value() <= bound_trainer.value() * (1 + 1e-9));
  }
}

TEST_CASE("decode placement: a quota trainer behind a fast holder gains from decoded samples", "[decode]") {
  PlanRequest req = HolderTrainer(2.0, 0.005, 2.0, DecodePlacement::kAuto);
  LoftPolicy loft;
  auto chosen = loft.PlanIteration(req);
  REQUIRE(chosen.ok());
  req.coding.placement = DecodePlacement::kTrainer;
  auto trainer = loft.PlanIteration(req);
  REQUIRE(trainer.ok());
  CHECK(chosen->makespan_ms < 0.9 * trainer->makespan_ms);
  CHECK(chosen->workers[1].decoded_from == std::vector<int32_t>{0});
}

TEST_CASE("decode placement: a raw request plans and bounds exactly as the plain model", "[decode]") {
  LoftPolicy loft;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    testing::InstanceOptions opt;
    opt.max_workers = 16;
    PlanRequest req = testing::RandomInstance(seed, opt);
    for (WorkerInput& w : req.workers) w.decode.per_sample_ms = 3.0;  // ignored: not encoded
    auto a = loft.PlanIteration(req);
    for (WorkerInput& w : req.workers) w.decode = DecodeCost{};
    auto b = loft.PlanIteration(req);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(a->makespan_ms == b->makespan_ms);
    for (size_t i = 0; i < a->workers.size(); ++i) {
      CHECK(a->workers[i].batch == b->workers[i].batch);
      CHECK(a->workers[i].predicted_ms == b->workers[i].predicted_ms);
      CHECK(a->workers[i].decoded_from.empty());
    }
    const PlanRequest folded = FoldTrainerDecode(req);
    const PlanRequest relaxed = RelaxDecode(req);
    for (size_t i = 0; i < req.workers.size(); ++i) {
      CHECK(folded.workers[i].cost.remote_per_sample_ms == req.workers[i].cost.remote_per_sample_ms);
      CHECK(relaxed.workers[i].cost.uplink_per_sample_ms == req.workers[i].cost.uplink_per_sample_ms);
    }
  }
}

TEST_CASE("decode placement: the folded and relaxed requests", "[decode]") {
  PlanRequest req = HolderTrainer(4.0, 0.2, 0.5, DecodePlacement::kAuto);
  const PlanRequest folded = FoldTrainerDecode(req);
  CHECK_FALSE(folded.coding.encoded);
  CHECK(folded.workers[1].cost.compute_per_sample_ms == Approx(0.1 + 0.5));  // no overlap: into compute
  req.overlap = true;
  const PlanRequest folded_ov = FoldTrainerDecode(req, false);
  CHECK(folded_ov.workers[1].cost.local_per_sample_ms == Approx(0.01 + 0.5));
  CHECK(folded_ov.workers[1].cost.remote_per_sample_ms == Approx(0.05 + 0.5));
  CHECK(folded_ov.workers[1].cost.compute_per_sample_ms == Approx(0.1));
  const PlanRequest folded_ovc = FoldTrainerDecode(req, true);
  CHECK(folded_ovc.workers[1].cost.compute_per_sample_ms == Approx(0.1 + 0.5));
  CHECK(folded_ovc.workers[1].cost.local_per_sample_ms == Approx(0.01));
  const PlanRequest relaxed = RelaxDecode(req);
  CHECK(relaxed.workers[1].cost.remote_per_sample_ms == Approx(std::min(0.05 + 0.5, 4 * 0.05)));
  CHECK(relaxed.workers[0].cost.uplink_per_sample_ms == Approx(std::min(0.02, 4 * 0.02 + 0.2)));
  CHECK(relaxed.workers[0].cost.local_per_sample_ms == Approx(0.01 + 0.2));
}

TEST_CASE("decode placement: invalid coding and decode costs are rejected by name", "[decode]") {
  PlanRequest req = HolderTrainer(4.0, 0.2, 0.5, DecodePlacement::kAuto);
  SECTION("encoded_bytes") {
    req.coding.encoded_bytes = 0;
    auto st = ValidatePlanRequest(req);
    REQUIRE_FALSE(st.ok());
    CHECK_THAT(st.message(), Catch::Contains("encoded_bytes"));
  }
  SECTION("decoded_bytes not finite") {
    req.coding.decoded_bytes = std::nan("");
    CHECK_FALSE(ValidatePlanRequest(req).ok());
  }
  SECTION("negative decode cost") {
    req.workers[1].decode.per_kb_ms = -1;
    auto st = ValidatePlanRequest(req);
    REQUIRE_FALSE(st.ok());
    CHECK_THAT(st.message(), Catch::Contains("decode costs"));
  }
  SECTION("auto without encoded samples") {
    req.coding.encoded = false;
    auto st = ValidatePlanRequest(req);
    REQUIRE_FALSE(st.ok());
    CHECK_THAT(st.message(), Catch::Contains("auto"));
  }
}

const char* kJpegSpec = R"(
dataset: {samples: 1000, sample_bytes: 784, encoding: jpeg, image_size: 96, record_bytes: 1700,
          decode_placement: auto}
training: {global_batch: 64, min_batch: 0}
nodes:
  - {name: holder, compute: {per_sample_ms: 0.05}, decode: {per_sample_ms: 0.01, per_kb_ms: 0.02}}
  - {name: quota, compute: {per_sample_ms: 0.05, cpu_cores: 0.25}, link: {up_mbps: 10}}
)";

TEST_CASE("decode placement: priors from a jpeg spec", "[decode]") {
  auto spec = ParseClusterSpec(kJpegSpec, "<test>");
  REQUIRE(spec.ok());
  CHECK(SampleWireBytes(spec->dataset) == 1700);
  // The decoded form is the 28x28 model input as uint8 levels, smaller
  // than the encoded record (ρ < 1).
  CHECK(DecodedWireBytes(spec->dataset) == 784);
  const SampleCoding c = CodingFromSpec(*spec);
  CHECK(c.encoded);
  CHECK(c.placement == DecodePlacement::kAuto);
  CHECK(c.ratio() == Approx(784.0 / 1700));
  CHECK(c.ratio() < 1);
  const DecodeCost d0 = DecodePriorFromSpec(*spec, 0);
  CHECK(d0.per_sample_ms == 0.01);
  CHECK(d0.per_kb_ms == 0.02);
  const DecodeCost d1 = DecodePriorFromSpec(*spec, 1);  // defaults / 0.25 cores
  CHECK(d1.per_sample_ms == Approx(0.008 / 0.25));
  CHECK(d1.per_kb_ms == Approx(0.011 / 0.25));
  CHECK(DecodeMsPerSample(d0, 2048) == Approx(0.01 + 0.04));
  // Link priors per encoded record: 1700 bytes at 10 Mbit/s.
  CHECK(PriorFromSpec(*spec, 1).uplink_per_sample_ms == Approx(1700 * 8 / 10000.0));
  auto placement = Placement::FromSpec(*spec);
  REQUIRE(placement.ok());
  const PlanRequest req = FirstIterationRequest(*spec, *placement);
  CHECK(req.coding.encoded);
  CHECK(req.workers[1].decode.per_sample_ms == Approx(0.032));
  CHECK(ValidatePlanRequest(req).ok());
}

TEST_CASE("decode placement: raw specs keep the raw priors and no decode", "[decode]") {
  auto spec = ParseClusterSpec("nodes: [{name: a}, {name: b}]\n", "<test>");
  REQUIRE(spec.ok());
  CHECK(SampleWireBytes(spec->dataset) == 784);
  CHECK_FALSE(CodingFromSpec(*spec).encoded);
  CHECK(DecodePriorFromSpec(*spec, 0).per_sample_ms == 0);
  CHECK(EstimatedJpegRecordBytes(96) == Approx(0.19 * 9216));
}

TEST_CASE("decode placement: spec errors name the field", "[decode]") {
  auto bad = [](const std::string& yaml) {
    auto s = ParseClusterSpec(yaml, "<test>");
    return s.ok() ? std::string() : s.status().message();
  };
  CHECK_THAT(bad("dataset: {decode_placement: auto}\nnodes: [{name: a}]\n"),
             Catch::Contains("dataset.decode_placement"));
  CHECK_THAT(bad("dataset: {encoding: jpeg, decode_placement: holder}\nnodes: [{name: a}]\n"),
             Catch::Contains("trainer, auto"));
  CHECK_THAT(bad("dataset: {encoding: jpeg, record_bytes: -1}\nnodes: [{name: a}]\n"),
             Catch::Contains("dataset.record_bytes"));
  CHECK_THAT(bad("nodes: [{name: a, decode: {per_kb_ms: -0.5}}]\n"),
             Catch::Contains("nodes[0].decode.per_kb_ms"));
  CHECK_THAT(bad("nodes: [{name: a, decode: {per_byte_ms: 1}}]\n"), Catch::Contains("per_byte_ms"));
}

TEST_CASE("decode placement: the cost model fits the decode law from reported preprocessing times",
          "[decode]") {
  CostParams prior;
  prior.compute_per_sample_ms = 0.1;
  const DecodeCost wrong{0.02, 0.1};  // 2× the truth
  CostModel model(prior, wrong);
  uint64_t st = 99;
  for (int k = 0; k < 200; ++k) {
    Observation o;
    o.node = 0;
    o.batch = 64;
    o.decode_samples = 64;
    // Mean record size varies between partitions: 1.2–2.4 KB.
    const double kb = 1.2 + 1.2 * testing::Uniform01(st);
    o.decode_bytes = static_cast<int64_t>(kb * 1024 * 64);
    const double noise = 1 + 0.02 * (testing::Uniform01(st) - 0.5);
    o.decode_ms = 64 * (0.01 + 0.05 * static_cast<double>(o.decode_bytes) / 1024 / 64) * noise;
    model.Observe(o);
  }
  // Partition means vary little, so the split between the two terms is
  // learnt slowly; what planning uses, the cost at the records' sizes, is
  // learnt (the prior said twice as much).
  const DecodeCost d = model.decode_params();
  for (double kb : {1.4, 1.8, 2.2}) {
    INFO("kb " << kb);
    CHECK(DecodeMsPerSample(d, kb * 1024) == Approx(0.01 + 0.05 * kb).epsilon(0.03));
  }
  CHECK(d.per_sample_ms >= 0);
  CHECK(d.per_kb_ms >= 0);
  // A raw report (no preprocessing) leaves the law alone.
  Observation raw;
  raw.node = 0;
  raw.batch = 10;
  raw.compute_ms = 1;
  model.Observe(raw);
  CHECK(model.decode_params().per_kb_ms == d.per_kb_ms);
  // The state round-trips, decode law included.
  CostModel restored(prior, DecodeCost{});
  REQUIRE(restored.Restore(model.state()).ok());
  CHECK(restored.decode_params().per_sample_ms == d.per_sample_ms);
  CHECK(restored.decode_params().per_kb_ms == d.per_kb_ms);
  // A state whose decode law is not finite is refused.
  CostModelState bad = model.state();
  bad.decode.theta[1] = std::nan("");
  auto rs = restored.Restore(bad);
  REQUIRE_FALSE(rs.ok());
  CHECK_THAT(rs.message(), Catch::Contains("decode"));
}

TEST_CASE("decode placement: the cost model set starts each node at its decode prior", "[decode]") {
  CostModelSet set;
  set.SetPrior(3, CostParams{}, DecodeCost{0.5, 0.25});
  auto d = set.decode_params(3);
  REQUIRE(d.ok());
  CHECK(d->per_sample_ms == 0.5);
  CHECK(d->per_kb_ms == 0.25);
  CHECK_FALSE(set.decode_params(4).ok());
}

}  // namespace

// The daemon's SchedulerState plans placement auto only while every live
// agent serves decoded samples, and then carries the plan's decoded_from
// to the partitions and their grants.
const char* kDaemonSpec = R"(
dataset: {samples: 600, sample_bytes: 784, encoding: jpeg, image_size: 96, record_bytes: 1700,
          decode_placement: auto}
placement: {kind: shards, replication: 1}
training: {global_batch: 60, min_batch: 1, overlap: false}
nodes:
  - {name: holder, count: 2, compute: {per_sample_ms: 2.0}, link: {up_mbps: 20, down_mbps: 20}}
  - {name: quota, compute: {per_sample_ms: 0.05, cpu_cores: 0.05}, link: {up_mbps: 20, down_mbps: 20}}
)";

TEST_CASE("decode placement: the daemon plans auto only when every live agent serves decoded", "[decode]") {
  auto spec = ParseClusterSpec(kDaemonSpec, "<test>");
  REQUIRE(spec.ok());
  auto policy = MakePolicy("loft");
  REQUIRE(policy.ok());
  auto st = SchedulerState::Create(*spec, std::move(*policy), {});
  REQUIRE(st.ok());
  SchedulerState& s = **st;
  for (int n = 0; n < 3; ++n) {
    loft::v1::StateUpdate u;
    u.mutable_worker_registered()->set_node(n);
    u.mutable_worker_registered()->set_view(n + 1);
    REQUIRE(s.Apply(u).ok());
  }
  // No agent said serves_decoded (an older agent): trainer.
  auto req = s.BuildPlanRequest();
  INFO(req.status().ToString());
  REQUIRE(req.ok());
  CHECK(req->coding.encoded);
  CHECK(req->coding.placement == DecodePlacement::kTrainer);
  s.SetServesDecoded(0, true);
  s.SetServesDecoded(1, true);
  CHECK(s.BuildPlanRequest()->coding.placement == DecodePlacement::kTrainer);  // node 2 does not
  s.SetServesDecoded(2, true);
  CHECK(s.BuildPlanRequest()->coding.placement == DecodePlacement::kAuto);

  // The 0.05-core node computes 40x faster than the holders but decodes
  // 20x slower: holders decode the samples it reads from them.
  auto prop = s.ProposeIteration(0);
  REQUIRE(prop.ok());
  REQUIRE(prop->update.has_value());
  int decoded_partitions = 0;
  for (const auto& pp : prop->update->iteration_planned().partitions()) {
    const loft::v1::Partition& p = pp.partition();
    for (int32_t h : p.decoded_from()) {
      INFO("partition of worker " << p.worker() << " decoded from " << h);
      CHECK(h != p.worker());
      CHECK(std::find(p.sources().begin(), p.sources().end(), h) != p.sources().end());
    }
    const auto grants = GrantsFor(p);
    for (const auto& [peer, g] : grants) {
      const bool listed =
          std::find(p.decoded_from().begin(), p.decoded_from().end(), peer) != p.decoded_from().end();
      CHECK(g.decoded() == listed);
    }
    decoded_partitions += p.decoded_from_size() > 0;
  }
  CHECK(decoded_partitions > 0);
  // A raw spec never gets decoded_from, whatever the agents say.
  auto raw = ParseClusterSpec("nodes: [{name: a}, {name: b}]\n", "<test>");
  REQUIRE(raw.ok());
  auto rp = MakePolicy("loft");
  REQUIRE(rp.ok());
  auto rs = SchedulerState::Create(*raw, std::move(*rp), {});
  REQUIRE(rs.ok());
  for (int n = 0; n < 2; ++n) {
    loft::v1::StateUpdate u;
    u.mutable_worker_registered()->set_node(n);
    u.mutable_worker_registered()->set_view(n + 1);
    REQUIRE((*rs)->Apply(u).ok());
    (*rs)->SetServesDecoded(n, true);
  }
  auto raw_req = (*rs)->BuildPlanRequest();
  REQUIRE(raw_req.ok());
  CHECK_FALSE(raw_req->coding.encoded);
  auto raw_prop = (*rs)->ProposeIteration(0);
  REQUIRE(raw_prop.ok());
  REQUIRE(raw_prop->update.has_value());
  for (const auto& pp : raw_prop->update->iteration_planned().partitions())
    CHECK(pp.partition().decoded_from_size() == 0);
}

}  // namespace loft::sched
