#include "scheduler/driver.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "state_fakes.h"

using loft::sched::AckOutcome;
using loft::sched::JobDriver;
using loft::sched::PartitionState;
using loft::sched::StateOptions;
using loft::sched::Updates;
using loft::sched::testing::FailedReport;
using loft::sched::testing::FakePolicy;
using loft::sched::testing::SmallSpec;
using loft::sched::testing::TimedDone;

namespace {

struct Harness {
  std::unique_ptr<JobDriver> driver;
  Updates journal;
  void Take(const loft::StatusOr<Updates>& u) {
    INFO(u.status().ToString());
    REQUIRE(u.ok());
    journal.insert(journal.end(), u->begin(), u->end());
  }
};

// Every sample id 0..samples-1 committed exactly once in each of the
// first `epochs` epochs (`committed`: epoch -> ids of accepted dones).
void CheckExactlyOncePerEpoch(const std::map<int64_t, std::vector<uint64_t>>& committed, int epochs,
                              uint64_t samples) {
  for (int e = 0; e < epochs; ++e) {
    INFO("epoch " << e);
    auto it = committed.find(e);
    std::vector<uint64_t> ids = it == committed.end() ? std::vector<uint64_t>{} : it->second;
    std::sort(ids.begin(), ids.end());
    REQUIRE(ids.size() == samples);
    for (uint64_t i = 0; i < samples; ++i) REQUIRE(ids[i] == i);
  }
}

// Runs `epochs` epochs with random failures, timeouts, deaths, duplicate and
// stale acks; checks exactly-once per epoch and replay equality.
void RunChaos(std::unique_ptr<loft::sched::Policy> policy, int replication, uint64_t seed, int epochs,
              const char* policy_name = nullptr) {
  const auto spec = SmallSpec(600, replication, 64);
  StateOptions opt;
  opt.timeout_min_ms = 50;
  opt.timeout_factor = 3;
  auto d = JobDriver::CreateWithPolicy(spec, std::move(policy), opt);
  REQUIRE(d.ok());
  Harness h{std::move(d).value(), {}};
  JobDriver& drv = *h.driver;
  const auto& st = drv.state();
  const int nodes = spec.num_nodes();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> U(0, 1);
  double now = 0;
  for (int i = 0; i < nodes; ++i) h.Take(drv.RegisterWorker(i, now));

  std::map<int64_t, std::vector<uint64_t>> committed;  // epoch -> ids (accepted dones)
  int64_t ignored_sent_by_test = 0;
  int64_t dead_count = 0;
  int guard = 0;
  while (st.ledger().counters().epochs_completed < epochs && ++guard < 5000) {
    now += 10;
    // Revive dead workers now and then.
    for (int i = 0; i < nodes; ++i) {
      if (!st.alive(i) && U(rng) < 0.4) {
        h.Take(drv.OnWorkerAlive(i, now));
        --dead_count;
      }
    }
    auto planned = drv.PlanNextIteration(now);
    h.Take(planned);
    auto parts = JobDriver::PartitionsToSend(*planned);
    if (parts.empty()) {
      INFO(drv.BlockedReason());
      REQUIRE_FALSE(drv.BlockedReason().empty());
      // Blocked: everything held by dead nodes or in flight. Revive all.
      for (int i = 0; i < nodes; ++i) {
        if (!st.alive(i)) {
          h.Take(drv.OnWorkerAlive(i, now));
          --dead_count;
        }
      }
      continue;
    }
    for (const auto& p : parts) {
      // Planned partitions use live holders as sources.
      for (int k = 0; k < p.sample_ids_size(); ++k) {
        REQUIRE(st.placement().Holds(p.sources(k), p.sample_ids(k)));
        REQUIRE(st.alive(p.sources(k)));
      }
      if (p.parent() != 0) {
        const auto* parent = st.ledger().Find(p.parent());
        REQUIRE(parent != nullptr);
        CHECK(p.attempt() == parent->partition.attempt() + 1);
        std::set<uint64_t> ps(parent->partition.sample_ids().begin(), parent->partition.sample_ids().end());
        for (uint64_t id : p.sample_ids()) CHECK(ps.count(id) == 1);
      }
      h.Take(drv.OnPartitionSent(p.id(), p.attempt(), now));
    }
    for (const auto& p : parts) {
      const double r = U(rng);
      const auto* rec = st.ledger().Find(p.id());
      const bool terminal_before = rec == nullptr || loft::sched::IsTerminal(rec->state);
      if (r < 0.03 && dead_count < 2 && st.alive(p.worker())) {
        h.Take(drv.OnWorkerDead(p.worker(), "chaos", now));
        ++dead_count;
        continue;
      }
      if (r < 0.12) {
        loft::v1::PartitionFailed f = FailedReport(p, "chaos");
        h.Take(drv.OnPartitionFailed(f, now));
        if (terminal_before) ++ignored_sent_by_test;
        // A late ack of the failed attempt must be ignored.
        if (U(rng) < 0.5) {
          h.Take(drv.OnPartitionDone(TimedDone(p, st), now));
          ++ignored_sent_by_test;
        }
        continue;
      }
      if (r < 0.17) continue;  // lost in transit: will time out
      h.Take(drv.OnPartitionDone(TimedDone(p, st), now + 1));
      if (terminal_before) {
        ++ignored_sent_by_test;
      } else {
        committed[p.epoch()].insert(committed[p.epoch()].end(), p.sample_ids().begin(), p.sample_ids().end());
      }
      if (U(rng) < 0.1) {  // duplicate ack
        h.Take(drv.OnPartitionDone(TimedDone(p, st), now + 2));
        ++ignored_sent_by_test;
      }
    }
    // Anything still in flight times out.
    now += 1000;
    h.Take(drv.CheckTimeouts(now));
    CHECK(drv.IterationComplete());
  }
  REQUIRE(st.ledger().counters().epochs_completed == epochs);
  CheckExactlyOncePerEpoch(committed, epochs, 600);
  const auto& c = st.ledger().counters();
  CHECK(c.duplicates == 0);
  CHECK(c.lost == 0);
  CHECK(c.samples_committed == epochs * 600);
  CHECK(c.retries > 0);
  CHECK(c.failed > 0);
  CHECK(c.timed_out > 0);
  CHECK(st.view() > nodes);  // some workers died and came back
  CHECK(st.rejected_observations() == 0);
  if (policy_name == nullptr || std::string(policy_name) == "uniform") CHECK(st.policy_failures() == 0);
  if (std::getenv("LOFT_STATE_TEST_VERBOSE") != nullptr) {
    WARN((policy_name ? policy_name : "fake") << ": iterations " << st.next_iteration() << " policy failures "
                                              << st.policy_failures() << " retries " << c.retries);
  }
  CHECK(c.acks_ignored >= ignored_sent_by_test);

  // Replay from the recorded updates rebuilds identical state.
  auto replayed = policy_name != nullptr
                      ? JobDriver::Recover(spec, policy_name, opt, h.journal)
                      : JobDriver::RecoverWithPolicy(
                            spec, std::make_unique<FakePolicy>(st.policy().locality_aware()), opt, h.journal);
  REQUIRE(replayed.ok());
  CHECK((*replayed)->state().ToJson() == st.ToJson());
  CHECK((*replayed)->state().Digest() == st.Digest());
}

}  // namespace

