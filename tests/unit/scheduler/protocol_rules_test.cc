// The iteration protocol's rules, each on its own (scheduler/
// iteration_gate.h, ring_committer.h, liveness.h, departures.h,
// failure_reports.h, flow_control.h, accusations.h,
// partition_timeouts.h, restart_resend.h, worker_messages.h,
// poison_reports.h, ring_commit.h): the
// daemon and the simulator run these, so each is tested without sockets.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/accusations.h"
#include "scheduler/departures.h"
#include "scheduler/driver.h"
#include "scheduler/failure_reports.h"
#include "scheduler/flow_control.h"
#include "scheduler/iteration_gate.h"
#include "scheduler/liveness.h"
#include "scheduler/partition_timeouts.h"
#include "scheduler/poison_reports.h"
#include "scheduler/register_backoff.h"
#include "scheduler/restart_resend.h"
#include "scheduler/ring_commit.h"
#include "scheduler/ring_committer.h"
#include "scheduler/send_queues.h"
#include "scheduler/worker_messages.h"
#include "state_fakes.h"

using loft::sched::IterationGate;
using loft::sched::JobDriver;
using loft::sched::testing::FakePolicy;
using loft::sched::testing::SmallSpec;

namespace {
std::unique_ptr<JobDriver> Driver(int nodes, bool locality = true) {
  auto d = JobDriver::CreateWithPolicy(SmallSpec(600, 1, 60, nodes), std::make_unique<FakePolicy>(locality));
  REQUIRE(d.ok());
  for (int n = 0; n < nodes; ++n) REQUIRE((*d)->RegisterWorker(n, 0).ok());
  return std::move(*d);
}

std::vector<loft::v1::Partition> PlanAndSend(JobDriver& d, double now) {
  auto u = d.PlanNextIteration(now);
  REQUIRE(u.ok());
  auto parts = JobDriver::PartitionsToSend(*u);
  for (const auto& p : parts) REQUIRE(d.OnPartitionSent(p.id(), p.attempt(), now).ok());
  return parts;
}

std::vector<char> WorkersOf(const std::vector<loft::v1::Partition>& parts, int nodes) {
  std::vector<char> w(static_cast<size_t>(nodes), 0);
  for (const auto& p : parts) {
    if (p.sample_ids_size() > 0) w[static_cast<size_t>(p.worker())] = 1;
  }
  return w;
}

void Ack(JobDriver& d, const loft::v1::Partition& p, double now) {
  loft::v1::PartitionDone done;
  done.set_partition_id(p.id());
  done.set_attempt(p.attempt());
  done.set_node(p.worker());
  REQUIRE(d.OnPartitionDone(done, now).ok());
}
}  // namespace

TEST_CASE("start gate: min_workers, capped at the spec's nodes, 0 means every node", "[rules][gate]") {
  CHECK(IterationGate({.plan_ahead = 0, .target_iterations = 5, .min_workers = 0}, 4).workers_needed() == 4);
  CHECK(IterationGate({.plan_ahead = 0, .target_iterations = 5, .min_workers = 2}, 4).workers_needed() == 2);
  IterationGate g({.plan_ahead = 0, .target_iterations = 5, .min_workers = 9}, 4);
  CHECK(g.workers_needed() == 4);
  CHECK_FALSE(g.MayStart(3));
  CHECK(g.MayStart(4));
}

TEST_CASE("start gate with start_when_ready: confirmed workers, then peers up or the wait over",
          "[rules][gate]") {
  using W = IterationGate::WorkerReadiness;
  IterationGate g({.plan_ahead = 0, .target_iterations = 5, .min_workers = 0}, 3);
  std::vector<W> live = {{0, true, true, 2}, {1, true, false, 2}, {2, true, true, 1}};
  // Without when_ready a connected worker counts.
  CHECK(g.CheckStart(live, false, 0, 0).start);
  // With it, worker 1 is not confirmed yet.
  auto c = g.CheckStart(live, true, 500, 10);
  CHECK_FALSE(c.start);
  CHECK(c.live == 2);
  live[1].confirmed = true;
  // Worker 2 has one of its two peers: the start waits, from now (100) ...
  c = g.CheckStart(live, true, 500, 100);
  CHECK_FALSE(c.start);
  CHECK(c.without_peers == std::vector<int32_t>{2});
  c = g.CheckStart(live, true, 500, 599);
  CHECK_FALSE(c.start);
  // ... until peers_wait_ms has passed,
  c = g.CheckStart(live, true, 500, 600);
  CHECK(c.start);
  CHECK(c.peers_waited_ms == 500);
  CHECK(c.without_peers == std::vector<int32_t>{2});
  // or every peer connection is up.
  IterationGate h({.plan_ahead = 0, .target_iterations = 5, .min_workers = 0}, 3);
  live[2].peers_ready = 2;
  c = h.CheckStart(live, true, 500, 50);
  CHECK(c.start);
  CHECK(c.without_peers.empty());
}

TEST_CASE("BSP gate: the next iteration waits for a complete one, finish needs none in flight",
          "[rules][gate]") {
  auto d = Driver(3);
  IterationGate g({.plan_ahead = 0, .target_iterations = 1, .min_workers = 0}, 3);
  CHECK(g.ReadyToPlan(d->state(), true));
  auto parts = PlanAndSend(*d, 1);
  g.OnPlanned(parts[0].iteration(), d->state().view(), WorkersOf(parts, 3));
  CHECK_FALSE(g.ReadyToPlan(d->state(), true));
  CHECK(g.AllPlanned(d->state()));
  CHECK_FALSE(g.Finished(d->state()));
  for (const auto& p : parts) Ack(*d, p, 2);
  CHECK(g.ReadyToPlan(d->state(), true));
  CHECK(g.Finished(d->state()));
}

TEST_CASE("plan-ahead gate: t+1 only when t is fully sent, same view, every live node in t",
          "[rules][gate]") {
  auto d = Driver(3);
  IterationGate g({.plan_ahead = 1, .target_iterations = 10, .min_workers = 0}, 3);
  auto t0 = PlanAndSend(*d, 1);
  const int workers = g.OnPlanned(t0[0].iteration(), d->state().view(), WorkersOf(t0, 3));
  CHECK(workers == 3);
  CHECK(g.ReadyToPlan(d->state(), true));
  CHECK_FALSE(g.ReadyToPlan(d->state(), false));  // (b) a partition of t not sent yet
  // (d) a live node without a partition of t.
  std::vector<char> two = WorkersOf(t0, 3);
  two[2] = 0;
  g.OnPlanned(t0[0].iteration(), d->state().view(), two);
  CHECK_FALSE(g.ReadyToPlan(d->state(), true));
  g.OnPlanned(t0[0].iteration(), d->state().view(), WorkersOf(t0, 3));
  // (a) two iterations open: no third.
  auto t1 = PlanAndSend(*d, 2);
  g.OnPlanned(t1[0].iteration(), d->state().view(), WorkersOf(t1, 3));
  CHECK_FALSE(g.ReadyToPlan(d->state(), true));
  for (const auto& p : t0) Ack(*d, p, 3);
  CHECK(g.ReadyToPlan(d->state(), true));
  // (c) a new view (a node died): wait for a complete iteration.
  REQUIRE(d->OnWorkerDead(1, "test", 4).ok());
  CHECK_FALSE(g.ReadyToPlan(d->state(), true));
  // BSP never plans ahead.
  IterationGate bsp({.plan_ahead = 0, .target_iterations = 10, .min_workers = 0}, 3);
  CHECK_FALSE(bsp.ReadyToPlan(d->state(), true));
}

