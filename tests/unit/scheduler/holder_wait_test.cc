// Dead and evicted holders (scheduler/holder_wait.h, WorkerEvicted): an
// evicted node's samples are left out at once and for good; a crashed
// node's are waited for until spec scheduler.holder_wait_s, then left out of
// their epoch only. Replay rebuilds both.
#include "scheduler/holder_wait.h"

#include <catch2/catch.hpp>
#include <string>

#include "scheduler/driver.h"
#include "state_fakes.h"

using loft::sched::CheckHolderWait;
using loft::sched::JobDriver;
using loft::sched::StateOptions;
using loft::sched::Updates;
using loft::sched::testing::FakePolicy;
using loft::sched::testing::SmallSpec;
using loft::sched::testing::TimedDone;

namespace {

struct Harness {
  std::unique_ptr<JobDriver> drv;
  Updates journal;
  double now = 0;

  void Take(const loft::StatusOr<Updates>& u) {
    INFO(u.status().ToString());
    REQUIRE(u.ok());
    journal.insert(journal.end(), u->begin(), u->end());
  }
  // Plans and completes iterations until `done` or the guard; returns the
  // iterations planned.
  template <typename Done>
  int Run(Done done, int guard = 200) {
    int planned = 0;
    for (int i = 0; i < guard && !done(); ++i) {
      now += 10;
      auto u = drv->PlanNextIteration(now);
      Take(u);
      for (const auto& p : JobDriver::PartitionsToSend(*u)) {
        ++planned;
        Take(drv->OnPartitionSent(p.id(), p.attempt(), now));
        Take(drv->OnPartitionDone(TimedDone(p, drv->state()), now + 1));
      }
    }
    return planned;
  }
};

Harness Start(loft::ClusterSpec spec) {
  Harness h;
  auto d = JobDriver::CreateWithPolicy(spec, std::make_unique<FakePolicy>(true), StateOptions{});
  REQUIRE(d.ok());
  h.drv = std::move(*d);
  for (int i = 0; i < spec.num_nodes(); ++i) h.Take(h.drv->RegisterWorker(i, 0));
  return h;
}

}  // namespace

TEST_CASE("An evicted holder's samples are left out for good, and training goes on", "[holder_wait]") {
  auto spec = SmallSpec(600, 1, 64);
  Harness h = Start(spec);
  const auto& st = h.drv->state();
  h.Run([&] { return st.next_iteration() >= 2; });
  const int64_t held = st.sampler().available(5);
  REQUIRE(held > 0);
  h.Take(h.drv->OnWorkerEvicted(5, "reported by its ring", h.now));
  CHECK(st.evicted(5));
  CHECK_FALSE(st.alive(5));
  CHECK(st.lost_to_eviction() == held);
  CHECK(st.unavailable() == held);
  // Epochs complete without node 5's shard; each later epoch loses it whole.
  h.Run([&] { return st.ledger().counters().epochs_completed >= 3; });
  REQUIRE(st.ledger().counters().epochs_completed >= 3);
  const int64_t shard = static_cast<int64_t>(st.placement().num_samples()) - [&] {
    int64_t others = 0;
    for (uint64_t id = 0; id < static_cast<uint64_t>(st.placement().num_samples()); ++id)
      others += st.placement().Holds(5, id) ? 0 : 1;
    return others;
  }();
  CHECK(st.lost_to_eviction() >= held + 2 * shard);
  CHECK(st.ledger().counters().duplicates == 0);
  CHECK(st.held_out() == 0);  // nothing was waited for
  // Evicting again changes nothing; replay rebuilds the same state.
  auto again = h.drv->OnWorkerEvicted(5, "again", h.now);
  REQUIRE(again.ok());
  CHECK(again->empty());
  auto replayed =
      JobDriver::RecoverWithPolicy(spec, std::make_unique<FakePolicy>(true), StateOptions{}, h.journal);
  REQUIRE(replayed.ok());
  CHECK((*replayed)->state().ToJson() == st.ToJson());
  CHECK(st.ToJson().find("\"lost_to_eviction\"") != std::string::npos);
}