TEST_CASE("JobDriver: exactly once per epoch under chaos (shuffle, r=1)", "[driver]") {
  RunChaos(std::make_unique<FakePolicy>(false), 1, 1, 3);
}
TEST_CASE("JobDriver: exactly once per epoch under chaos (shuffle, r=2)", "[driver]") {
  RunChaos(std::make_unique<FakePolicy>(false), 2, 2, 3);
}
TEST_CASE("JobDriver: exactly once per epoch under chaos (locality, r=1)", "[driver]") {
  RunChaos(std::make_unique<FakePolicy>(true), 1, 3, 3);
}
TEST_CASE("JobDriver: exactly once per epoch under chaos (locality, r=2)", "[driver]") {
  RunChaos(std::make_unique<FakePolicy>(true), 2, 4, 3);
}

TEST_CASE("JobDriver: exactly once per epoch under chaos with the real policies", "[driver]") {
  for (const char* name : {"uniform", "loft"}) {
    for (int r : {1, 2}) {
      DYNAMIC_SECTION(name << " r=" << r) {
        auto p = loft::sched::MakePolicy(name);
        REQUIRE(p.ok());
        RunChaos(std::move(p).value(), r, 17 + r, 2, name);
      }
    }
  }
}

TEST_CASE("JobDriver: journal-before-act ordering and blocked reasons", "[driver]") {
  const auto spec = SmallSpec(100, 1, 32, 4);
  StateOptions one_epoch;  // an epoch starts only once the previous one is committed
  one_epoch.overlap_epochs = false;
  auto d = JobDriver::CreateWithPolicy(spec, std::make_unique<FakePolicy>(false), one_epoch);
  REQUIRE(d.ok());
  JobDriver& drv = **d;
  // No live worker: nothing planned, reason given, no updates.
  auto none = drv.PlanNextIteration(0);
  REQUIRE(none.ok());
  CHECK(none->empty());
  CHECK(drv.BlockedReason().find("no live workers") != std::string::npos);
  for (int i = 0; i < 4; ++i) REQUIRE(drv.RegisterWorker(i, 0).ok());
  CHECK(drv.state().view() == 4);
  CHECK(drv.OnWorkerAlive(1, 0)->empty());  // already alive: no update
  CHECK(drv.RegisterWorker(7, 0).status().code() == loft::StatusCode::kInvalidArgument);
  // Plan the whole epoch without acking: 32+32+32+4, then blocked on in-flight.
  std::vector<int64_t> sizes;
  for (int k = 0; k < 4; ++k) {
    auto u = drv.PlanNextIteration(k);
    REQUIRE(u.ok());
    REQUIRE(u->size() == 1);
    REQUIRE(u->front().has_iteration_planned());
    sizes.push_back(u->front().iteration_planned().global_batch());
  }
  CHECK(sizes == std::vector<int64_t>{32, 32, 32, 4});
  auto blocked = drv.PlanNextIteration(10);
  REQUIRE(blocked.ok());
  CHECK(blocked->empty());
  CHECK(drv.BlockedReason().find("in flight") != std::string::npos);
  // Killing node 0 fails its partitions and those reading from it.
  auto dead = drv.OnWorkerDead(0, "test", 11);
  REQUIRE(dead.ok());
  REQUIRE(dead->size() >= 2);
  CHECK(dead->front().has_worker_dead());
  for (size_t k = 1; k < dead->size(); ++k) CHECK((*dead)[k].has_partition_failed());
  // The returned samples are replanned, except those only node 0 holds.
  auto again = drv.PlanNextIteration(12);
  REQUIRE(again.ok());
  for (const auto& p : JobDriver::PartitionsToSend(*again)) {
    CHECK(p.worker() != 0);
    CHECK(p.attempt() == 1);
    CHECK(p.parent() != 0);
    for (int32_t s : p.sources()) CHECK(s != 0);
  }
  while (true) {
    auto more = drv.PlanNextIteration(13);
    REQUIRE(more.ok());
    if (more->empty()) break;
  }
  const int64_t only0 = drv.state().sampler().pooled();
  CHECK(only0 == drv.state().sampler().available(0));
  if (only0 > 0) CHECK(drv.BlockedReason().find("dead") != std::string::npos);
}