TEST_CASE("plan-ahead 2: t+1 while t-1 and t run, never a fourth open, (b)-(d) on the last plan",
          "[rules][gate]") {
  auto d = Driver(3);
  IterationGate g({.plan_ahead = 2, .target_iterations = 10, .min_workers = 0}, 3);
  auto t0 = PlanAndSend(*d, 1);
  g.OnPlanned(t0[0].iteration(), d->state().view(), WorkersOf(t0, 3));
  CHECK(g.ReadyToPlan(d->state(), true));
  auto t1 = PlanAndSend(*d, 2);
  g.OnPlanned(t1[0].iteration(), d->state().view(), WorkersOf(t1, 3));
  // (a) t0 and t1 open: t2 may be planned, as plan_ahead 1 would not allow.
  CHECK(g.ReadyToPlan(d->state(), true));
  CHECK_FALSE(IterationGate({.plan_ahead = 1, .target_iterations = 10, .min_workers = 0}, 3)
                  .ReadyToPlan(d->state(), true));
  CHECK_FALSE(g.ReadyToPlan(d->state(), false));  // (b) t1 not fully sent
  std::vector<char> two = WorkersOf(t1, 3);
  two[0] = 0;
  g.OnPlanned(t1[0].iteration(), d->state().view(), two);
  CHECK_FALSE(g.ReadyToPlan(d->state(), true));  // (d) a live node without a partition of t1
  g.OnPlanned(t1[0].iteration(), d->state().view(), WorkersOf(t1, 3));
  auto t2 = PlanAndSend(*d, 3);
  g.OnPlanned(t2[0].iteration(), d->state().view(), WorkersOf(t2, 3));
  // (a) three open: no fourth, even with t0 partly done.
  CHECK_FALSE(g.ReadyToPlan(d->state(), true));
  Ack(*d, t0[0], 4);
  CHECK_FALSE(g.ReadyToPlan(d->state(), true));
  for (size_t k = 1; k < t0.size(); ++k) Ack(*d, t0[k], 4);
  CHECK(g.ReadyToPlan(d->state(), true));
  // (a) counts every open iteration, not only the last two: t1 still open
  // with t3 the last plan (t2 done) is refused.
  auto t3 = PlanAndSend(*d, 5);
  g.OnPlanned(t3[0].iteration(), d->state().view(), WorkersOf(t3, 3));
  for (const auto& p : t2) Ack(*d, p, 6);
  CHECK_FALSE(g.ReadyToPlan(d->state(), true));  // t1 is older than t3-1
  for (const auto& p : t1) Ack(*d, p, 7);
  CHECK(g.ReadyToPlan(d->state(), true));
  // (c) a new view: wait for a complete iteration.
  REQUIRE(d->OnWorkerDead(1, "test", 8).ok());
  CHECK_FALSE(g.ReadyToPlan(d->state(), true));
}

TEST_CASE("auto plan-ahead: deep enough for the control path, the former auto without one", "[rules][gate]") {
  using loft::sched::AutoPlanAhead;
  using loft::sched::kMaxPlanAhead;
  // No control path: 1 with overlap, 0 (BSP) without, whatever the makespan.
  CHECK(AutoPlanAhead(true, 0, 4) == 1);
  CHECK(AutoPlanAhead(false, 0, 4) == 0);
  // ceil(control / T) without overlap, + 1 with.
  CHECK(AutoPlanAhead(false, 5.9, 5.69) == 2);
  CHECK(AutoPlanAhead(false, 5.9, 100) == 1);
  CHECK(AutoPlanAhead(true, 5.9, 100) == 2);
  CHECK(AutoPlanAhead(true, 5.9, 4.1) == 3);
  CHECK(AutoPlanAhead(false, 8, 4) == 2);                 // exactly 2·T: depth 2
  CHECK(AutoPlanAhead(true, 5.9, 2.3) == kMaxPlanAhead);  // 4, capped
  CHECK(AutoPlanAhead(true, 5.9, 0) == kMaxPlanAhead);    // no prediction
  // The gate's depth follows the last plan's prediction.
  auto d = Driver(3);
  IterationGate g(
      {.plan_ahead = -1, .target_iterations = 10, .min_workers = 0, .overlap = true, .control_ms = 5.9}, 3);
  CHECK(g.plan_ahead() == -1);
  CHECK(g.max_depth() == kMaxPlanAhead);
  auto t0 = PlanAndSend(*d, 1);
  g.OnPlanned(t0[0].iteration(), d->state().view(), WorkersOf(t0, 3), 100);
  CHECK(g.depth() == 2);
  auto t1 = PlanAndSend(*d, 2);
  g.OnPlanned(t1[0].iteration(), d->state().view(), WorkersOf(t1, 3), 100);
  CHECK(g.ReadyToPlan(d->state(), true));  // depth 2: t2 while t0 and t1 run
  auto t2 = PlanAndSend(*d, 3);
  g.OnPlanned(t2[0].iteration(), d->state().view(), WorkersOf(t2, 3), 100);
  CHECK_FALSE(g.ReadyToPlan(d->state(), true));  // not a fourth open
  g.OnPlanned(t2[0].iteration(), d->state().view(), WorkersOf(t2, 3), 4.1);
  CHECK(g.depth() == 3);
  CHECK(g.ReadyToPlan(d->state(), true));  // depth 3: t3 while t0 .. t2 run
  // A fixed plan_ahead ignores the prediction.
  IterationGate fixed(
      {.plan_ahead = 1, .target_iterations = 10, .min_workers = 0, .overlap = true, .control_ms = 5.9}, 3);
  fixed.OnPlanned(t2[0].iteration(), d->state().view(), WorkersOf(t2, 3), 0.1);
  CHECK(fixed.depth() == 1);
  CHECK(fixed.max_depth() == 1);
  CHECK_FALSE(fixed.ReadyToPlan(d->state(), true));
}

