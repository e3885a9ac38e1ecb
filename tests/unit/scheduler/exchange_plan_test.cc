#include "scheduler/exchange_plan.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "scheduler/driver.h"
#include "scheduler/proto/state.pb.h"
#include "scheduler/scheduler_state.h"
#include "state_fakes.h"

using loft::TrainingSpec;
using loft::sched::ExchangeDecision;
using loft::sched::ExchangePlan;

namespace {

TrainingSpec::Exchange Fixed(int64_t period) {
  TrainingSpec::Exchange e;
  e.period = period;
  return e;
}

// Plans iterations 0..n-1 through `plan`, returning which end a round.
std::vector<bool> Ends(ExchangePlan& plan, int64_t n, double step_ms = 10) {
  std::vector<bool> out;
  for (int64_t it = 0; it < n; ++it) {
    const ExchangeDecision d = plan.Decide(it, step_ms);
    plan.OnPlanned(it, d.period, d.ends_round, step_ms);
    out.push_back(d.ends_round);
  }
  return out;
}

}  // namespace

TEST_CASE("ExchangePlan: period 1 ends every step, with gradients", "[exchange]") {
  ExchangePlan plan(Fixed(1), 9, 100);
  CHECK_FALSE(plan.delta_exchange());
  for (bool e : Ends(plan, 10)) CHECK(e);
  CHECK(plan.rounds() == 10);
}

TEST_CASE("ExchangePlan: period N ends every N-th step and the job's last", "[exchange]") {
  ExchangePlan plan(Fixed(4), 9, 100);  // iterations 0..9
  CHECK(plan.delta_exchange());
  const std::vector<bool> want = {false, false, false, true, false, false, false, true, false, true};
  CHECK(Ends(plan, 10) == want);
  CHECK(plan.rounds() == 3);
}

TEST_CASE("ExchangePlan: an update without a period is a round of one step", "[exchange]") {
  ExchangePlan plan(Fixed(3), -1, 0);
  plan.OnPlanned(0, 3, false, 10);
  plan.OnPlanned(1, 0, false, 10);  // written before exchange modes: ends its round
  CHECK(plan.rounds() == 1);
  CHECK(plan.Decide(2, 10).period == 3);  // a new round starts
}

TEST_CASE("ExchangePlan: auto sizes rounds from exchange and step time, then the loss", "[exchange]") {
  TrainingSpec::Exchange e;
  e.period_auto = true;
  e.max_period = 16;
  CHECK(e.drift == 0.0625);  // the default c
  // c = 1/16 quadruples the loss-free period: ceil(sqrt(90 / (0.0625 * 10))) = 12,
  // and ceil(sqrt(640 / 0.625)) = 32 is capped at max_period.
  CHECK(ExchangePlan(e, -1, 90).NextPeriod(10) == 12);
  CHECK(ExchangePlan(e, -1, 640).NextPeriod(10) == 16);
  e.drift = 1;  // the figures below: tau0 = ceil(sqrt(X / S))
  ExchangePlan plan(e, -1, /*prior_exchange_ms=*/640);
  CHECK(plan.delta_exchange());
  // Prior 640 ms exchange, 10 ms steps: ceil(sqrt(64)) = 8.
  CHECK(plan.NextPeriod(10) == 8);
  ExchangeDecision d = plan.Decide(0, 10);
  CHECK(d.period == 8);
  CHECK_FALSE(d.ends_round);
  // A measured exchange replaces the prior at once: 90 ms -> ceil(sqrt(9)) = 3.
  plan.OnPlanned(0, d.period, d.ends_round, 10);
  plan.OnReport(0, 2.0, /*exchanged=*/true, 90);
  CHECK(plan.NextPeriod(10) == 3);
  // Once a step was planned, the EWMA of planned steps (10 ms) is used,
  // not the caller's figure.
  CHECK(plan.NextPeriod(40) == 3);
  // The open round keeps its period.
  CHECK(plan.Decide(1, 10).period == 8);
  // Losses are folded per iteration.
  plan.OnReport(1, 0.5, false, 0);
  plan.OnReport(2, 0.5, false, 0);  // folds iteration 1's mean
  // loss EWMA = 0.7 * 2.0 + 0.3 * 0.5 = 1.55; ratio 0.775 -> ceil(3 * 0.880) = 3
  CHECK(plan.loss() == Approx(1.55));
  CHECK(plan.NextPeriod(10) == 3);
  for (int it = 3; it < 40; ++it) plan.OnReport(it, 0.125, false, 0);
  // loss -> 0.125, ratio 1/16: ceil(3 / 4) = 1
  CHECK(plan.NextPeriod(10) == 1);
  // max_period caps it.
  ExchangePlan slow(e, -1, 1e6);
  CHECK(slow.NextPeriod(1) == 16);
  // Without a step estimate yet, the plan's own makespan is used.
  ExchangePlan fresh(e, -1, 250);
  CHECK(fresh.NextPeriod(10) == 5);
  CHECK(fresh.NextPeriod(250) == 1);
}