TEST_CASE("JobDriver: a distrusted source serves only itself, epochs still complete", "[driver][byzantine]") {
  for (const char* policy : {"uniform", "loft"}) {
    for (int replication : {1, 2}) {
      for (const int32_t kBad : {2, 5}) {  // 5: the last node (uniform gives it no remainder)
        INFO(policy << " replication " << replication << " distrusted " << kBad);
        const auto spec = SmallSpec(600, replication, 64);
        StateOptions opt;
        auto d = JobDriver::Create(spec, policy, opt);
        REQUIRE(d.ok());
        Harness h{std::move(d).value(), {}};
        JobDriver& drv = *h.driver;
        const auto& st = drv.state();
        double now = 0;
        for (int i = 0; i < spec.num_nodes(); ++i) h.Take(drv.RegisterWorker(i, now));
        int64_t served_by_bad_before = 0, read_by_others_after = 0;
        bool distrusted = false;
        std::set<uint64_t> committed;
        for (int guard = 0; st.ledger().counters().epochs_completed < 2 && guard < 2000; ++guard) {
          now += 10;
          if (st.next_iteration() == 1 && !distrusted) {
            auto u = drv.DistrustSource(kBad, 1, now);
            h.Take(u);
            REQUIRE(u->size() == 1);
            CHECK(drv.DistrustSource(kBad, 1, now)->empty());  // once
            distrusted = true;
          }
          auto planned = drv.PlanNextIteration(now);
          h.Take(planned);
          auto parts = JobDriver::PartitionsToSend(*planned);
          REQUIRE_FALSE(parts.empty());
          for (const auto& p : parts) {
            for (int k = 0; k < p.sample_ids_size(); ++k) {
              if (p.worker() == kBad || p.sources(k) != kBad) continue;
              (distrusted ? read_by_others_after : served_by_bad_before)++;
            }
            h.Take(drv.OnPartitionSent(p.id(), p.attempt(), now));
            // The first iteration's partitions reading from kBad fail (their
            // worker refused forged samples); the retries avoid kBad.
            const bool from_bad = std::find_if(p.sources().begin(), p.sources().end(), [&](int32_t s) {
                                    return s == kBad && p.worker() != kBad;
                                  }) != p.sources().end();
            if (from_bad) {
              loft::v1::PartitionFailed f = FailedReport(p, "poisoned");
              h.Take(drv.OnPartitionFailed(f, now));
            } else {
              h.Take(drv.OnPartitionDone(TimedDone(p, st), now + 1));
              if (p.epoch() == 0) committed.insert(p.sample_ids().begin(), p.sample_ids().end());
            }
          }
        }
        REQUIRE(st.ledger().counters().epochs_completed == 2);
        CHECK(committed.size() == 600);
        CHECK(st.ledger().counters().lost == 0);
        CHECK(st.ledger().counters().duplicates == 0);
        if (std::string(policy) == "uniform" && kBad == 2)
          CHECK(served_by_bad_before > 0);  // attacks something
        CHECK(read_by_others_after == 0);
        CHECK(st.distrusted(kBad));
        CHECK_FALSE(st.distrusted(0));
        // With one replica, kBad's samples are trained by kBad alone.
        if (replication == 1) CHECK(st.distrusted_reads_committed() > 0);
        auto replayed = JobDriver::Recover(spec, policy, opt, h.journal);
        REQUIRE(replayed.ok());
        CHECK((*replayed)->state().ToJson() == st.ToJson());
        CHECK((*replayed)->state().ToJson().find("\"distrusted\"") != std::string::npos);
      }
    }
  }
}