TEST_CASE("liveness: a death fails the node's partitions and those reading from it", "[rules][liveness]") {
  loft::v1::Partition p;
  p.set_worker(0);
  p.add_sources(0);
  p.add_sources(2);
  CHECK(loft::sched::AffectedByDeath(p, 0));
  CHECK(loft::sched::AffectedByDeath(p, 2));
  CHECK_FALSE(loft::sched::AffectedByDeath(p, 1));
  CHECK(loft::sched::HeartbeatExpired(0, 1001, 1000));
  CHECK_FALSE(loft::sched::HeartbeatExpired(0, 1000, 1000));
  // The simulator's detection time is the first clock tick the rule holds at.
  const double at = loft::sched::HeartbeatExpiresAt(250, 1000, 1e-3);
  CHECK(loft::sched::HeartbeatExpired(250, at, 1000));
  CHECK_FALSE(loft::sched::HeartbeatExpired(250, at - 1e-3, 1000));

  auto d = Driver(3);
  auto parts = PlanAndSend(*d, 1);
  for (int32_t node = 0; node < 3; ++node) {
    std::vector<uint64_t> expect;
    for (const auto& q : parts) {
      if (loft::sched::AffectedByDeath(q, node)) expect.push_back(q.id());
    }
    CHECK(loft::sched::AffectedPartitions(d->state().ledger(), node) == expect);
  }
  // The driver fails exactly those.
  const auto affected = loft::sched::AffectedPartitions(d->state().ledger(), 1);
  auto u = d->OnWorkerDead(1, "test", 2);
  REQUIRE(u.ok());
  std::vector<uint64_t> failed;
  for (const auto& x : *u) {
    if (x.has_partition_failed()) failed.push_back(x.partition_failed().failed().partition_id());
  }
  CHECK(failed == affected);
}

TEST_CASE("departures: eviction before silence, the ring's commits first, then the driver",
          "[rules][liveness]") {
  using loft::sched::Departure;
  auto d = Driver(3);
  auto parts = PlanAndSend(*d, 1);
  REQUIRE(parts.size() == 3);
  const auto& st = d->state();
  loft::sched::AccusationBook book;
  // The heartbeat rule: strictly more than the timeout.
  CHECK(loft::sched::DepartureOf(st, book, 0, 0, 1000, 1000) == Departure::kStays);
  CHECK(loft::sched::DepartureOf(st, book, 0, 0, 1001, 1000) == Departure::kDead);
  // Evicted by its ring (f = 0: one report): leaves even when heard from.
  REQUIRE(book.Report(0, 2, 0));
  CHECK(loft::sched::DepartureOf(st, book, 2, 1000, 1000, 1000) == Departure::kEvicted);
  CHECK(loft::sched::DepartureOf(st, book, 2, 0, 5000, 1000) == Departure::kEvicted);

  // Worker 1 goes silent; the other two name its partition applied.
  const loft::v1::Partition* p1 = nullptr;
  for (const auto& p : parts) {
    if (p.worker() == 1) p1 = &p;
  }
  REQUIRE(p1 != nullptr);
  loft::sched::RingCommitter rc;
  const int64_t it = p1->iteration();
  rc.OnPlanned(it, 3);
  loft::v1::TrainingReport named;
  named.add_applied_partitions(p1->id());
  named.add_applied_nodes(1);
  for (int32_t reporter : {0, 2}) REQUIRE(rc.RecordVotes(st.ledger(), it, reporter, named) == 0);
  std::vector<std::pair<int32_t, Departure>> leaving, departed;
  std::vector<uint64_t> committed;
  loft::sched::DepartureCallbacks cb;
  cb.last_seen_ms = [](int32_t node) { return node == 1 ? 0.0 : 1900.0; };
  cb.leaving = [&](int32_t node, Departure why) {
    CHECK(st.alive(node));  // nothing changed yet
    leaving.emplace_back(node, why);
  };
  cb.commit = [&](uint64_t id) {
    committed.push_back(id);
    Ack(*d, *p1, 2000);  // as the engines: PartitionDone on its behalf
    return loft::OkStatus();
  };
  cb.departed = [&](int32_t node, Departure why, loft::sched::Updates&& u, int64_t) {
    CHECK_FALSE(st.alive(node));
    CHECK_FALSE(u.empty());
    departed.emplace_back(node, why);
    return loft::OkStatus();
  };
  REQUIRE(loft::sched::DepartAt(*d, book, rc, 2000, 1000, cb).ok());
  // Ascending: 1 is dead (silent, its applied partition committed), 2 evicted.
  const std::vector<std::pair<int32_t, Departure>> expect = {{1, Departure::kDead}, {2, Departure::kEvicted}};
  CHECK(leaving == expect);
  CHECK(departed == expect);
  CHECK(committed == std::vector<uint64_t>{p1->id()});
  CHECK(st.ledger().Find(p1->id())->state == loft::sched::PartitionState::kDone);
  CHECK(st.evicted(2));
  CHECK(st.alive(0));
  // Both gone: nothing more leaves (an evicted node is evicted once).
  leaving.clear();
  REQUIRE(loft::sched::DepartAt(*d, book, rc, 9000, 1000, cb).ok());
  CHECK(leaving.size() == 1);  // only 0, silent since 1900 now
  CHECK(leaving[0] == std::make_pair(0, Departure::kDead));
}

TEST_CASE("partition timeouts: at the deadline, the ring's commit first, the rest time out",
          "[rules][timeouts]") {
  auto d = Driver(4);  // StateOptions' defaults: max(10 s, 5 x predicted)
  auto parts = PlanAndSend(*d, 1);
  REQUIRE(parts.size() == 4);
  const auto& ledger = d->state().ledger();
  double deadline = std::numeric_limits<double>::infinity();
  for (const auto& p : parts) {
    const double expect = 1 + std::max(10000.0, 5 * p.predicted_ms());
    CHECK(ledger.Find(p.id())->deadline_ms == Approx(expect));
    deadline = std::min(deadline, expect);
  }
  CHECK(loft::sched::NextPartitionDeadline(ledger) == Approx(deadline));
  // parts[0] is acked in time; parts[1] its ring applied (the 3 other
  // workers, more than half of 4, name it); parts[2] and parts[3] time out.
  Ack(*d, parts[0], 5);
  loft::sched::RingCommitter rc;
  const int64_t it = parts[0].iteration();
  rc.OnPlanned(it, 4);
  loft::v1::TrainingReport named;
  named.add_applied_partitions(parts[1].id());
  named.add_applied_nodes(parts[1].worker());
  for (int32_t reporter : {parts[0].worker(), parts[2].worker(), parts[3].worker()})
    REQUIRE(rc.RecordVotes(ledger, it, reporter, named) == 0);
  std::vector<uint64_t> committed;
  auto commit = [&](uint64_t id) {
    committed.push_back(id);
    Ack(*d, parts[1], deadline);  // as the engines: PartitionDone on its behalf
    return loft::OkStatus();
  };
  // A clock tick before the deadline: nothing.
  auto none = loft::sched::TimeOutPartitions(*d, rc, deadline - 1e-3, commit);
  REQUIRE(none.ok());
  CHECK(none->empty());
  CHECK(committed.empty());
  // The first tick at which every engine's clock has passed it.
  const double at = loft::sched::PartitionExpiresAt(deadline, 1e-3);
  CHECK(at > deadline);
  auto u = loft::sched::TimeOutPartitions(*d, rc, at, commit);
  REQUIRE(u.ok());
  CHECK(committed == std::vector<uint64_t>{parts[1].id()});
  std::vector<uint64_t> timed_out;
  for (const auto& x : *u) {
    if (x.has_partition_timed_out()) timed_out.push_back(x.partition_timed_out().partition_id());
  }
  CHECK(timed_out == std::vector<uint64_t>{parts[2].id(), parts[3].id()});
  CHECK(ledger.counters().timed_out == 2);
  CHECK(ledger.in_flight() == 0);
  CHECK(std::isinf(loft::sched::NextPartitionDeadline(ledger)));  // nothing left to time out
  // Their late acks change nothing.
  CHECK_FALSE(loft::sched::WouldApply(ledger, parts[2].id(), parts[2].attempt(), parts[2].worker()));
}

