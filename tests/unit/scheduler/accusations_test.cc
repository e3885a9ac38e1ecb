#include "scheduler/accusations.h"

#include <catch2/catch.hpp>

using loft::scheduler::AccusationBook;

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