TEST_CASE("SchedulerState: a plan naming a distrusted source for another worker is refused",
          "[driver][byzantine]") {
  const auto spec = SmallSpec(600, 1, 64);
  auto d = JobDriver::Create(spec, "uniform", {});
  REQUIRE(d.ok());
  JobDriver& drv = **d;
  for (int i = 0; i < spec.num_nodes(); ++i) REQUIRE(drv.RegisterWorker(i, 0).ok());
  // Plan without distrust, then distrust a source the plan used and apply
  // the same plan to a fresh state that has the distrust: refused.
  auto planned = drv.PlanNextIteration(1);
  REQUIRE(planned.ok());
  const auto parts = JobDriver::PartitionsToSend(*planned);
  int32_t src = -1;
  for (const auto& p : parts)
    for (int32_t s : p.sources())
      if (s != p.worker()) src = s;
  REQUIRE(src >= 0);
  auto policy = loft::sched::MakePolicy("uniform");
  REQUIRE(policy.ok());
  auto made = loft::sched::SchedulerState::Create(spec, std::move(policy).value(), {});
  REQUIRE(made.ok());
  loft::sched::SchedulerState& st = **made;
  for (int i = 0; i < spec.num_nodes(); ++i) {
    loft::v1::StateUpdate r;
    r.mutable_worker_registered()->set_node(i);
    r.mutable_worker_registered()->set_view(i + 1);
    REQUIRE(st.Apply(r).ok());
  }
  loft::v1::StateUpdate distrust;
  distrust.mutable_source_distrusted()->set_node(src);
  REQUIRE(st.Apply(distrust).ok());
  const loft::Status s = st.Apply(planned->front());
  CHECK(s.code() == loft::StatusCode::kInvalidArgument);
  CHECK(s.message().find("distrusted") != std::string::npos);
  loft::v1::StateUpdate bad;
  bad.mutable_source_distrusted()->set_node(99);
  CHECK(st.Apply(bad).code() == loft::StatusCode::kInvalidArgument);
  bad.mutable_source_distrusted()->set_node(src);
  CHECK(st.Apply(bad).code() == loft::StatusCode::kFailedPrecondition);  // already
}

TEST_CASE("JobDriver: the last samples held only by a distrusted node are left to it",
          "[driver][byzantine]") {
  // Node 3 holds half the data (replication 1) and is distrusted: nobody
  // else may read its samples. At the epoch's end fewer samples are left
  // than workers, and uniform gives the remainder to the first workers:
  // node 3 must still get its own, or the epoch never ends.
  auto spec = loft::ParseClusterSpec(
      "dataset: {name: test, samples: 603, sample_bytes: 1000}\n"
      "placement: {kind: explicit, shares: [1, 1, 1, 3], replication: 1}\n"
      "training: {global_batch: 64, min_batch: 1, overlap: false, seed: 3}\n"
      "nodes:\n  - name: n\n    count: 4\n",
      "distrust-end.yaml");
  REQUIRE(spec.ok());
  auto d = JobDriver::Create(*spec, "uniform", {});
  REQUIRE(d.ok());
  Harness h{std::move(d).value(), {}};
  JobDriver& drv = *h.driver;
  const auto& st = drv.state();
  for (int i = 0; i < 4; ++i) h.Take(drv.RegisterWorker(i, 0));
  h.Take(drv.DistrustSource(3, 1, 0));
  double now = 0;
  int64_t smallest = 64;
  for (int guard = 0; st.ledger().counters().epochs_completed < 1 && guard < 500; ++guard) {
    now += 10;
    auto planned = drv.PlanNextIteration(now);
    h.Take(planned);
    auto parts = JobDriver::PartitionsToSend(*planned);
    INFO(drv.BlockedReason());
    REQUIRE_FALSE(parts.empty());
    int64_t n = 0;
    for (const auto& p : parts) {
      n += p.sample_ids_size();
      for (int k = 0; k < p.sample_ids_size(); ++k) CHECK((p.sources(k) != 3 || p.worker() == 3));
      h.Take(drv.OnPartitionSent(p.id(), p.attempt(), now));
      h.Take(drv.OnPartitionDone(TimedDone(p, st), now + 1));
    }
    smallest = std::min(smallest, n);
  }
  CHECK(st.ledger().counters().epochs_completed == 1);
  CHECK(smallest < 4);  // the case above happened
  CHECK(st.distrusted_reads_committed() ==
        static_cast<int64_t>(st.placement().SamplesOf(3).size()));  // by itself
}