TEST_CASE("failure reports: ignored unless the worker's open attempt, committed when the ring applied it",
          "[rules][ring]") {
  using loft::sched::FailureOutcome;
  auto d = Driver(3);
  auto parts = PlanAndSend(*d, 1);
  REQUIRE(parts.size() == 3);
  const auto& ledger = d->state().ledger();
  loft::sched::RingCommitter rc;
  const int64_t it = parts[0].iteration();
  rc.OnPlanned(it, 3);
  // The two other workers name parts[1] applied.
  loft::v1::TrainingReport named;
  named.add_applied_partitions(parts[1].id());
  named.add_applied_nodes(parts[1].worker());
  for (const auto& p : parts) {
    if (p.worker() != parts[1].worker()) REQUIRE(rc.RecordVotes(ledger, it, p.worker(), named) == 0);
  }
  std::vector<uint64_t> committed;
  auto commit = [&](uint64_t id) {
    committed.push_back(id);
    Ack(*d, parts[1], 3);  // as the engines: PartitionDone on its behalf
    return loft::OkStatus();
  };
  auto report = [&](const loft::v1::Partition& p, int32_t node, int32_t attempt, loft::sched::Updates* u) {
    loft::v1::PartitionFailed f;
    f.set_partition_id(p.id());
    f.set_attempt(attempt);
    f.set_node(node);
    f.set_reason("test");
    auto o = loft::sched::OnFailureReport(*d, rc, node, f, 2, commit, u);
    REQUIRE(o.ok());
    return *o;
  };
  loft::sched::Updates u;
  // Another attempt, or another node's word: nothing changes.
  CHECK(report(parts[2], parts[2].worker(), parts[2].attempt() + 1, &u) == FailureOutcome::kIgnored);
  CHECK(report(parts[2], parts[0].worker(), parts[2].attempt(), &u) == FailureOutcome::kIgnored);
  CHECK(u.empty());
  CHECK(ledger.counters().failed == 0);
  // The ring applied parts[1]: committed instead of failed.
  CHECK(report(parts[1], parts[1].worker(), parts[1].attempt(), &u) == FailureOutcome::kCommittedByRing);
  CHECK(committed == std::vector<uint64_t>{parts[1].id()});
  CHECK(u.empty());
  CHECK(ledger.Find(parts[1].id())->state == loft::sched::PartitionState::kDone);
  // parts[2]: no votes, it fails.
  CHECK(report(parts[2], parts[2].worker(), parts[2].attempt(), &u) == FailureOutcome::kFailed);
  REQUIRE(u.size() >= 1);
  CHECK(std::any_of(u.begin(), u.end(), [&](const loft::v1::StateUpdate& x) {
    return x.has_partition_failed() && x.partition_failed().failed().partition_id() == parts[2].id();
  }));
  CHECK(ledger.counters().failed == 1);
  CHECK(committed.size() == 1);
  // Its second report changes nothing.
  CHECK(report(parts[2], parts[2].worker(), parts[2].attempt(), &u) == FailureOutcome::kIgnored);
  CHECK(u.empty());
}

TEST_CASE("ring committer: more than half of the other workers must name a partition", "[rules][ring]") {
  auto d = Driver(3);
  auto parts = PlanAndSend(*d, 1);
  REQUIRE(parts.size() == 3);
  loft::sched::RingCommitter rc;
  const int64_t it = parts[0].iteration();
  rc.OnPlanned(it, 3);
  loft::v1::TrainingReport all;
  for (const auto& p : parts) {
    all.add_applied_partitions(p.id());
    all.add_applied_nodes(p.worker());
  }
  const auto* rec = d->state().ledger().Find(parts[0].id());
  CHECK(rc.RecordVotes(d->state().ledger(), it, 0, all) == 0);  // its own worker: does not count
  CHECK(rc.CommitVotes(*rec) == 0);
  CHECK(rc.RecordVotes(d->state().ledger(), it, 1, all) == 0);
  CHECK(rc.CommitVotes(*rec) == 0);  // 1 of 3: not more than half
  CHECK(rc.RecordVotes(d->state().ledger(), it, 2, all) == 0);
  CHECK(rc.CommitVotes(*rec) == 2);
  CHECK(rc.AppliedCount(it) == 3);
  // A pair naming another member's partition, or an unknown id, is dropped.
  loft::v1::TrainingReport junk;
  junk.add_applied_partitions(parts[1].id());
  junk.add_applied_nodes(parts[0].worker());
  junk.add_applied_partitions(999999);
  junk.add_applied_nodes(0);
  CHECK(rc.RecordVotes(d->state().ledger(), it, 0, junk) == 2);
  // Unknown (not planned here) iterations record nothing.
  CHECK(rc.RecordVotes(d->state().ledger(), it + 1, 0, all) == 0);
  CHECK(rc.AppliedCount(it + 1) == -1);
  rc.Close(it);
  CHECK(rc.CommitVotes(*rec) == 0);
  CHECK(rc.workers(it) == 0);
}

TEST_CASE("credit window: never more in flight than granted, a timeout returns its credit",
          "[rules][credits]") {
  loft::sched::CreditWindow w;
  w.Open(2);
  CHECK(w.CanSend());
  w.OnSent();
  w.OnSent();
  CHECK_FALSE(w.CanSend());
  CHECK(w.max_in_flight == 2);
  w.Grant(5);
  CHECK(w.credits == 2);  // never above the window
  w.credits = 0;
  w.OnFinished(/*timed_out=*/true);
  CHECK(w.credits == 1);
  CHECK(w.in_flight == 1);
  w.OnFinished(false);
  w.OnFinished(false);
  CHECK(w.in_flight == 0);
  w.in_flight = 1;
  w.HoldInFlight();
  CHECK(w.credits == 0);
  w.Close();
  CHECK_FALSE(w.CanSend());
}

