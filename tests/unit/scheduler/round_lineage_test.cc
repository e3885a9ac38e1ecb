// Round-level lineage (training.exchange period > 1): a local step's
// partition is committed only when the round that holds it is applied by
// the ring through its worker's round-ending partition; a worker that dies
// mid-round has its round's local partitions retried elsewhere. Each test
// keeps an oracle of what the agreed model learnt (a member's local steps
// reach it only with that member's round-ending exchange) and checks the
// ledger against it: every sample of the epoch learnt exactly once when the
// ledger completes the epoch.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <vector>

#include "scheduler/driver.h"
#include "state_fakes.h"

using loft::sched::JobDriver;
using loft::sched::PartitionState;
using loft::sched::StateOptions;
using loft::sched::Updates;

namespace {

constexpr int kNodes = 4;
constexpr int64_t kSamples = 240;
constexpr int64_t kBatch = 24;

loft::ClusterSpec PeriodSpec(int64_t period) {
  loft::ClusterSpec spec = loft::sched::testing::SmallSpec(kSamples, 1, kBatch, kNodes);
  spec.training.exchange.period = period;
  spec.training.iterations = 200;
  return spec;
}

struct Lineage {
  explicit Lineage(int64_t period) : spec(PeriodSpec(period)) {
    auto d = JobDriver::Create(spec, "uniform", StateOptions{});
    REQUIRE(d.ok());
    drv = std::move(d).value();
    for (int i = 0; i < kNodes; ++i) Take(drv->RegisterWorker(i, now));
  }

  void Take(const loft::StatusOr<Updates>& u) {
    INFO(u.status().ToString());
    REQUIRE(u.ok());
    journal.insert(journal.end(), u->begin(), u->end());
  }

  // Plans the next iteration and sends its partitions.
  std::vector<loft::v1::Partition> Plan() {
    now += 10;
    auto u = drv->PlanNextIteration(now);
    Take(u);
    auto parts = JobDriver::PartitionsToSend(*u);
    for (const auto& p : parts) Take(drv->OnPartitionSent(p.id(), p.attempt(), now));
    return parts;
  }

  // The worker acks `p`. The agent side: a local step's samples wait in the
  // member's round; a round-ending step exchanges them with its own.
  void Done(const loft::v1::Partition& p, bool delta_dropped = false) {
    now += 1;
    loft::v1::PartitionDone d;
    d.set_partition_id(p.id());
    d.set_attempt(p.attempt());
    d.set_node(p.worker());
    if (delta_dropped) d.mutable_timings()->mutable_training()->set_delta_dropped(true);
    Take(drv->OnPartitionDone(d, now));
    auto& held = round_samples[p.worker()];
    for (uint64_t id : p.sample_ids()) held.emplace_back(p.epoch(), id);
    if (p.local_step()) return;
    if (!delta_dropped) {
      for (const auto& [epoch, id] : held) learnt[epoch].push_back(id);
    }
    held.clear();
  }

  // The worker reports `p` failed. The agent side: at a round's end it
  // joins the exchange with weight 0, carrying its round's local steps.
  void Fail(const loft::v1::Partition& p) {
    now += 1;
    Take(drv->OnPartitionFailed(loft::sched::testing::FailedReport(p, "source dead"), now));
    if (p.local_step()) return;
    auto& held = round_samples[p.worker()];
    for (const auto& [epoch, id] : held) learnt[epoch].push_back(id);
    held.clear();
  }

  // The worker dies: its parameters (its round's local steps) die with it.
  void Die(int32_t node) {
    now += 1;
    Take(drv->OnWorkerDead(node, "test", now));
    round_samples[node].clear();
  }

  void Register(int32_t node) {
    now += 1;
    Take(drv->RegisterWorker(node, now));
  }

  // Plans and acks whole iterations until epoch 0 is completed.
  void FinishEpochZero() {
    for (int guard = 0; guard < 100 && drv->state().ledger().counters().epochs_completed < 1; ++guard) {
      for (const auto& p : Plan()) Done(p);
    }
    REQUIRE(drv->state().ledger().counters().epochs_completed >= 1);
  }