namespace {

// Like RunChaos, but planning ahead as the daemon does: each round plans
// one iteration and resolves only the partitions planned in earlier
// rounds, so an epoch's last partitions are in flight when the next
// epoch's first iteration is planned (two epochs open). Lost partitions
// time out on their own deadlines. Checks exactly-once per epoch, that
// two epochs really were open, that failed partitions of the older epoch
// were retried from its own pool, and replay equality.
void RunPipelinedChaos(const char* policy_name, int replication, uint64_t seed, int epochs) {
  const auto spec = SmallSpec(600, replication, 64);
  StateOptions opt;
  opt.timeout_min_ms = 50;
  opt.timeout_factor = 3;
  auto made = JobDriver::Create(spec, policy_name, opt);
  REQUIRE(made.ok());
  Harness h{std::move(made).value(), {}};
  JobDriver& drv = *h.driver;
  const auto& st = drv.state();
  const int nodes = spec.num_nodes();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> U(0, 1);
  double now = 0;
  for (int i = 0; i < nodes; ++i) h.Take(drv.RegisterWorker(i, now));
  std::map<int64_t, std::vector<uint64_t>> committed;  // epoch -> ids (accepted dones)
  std::vector<loft::v1::Partition> in_flight;          // planned in earlier rounds
  int64_t rounds_two_open = 0, older_epoch_iterations = 0, early_advances = 0;
  int guard = 0;
  while (st.ledger().counters().epochs_completed < epochs && ++guard < 5000) {
    now += 10;
    for (int i = 0; i < nodes; ++i) {
      if (!st.alive(i)) h.Take(drv.OnWorkerAlive(i, now));
    }
    auto planned = drv.PlanNextIteration(now);
    h.Take(planned);
    for (const auto& u : *planned) {
      if (u.has_epoch_advanced() && st.previous_sampler() != nullptr) ++early_advances;
      if (u.has_iteration_planned() && u.iteration_planned().epoch() < st.epoch()) ++older_epoch_iterations;
    }
    auto parts = JobDriver::PartitionsToSend(*planned);
    for (const auto& p : parts) {
      const auto* rec = st.ledger().Find(p.id());
      REQUIRE(rec != nullptr);
      if (p.parent() != 0) {
        const auto* parent = st.ledger().Find(p.parent());
        REQUIRE(parent != nullptr);
        CHECK(parent->partition.epoch() == p.epoch());  // a retry stays in its epoch
      }
      h.Take(drv.OnPartitionSent(p.id(), p.attempt(), now));
    }
    if (st.previous_sampler() != nullptr) ++rounds_two_open;
    // Resolve what earlier rounds planned; this round's stay in flight.
    std::vector<loft::v1::Partition> older;
    older.swap(in_flight);
    for (const auto& p : older) {
      const double r = U(rng);
      if (r < 0.02 && st.alive(p.worker()) && st.LiveNodes().size() > 3) {
        h.Take(drv.OnWorkerDead(p.worker(), "chaos", now));
        continue;
      }
      if (r < 0.12) {
        loft::v1::PartitionFailed f = FailedReport(p, "chaos");
        h.Take(drv.OnPartitionFailed(f, now));
        continue;
      }
      if (r < 0.16) continue;  // lost in transit: times out below
      const auto* rec = st.ledger().Find(p.id());
      const bool open = rec != nullptr && !loft::sched::IsTerminal(rec->state);
      h.Take(drv.OnPartitionDone(TimedDone(p, st), now + 1));
      if (open) {
        committed[p.epoch()].insert(committed[p.epoch()].end(), p.sample_ids().begin(), p.sample_ids().end());
      }
    }
    in_flight = std::move(parts);
    h.Take(drv.CheckTimeouts(now));
  }
  REQUIRE(st.ledger().counters().epochs_completed >= epochs);
  CheckExactlyOncePerEpoch(committed, epochs, 600);
  const auto& c = st.ledger().counters();
  CHECK(c.duplicates == 0);
  CHECK(c.lost == 0);
  CHECK(c.failed > 0);
  CHECK(c.timed_out > 0);
  CHECK(early_advances >= epochs);    // each boundary crossed with the old epoch in flight
  CHECK(rounds_two_open >= epochs);   // and both held for a while
  CHECK(older_epoch_iterations > 0);  // failed samples of the old epoch were planned again
  CHECK(c.epochs_completed + (st.previous_sampler() != nullptr ? 1 : 0) == st.epoch());
  auto replayed = JobDriver::Recover(spec, policy_name, opt, h.journal);
  REQUIRE(replayed.ok());
  CHECK((*replayed)->state().ToJson() == st.ToJson());
  // A snapshot taken now restores to the same state.
  auto fresh = JobDriver::Create(spec, policy_name, opt);
  REQUIRE(fresh.ok());
  REQUIRE((*fresh)->Restore(st.ToSnapshot()).ok());
  CHECK((*fresh)->state().ToJson() == st.ToJson());
}

}  // namespace

TEST_CASE("JobDriver: two epochs open when planning ahead, exactly once per epoch under chaos", "[driver]") {
  for (const char* name : {"uniform", "loft", "loft-epoch"}) {
    for (int r : {1, 2}) {
      DYNAMIC_SECTION(name << " r=" << r) {
        RunPipelinedChaos(name, r, 31 + r, 4);
      }
    }
  }
}

