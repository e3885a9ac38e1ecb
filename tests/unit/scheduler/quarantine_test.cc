// Corrupt-record livelock: a sample whose record fails its check
// on its only holder is quarantined after StateOptions.quarantine_after
// failure reports, the epoch completes without it, it is never committed,
// every other sample is committed once per epoch, and replay rebuilds it.
#include "scheduler/quarantine.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "scheduler/driver.h"
#include "state_fakes.h"

using loft::sched::JobDriver;
using loft::sched::SampleQuarantine;
using loft::sched::StateOptions;
using loft::sched::Updates;
using loft::sched::testing::FakePolicy;
using loft::sched::testing::SmallSpec;

TEST_CASE("SampleQuarantine: `after` distinct reporters of the only holder's copy quarantine, once",
          "[quarantine]") {
  SampleQuarantine q(3);
  // Replication 1: holder 0's copy, read by 0 itself, then by 1 and 2.
  CHECK_FALSE(q.Report(7, 0, 0, 1));
  CHECK_FALSE(q.Report(7, 1, 0, 1));
  CHECK(q.reports(7) == 2);
  REQUIRE(q.pending(7) != nullptr);
  CHECK(q.pending(7)->reporters == std::vector<int32_t>{0, 1});
  CHECK(q.pending(7)->holders == std::vector<int32_t>{0});
  CHECK(q.Report(7, 2, 0, 1));
  CHECK(q.quarantined(7));
  CHECK(q.pending(7) == nullptr);
  CHECK_FALSE(q.Report(7, 3, 0, 1));
  CHECK(q.samples() == std::set<uint64_t>{7});
  SampleQuarantine never(0);
  for (int i = 0; i < 10; ++i) CHECK_FALSE(never.Report(1, i, 0, 1));
}

TEST_CASE("SampleQuarantine: one accuser, or one holder's copy among several, quarantines nothing",
          "[quarantine]") {
  SampleQuarantine q(3);
  // One Byzantine worker naming a sample over and over.
  for (int i = 0; i < 20; ++i) CHECK_FALSE(q.Report(5, 4, 4, 2));
  CHECK(q.reports(5) == 20);
  CHECK(q.pending(5)->reporters == std::vector<int32_t>{4});
  // Many honest readers of one spoiled copy while two other holders have it.
  for (int32_t r = 0; r < 4; ++r) CHECK_FALSE(q.Report(9, r, 6, 3));
  CHECK_FALSE(q.quarantined(9));
  CHECK_FALSE(q.Report(9, 1, 7, 3));  // a second holder's copy: still one short
  CHECK(q.Report(9, 2, 8, 3));        // every holder's copy reported by distinct readers
  CHECK(q.quarantined(9));
  // Restore validates: reporters sorted and distinct, at least one holder.
  SampleQuarantine r(3);
  std::map<uint64_t, SampleQuarantine::Pending> bad = {{1, {2, {3, 1}, {0}}}};
  CHECK_FALSE(r.Restore(bad, {}, 0).ok());
  std::map<uint64_t, SampleQuarantine::Pending> good = {{1, {2, {1, 3}, {0}}}};
  REQUIRE(r.Restore(good, {4}, 1).ok());
  CHECK(r.pending(1)->reporters == std::vector<int32_t>{1, 3});
}

namespace {

struct Run {
  std::map<int64_t, std::vector<uint64_t>> committed;  // epoch -> committed ids
  int64_t failures = 0;
};

// Runs until `epochs` epochs completed (or a guard); every partition holding
// `bad` fails, naming it. Returns the commits.
Run RunWithBadSample(JobDriver& drv, Updates& journal, uint64_t bad, int epochs, bool name_it = true) {
  Run r;
  const auto& st = drv.state();
  auto take = [&](const loft::StatusOr<Updates>& u) {
    INFO(u.status().ToString());
    REQUIRE(u.ok());
    journal.insert(journal.end(), u->begin(), u->end());
  };
  double now = 0;
  for (int i = 0; i < st.spec().num_nodes(); ++i) take(drv.RegisterWorker(i, now));
  for (int guard = 0; st.ledger().counters().epochs_completed < epochs && guard < 400; ++guard) {
    now += 10;
    auto planned = drv.PlanNextIteration(now);
    take(planned);
    for (const auto& p : JobDriver::PartitionsToSend(*planned)) {
      take(drv.OnPartitionSent(p.id(), p.attempt(), now));
      const bool holds_bad =
          std::find(p.sample_ids().begin(), p.sample_ids().end(), bad) != p.sample_ids().end();
      if (holds_bad) {
        loft::v1::PartitionFailed f =
            loft::sched::testing::FailedReport(p, "local sample: record failed its CRC");
        if (name_it) {
          f.add_bad_samples(bad);
          f.add_bad_samples(bad);       // named twice: counts once
          f.add_bad_samples(1u << 30);  // not in the partition: ignored
        }
        take(drv.OnPartitionFailed(f, now));
        ++r.failures;
        continue;
      }
      loft::v1::PartitionDone d;
      d.set_partition_id(p.id());
      d.set_attempt(p.attempt());
      d.set_node(p.worker());
      take(drv.OnPartitionDone(d, now + 1));
      r.committed[p.epoch()].insert(r.committed[p.epoch()].end(), p.sample_ids().begin(),
                                    p.sample_ids().end());
    }
  }
  return r;
}

}  // namespace

