#include "scheduler/poison_reports.h"

#include <catch2/catch.hpp>

using namespace loft;
using loft::sched::PoisonReports;

namespace {
v1::PartitionFailed Report(uint64_t partition, std::vector<std::pair<int32_t, int64_t>> accused) {
  v1::PartitionFailed f;
  f.set_partition_id(partition);
  for (auto [peer, n] : accused) {
    f.add_poisoned_by(peer);
    f.add_poisoned_samples(n);
  }
  return f;
}
// The ledger's record of a partition of `worker` reading from every node 0..4.
sched::PartitionRecord Rec(int32_t worker) {
  sched::PartitionRecord r;
  r.partition.set_worker(worker);
  for (int32_t n = 0; n < 5; ++n) {
    r.partition.add_sample_ids(static_cast<uint64_t>(n));
    r.partition.add_sources(n);
  }
  return r;
}
}  // namespace

TEST_CASE("Poisoning reports are counted per accused peer and per reporter, with the metric") {
  metrics::Registry registry;
  const sched::PartitionRecord rec[5] = {Rec(0), Rec(1), Rec(2), Rec(3), Rec(4)};
  auto r = PoisonReports::Create(&registry);
  REQUIRE(r.ok());
  CHECK(r->Record(0, v1::PartitionFailed(), 5, &rec[0]).empty());  // an ordinary failure
  CHECK(r->reports() == 0);
  auto lines = r->Record(0, Report(7, {{4, 3}}), 5, &rec[0]);
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0],
             Catch::Contains("POISONING") && Catch::Contains("node 0 refused 3 samples served by node 4"));
  r->Record(2, Report(8, {{4, 2}, {1, 1}}), 5, &rec[2]);
  CHECK(r->reports() == 2);
  CHECK(r->total_samples() == 6);
  CHECK(r->samples_by_peer() == std::map<int32_t, int64_t>{{1, 1}, {4, 5}});
  CHECK(r->samples_by_pair().at({2, 4}) == 2);
  CHECK(registry.Render().find("loft_scheduler_poisoned_samples_total{peer=\"4\"} 5") != std::string::npos);
}

TEST_CASE("Malformed poisoning reports are skipped and named") {
  const sched::PartitionRecord rec[5] = {Rec(0), Rec(1), Rec(2), Rec(3), Rec(4)};
  auto r = PoisonReports::Create(nullptr);
  REQUIRE(r.ok());
  std::vector<std::string> rejected;
  // Out of range, the reporter itself, a zero count.
  CHECK(r->Record(1, Report(3, {{9, 1}, {1, 4}, {2, 0}, {-1, 2}}), 5, &rec[1], &rejected).empty());
  CHECK(rejected.size() == 4);
  CHECK(r->total_samples() == 0);
  CHECK(r->reports() == 0);
  // Counts of another length: each accused peer counts 1.
  v1::PartitionFailed f = Report(4, {{3, 10}});
  f.add_poisoned_by(2);
  rejected.clear();
  CHECK(r->Record(0, f, 5, &rec[0], &rejected).size() == 2);
  CHECK(rejected.size() == 1);
  CHECK(r->samples_by_peer() == std::map<int32_t, int64_t>{{2, 1}, {3, 1}});
}

TEST_CASE("A peer is distrusted once f+1 distinct nodes reported it") {
  metrics::Registry registry;
  const sched::PartitionRecord rec[5] = {Rec(0), Rec(1), Rec(2), Rec(3), Rec(4)};
  auto r = PoisonReports::Create(&registry);
  REQUIRE(r.ok());
  CHECK_FALSE(r->ShouldDistrust(4, 0));
  r->Record(0, Report(1, {{4, 3}}), 5, &rec[0]);
  CHECK(r->reporters(4) == 1);
  CHECK(r->ShouldDistrust(4, 0));                 // f = 0: one report
  CHECK_FALSE(r->ShouldDistrust(4, 1));           // f = 1: one liar could have sent it
  r->Record(0, Report(2, {{4, 9}}), 5, &rec[0]);  // the same reporter again: still one
  CHECK_FALSE(r->ShouldDistrust(4, 1));
  r->Record(3, Report(3, {{4, 1}}), 5, &rec[3]);
  CHECK(r->reporters(4) == 2);
  CHECK(r->ShouldDistrust(4, 1));
  CHECK(r->reporters(1) == 0);
  r->CountDistrusted(4);
  CHECK(registry.Render().find("loft_scheduler_distrusted_sources_total{peer=\"4\"} 1") != std::string::npos);
}

TEST_CASE(
    "Poisoning reports about unknown or foreign partitions, or peers that served nothing, accuse nobody") {
  auto r = PoisonReports::Create(nullptr);
  REQUIRE(r.ok());
  std::vector<std::string> rejected;
  // A partition the ledger does not know: ignored whole, counted.
  CHECK(r->Record(0, Report(999, {{4, 3}}), 5, nullptr, &rejected).empty());
  CHECK(r->ignored_reports() == 1);
  REQUIRE(rejected.size() == 1);
  CHECK_THAT(rejected[0], Catch::Contains("which the scheduler does not know"));
  // Another worker's partition.
  const sched::PartitionRecord other = Rec(2);
  CHECK(r->Record(0, Report(5, {{4, 3}}), 5, &other, &rejected).empty());
  CHECK(r->ignored_reports() == 2);
  CHECK(r->reporters(4) == 0);
  CHECK_FALSE(r->ShouldDistrust(4, 0));  // f = 0: still nobody distrusted
  // The reporter's own partition, but peer 4 served none of it.
  sched::PartitionRecord own;
  own.partition.set_worker(0);
  own.partition.add_sample_ids(10);
  own.partition.add_sources(3);
  rejected.clear();
  CHECK(r->Record(0, Report(6, {{4, 1}, {3, 1}}), 5, &own, &rejected).size() == 1);  // only peer 3
  REQUIRE(rejected.size() == 1);
  CHECK_THAT(rejected[0], Catch::Contains("served none of its samples"));
  CHECK(r->reporters(4) == 0);
  CHECK(r->reporters(3) == 1);
  CHECK(r->ignored_reports() == 2);
  // Ignored reports are named at the 1st, 2nd, 4th ... only.
  rejected.clear();
  for (int i = 0; i < 6; ++i) r->Record(1, Report(1000 + i, {{4, 1}}), 5, nullptr, &rejected);
  CHECK(r->ignored_reports() == 8);
  CHECK(rejected.size() == 2);  // #4 and #8
}