TEST_CASE("JobDriver: the next epoch starts while the last partitions are in flight", "[driver]") {
  const auto spec = SmallSpec(100, 1, 32, 4);
  auto d = JobDriver::CreateWithPolicy(spec, std::make_unique<FakePolicy>(false), StateOptions{});
  REQUIRE(d.ok());
  JobDriver& drv = **d;
  const auto& st = drv.state();
  for (int i = 0; i < 4; ++i) REQUIRE(drv.RegisterWorker(i, 0).ok());
  std::vector<loft::v1::Partition> epoch0;
  for (int k = 0; k < 4; ++k) {  // 32 + 32 + 32 + 4, nothing acked
    auto u = drv.PlanNextIteration(k);
    REQUIRE(u.ok());
    for (const auto& p : JobDriver::PartitionsToSend(*u)) epoch0.push_back(p);
  }
  CHECK(st.sampler().pooled() == 0);
  CHECK(st.EpochAdvanceDue());
  // The 5th plan starts epoch 1 instead of waiting for epoch 0's acks.
  auto next = drv.PlanNextIteration(4);
  REQUIRE(next.ok());
  REQUIRE(next->size() == 2);
  CHECK((*next)[0].has_epoch_advanced());
  CHECK((*next)[0].epoch_advanced().epoch() == 1);
  REQUIRE((*next)[1].has_iteration_planned());
  CHECK((*next)[1].iteration_planned().epoch() == 1);
  CHECK((*next)[1].iteration_planned().global_batch() == 32);
  REQUIRE(st.previous_sampler() != nullptr);
  CHECK(st.previous_sampler()->epoch() == 0);
  CHECK(st.previous_sampler()->taken() == 100);
  CHECK(st.epoch() == 1);
  CHECK(st.ledger().counters().epochs_completed == 0);
  // At most two epochs: epoch 1 handed out, epoch 2 waits for epoch 0.
  for (int k = 0; k < 3; ++k) REQUIRE(drv.PlanNextIteration(5 + k).ok());
  CHECK(st.sampler().pooled() == 0);
  CHECK_FALSE(st.EpochAdvanceDue());
  auto blocked = drv.PlanNextIteration(9);
  REQUIRE(blocked.ok());
  CHECK(blocked->empty());
  CHECK(drv.BlockedReason().find("in flight") != std::string::npos);
  // A failed partition of epoch 0 goes back to epoch 0's pool and is
  // planned again in epoch 0, before anything else.
  const loft::v1::Partition failed = epoch0[1];
  loft::v1::PartitionFailed f = FailedReport(failed, "test");
  REQUIRE(drv.OnPartitionFailed(f, 10).ok());
  CHECK(st.previous_sampler()->pooled() == failed.sample_ids_size());
  auto retry = drv.PlanNextIteration(11);
  REQUIRE(retry.ok());
  REQUIRE(retry->size() == 1);
  const auto& ip = retry->front().iteration_planned();
  CHECK(ip.epoch() == 0);
  CHECK(ip.global_batch() == failed.sample_ids_size());
  std::vector<loft::v1::Partition> retries = JobDriver::PartitionsToSend(*retry);
  for (const auto& p : retries) {
    CHECK(p.epoch() == 0);
    CHECK(p.parent() == failed.id());
    CHECK(p.attempt() == 1);
  }
  // Acking epoch 0 (the retries instead of the failed one) completes it:
  // no EpochAdvanced (epoch 1 is current), one epoch counted.
  for (const auto& p : epoch0) {
    if (p.id() == failed.id()) continue;
    auto u = drv.OnPartitionDone(TimedDone(p, st), 12);
    REQUIRE(u.ok());
  }
  REQUIRE(st.previous_sampler() != nullptr);
  for (const auto& p : retries) {
    auto u = drv.OnPartitionDone(TimedDone(p, st), 13);
    REQUIRE(u.ok());
    for (const auto& x : *u) CHECK_FALSE(x.has_epoch_advanced());
  }
  CHECK(st.previous_sampler() == nullptr);
  CHECK(st.ledger().counters().epochs_completed == 1);
  CHECK(st.ledger().counters().samples_committed == 100);
  CHECK(st.ledger().counters().duplicates == 0);
  // Now epoch 2 may start (epoch 1 handed out, its partitions in flight).
  CHECK(st.EpochAdvanceDue());
}