  // Every sample of epoch 0 learnt by the agreed model exactly once.
  void CheckEpochZeroLearntOnce() const {
    auto it = learnt.find(0);
    std::vector<uint64_t> ids = it == learnt.end() ? std::vector<uint64_t>{} : it->second;
    std::sort(ids.begin(), ids.end());
    std::vector<uint64_t> all(kSamples);
    for (int64_t i = 0; i < kSamples; ++i) all[i] = static_cast<uint64_t>(i);
    std::vector<uint64_t> missing, twice;
    std::set_difference(all.begin(), all.end(), ids.begin(), ids.end(), std::back_inserter(missing));
    for (size_t i = 1; i < ids.size(); ++i)
      if (ids[i] == ids[i - 1]) twice.push_back(ids[i]);
    INFO("samples learnt " << ids.size() << ", never learnt " << missing.size() << ", learnt twice "
                           << twice.size());
    CHECK(missing.empty());
    CHECK(twice.empty());
    CHECK(drv->state().ledger().counters().duplicates == 0);
    CHECK(drv->state().ledger().counters().lost == 0);
  }

  loft::ClusterSpec spec;
  std::unique_ptr<JobDriver> drv;
  Updates journal;
  double now = 0;
  std::map<int32_t, std::vector<std::pair<int64_t, uint64_t>>> round_samples;
  std::map<int64_t, std::vector<uint64_t>> learnt;  // epoch -> samples the agreed model learnt
};

// Samples of epoch 0 committed in the ledger so far.
int64_t CommittedInEpochZero(const JobDriver& d) {
  const auto& s = d.state();
  if (s.sampler().epoch() == 0) return s.sampler().committed();
  return s.previous_sampler() != nullptr ? s.previous_sampler()->committed() : kSamples;
}

}  // namespace

TEST_CASE("Round lineage: normal rounds commit each local step once, at the round's end", "[round_lineage]") {
  Lineage run(4);
  std::vector<loft::v1::Partition> local;
  for (int it = 0; it < 3; ++it) {
    for (const auto& p : run.Plan()) {
      REQUIRE(p.local_step());
      run.Done(p);
      local.push_back(p);
    }
  }
  // Three local steps acked: none of their samples is committed yet.
  CHECK(CommittedInEpochZero(*run.drv) == 0);
  CHECK(run.drv->state().round_pending() == static_cast<int64_t>(local.size()));
  CHECK(run.drv->IterationComplete());  // the next step may be planned
  const auto ending = run.Plan();
  for (const auto& p : ending) REQUIRE_FALSE(p.local_step());
  for (const auto& p : ending) run.Done(p);
  // The round is applied: its four steps are committed, once.
  CHECK(CommittedInEpochZero(*run.drv) == 4 * kBatch);
  CHECK(run.drv->state().round_pending() == 0);
  for (const auto& p : local) CHECK(run.drv->state().ledger().Find(p.id())->state == PartitionState::kDone);
  run.FinishEpochZero();
  run.CheckEpochZeroLearntOnce();
  CHECK(run.drv->state().ledger().counters().retries == 0);
}

TEST_CASE("Round lineage: a worker dying mid-round with period 4 has its round's local partitions retried",
          "[round_lineage]") {
  Lineage run(4);
  constexpr int32_t kVictim = 1;
  std::vector<loft::v1::Partition> victim_local;
  for (int it = 0; it < 3; ++it) {
    for (const auto& p : run.Plan()) {
      run.Done(p);
      if (p.worker() == kVictim) victim_local.push_back(p);
    }
  }
  REQUIRE_FALSE(victim_local.empty());
  // The round-ending step: every other member exchanges, the victim dies
  // before its exchange.
  for (const auto& p : run.Plan()) {
    if (p.worker() != kVictim) run.Done(p);
  }
  run.Die(kVictim);
  for (const auto& p : victim_local) {
    INFO("partition " << p.id() << " of iteration " << p.iteration());
    CHECK(run.drv->state().ledger().Find(p.id())->state == PartitionState::kFailed);
  }
  run.Register(kVictim);
  run.FinishEpochZero();
  run.CheckEpochZeroLearntOnce();
  // Each of the victim's local partitions has a retried child (attempt + 1).
  for (const auto& p : victim_local) {
    bool child = false;
    for (const auto& u : run.journal) {
      if (!u.has_iteration_planned()) continue;
      for (const auto& pp : u.iteration_planned().partitions())
        child |= pp.partition().parent() == p.id() && pp.partition().attempt() == p.attempt() + 1;
    }
    INFO("partition " << p.id());
    CHECK(child);
  }
}