TEST_CASE("ExchangePlan: a snapshot restores the open round", "[exchange]") {
  ExchangePlan a(Fixed(5), -1, 0);
  (void)Ends(a, 7);  // one round of 5, then 2 steps of the next
  loft::v1::ExchangeSnapshot snap;
  a.Save(&snap);
  ExchangePlan b(Fixed(5), -1, 0);
  REQUIRE(b.Restore(snap).ok());
  CHECK(b.rounds() == 1);
  CHECK_FALSE(b.Decide(7, 10).ends_round);
  b.OnPlanned(7, 5, false, 10);
  CHECK_FALSE(b.Decide(8, 10).ends_round);
  b.OnPlanned(8, 5, false, 10);
  CHECK(b.Decide(9, 10).ends_round);  // the 5th step of the second round (5..9)
  snap.set_planned_in_round(5);
  CHECK(b.Restore(snap).code() == loft::StatusCode::kDataLoss);
  snap.set_planned_in_round(0);
  snap.set_period(0);
  CHECK(b.Restore(snap).code() == loft::StatusCode::kDataLoss);
}

TEST_CASE("ExchangePriorMs: the slowest member's share of the payload", "[exchange]") {
  loft::ClusterSpec spec = loft::sched::testing::SmallSpec(1000, 1, 64, 4);
  spec.training.model = "mlp";
  spec.dataset.sample_bytes = 784;
  for (auto& n : spec.nodes) n.link = {100, 100, 1};
  spec.nodes[2].link = {8, 100, 5};  // 8 Mbit/s up
  // 235146 params x 4 bytes x 3/4 x 2 (scatter + gather) = 1.41 MB over 8 Mbit/s = 1410.9 ms + 2 x 5.
  const double bytes = 235146.0 * 4 * 3 / 4 * 2;
  CHECK(loft::sched::ExchangePriorMs(spec) == Approx(bytes * 8 / 8000 + 10));
  spec.training.exchange.compression = "int8";
  CHECK(loft::sched::ExchangePriorMs(spec) == Approx(bytes / 4 * 8 / 8000 + 10));
  spec.training.model = "none";
  CHECK(loft::sched::ExchangePriorMs(spec) == 0);
}

TEST_CASE("SchedulerState: partitions carry the round's decision and replay rebuilds it", "[exchange]") {
  loft::ClusterSpec spec = loft::sched::testing::SmallSpec(240, 1, 24, 4);
  spec.training.exchange.period = 3;
  spec.training.iterations = 5;
  auto d = loft::sched::JobDriver::Create(spec, "uniform", {});
  REQUIRE(d.ok());
  auto& driver = **d;
  std::vector<loft::v1::StateUpdate> journal;
  for (int i = 0; i < 4; ++i) {
    auto u = driver.RegisterWorker(i, 0);
    REQUIRE(u.ok());
    journal.insert(journal.end(), u->begin(), u->end());
  }
  std::vector<bool> ends;
  for (int it = 0; it < 5; ++it) {
    auto u = driver.PlanNextIteration(it * 10.0);
    REQUIRE(u.ok());
    for (const auto& x : *u) {
      journal.push_back(x);
      if (!x.has_iteration_planned()) continue;
      const auto& ip = x.iteration_planned();
      ends.push_back(ip.ends_round());
      CHECK(ip.round_period() == 3);
      for (const auto& pp : ip.partitions()) {
        CHECK(pp.partition().local_step() == !ip.ends_round());
        CHECK(pp.partition().delta_exchange());
      }
      // Finish the iteration so the next one may be planned.
      for (const auto& pp : ip.partitions()) {
        auto sent = driver.OnPartitionSent(pp.partition().id(), 0, it * 10.0 + 1);
        REQUIRE(sent.ok());
        journal.insert(journal.end(), sent->begin(), sent->end());
        loft::v1::PartitionDone done;
        done.set_partition_id(pp.partition().id());
        done.set_node(pp.partition().worker());
        auto a = driver.OnPartitionDone(done, it * 10.0 + 5);
        REQUIRE(a.ok());
        journal.insert(journal.end(), a->begin(), a->end());
      }
    }
  }
  CHECK(ends == std::vector<bool>{false, false, true, false, true});  // the last step ends its round
  auto r = loft::sched::JobDriver::Create(spec, "uniform", {});
  REQUIRE(r.ok());
  REQUIRE((*r)->Replay(journal).ok());
  CHECK((*r)->state().exchange().rounds() == 2);
  CHECK((*r)->state().ToJson() == driver.state().ToJson());
}

TEST_CASE("ExchangePlan: with exchange overlap, plan ahead through the first steps after a round's end",
          "[exchange]") {
  TrainingSpec::Exchange e = Fixed(4);
  e.overlap = true;
  ExchangePlan plan(e, -1, /*prior_exchange_ms=*/250);
  CHECK(plan.ReadAhead(3) == 0);         // no round ended yet: nothing to overlap
  (void)Ends(plan, 4, /*step_ms=*/100);  // one round: steps 0..3, ends at 3
  // A 250 ms exchange over 100 ms steps: ceil(2.5) = 3 steps past its end.
  CHECK(plan.ReadAhead(3) == 3);
  CHECK(plan.ReadAhead(2) == 2);  // capped
  (void)Ends(plan, 2, 100);       // steps 4 and 5 of the next round planned
  CHECK(plan.ReadAhead(3) == 3);
  (void)Ends(plan, 1, 100);  // the third: no deeper than that
  CHECK(plan.ReadAhead(3) == 0);
  // A short exchange: one step past the end.
  ExchangePlan quick(e, -1, 50);
  (void)Ends(quick, 4, 100);
  CHECK(quick.ReadAhead(3) == 1);
  (void)Ends(quick, 1, 100);
  CHECK(quick.ReadAhead(3) == 0);
  // Without exchange overlap: never.
  ExchangePlan plain(Fixed(4), -1, 250);
  (void)Ends(plain, 4, 100);
  CHECK(plain.ReadAhead(3) == 0);
}