TEST_CASE("SchedulerState: EpochAdvanced while two epochs are open is refused", "[driver]") {
  const auto spec = SmallSpec(100, 1, 50, 2);
  for (bool overlap : {true, false}) {
    INFO("overlap_epochs " << overlap);
    StateOptions opt;
    opt.overlap_epochs = overlap;
    auto d = JobDriver::CreateWithPolicy(spec, std::make_unique<FakePolicy>(false), opt);
    REQUIRE(d.ok());
    JobDriver& drv = **d;
    for (int i = 0; i < 2; ++i) REQUIRE(drv.RegisterWorker(i, 0).ok());
    REQUIRE(drv.PlanNextIteration(0).ok());
    loft::v1::StateUpdate adv;
    adv.mutable_epoch_advanced()->set_epoch(1);
    // Half the epoch still pooled: refused either way.
    auto early = drv.Replay(std::span<const loft::v1::StateUpdate>(&adv, 1));
    CHECK(early.code() == loft::StatusCode::kFailedPrecondition);
    CHECK(early.message().find("uncommitted") != std::string::npos);
    REQUIRE(drv.PlanNextIteration(1).ok());  // all handed out
    auto handed = drv.Replay(std::span<const loft::v1::StateUpdate>(&adv, 1));
    if (!overlap) {
      CHECK(handed.code() == loft::StatusCode::kFailedPrecondition);
      continue;
    }
    REQUIRE(handed.ok());
    adv.mutable_epoch_advanced()->set_epoch(2);
    for (int k = 0; k < 2; ++k) REQUIRE(drv.PlanNextIteration(2 + k).ok());
    auto third = drv.Replay(std::span<const loft::v1::StateUpdate>(&adv, 1));
    CHECK(third.code() == loft::StatusCode::kFailedPrecondition);
    CHECK(third.message().find("at most two epochs") != std::string::npos);
  }
}

TEST_CASE("SchedulerState: a snapshot with two epochs open restores, a bad previous epoch is DataLoss",
          "[driver][journal]") {
  const auto spec = SmallSpec(100, 1, 50, 2);
  auto d = JobDriver::CreateWithPolicy(spec, std::make_unique<FakePolicy>(false), StateOptions{});
  REQUIRE(d.ok());
  JobDriver& drv = **d;
  for (int i = 0; i < 2; ++i) REQUIRE(drv.RegisterWorker(i, 0).ok());
  for (int k = 0; k < 3; ++k) REQUIRE(drv.PlanNextIteration(k).ok());  // epoch 0 handed out, epoch 1 begun
  REQUIRE(drv.state().previous_sampler() != nullptr);
  const loft::v1::StateSnapshot snap = drv.state().ToSnapshot();
  REQUIRE(snap.has_previous_sampler());
  CHECK(snap.previous_sampler().epoch() == 0);
  CHECK(snap.sampler().epoch() == 1);
  auto restore = [&](const loft::v1::StateSnapshot& s) {
    auto fresh = JobDriver::CreateWithPolicy(spec, std::make_unique<FakePolicy>(false), StateOptions{});
    REQUIRE(fresh.ok());
    loft::Status st = (*fresh)->Restore(s);
    if (st.ok()) CHECK((*fresh)->state().ToJson() == drv.state().ToJson());
    return st;
  };
  CHECK(restore(snap).ok());
  loft::v1::StateSnapshot same_epoch = snap;
  same_epoch.mutable_previous_sampler()->set_epoch(1);
  loft::Status bad = restore(same_epoch);
  CHECK(bad.code() == loft::StatusCode::kDataLoss);
  CHECK(bad.message().find("previous sampler") != std::string::npos);
  loft::v1::StateSnapshot all_committed = snap;
  all_committed.mutable_previous_sampler()->set_states(std::string(100, '\2'));
  bad = restore(all_committed);
  CHECK(bad.code() == loft::StatusCode::kDataLoss);
  CHECK(bad.message().find("previous sampler") != std::string::npos);
}

TEST_CASE("SchedulerState: a partition time that is not finite is refused in a snapshot and in a plan",
          "[driver][journal]") {
  // A NaN deadline never expires (Ledger::Expired): the partition would
  // stay in flight for good. Found by fuzz_state_restore.
  const auto spec = SmallSpec(100, 1, 50, 2);
  auto fresh = [&] {
    auto d = JobDriver::CreateWithPolicy(spec, std::make_unique<FakePolicy>(false), StateOptions{});
    REQUIRE(d.ok());
    return std::move(*d);
  };
  auto drv = fresh();
  Updates journal;
  for (int i = 0; i < 2; ++i) {
    auto u = drv->RegisterWorker(i, 0);
    REQUIRE(u.ok());
    journal.insert(journal.end(), u->begin(), u->end());
  }
  auto planned = drv->PlanNextIteration(1);
  REQUIRE(planned.ok());
  journal.insert(journal.end(), planned->begin(), planned->end());

  loft::v1::StateSnapshot snap = drv->state().ToSnapshot();
  REQUIRE(snap.ledger().records_size() > 0);
  CHECK(fresh()->Restore(snap).ok());
  for (int field = 0; field < 4; ++field) {
    loft::v1::StateSnapshot bad = snap;
    auto* r = bad.mutable_ledger()->mutable_records(0);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    if (field == 0) r->set_planned_ms(nan);
    if (field == 1) r->set_sent_ms(std::numeric_limits<double>::infinity());
    if (field == 2) r->set_finished_ms(nan);
    if (field == 3) r->set_deadline_ms(nan);
    loft::Status st = fresh()->Restore(bad);
    INFO(st.ToString());
    CHECK(st.code() == loft::StatusCode::kDataLoss);
    CHECK(st.message().find("is not finite") != std::string::npos);
  }

  CHECK(fresh()->Replay(journal).ok());
  Updates bad_plan = journal;
  auto& plan = bad_plan.back();
  REQUIRE(plan.has_iteration_planned());
  plan.mutable_iteration_planned()->mutable_partitions(0)->set_deadline_ms(
      std::numeric_limits<double>::quiet_NaN());
  loft::Status st = fresh()->Replay(bad_plan);
  CHECK(st.code() == loft::StatusCode::kInvalidArgument);
  CHECK(st.message().find("deadline_ms is not finite") != std::string::npos);
  bad_plan = journal;
  bad_plan.back().mutable_iteration_planned()->set_now_ms(std::numeric_limits<double>::infinity());
  st = fresh()->Replay(bad_plan);
  CHECK(st.code() == loft::StatusCode::kInvalidArgument);
  CHECK(st.message().find("now_ms is not finite") != std::string::npos);
}

