#include "scheduler/scheduler_state.h"

#include <catch2/catch.hpp>

#include "scheduler/driver.h"
#include "state_fakes.h"

using loft::StatusCode;
using loft::sched::JobDriver;
using loft::sched::SchedulerState;
using loft::sched::testing::FakePolicy;
using loft::sched::testing::SmallSpec;

namespace {
std::unique_ptr<SchedulerState> NewState(FakePolicy** fake = nullptr) {
  auto p = std::make_unique<FakePolicy>(false);
  if (fake != nullptr) *fake = p.get();
  auto s = SchedulerState::Create(SmallSpec(120, 1, 24, 4), std::move(p), {});
  REQUIRE(s.ok());
  return std::move(s).value();
}
loft::v1::StateUpdate Reg(int node, int64_t view) {
  loft::v1::StateUpdate u;
  u.mutable_worker_registered()->set_node(node);
  u.mutable_worker_registered()->set_view(view);
  return u;
}
}  // namespace

TEST_CASE("SchedulerState: membership updates are validated", "[state]") {
  auto s = NewState();
  CHECK(s->Apply(Reg(9, 1)).code() == StatusCode::kInvalidArgument);
  REQUIRE(s->Apply(Reg(0, 1)).ok());
  CHECK(s->Apply(Reg(1, 1)).code() == StatusCode::kInvalidArgument);  // view not increasing
  loft::v1::StateUpdate alive;
  alive.mutable_worker_alive()->set_node(2);
  alive.mutable_worker_alive()->set_view(5);
  CHECK(s->Apply(alive).code() == StatusCode::kFailedPrecondition);  // never registered
  loft::v1::StateUpdate dead;
  dead.mutable_worker_dead()->set_node(0);
  dead.mutable_worker_dead()->set_view(2);
  REQUIRE(s->Apply(dead).ok());
  CHECK_FALSE(s->alive(0));
  CHECK(s->registered(0));
  CHECK(s->view() == 2);
  CHECK(s->Apply(loft::v1::StateUpdate()).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("SchedulerState: IterationPlanned is validated before anything changes", "[state]") {
  auto s = NewState();
  for (int i = 0; i < 4; ++i) REQUIRE(s->Apply(Reg(i, i + 1)).ok());
  auto prop = s->ProposeIteration(5);
  REQUIRE(prop.ok());
  REQUIRE(prop->update.has_value());
  const std::string before = s->ToJson();
  CHECK(s->sampler().pooled() == 120);  // proposal is a dry run

  auto bad_source = *prop->update;
  auto* p0 = bad_source.mutable_iteration_planned()->mutable_partitions(0)->mutable_partition();
  const uint64_t id0 = p0->sample_ids(0);
  int32_t not_holder = 0;
  while (s->placement().Holds(not_holder, id0)) ++not_holder;
  p0->set_sources(0, not_holder);
  CHECK(s->Apply(bad_source).code() == StatusCode::kInvalidArgument);

  auto dup = *prop->update;
  auto* p1 = dup.mutable_iteration_planned()->mutable_partitions(1)->mutable_partition();
  p1->set_sample_ids(0, id0);
  p1->set_sources(0, bad_source.iteration_planned().partitions(0).partition().worker());
  CHECK_FALSE(s->Apply(dup).ok());

  auto wrong_iter = *prop->update;
  wrong_iter.mutable_iteration_planned()->set_iteration(3);
  CHECK(s->Apply(wrong_iter).code() == StatusCode::kInvalidArgument);

  auto fake_child = *prop->update;
  fake_child.mutable_iteration_planned()->mutable_partitions(0)->mutable_partition()->set_parent(77);
  CHECK(s->Apply(fake_child).code() == StatusCode::kInvalidArgument);

  CHECK(s->ToJson() == before);
  REQUIRE(s->Apply(*prop->update).ok());
  CHECK(s->sampler().taken() == 24);
  CHECK(s->Apply(*prop->update).code() == StatusCode::kInvalidArgument);  // replayed twice
  CHECK(s->next_iteration() == 1);
  CHECK_FALSE(s->IterationComplete());
}

TEST_CASE("SchedulerState: the policy observes each iteration once, merged per worker", "[state]") {
  FakePolicy* fake = nullptr;
  auto s = NewState(&fake);
  for (int i = 0; i < 4; ++i) REQUIRE(s->Apply(Reg(i, i + 1)).ok());
  auto prop = s->ProposeIteration(0);
  REQUIRE(prop.ok());
  REQUIRE(s->Apply(*prop->update).ok());
  const auto& parts = prop->update->iteration_planned().partitions();
  REQUIRE(parts.size() == 4);
  for (int k = 0; k < parts.size(); ++k) {
    CHECK(fake->observe_calls.empty());
    loft::v1::StateUpdate u;
    auto* d = u.mutable_partition_done()->mutable_done();
    d->set_partition_id(parts[k].partition().id());
    d->set_attempt(0);
    d->set_node(parts[k].partition().worker());
    d->mutable_timings()->set_compute_ms(2.0 + k);
    REQUIRE(s->Apply(u).ok());
  }
  REQUIRE(fake->observe_calls.size() == 1);
  REQUIRE(fake->observe_calls[0].size() == 4);
  CHECK(fake->observe_calls[0][2].compute_ms == 4.0);
  CHECK(fake->observe_calls[0][2].batch == 6);
  CHECK(s->IterationComplete());
  CHECK(s->ledger().counters().samples_committed == 24);
  CHECK(s->observations(0) == 1);

  // Bad timings: samples commit, the observation is rejected.
  auto next = s->ProposeIteration(1);
  REQUIRE(s->Apply(*next->update).ok());
  loft::v1::StateUpdate u;
  const auto& p = next->update->iteration_planned().partitions(0).partition();
  u.mutable_partition_done()->mutable_done()->set_partition_id(p.id());
  u.mutable_partition_done()->mutable_done()->set_node(p.worker());
  u.mutable_partition_done()->mutable_done()->mutable_timings()->set_compute_ms(-1);
  REQUIRE(s->Apply(u).ok());
  CHECK(s->rejected_observations() == 1);
  CHECK(s->ledger().counters().samples_committed == 30);

  // No timings at all (the scheduler's own ack for a partition the ring
  // applied): samples commit, and the worker's profile learns nothing —
  // neither a 0 ms observation nor a rejected one.
  const auto& q = next->update->iteration_planned().partitions(1).partition();
  const int64_t before = s->observations(q.worker());
  loft::v1::StateUpdate v;
  v.mutable_partition_done()->mutable_done()->set_partition_id(q.id());
  v.mutable_partition_done()->mutable_done()->set_node(q.worker());
  REQUIRE(s->Apply(v).ok());
  CHECK(s->ledger().counters().samples_committed == 30 + q.sample_ids_size());
  CHECK(s->observations(q.worker()) == before);
  CHECK(s->rejected_observations() == 1);
  // The iteration's other partitions still deliver its merged observation.
  for (int k = 2; k < next->update->iteration_planned().partitions_size(); ++k) {
    const auto& r = next->update->iteration_planned().partitions(k).partition();
    loft::v1::StateUpdate w;
    w.mutable_partition_done()->mutable_done()->set_partition_id(r.id());
    w.mutable_partition_done()->mutable_done()->set_node(r.worker());
    w.mutable_partition_done()->mutable_done()->mutable_timings()->set_compute_ms(3.0);
    REQUIRE(s->Apply(w).ok());
  }
  REQUIRE(fake->observe_calls.size() == 2);
  for (const auto& o : fake->observe_calls[1]) CHECK(o.node != q.worker());
}

TEST_CASE("SchedulerState: plan requests shrink at the end of an epoch", "[state]") {
  auto s = NewState();
  for (int i = 0; i < 4; ++i) REQUIRE(s->Apply(Reg(i, i + 1)).ok());
  auto r0 = s->BuildPlanRequest();
  REQUIRE(r0.ok());
  CHECK(r0->global_batch == 24);
  CHECK(r0->iterations_left_in_epoch == 5);
  CHECK(r0->unconsumed_in_epoch == 120);
  CHECK_FALSE(r0->pipelined);  // nothing in flight: its reads cannot overlap a previous compute
  int64_t sum = 0;
  for (const auto& w : r0->workers) sum += w.local_available;
  CHECK(sum == 120);
  for (int k = 0; k < 4; ++k) REQUIRE(s->Apply(*s->ProposeIteration(k)->update).ok());
  auto r4 = s->BuildPlanRequest();
  REQUIRE(r4.ok());
  CHECK(r4->global_batch == 24);
  CHECK(r4->iterations_left_in_epoch == 1);
  CHECK(r4->pipelined);  // planned while earlier iterations run
  REQUIRE(s->Apply(*s->ProposeIteration(4)->update).ok());
  auto r5 = s->BuildPlanRequest();
  CHECK(r5.status().code() == StatusCode::kUnavailable);
  auto blocked = s->ProposeIteration(5);
  REQUIRE(blocked.ok());
  CHECK_FALSE(blocked->update.has_value());
  CHECK(blocked->blocked_reason.find("in flight") != std::string::npos);
}

TEST_CASE("SchedulerState: exclusive availability follows replicas and liveness", "[state]") {
  for (int replication : {1, 2}) {
    auto s =
        SchedulerState::Create(SmallSpec(120, replication, 24, 4), std::make_unique<FakePolicy>(false), {});
    REQUIRE(s.ok());
    SchedulerState& st = **s;
    for (int n = 0; n < 4; ++n) REQUIRE(st.Apply(Reg(n, n + 1)).ok());
    auto req = st.BuildPlanRequest();
    REQUIRE(req.ok());
    // Brute force: pooled samples whose only live holder is the worker.
    auto expected = [&](int node) {
      int64_t count = 0;
      for (uint64_t id = 0; id < 120; ++id) {
        int live = 0;
        bool mine = false;
        for (int32_t h : st.placement().Holders(id)) {
          live += st.alive(h) ? 1 : 0;
          mine = mine || h == node;
        }
        count += (mine && live == 1) ? 1 : 0;
      }
      return count;
    };
    for (const auto& w : req->workers) {
      if (replication == 1) {
        CHECK(w.exclusive_available == w.local_available);
      } else {
        CHECK(w.exclusive_available == -1);  // unknown until filled
      }
    }
    st.FillExclusiveAvailable(*req);
    for (const auto& w : req->workers) CHECK(w.exclusive_available == expected(w.node));
    if (replication == 2) {
      for (const auto& w : req->workers)
        CHECK(w.exclusive_available == 0);  // every sample has 2 live holders
      loft::v1::StateUpdate dead;
      dead.mutable_worker_dead()->set_node(1);
      dead.mutable_worker_dead()->set_view(10);
      REQUIRE(st.Apply(dead).ok());
      auto after = st.BuildPlanRequest();
      REQUIRE(after.ok());
      st.FillExclusiveAvailable(*after);
      int64_t total = 0;
      for (const auto& w : after->workers) {
        CHECK(w.exclusive_available == expected(w.node));
        total += w.exclusive_available;
      }
      // Node 1's samples now have one live holder each.
      CHECK(total == static_cast<int64_t>(st.placement().SamplesOf(1).size()));
    }
  }
}

TEST_CASE(
    "SchedulerState: reads that ran during the worker's exchange stay out of the read fits (delta exchange)",
    "[state]") {
  // Two states, the same acks: slow reads flagged read_during_exchange,
  // then the fitted read costs. With period 4 (a delta exchange) the read
  // fits ignore them (the cost stays the prior's) and compute still
  // learns; with period 1 they are fitted as before.
  auto run = [](int64_t period, int64_t* left_out) {
    loft::ClusterSpec spec = SmallSpec(480, 1, 24, 4);
    spec.training.exchange.period = period;
    auto made = SchedulerState::Create(spec, std::make_unique<FakePolicy>(false), {});
    REQUIRE(made.ok());
    auto s = std::move(made).value();
    for (int i = 0; i < 4; ++i) REQUIRE(s->Apply(Reg(i, i + 1)).ok());
    for (int it = 0; it < 8; ++it) {
      auto prop = s->ProposeIteration(it);
      REQUIRE(prop.ok());
      REQUIRE(s->Apply(*prop->update).ok());
      for (const auto& pp : prop->update->iteration_planned().partitions()) {
        loft::v1::StateUpdate u;
        *u.mutable_partition_done()->mutable_done() =
            loft::sched::testing::TimedDone(pp.partition(), *s, /*factor=*/3.0);
        u.mutable_partition_done()->mutable_done()->mutable_timings()->set_read_during_exchange(true);
        REQUIRE(s->Apply(u).ok());
      }
    }
    *left_out = s->reads_left_out_of_fits();
    // A snapshot keeps the count.
    auto again = SchedulerState::Create(spec, std::make_unique<FakePolicy>(false), {});
    REQUIRE(again.ok());
    REQUIRE((*again)->RestoreSnapshot(s->ToSnapshot()).ok());
    CHECK((*again)->reads_left_out_of_fits() == *left_out);
    CHECK((*again)->ToJson() == s->ToJson());
    return s;
  };
  int64_t left_delta = 0, left_plain = 0;
  auto delta = run(4, &left_delta);
  auto plain = run(1, &left_plain);
  CHECK(left_delta == 32);  // 8 iterations x 4 workers
  CHECK(left_plain == 0);
  // A read of 6 samples (the batch each worker got) as each state predicts it.
  auto read6 = [](const loft::sched::CostParams& c) {
    return c.local_fixed_ms + 6 * c.local_per_sample_ms + c.remote_fixed_ms + 6 * c.remote_per_sample_ms;
  };
  auto compute6 = [](const loft::sched::CostParams& c) {
    return c.compute_fixed_ms + 6 * c.compute_per_sample_ms;
  };
  for (int n = 0; n < 4; ++n) {
    const auto prior = loft::sched::PriorFromSpec(delta->spec(), n);
    INFO("node " << n);
    CHECK(read6(delta->cost(n)) == Approx(read6(prior)));
    CHECK(read6(plain->cost(n)) > 1.5 * read6(prior));  // period 1 learnt the slow reads
    CHECK(compute6(delta->cost(n)) == Approx(compute6(plain->cost(n))));
    CHECK(compute6(delta->cost(n)) > 1.5 * compute6(prior));
  }
  CHECK(delta->ToJson().find("reads_left_out_of_fits") != std::string::npos);
  CHECK(plain->ToJson().find("reads_left_out_of_fits") == std::string::npos);
}
