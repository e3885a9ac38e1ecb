#include "scheduler/assigner.h"

#include <catch2/catch.hpp>
#include <set>

using loft::Placement;
using loft::sched::Assigner;
using loft::sched::EpochSampler;
using loft::sched::Plan;
using loft::sched::PlanRequest;
using loft::sched::WorkerPlan;

namespace {
Placement Make(int nodes, int replication) {
  auto p = Placement::Make(200, std::vector<double>(nodes, 1.0), replication, 9);
  REQUIRE(p.ok());
  return std::move(p).value();
}
PlanRequest Request(int nodes) {
  PlanRequest r;
  r.overlap = true;
  for (int i = 0; i < nodes; ++i) {
    loft::sched::WorkerInput w;
    w.node = i;
    w.cost.compute_fixed_ms = 1 + i;
    w.cost.compute_per_sample_ms = 0.1;
    w.cost.local_per_sample_ms = 0.01;
    w.cost.remote_fixed_ms = 2;
    w.cost.remote_per_sample_ms = 0.3;
    r.workers.push_back(w);
  }
  return r;
}
WorkerPlan W(int node, int64_t batch, int64_t local = 0, std::vector<std::pair<int32_t, int64_t>> from = {}) {
  WorkerPlan w;
  w.node = node;
  w.batch = batch;
  w.local = local;
  for (auto& [p, c] : from) w.remote += c;
  w.remote_from = std::move(from);
  return w;
}
}  // namespace

TEST_CASE("Assigner: locality-aware plan counts and sources are respected", "[assigner]") {
  Placement pl = Make(4, 1);
  EpochSampler s(&pl, 1);
  PlanRequest req = Request(4);
  Plan plan;
  plan.workers = {W(0, 10, 5, {{1, 3}, {2, 2}}), W(3, 4, 4)};
  std::vector<bool> live(4, true);
  auto a = Assigner::Assign(plan, req, true, pl, live, s);
  REQUIRE(a.ok());
  const auto& w0 = a->workers[0];
  REQUIRE(w0.sample_ids.size() == 10);
  for (int k = 0; k < 10; ++k) {
    const int32_t want = k < 5 ? 0 : (k < 8 ? 1 : 2);
    CHECK(w0.sources[k] == want);
    CHECK(pl.Holds(w0.sources[k], w0.sample_ids[k]));
  }
  CHECK(w0.local == 5);
  CHECK(w0.remote == 5);
  CHECK(w0.shortfall() == 0);
  CHECK(w0.predicted_ms == loft::sched::PredictMs(req.workers[0].cost, 5, 5, true));
  CHECK(a->workers[1].local == 4);
  CHECK(a->assigned == 14);
  CHECK(a->locality_fallbacks == 0);
  CHECK(s.taken() == 14);
  CHECK(a->makespan_ms == std::max(w0.predicted_ms, a->workers[1].predicted_ms));
}

TEST_CASE("Assigner: shortfalls fall back to live holders, dead peers never serve", "[assigner]") {
  Placement pl = Make(4, 2);
  EpochSampler s(&pl, 2);
  PlanRequest req = Request(4);
  std::vector<bool> live = {true, true, false, true};
  Plan plan;
  // Worker 0 asks for more local samples than it holds and for samples from dead node 2.
  plan.workers = {W(0, 150, 140, {{2, 10}}), W(1, 20)};
  auto a = Assigner::Assign(plan, req, true, pl, live, s);
  REQUIRE(a.ok());
  std::set<uint64_t> seen;
  for (const auto& w : a->workers) {
    for (size_t k = 0; k < w.sample_ids.size(); ++k) {
      CHECK(seen.insert(w.sample_ids[k]).second);
      CHECK(pl.Holds(w.sources[k], w.sample_ids[k]));
      CHECK(w.sources[k] != 2);
    }
  }
  CHECK(a->workers[0].sample_ids.size() == 150);
  CHECK(a->workers[0].local == static_cast<int64_t>(pl.SamplesOf(0).size()));
  CHECK(a->locality_fallbacks > 0);
}

TEST_CASE("Assigner: global shuffle takes the permutation order, end of epoch shrinks", "[assigner]") {
  Placement pl = Make(3, 1);
  EpochSampler s(&pl, 3), ref(&pl, 3);
  std::vector<uint64_t> order;
  ref.TakeInOrder(
      200, [](uint64_t) { return true; }, order);
  PlanRequest req = Request(3);
  std::vector<bool> live(3, true);
  Plan plan;
  plan.workers = {W(0, 30), W(1, 30), W(2, 30)};
  auto a = Assigner::Assign(plan, req, false, pl, live, s);
  REQUIRE(a.ok());
  size_t pos = 0;
  for (const auto& w : a->workers) {
    for (size_t k = 0; k < w.sample_ids.size(); ++k) {
      CHECK(w.sample_ids[k] == order[pos++]);
      const bool held = pl.Holds(w.node, w.sample_ids[k]);
      CHECK((w.sources[k] == w.node) == held);
      CHECK(pl.Holds(w.sources[k], w.sample_ids[k]));
    }
    CHECK(w.local + w.remote == 30);
  }
  // 110 left; ask for 150: the last iteration of the epoch is smaller.
  plan.workers = {W(0, 50), W(1, 50), W(2, 50)};
  auto b = Assigner::Assign(plan, req, false, pl, live, s);
  REQUIRE(b.ok());
  CHECK(b->assigned == 110);
  CHECK(b->planned == 150);
  CHECK(b->workers[2].shortfall() == 40);
  CHECK(s.pooled() == 0);
}