TEST_CASE("JobDriver: a sample quarantined through the previous epoch is set aside when it comes back",
          "[driver][quarantine]") {
  const auto spec = SmallSpec(100, 1, 50, 2);
  StateOptions opt;
  opt.quarantine_after = 1;
  auto d = JobDriver::CreateWithPolicy(spec, std::make_unique<FakePolicy>(false), opt);
  REQUIRE(d.ok());
  JobDriver& drv = **d;
  const auto& st = drv.state();
  for (int i = 0; i < 2; ++i) REQUIRE(drv.RegisterWorker(i, 0).ok());
  std::vector<loft::v1::Partition> e0, e1;
  for (int k = 0; k < 2; ++k) {
    auto u = drv.PlanNextIteration(k);
    REQUIRE(u.ok());
    for (const auto& p : JobDriver::PartitionsToSend(*u)) e0.push_back(p);
  }
  for (int k = 0; k < 2; ++k) {  // epoch 1 handed out too, epoch 0 still in flight
    auto u = drv.PlanNextIteration(2 + k);
    REQUIRE(u.ok());
    for (const auto& p : JobDriver::PartitionsToSend(*u)) e1.push_back(p);
  }
  REQUIRE(st.previous_sampler() != nullptr);
  REQUIRE(st.epoch() == 1);
  // X: a sample of an epoch-0 partition; find its epoch-1 partition.
  const loft::v1::Partition bad0 = e0.front();
  const uint64_t x = bad0.sample_ids(0);
  const loft::v1::Partition* bad1 = nullptr;
  for (const auto& p : e1) {
    if (std::find(p.sample_ids().begin(), p.sample_ids().end(), x) != p.sample_ids().end()) bad1 = &p;
  }
  REQUIRE(bad1 != nullptr);
  auto fail = [&](const loft::v1::Partition& p, bool name_x, double now) {
    loft::v1::PartitionFailed f = FailedReport(p, "test");
    if (name_x) f.add_bad_samples(x);
    auto u = drv.OnPartitionFailed(f, now);
    REQUIRE(u.ok());
  };
  fail(bad0, true, 10);  // quarantined now; in flight in epoch 1
  CHECK(st.quarantine().quarantined(x));
  CHECK(st.previous_sampler()->state(x) == loft::sched::EpochSampler::SampleState::kCommitted);
  CHECK(st.sampler().state(x) == loft::sched::EpochSampler::SampleState::kTaken);
  // Finish epoch 0: its other partitions, then the retry of bad0's rest.
  for (const auto& p : e0) {
    if (p.id() != bad0.id()) REQUIRE(drv.OnPartitionDone(TimedDone(p, st), 11).ok());
  }
  auto retry = drv.PlanNextIteration(12);
  REQUIRE(retry.ok());
  for (const auto& p : JobDriver::PartitionsToSend(*retry)) {
    CHECK(p.epoch() == 0);
    CHECK(std::find(p.sample_ids().begin(), p.sample_ids().end(), x) == p.sample_ids().end());
    REQUIRE(drv.OnPartitionDone(TimedDone(p, st), 13).ok());
  }
  REQUIRE(st.previous_sampler() == nullptr);  // epoch 0 retired
  CHECK(st.ledger().counters().epochs_completed == 1);
  // Epoch 1's partition holding x fails (not naming it): x comes back set
  // aside, never pooled again.
  fail(*bad1, false, 14);
  CHECK(st.sampler().state(x) == loft::sched::EpochSampler::SampleState::kCommitted);
  auto next = drv.PlanNextIteration(15);
  REQUIRE(next.ok());
  for (const auto& p : JobDriver::PartitionsToSend(*next)) {
    CHECK(std::find(p.sample_ids().begin(), p.sample_ids().end(), x) == p.sample_ids().end());
  }
  CHECK(st.quarantine().unavailable() == 2);  // once in each epoch
}