TEST_CASE("GrantsFor: one grant per serving peer with exactly the samples read from it", "[rules][grants]") {
  loft::v1::Partition p;
  p.set_id(7);
  p.set_worker(1);
  p.set_view(3);
  const int32_t src[] = {1, 2, 0, 2, 1};
  for (int k = 0; k < 5; ++k) {
    p.add_sample_ids(100 + static_cast<uint64_t>(k));
    p.add_sources(src[k]);
  }
  auto g = loft::sched::GrantsFor(p);
  REQUIRE(g.size() == 2);
  CHECK(g.at(0).sample_ids_size() == 1);
  CHECK(g.at(0).sample_ids(0) == 102);
  CHECK(g.at(2).sample_ids_size() == 2);
  CHECK(g.at(2).sample_ids(1) == 103);
  CHECK(g.at(2).requester() == 1);
  CHECK(g.at(2).partition_id() == 7);
  CHECK(g.at(2).view() == 3);
}

TEST_CASE("SendServeGrants: each serving peer's grant, ascending peer, none for local samples",
          "[rules][grants]") {
  loft::v1::Partition p;
  p.set_id(9);
  p.set_worker(2);
  const int32_t src[] = {3, 2, 0, 3};
  for (int k = 0; k < 4; ++k) {
    p.add_sample_ids(200 + static_cast<uint64_t>(k));
    p.add_sources(src[k]);
  }
  std::vector<std::pair<int32_t, int>> sent;  // (peer, samples)
  const int n = loft::sched::SendServeGrants(p, [&](int32_t peer, loft::v1::ServeGrant&& g) {
    CHECK(g.partition_id() == 9);
    CHECK(g.requester() == 2);
    sent.emplace_back(peer, g.sample_ids_size());
  });
  CHECK(n == 2);
  CHECK(sent == std::vector<std::pair<int32_t, int>>{{0, 1}, {3, 2}});
  // A partition read only locally sends none.
  loft::v1::Partition local;
  local.set_worker(1);
  local.add_sample_ids(1);
  local.add_sources(1);
  CHECK(loft::sched::SendServeGrants(local, [](int32_t, loft::v1::ServeGrant&&) { FAIL("no grant"); }) == 0);
}

TEST_CASE("restart hold: a node gets no later iteration before its unconfirmed earlier one",
          "[rules][hold]") {
  loft::sched::RestartHold h;
  h.Hold(10, 0, 4);
  CHECK(h.Holds(0, 5));
  CHECK_FALSE(h.Holds(0, 4));
  CHECK_FALSE(h.Holds(1, 5));
  h.Release(10);
  CHECK_FALSE(h.Holds(0, 5));
  h.Hold(11, 1, 2);
  h.ReleaseNode(1);
  CHECK_FALSE(h.Holds(1, 3));
}

TEST_CASE("re-send after a restart: once, planned ones queued again, sent ones held on their window",
          "[rules][hold]") {
  auto d = Driver(3);
  auto u = d->PlanNextIteration(1);
  REQUIRE(u.ok());
  auto parts = JobDriver::PartitionsToSend(*u);
  REQUIRE(parts.size() == 3);
  // Sent before the crash: parts[0] and parts[1]; parts[2] only planned.
  for (int k = 0; k < 2; ++k) REQUIRE(d->OnPartitionSent(parts[k].id(), parts[k].attempt(), 2).ok());
  const auto& ledger = d->state().ledger();
  loft::sched::SendQueues sends(3);
  for (int32_t node = 0; node < 3; ++node) sends.window(node).Open(2);
  loft::sched::RestartHold hold;
  loft::sched::RestartResend resend;
  std::vector<uint64_t> seen;
  auto recovered = [&](const loft::sched::PartitionRecord& r) { seen.push_back(r.partition.id()); };
  // Not recovered from a journal: nothing to do.
  CHECK(loft::sched::ResendAfterRestart(resend, ledger, sends, hold, recovered) == -1);
  CHECK(sends.empty());
  CHECK(seen.empty());
  resend.Recovered();
  CHECK(resend.due());
  CHECK(loft::sched::ResendAfterRestart(resend, ledger, sends, hold, recovered) == 1);
  CHECK_FALSE(resend.due());
  CHECK(seen == std::vector<uint64_t>{parts[0].id(), parts[1].id(), parts[2].id()});
  const int64_t it = parts[0].iteration();
  for (int k = 0; k < 3; ++k) {
    const int32_t w = parts[k].worker();
    const bool was_sent = k < 2;
    CHECK(sends.queued(w) == (was_sent ? 0u : 1u));
    CHECK(sends.window(w).in_flight == (was_sent ? 1 : 0));
    CHECK(sends.window(w).credits == (was_sent ? 1 : 2));  // HoldInFlight
    CHECK(hold.Holds(w, it + 1) == was_sent);
    CHECK_FALSE(hold.Holds(w, it));
  }
  // Once: a later tick changes nothing.
  CHECK(loft::sched::ResendAfterRestart(resend, ledger, sends, hold, recovered) == -1);
  CHECK(seen.size() == 3);
  CHECK(sends.queued(parts[2].worker()) == 1);
  CHECK(sends.window(parts[0].worker()).in_flight == 1);
  // The streaming rule then sends only the planned one.
  std::vector<uint64_t> streamed;
  REQUIRE(sends
              .Stream([](int32_t, uint64_t) { return loft::sched::SendQueues::Offer::kSend; },
                      [&](int32_t, uint64_t id) {
                        streamed.push_back(id);
                        return loft::OkStatus();
                      })
              .ok());
  CHECK(streamed == std::vector<uint64_t>{parts[2].id()});
}

TEST_CASE("re-registration backoff doubles until the node is stable", "[register_backoff][rules]") {
  loft::sched::RegisterBackoff b({.min_ms = 1000, .max_ms = 8000, .stable_ms = 60000});
  CHECK(b.Admit(1, 0) == 0);
  CHECK(b.Admit(2, 10) == 0);  // per node
  CHECK(b.Admit(1, 5) == 0);   // one re-registration (a restart) is free
  CHECK(b.Admit(1, 405) == 600);
  CHECK(b.Admit(1, 1005) == 0);  // waited min_ms; the next wait doubles
  CHECK(b.Admit(1, 2505) == 500);
  CHECK(b.Admit(1, 3005) == 0);
  CHECK(b.Admit(1, 7004) > 0);
  CHECK(b.Admit(1, 7005) == 0);
  CHECK(b.Admit(1, 15005) == 0);  // capped at max_ms
  CHECK(b.Admit(1, 23004) > 0);
  CHECK(b.Admit(1, 200000) == 0);  // stable for stable_ms: back to min_ms
  CHECK(b.Admit(1, 200500) > 0);
  CHECK(b.Admit(1, 201000) == 0);
}

