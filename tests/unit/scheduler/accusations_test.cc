#include "scheduler/accusations.h"

#include <catch2/catch.hpp>
#include <set>

using loft::sched::AccusationBook;

TEST_CASE("AccusationBook evicts a node once f+1 distinct others reported it, once") {
  AccusationBook b;
  CHECK_FALSE(b.Report(1, 3, 1));
  CHECK_FALSE(b.Report(1, 3, 1));  // the same reporter again counts once
  CHECK(b.reporters(3) == 1);
  CHECK_FALSE(b.Report(3, 3, 1));  // itself: ignored
  CHECK_FALSE(b.evicted(3));
  CHECK(b.Report(2, 3, 1));  // the second distinct reporter: evicted
  CHECK(b.evicted(3));
  CHECK_FALSE(b.Report(4, 3, 1));  // already evicted: not again
  CHECK_FALSE(b.evicted(1));
}

TEST_CASE("AccusationBook: in a trusted cluster (f = 0) one report evicts") {
  AccusationBook b;
  CHECK(b.Report(0, 5, 0));
  CHECK(b.evicted(5));
}

TEST_CASE("a silent member takes a majority of the other live members to evict") {
  using loft::sched::SilenceTolerance;
  CHECK(SilenceTolerance(0, 4) == 1);   // 2 of the 3 others
  CHECK(SilenceTolerance(0, 3) == 1);   // both others
  CHECK(SilenceTolerance(0, 5) == 2);   // 3 of the 4 others
  CHECK(SilenceTolerance(3, 4) == 3);   // never below f
  CHECK(SilenceTolerance(0, 2) > 100);  // 2 members: nobody can tell who is at fault
  const std::set<int> live{0, 1, 2, 3};
  AccusationBook b;
  CHECK(b.ReportSilent(0, 3, live, 0) == -1);
  CHECK(b.ReportSilent(1, 3, live, 0) == 3);  // the second reporter: a majority of 3
  CHECK(b.evicted(3));
}

TEST_CASE("a member that finds every other live member silent is the one evicted") {
  const std::set<int> live{0, 1, 2, 3};
  AccusationBook b;
  CHECK(b.ReportSilent(3, 0, live, 0) == -1);
  CHECK(b.ReportSilent(3, 1, live, 0) == -1);
  CHECK(b.ReportSilent(0, 3, live, 0) == -1);  // one honest report of 3 so far
  CHECK(b.ReportSilent(3, 2, live, 0) == 3);   // 3 hears nobody: it is evicted
  CHECK(b.evicted(3));
  CHECK_FALSE(b.evicted(0));
  CHECK_FALSE(b.evicted(1));
  CHECK_FALSE(b.evicted(2));
}