TEST_CASE("Assigner: samples held only by dead nodes stay pooled", "[assigner]") {
  Placement pl = Make(3, 1);
  EpochSampler s(&pl, 4);
  PlanRequest req = Request(3);
  std::vector<bool> live = {true, false, true};
  Plan plan;
  plan.workers = {W(0, 100), W(2, 100)};
  auto a = Assigner::Assign(plan, req, false, pl, live, s);
  REQUIRE(a.ok());
  CHECK(a->assigned == 200 - s.available(1));
  CHECK(s.pooled() == s.available(1));
  for (uint64_t id : pl.SamplesOf(1)) CHECK(s.state(id) == EpochSampler::SampleState::kPooled);
}

TEST_CASE("Assigner: invalid plans are rejected before taking anything", "[assigner]") {
  Placement pl = Make(3, 1);
  EpochSampler s(&pl, 4);
  PlanRequest req = Request(2);
  std::vector<bool> live(3, true);
  Plan plan;
  plan.workers = {W(0, 10), W(2, 10)};  // node 2 is not in the request
  CHECK(Assigner::Assign(plan, req, false, pl, live, s).status().code() ==
        loft::StatusCode::kInvalidArgument);
  plan.workers = {W(0, 10, 0, {{7, 3}})};
  CHECK(Assigner::Assign(plan, req, true, pl, live, s).status().code() == loft::StatusCode::kInvalidArgument);
  plan.workers = {W(0, -1)};
  CHECK(Assigner::Assign(plan, req, true, pl, live, s).status().code() == loft::StatusCode::kInvalidArgument);
  CHECK(s.pooled() == 200);
}

TEST_CASE("Assigner: a distrusted node serves only itself", "[assigner][byzantine]") {
  const std::vector<bool> distrusted = {false, false, false, true};
  std::vector<bool> live(4, true);
  PlanRequest req = Request(4);
  SECTION("replication 2, global shuffle: other workers read node 3's samples from their other holder") {
    Placement pl = Make(4, 2);
    EpochSampler s(&pl, 4);
    Plan plan;
    plan.workers = {W(0, 40), W(1, 40), W(2, 40), W(3, 40)};
    auto a = Assigner::Assign(plan, req, false, pl, live, s, distrusted);
    REQUIRE(a.ok());
    CHECK(a->assigned == 160);
    int64_t held_by_3 = 0;
    for (const auto& w : a->workers) {
      for (size_t k = 0; k < w.sample_ids.size(); ++k) {
        CHECK(pl.Holds(w.sources[k], w.sample_ids[k]));
        if (w.node != 3) CHECK(w.sources[k] != 3);
        held_by_3 += w.node != 3 && pl.Holds(3, w.sample_ids[k]);
      }
    }
    CHECK(held_by_3 > 0);  // node 3's samples were read, from their other holders
    // Without the mask node 3 serves some of them (the test would be vacuous otherwise).
    EpochSampler t(&pl, 4);
    auto b = Assigner::Assign(plan, req, false, pl, live, t);
    REQUIRE(b.ok());
    int64_t from_3 = 0;
    for (const auto& w : b->workers)
      for (int32_t src : w.sources) from_3 += w.node != 3 && src == 3;
    CHECK(from_3 > 0);
  }
  SECTION("replication 1: its samples go to nobody but itself, it takes them first") {
    Placement pl = Make(4, 1);
    EpochSampler s(&pl, 5);
    const auto mine = static_cast<int64_t>(pl.SamplesOf(3).size());
    Plan plan;
    plan.workers = {W(0, 30), W(1, 30), W(2, 30), W(3, 30)};
    auto a = Assigner::Assign(plan, req, false, pl, live, s, distrusted);
    REQUIRE(a.ok());
    for (const auto& w : a->workers) {
      for (size_t k = 0; k < w.sample_ids.size(); ++k) {
        if (w.node != 3) CHECK_FALSE(pl.Holds(3, w.sample_ids[k]));
      }
    }
    CHECK(a->workers[3].local == std::min<int64_t>(30, mine));
    // Locality-aware: remote_from naming node 3 is skipped; the shortfall
    // is filled from trusted holders.
    plan.workers = {W(0, 20, 0, {{3, 20}})};
    auto b = Assigner::Assign(plan, req, true, pl, live, s, distrusted);
    REQUIRE(b->assigned == 20);
    for (size_t k = 0; k < 20; ++k) {
      CHECK(b->workers[0].sources[k] != 3);
      CHECK_FALSE(pl.Holds(3, b->workers[0].sample_ids[k]));
    }
    CHECK(b->locality_fallbacks == 20);
  }
  SECTION("a mask of the wrong size is an error") {
    Placement pl = Make(4, 1);
    EpochSampler s(&pl, 6);
    Plan plan;
    plan.workers = {W(0, 10)};
    CHECK(Assigner::Assign(plan, req, false, pl, live, s, {true}).status().code() ==
          loft::StatusCode::kInvalidArgument);
  }
}