TEST_CASE("A crashed holder is waited for until holder_wait_s, then its samples leave the epoch",
          "[holder_wait]") {
  auto spec = SmallSpec(600, 1, 64);
  spec.scheduler.holder_wait_s = 5;
  Harness h = Start(spec);
  const auto& st = h.drv->state();
  h.Run([&] { return st.next_iteration() >= 2; });
  h.Take(h.drv->OnWorkerDead(5, "missed heartbeats", h.now));
  const double died = h.now;
  // Train what the live nodes hold; then planning waits.
  h.Run([&] { return !h.drv->BlockedReason().empty(); });
  REQUIRE_FALSE(h.drv->BlockedReason().empty());
  CHECK_THAT(h.drv->BlockedReason(),
             Catch::Contains("held only by dead nodes") && Catch::Contains("scheduler.holder_wait_s = 5 s"));
  auto w = CheckHolderWait(st, died + 4000);
  CHECK(w.waiting);
  CHECK(w.dead_holders == std::vector<int32_t>{5});
  CHECK(w.samples == st.sampler().available(5));
  CHECK(w.waited_ms == Approx(4000));
  CHECK(w.limit_ms == 5000);
  CHECK_FALSE(w.expired());
  // Before the limit: still blocked, nothing held out.
  auto early = h.drv->PlanNextIteration(died + 4000);
  h.Take(early);
  CHECK(JobDriver::PartitionsToSend(*early).empty());
  CHECK(st.held_out() == 0);
  // At the limit: left out of the epoch, the epoch completes, the next one is planned.
  const int64_t waiting = w.samples;
  h.now = died + 5000;
  auto late = h.drv->PlanNextIteration(h.now);
  h.Take(late);
  CHECK(st.held_out() == waiting);
  CHECK(st.epoch() == 1);
  CHECK_FALSE(JobDriver::PartitionsToSend(*late).empty());
  // Node 5 is back: its samples are trained in epoch 1, nothing more held out.
  h.Take(h.drv->OnWorkerAlive(5, h.now));
  for (const auto& p : JobDriver::PartitionsToSend(*late)) {
    h.Take(h.drv->OnPartitionSent(p.id(), p.attempt(), h.now));
    h.Take(h.drv->OnPartitionDone(TimedDone(p, st), h.now + 1));
  }
  h.Run([&] { return st.ledger().counters().epochs_completed >= 2; });
  CHECK(st.ledger().counters().epochs_completed == 2);
  CHECK(st.held_out() == waiting);
  CHECK(st.lost_to_eviction() == 0);
  auto replayed =
      JobDriver::RecoverWithPolicy(spec, std::make_unique<FakePolicy>(true), StateOptions{}, h.journal);
  REQUIRE(replayed.ok());
  CHECK((*replayed)->state().ToJson() == st.ToJson());
  // A snapshot carries the counters and the death time.
  auto fresh = JobDriver::CreateWithPolicy(spec, std::make_unique<FakePolicy>(true), StateOptions{});
  REQUIRE(fresh.ok());
  REQUIRE((*fresh)->Restore(st.ToSnapshot()).ok());
  CHECK((*fresh)->state().ToJson() == st.ToJson());
  CHECK((*fresh)->state().dead_since_ms(5) == died);
}

TEST_CASE("Holder wait: nothing is left out with every node dead, nor epoch after epoch with nothing trained",
          "[holder_wait]") {
  // Node 1 holds nothing (explicit shares), node 0 everything; no wait.
  auto parsed = loft::ParseClusterSpec(
      "dataset: {name: t, samples: 120, sample_bytes: 100}\n"
      "placement: {kind: explicit, shares: [1, 0]}\n"
      "training: {global_batch: 60, min_batch: 1, seed: 3}\n"
      "scheduler: {holder_wait_s: 0}\n"
      "nodes:\n  - name: n\n    count: 2\n");
  REQUIRE(parsed.ok());
  Harness h = Start(*parsed);
  const auto& st = h.drv->state();
  h.Take(h.drv->OnWorkerDead(0, "x", 0));
  h.Take(h.drv->OnWorkerDead(1, "x", 0));
  CHECK_FALSE(CheckHolderWait(st, 1e9).waiting);  // nobody live: nothing would be trained anyway
  h.Take(h.drv->PlanNextIteration(1e9));
  CHECK(st.held_out() == 0);
  // Node 1 is live but holds nothing: epoch 0 is left out once, then the
  // wait holds until an iteration is planned (node 0 back).
  h.Take(h.drv->OnWorkerAlive(1, 1e9));
  for (int k = 1; k <= 5; ++k) h.Take(h.drv->PlanNextIteration(1e9 + k));
  CHECK(st.held_out() == 120);
  CHECK(st.epoch() == 1);
  auto w = CheckHolderWait(st, 2e9);
  CHECK(w.waiting);
  CHECK_FALSE(w.may_abandon);
  CHECK_FALSE(w.expired());
  h.Take(h.drv->OnWorkerAlive(0, 2e9));
  h.Run([&] { return st.ledger().counters().epochs_completed >= 2; });
  CHECK(st.ledger().counters().epochs_completed == 2);
  CHECK(st.held_out() == 120);
}