TEST_CASE("heartbeat admission: evicted first, then unregistered, then credits out of 0..kMaxCredits",
          "[rules][admission]") {
  using loft::StatusCode;
  using loft::sched::AdmitHeartbeat;
  using loft::sched::kMaxCredits;
  auto d = Driver(3);
  const auto& st = d->state();
  loft::sched::AccusationBook acc;
  CHECK(AdmitHeartbeat(st, acc, 1, true, 0).ok());
  CHECK(AdmitHeartbeat(st, acc, 1, true, kMaxCredits).ok());
  CHECK(AdmitHeartbeat(st, acc, 1, true, -1).code() == StatusCode::kInvalidArgument);
  CHECK(AdmitHeartbeat(st, acc, 1, true, kMaxCredits + 1).code() == StatusCode::kInvalidArgument);
  const auto unregistered = AdmitHeartbeat(st, acc, 1, false, 1);
  CHECK(unregistered.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(unregistered.message(), Catch::Contains("not registered"));
  // Node 1 evicted (f = 0: one report): refused whatever else holds.
  REQUIRE(acc.Report(0, 1, 0));
  CHECK(AdmitHeartbeat(st, acc, 1, true, 1).code() == StatusCode::kPermissionDenied);
  CHECK(AdmitHeartbeat(st, acc, 1, false, -1).code() == StatusCode::kPermissionDenied);
  CHECK(AdmitHeartbeat(st, acc, 2, true, 1).ok());
}

TEST_CASE("credit grant admission: unregistered, or credits out of 1..kMaxCredits", "[rules][admission]") {
  using loft::StatusCode;
  using loft::sched::AdmitCreditGrant;
  using loft::sched::kMaxCredits;
  auto d = Driver(2);
  CHECK(AdmitCreditGrant(d->state(), 0, true, 1).ok());
  CHECK(AdmitCreditGrant(d->state(), 0, true, kMaxCredits).ok());
  CHECK(AdmitCreditGrant(d->state(), 0, true, 0).code() == StatusCode::kInvalidArgument);
  CHECK(AdmitCreditGrant(d->state(), 0, true, kMaxCredits + 1).code() == StatusCode::kInvalidArgument);
  CHECK(AdmitCreditGrant(d->state(), 0, false, 1).code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("a dead node heard from again comes back, a live one changes nothing", "[rules][admission]") {
  auto d = Driver(3);
  const int64_t view = d->state().view();
  auto none = loft::sched::ComeBackIfDead(*d, 2, 1);
  REQUIRE(none.ok());
  CHECK(none->empty());
  CHECK(d->state().view() == view);
  REQUIRE(d->OnWorkerDead(2, "test", 2).ok());
  REQUIRE_FALSE(d->state().alive(2));
  auto back = loft::sched::ComeBackIfDead(*d, 2, 3);
  REQUIRE(back.ok());
  CHECK_FALSE(back->empty());
  CHECK(d->state().alive(2));
  CHECK(d->state().view() > view + 1);
}

TEST_CASE("an ack's votes: its open attempt's, or an ignored ack of the worker's own partition",
          "[rules][ring][admission]") {
  auto d = Driver(3);
  auto parts = PlanAndSend(*d, 1);
  REQUIRE(parts.size() == 3);
  const auto& ledger = d->state().ledger();
  const int64_t it = parts[0].iteration();
  // Every ack names parts[2] applied.
  auto ack = [&](const loft::v1::Partition& p, int32_t node, int32_t attempt, bool training) {
    loft::v1::PartitionDone done;
    done.set_partition_id(p.id());
    done.set_attempt(attempt);
    done.set_node(node);
    if (training) {
      auto* t = done.mutable_timings()->mutable_training();
      t->add_applied_partitions(parts[2].id());
      t->add_applied_nodes(parts[2].worker());
    }
    return done;
  };
  const auto* rec2 = ledger.Find(parts[2].id());
  REQUIRE(rec2 != nullptr);
  {
    loft::sched::RingCommitter rc;
    rc.OnPlanned(it, 3);
    // Another node's word on parts[0], an unknown partition, no training report: no votes.
    auto v = loft::sched::RecordAckVotes(rc, ledger, parts[1].worker(),
                                         ack(parts[0], parts[1].worker(), parts[0].attempt(), true));
    CHECK_FALSE(v.applies);
    CHECK_FALSE(v.voted);
    loft::v1::Partition unknown = parts[0];
    unknown.set_id(ledger.last_id() + 100);
    v = loft::sched::RecordAckVotes(rc, ledger, parts[0].worker(), ack(unknown, parts[0].worker(), 0, true));
    CHECK_FALSE(v.applies);
    CHECK_FALSE(v.voted);
    v = loft::sched::RecordAckVotes(rc, ledger, parts[0].worker(),
                                    ack(parts[0], parts[0].worker(), parts[0].attempt(), false));
    CHECK(v.applies);
    CHECK_FALSE(v.voted);
    CHECK(rc.CommitVotes(*rec2) == 0);
    // The worker's own partition, another attempt: ignored, but it votes.
    v = loft::sched::RecordAckVotes(rc, ledger, parts[0].worker(),
                                    ack(parts[0], parts[0].worker(), parts[0].attempt() + 1, true));
    CHECK_FALSE(v.applies);
    CHECK(v.voted);
    // Its open attempt: applies and votes; two of the other workers named parts[2].
    v = loft::sched::RecordAckVotes(rc, ledger, parts[1].worker(),
                                    ack(parts[1], parts[1].worker(), parts[1].attempt(), true));
    CHECK(v.applies);
    CHECK(v.voted);
    CHECK(v.dropped == 0);
    CHECK(rc.CommitVotes(*rec2) > 0);
  }
}

TEST_CASE("distrust: a peer reported by f+1 distinct nodes stops being a source, once",
          "[rules][poisoning]") {
  auto d = Driver(5);
  auto reports = loft::sched::PoisonReports::Create(nullptr);
  REQUIRE(reports.ok());
  // A partition of `worker` reading from every node.
  auto rec = [](int32_t worker) {
    loft::sched::PartitionRecord r;
    r.partition.set_worker(worker);
    for (int32_t n = 0; n < 5; ++n) {
      r.partition.add_sample_ids(static_cast<uint64_t>(n));
      r.partition.add_sources(n);
    }
    return r;
  };
  std::vector<std::pair<int32_t, int32_t>> distrusted;  // (peer, reporters)
  auto report = [&](int32_t reporter, int32_t peer) {
    loft::v1::PartitionFailed f;
    f.set_partition_id(static_cast<uint64_t>(10 + reporter));
    f.set_node(reporter);
    f.add_poisoned_by(peer);
    f.add_poisoned_samples(1);
    const auto r = rec(reporter);
    reports->Record(reporter, f, 5, &r);
    REQUIRE(loft::sched::DistrustReported(*d, *reports, f, /*tolerance=*/1, 5,
                                          [&](int32_t p, int32_t n, loft::sched::Updates&& u) {
                                            CHECK_FALSE(u.empty());
                                            distrusted.emplace_back(p, n);
                                            return loft::OkStatus();
                                          })
                .ok());
  };
  report(0, 4);
  report(0, 4);  // the same reporter again: still one
  CHECK(distrusted.empty());
  CHECK_FALSE(d->state().distrusted(4));
  report(1, 4);
  CHECK(distrusted == std::vector<std::pair<int32_t, int32_t>>{{4, 2}});
  CHECK(d->state().distrusted(4));
  report(2, 4);  // already distrusted: nothing more
  CHECK(distrusted.size() == 1);
  CHECK_FALSE(d->state().distrusted(3));
}

TEST_CASE("commit for a worker: only a known partition the ring applied, as its open attempt's ack",
          "[rules][ring]") {
  auto d = Driver(3);
  auto parts = PlanAndSend(*d, 1);
  REQUIRE(parts.size() == 3);
  const auto& ledger = d->state().ledger();
  loft::sched::RingCommitter rc;
  const int64_t it = parts[0].iteration();
  rc.OnPlanned(it, 3);
  loft::v1::TrainingReport named;
  named.add_applied_partitions(parts[1].id());
  named.add_applied_nodes(parts[1].worker());
  for (const auto& p : parts) {
    if (p.worker() != parts[1].worker()) REQUIRE(rc.RecordVotes(ledger, it, p.worker(), named) == 0);
  }
  // Not applied, or unknown: nothing changes.
  auto none = loft::sched::CommitForWorker(*d, rc, parts[0].id(), 2);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  auto unknown = loft::sched::CommitForWorker(*d, rc, ledger.last_id() + 100, 2);
  REQUIRE(unknown.ok());
  CHECK_FALSE(unknown->has_value());
  CHECK(ledger.Find(parts[0].id())->state != loft::sched::PartitionState::kDone);
  // Applied: committed for its worker.
  auto c = loft::sched::CommitForWorker(*d, rc, parts[1].id(), 2);
  REQUIRE(c.ok());
  REQUIRE(c->has_value());
  CHECK((*c)->worker == parts[1].worker());
  CHECK((*c)->iteration == it);
  CHECK((*c)->votes == 2);
  CHECK_FALSE((*c)->updates.empty());
  CHECK(ledger.Find(parts[1].id())->state == loft::sched::PartitionState::kDone);
}

TEST_CASE("registration: an alive node's ring-applied partitions are committed, the rest fail",
          "[rules][ring][admission]") {
  auto d = Driver(3);
  auto parts = PlanAndSend(*d, 1);
  REQUIRE(parts.size() == 3);
  const auto& ledger = d->state().ledger();
  loft::sched::RingCommitter rc;
  const int64_t it = parts[0].iteration();
  rc.OnPlanned(it, 3);
  loft::v1::TrainingReport named;
  named.add_applied_partitions(parts[1].id());
  named.add_applied_nodes(parts[1].worker());
  for (const auto& p : parts) {
    if (p.worker() != parts[1].worker()) REQUIRE(rc.RecordVotes(ledger, it, p.worker(), named) == 0);
  }
  std::vector<uint64_t> committed;
  auto commit = [&](uint64_t id) {
    committed.push_back(id);
    auto c = loft::sched::CommitForWorker(*d, rc, id, 2);
    REQUIRE(c.ok());
    return loft::OkStatus();
  };
  // parts[0]'s worker: nothing of its own the ring applied; its partition fails.
  auto u = loft::sched::Register(*d, rc, parts[0].worker(), 2, commit);
  REQUIRE(u.ok());
  CHECK(committed.empty());
  CHECK(ledger.Find(parts[0].id())->state == loft::sched::PartitionState::kFailed);
  // parts[1]'s worker: the ring applied it, committed before the registration.
  u = loft::sched::Register(*d, rc, parts[1].worker(), 3, commit);
  REQUIRE(u.ok());
  CHECK(committed == std::vector<uint64_t>{parts[1].id()});
  CHECK(ledger.Find(parts[1].id())->state == loft::sched::PartitionState::kDone);
  // A dead node registering has nothing in flight to commit.
  REQUIRE(d->OnWorkerDead(2, "test", 4).ok());
  u = loft::sched::Register(*d, rc, 2, 5, commit);
  REQUIRE(u.ok());
  CHECK(committed.size() == 1);
  CHECK(d->state().alive(2));
}

namespace {
loft::v1::RegisterRequest RegisterRequestOf(uint64_t incarnation, int credits = 2,
                                            const std::string& peer = "tcp://10.0.0.1:1",
                                            const std::string& ring = "tcp://10.0.0.1:2") {
  loft::v1::RegisterRequest r;
  r.set_credits(credits);
  r.set_incarnation(incarnation);
  r.set_peer_endpoint(peer);
  r.set_ring_endpoint(ring);
  return r;
}
}  // namespace

TEST_CASE("registration rule: refused, a reconnect that changes nothing, or a new session",
          "[rules][admission][register]") {
  using loft::StatusCode;
  using loft::sched::TakeRegistration;
  auto d = Driver(3);
  auto parts = PlanAndSend(*d, 1);
  REQUIRE(parts.size() == 3);
  const auto& ledger = d->state().ledger();
  loft::sched::RingCommitter rc;
  loft::sched::AccusationBook acc;
  loft::sched::RegisterBackoff backoff;
  std::vector<uint64_t> committed;
  auto commit = [&](uint64_t id) {
    committed.push_back(id);
    return loft::OkStatus();
  };
  const int32_t node = parts[0].worker();
  // The session the engine holds: process 7, connected, these endpoints.
  const loft::sched::Session live{.connected = true,
                                  .incarnation = 7,
                                  .peer_endpoint = "tcp://10.0.0.1:1",
                                  .ring_endpoint = "tcp://10.0.0.1:2"};
  const int64_t view = d->state().view();
  // Credits outside 1..kMaxCredits: refused, nothing changed.
  for (int credits : {0, -1, static_cast<int>(loft::sched::kMaxCredits) + 1}) {
    auto r = TakeRegistration(*d, rc, acc, backoff, node, live, RegisterRequestOf(8, credits), 2, commit);
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
  }
  CHECK(d->state().view() == view);
  // The same process again, its session live: a reconnect. Nothing fails,
  // the view is unchanged, and the backoff does not count it.
  for (int i = 0; i < 5; ++i) {
    auto r = TakeRegistration(*d, rc, acc, backoff, node, live, RegisterRequestOf(7), 2 + i, commit);
    REQUIRE(r.ok());
    CHECK(r->reconnect);
    CHECK(r->wait_ms == 0);
    CHECK(r->updates.empty());
  }
  CHECK(d->state().view() == view);
  CHECK(ledger.Find(parts[0].id())->state == loft::sched::PartitionState::kSent);
  // Any one condition of a reconnect missing: a new session.
  using loft::sched::IsReconnect;
  const auto& st = d->state();
  CHECK(IsReconnect(st, node, live, RegisterRequestOf(7)));
  CHECK_FALSE(IsReconnect(st, node, live, RegisterRequestOf(8)));  // another process
  loft::sched::Session unknown = live;
  unknown.incarnation = 0;
  CHECK_FALSE(IsReconnect(st, node, unknown, RegisterRequestOf(0)));  // 0: unknown, never a reconnect
  loft::sched::Session dropped = live;
  dropped.connected = false;
  CHECK_FALSE(IsReconnect(st, node, dropped, RegisterRequestOf(7)));
  CHECK_FALSE(IsReconnect(st, node, live, RegisterRequestOf(7, 2, "tcp://10.0.0.9:1")));
  CHECK_FALSE(IsReconnect(st, node, live, RegisterRequestOf(7, 2, "tcp://10.0.0.1:1", "tcp://10.0.0.9:2")));
  // A new process: a new session; its partition in flight fails, a new view.
  auto r = TakeRegistration(*d, rc, acc, backoff, node, live, RegisterRequestOf(8), 10, commit);
  REQUIRE(r.ok());
  CHECK_FALSE(r->reconnect);
  CHECK_FALSE(r->updates.empty());
  CHECK(d->state().view() == view + 1);
  CHECK(ledger.Find(parts[0].id())->state == loft::sched::PartitionState::kFailed);
  CHECK(committed.empty());
  // Its first registration was the spec's (Driver registered it directly):
  // the backoff saw this one first (free), the next is a re-registration
  // (free), the one after it waits min_ms.
  r = TakeRegistration(*d, rc, acc, backoff, node, live, RegisterRequestOf(9), 11, commit);
  REQUIRE(r.ok());
  CHECK(r->wait_ms == 0);
  CHECK(d->state().view() == view + 2);
  r = TakeRegistration(*d, rc, acc, backoff, node, live, RegisterRequestOf(10), 12, commit);
  REQUIRE(r.ok());
  CHECK(r->wait_ms == Approx(999));
  CHECK(r->updates.empty());
  CHECK(d->state().view() == view + 2);  // refused: nothing changed
  // A dead node comes back by registering.
  REQUIRE(d->OnWorkerDead(node, "test", 20).ok());
  REQUIRE_FALSE(d->state().alive(node));
  r = TakeRegistration(*d, rc, acc, backoff, node, live, RegisterRequestOf(7), 1011, commit);
  REQUIRE(r.ok());
  CHECK_FALSE(r->reconnect);  // its session's process, but the node is dead
  CHECK(d->state().alive(node));
  // Evicted: refused first, whatever else holds (even bad credits).
  REQUIRE(acc.Report(parts[1].worker(), node, 0));
  CHECK(TakeRegistration(*d, rc, acc, backoff, node, live, RegisterRequestOf(7), 1012, commit)
            .status()
            .code() == StatusCode::kPermissionDenied);
  CHECK(TakeRegistration(*d, rc, acc, backoff, node, live, RegisterRequestOf(11), 99999, commit)
            .status()
            .code() == StatusCode::kPermissionDenied);
}

TEST_CASE("peer reports: which count, silence against accusations", "[rules][accusations]") {
  using loft::StatusCode;
  using loft::sched::TakePeerReport;
  auto d = Driver(4);
  auto report = [](int32_t accused, const std::string& reason) {
    loft::v1::PeerReport pr;
    pr.set_accused(accused);
    pr.set_reason(reason);
    pr.set_count(1);
    return pr;
  };
  loft::sched::AccusationBook book;
  // Outside the cluster, or the reporter itself: refused, counts for nothing.
  CHECK(TakePeerReport(book, d->state(), 0, report(-1, "chunk_mismatch"), 0).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(TakePeerReport(book, d->state(), 0, report(4, "chunk_mismatch"), 0).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(TakePeerReport(book, d->state(), 2, report(2, "silent"), 0).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(book.reporters(2) == 0);
  // An accusation: f+1 distinct reporters evict (f = 1: two).
  auto r = TakePeerReport(book, d->state(), 0, report(3, "chunk_mismatch"), 1);
  REQUIRE(r.ok());
  CHECK(*r == -1);
  CHECK(*TakePeerReport(book, d->state(), 0, report(3, "out_of_window"), 1) == -1);  // the same reporter
  CHECK(*TakePeerReport(book, d->state(), 1, report(3, "malformed_hello"), 1) == 3);
  CHECK(book.evicted(3));
  CHECK(*TakePeerReport(book, d->state(), 2, report(3, "chunk_mismatch"), 1) == -1);  // once
  // Silence: a majority of the other live members (4 live, f = 0: two),
  // not f+1 = 1 as an accusation would take.
  loft::sched::AccusationBook quiet;
  CHECK(*TakePeerReport(quiet, d->state(), 0, report(2, "silent"), 0) == -1);
  CHECK_FALSE(quiet.evicted(2));
  CHECK(*TakePeerReport(quiet, d->state(), 1, report(2, "silent"), 0) == 2);
  // A reporter that hears none of the state's live members is the one evicted.
  loft::sched::AccusationBook deaf;
  CHECK(*TakePeerReport(deaf, d->state(), 3, report(0, "silent"), 0) == -1);
  CHECK(*TakePeerReport(deaf, d->state(), 3, report(1, "silent"), 0) == -1);
  CHECK(*TakePeerReport(deaf, d->state(), 3, report(2, "silent"), 0) == 3);
  // The live members are the state's: with 2 of 4 dead, silence evicts nobody.
  REQUIRE(d->OnWorkerDead(2, "test", 1).ok());
  REQUIRE(d->OnWorkerDead(3, "test", 1).ok());
  loft::sched::AccusationBook two;
  CHECK(*TakePeerReport(two, d->state(), 0, report(1, "silent"), 0) == -1);
  CHECK_FALSE(two.evicted(1));
}

TEST_CASE("send side of a session: a departure closes the window and drops the queue, a new session opens it",
          "[rules][flow]") {
  loft::sched::SendQueues q(3);
  q.StartSession(1, 2);
  CHECK(q.window(1).credits == 2);
  CHECK(q.window(1).window == 2);
  q.Push(1, 10);
  q.Push(1, 11);
  q.Push(1, 12);
  std::vector<uint64_t> sent;
  auto stream = [&] {
    REQUIRE(q.Stream([](int32_t, uint64_t) { return loft::sched::SendQueues::Offer::kSend; },
                     [&](int32_t, uint64_t id) {
                       sent.push_back(id);
                       return loft::OkStatus();
                     })
                .ok());
  };
  stream();
  CHECK(sent == std::vector<uint64_t>{10, 11});  // two credits
  CHECK(q.window(1).in_flight == 2);
  // It leaves: nothing in flight, no credit, its queue gone.
  q.Depart(1);
  CHECK(q.window(1).credits == 0);
  CHECK(q.window(1).in_flight == 0);
  CHECK(q.queued(1) == 0);
  q.Push(1, 13);
  q.Depart(1);
  // Its new session: a full window of the registration's credits, an empty queue.
  q.StartSession(1, 3);
  CHECK(q.window(1).credits == 3);
  CHECK(q.window(1).in_flight == 0);
  CHECK(q.queued(1) == 0);
  CHECK(q.empty());
  q.Push(1, 14);
  q.StartSession(1, 1);  // a re-registration drops what was queued for the old one
  CHECK(q.queued(1) == 0);
  stream();
  CHECK(sent == std::vector<uint64_t>{10, 11});
}