TEST_CASE("Round lineage: a member whose exchange dropped its delta has its round retried",
          "[round_lineage]") {
  Lineage run(4);
  constexpr int32_t kSynced = 2;
  std::vector<loft::v1::Partition> synced_round;
  for (int it = 0; it < 3; ++it) {
    for (const auto& p : run.Plan()) {
      run.Done(p);
      if (p.worker() == kSynced) synced_round.push_back(p);
    }
  }
  for (const auto& p : run.Plan()) {
    // It fetched the agreed state at the exchange: a zero delta.
    run.Done(p, /*delta_dropped=*/p.worker() == kSynced);
    if (p.worker() == kSynced) synced_round.push_back(p);
  }
  for (const auto& p : synced_round) {
    INFO("partition " << p.id() << " of iteration " << p.iteration());
    CHECK(run.drv->state().ledger().Find(p.id())->state == PartitionState::kFailed);
  }
  CHECK(CommittedInEpochZero(*run.drv) == 4 * kBatch - 4 * (kBatch / kNodes));
  run.FinishEpochZero();
  run.CheckEpochZeroLearntOnce();
}

TEST_CASE("Round lineage: a scheduler restart mid-round keeps the pending local partitions",
          "[round_lineage][journal]") {
  Lineage run(4);
  for (int it = 0; it < 3; ++it) {
    for (const auto& p : run.Plan()) run.Done(p);
  }
  REQUIRE(run.drv->state().round_pending() > 0);
  REQUIRE(CommittedInEpochZero(*run.drv) == 0);
  // Replay of the journal and a snapshot both rebuild the pending state.
  auto replayed = JobDriver::Recover(run.spec, "uniform", StateOptions{}, run.journal);
  REQUIRE(replayed.ok());
  CHECK((*replayed)->state().ToJson() == run.drv->state().ToJson());
  CHECK((*replayed)->state().round_pending() == run.drv->state().round_pending());
  auto restored = JobDriver::Create(run.spec, "uniform", StateOptions{});
  REQUIRE(restored.ok());
  REQUIRE((*restored)->Restore(run.drv->state().ToSnapshot()).ok());
  CHECK((*restored)->state().ToJson() == run.drv->state().ToJson());
  CHECK((*restored)->state().round_pending() == run.drv->state().round_pending());
  // A snapshot naming a partition that is not a pending local step is DataLoss.
  loft::v1::StateSnapshot bad = run.drv->state().ToSnapshot();
  bad.add_round_pending(bad.round_pending(0) + 100000);
  auto fresh = JobDriver::Create(run.spec, "uniform", StateOptions{});
  REQUIRE(fresh.ok());
  CHECK((*fresh)->Restore(bad).code() == loft::StatusCode::kDataLoss);

  // The restored scheduler goes on: member 3 dies before its exchange, the
  // others apply the round. The restored run and the original agree.
  Lineage after(4);
  after.drv = std::move(restored).value();
  after.now = run.now;
  after.round_samples = run.round_samples;
  after.learnt = run.learnt;
  for (const auto& p : after.Plan()) {
    if (p.worker() != 3) after.Done(p);
  }
  after.Die(3);
  CHECK(CommittedInEpochZero(*after.drv) == 4 * (kBatch - kBatch / kNodes));
  after.Register(3);
  after.FinishEpochZero();
  after.CheckEpochZeroLearntOnce();
}

TEST_CASE("Round lineage: a member whose round-ending step failed keeps its steps for its next round",
          "[round_lineage]") {
  Lineage run(4);
  constexpr int32_t kFailing = 2;
  std::vector<loft::v1::Partition> local;
  for (int it = 0; it < 3; ++it) {
    for (const auto& p : run.Plan()) {
      run.Done(p);
      if (p.worker() == kFailing) local.push_back(p);
    }
  }
  for (const auto& p : run.Plan()) {
    if (p.worker() == kFailing) {
      run.Fail(p);  // a read failed: it joined the exchange with weight 0
    } else {
      run.Done(p);
    }
  }
  // The round closed: its local steps wait for its next round's report.
  CHECK(run.drv->state().round_pending() == static_cast<int64_t>(local.size()));
  for (const auto& p : local) CHECK(run.drv->state().ledger().Find(p.id())->state == PartitionState::kDone);
  for (int it = 4; it < 8; ++it) {
    for (const auto& p : run.Plan()) run.Done(p);
  }
  CHECK(run.drv->state().round_pending() == 0);
  for (const auto& p : local) CHECK(run.drv->state().ledger().Find(p.id())->state == PartitionState::kDone);
  run.FinishEpochZero();
  run.CheckEpochZeroLearntOnce();
}