TEST_CASE("JobDriver: a sample that keeps failing is quarantined and the epoch completes", "[quarantine]") {
  const auto spec = SmallSpec(600, 1, 64);
  StateOptions opt;
  opt.quarantine_after = 3;
  auto d = JobDriver::CreateWithPolicy(spec, std::make_unique<FakePolicy>(true), opt);
  REQUIRE(d.ok());
  Updates journal;
  const uint64_t bad = 123;
  Run r = RunWithBadSample(**d, journal, bad, 3);
  const auto& st = (*d)->state();
  const auto& c = st.ledger().counters();
  REQUIRE(c.epochs_completed == 3);
  CHECK(st.quarantine().samples() == std::set<uint64_t>{bad});
  CHECK(r.failures == 3);  // three attempts in epoch 0; later epochs never hand it out
  for (int e = 0; e < 3; ++e) {
    std::vector<uint64_t> ids = r.committed[e];
    std::sort(ids.begin(), ids.end());
    REQUIRE(ids.size() == 599);  // every other sample once, the bad one never
    CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
    CHECK_FALSE(std::binary_search(ids.begin(), ids.end(), bad));
  }
  CHECK(c.duplicates == 0);
  CHECK(c.lost == 0);
  CHECK(st.quarantine().unavailable() >= 3);  // epochs 0, 1, 2 (and the current one)
  CHECK(st.ToJson().find("\"quarantine\"") != std::string::npos);
  auto replayed = JobDriver::RecoverWithPolicy(spec, std::make_unique<FakePolicy>(true), opt, journal);
  REQUIRE(replayed.ok());
  CHECK((*replayed)->state().ToJson() == st.ToJson());
}

TEST_CASE("JobDriver: without sample reports (or quarantine off) the epoch never completes", "[quarantine]") {
  // The livelock this fixes: with replication 1 the partition fails forever.
  const auto spec = SmallSpec(600, 1, 64);
  for (bool name_it : {false, true}) {
    StateOptions opt;
    opt.quarantine_after = name_it ? 0 : 3;
    auto d = JobDriver::CreateWithPolicy(spec, std::make_unique<FakePolicy>(true), opt);
    REQUIRE(d.ok());
    Updates journal;
    Run r = RunWithBadSample(**d, journal, 123, 1, name_it);
    CHECK((*d)->state().ledger().counters().epochs_completed == 0);
    CHECK(r.failures > 100);
    CHECK((*d)->state().quarantine().samples().empty());
    CHECK((*d)->state().ToJson().find("\"quarantine\"") == std::string::npos);
  }
}

TEST_CASE("JobDriver: a worker naming its own samples bad quarantines nothing, and others train them",
          "[quarantine]") {
  for (int replication : {1, 2}) {
    INFO("replication " << replication);
    const auto spec = SmallSpec(600, replication, 64);
    StateOptions opt;
    opt.quarantine_after = 3;
    auto d = JobDriver::CreateWithPolicy(spec, std::make_unique<FakePolicy>(true), opt);
    REQUIRE(d.ok());
    JobDriver& drv = **d;
    const auto& st = drv.state();
    const int32_t liar = 0;
    double now = 0;
    for (int i = 0; i < spec.num_nodes(); ++i) REQUIRE(drv.RegisterWorker(i, now).ok());
    std::set<uint64_t> named;
    int64_t renamed = 0;  // samples the liar got back after naming them
    for (int guard = 0; st.ledger().counters().epochs_completed < 2 && guard < 400; ++guard) {
      now += 10;
      auto planned = drv.PlanNextIteration(now);
      REQUIRE(planned.ok());
      for (const auto& p : JobDriver::PartitionsToSend(*planned)) {
        REQUIRE(drv.OnPartitionSent(p.id(), p.attempt(), now).ok());
        if (p.worker() == liar) {
          loft::v1::PartitionFailed f = loft::sched::testing::FailedReport(p, "record failed its CRC");
          for (uint64_t id : p.sample_ids()) {
            f.add_bad_samples(id);
            renamed += named.insert(id).second ? 0 : 1;
          }
          REQUIRE(drv.OnPartitionFailed(f, now).ok());
          continue;
        }
        REQUIRE(drv.OnPartitionDone(loft::sched::testing::TimedDone(p, st), now + 1).ok());
      }
    }
    CHECK(st.ledger().counters().epochs_completed == 2);  // every sample trained, the named ones too
    CHECK_FALSE(named.empty());
    CHECK(renamed == 0);  // a sample it named went to another worker
    CHECK(st.quarantine().samples().empty());
    CHECK(st.quarantine().unavailable() == 0);
    CHECK(st.ledger().counters().duplicates == 0);
  }
}
