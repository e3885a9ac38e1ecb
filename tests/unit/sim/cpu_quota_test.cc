#include "sim/cpu_quota.h"

#include <catch2/catch.hpp>

namespace loft::sim {
namespace {

TEST_CASE("CpuQuota: one period's quota runs at a full core, then the rest at cpu_cores", "[sim][cpu]") {
  CpuQuota q(0.25, 10.0);  // 2.5 ms of CPU per 10 ms
  REQUIRE(q.enabled());
  CHECK(q.TokensAt(0) == Approx(2.5));
  // 1 ms at a full core drains 0.75 ms of the bucket.
  CHECK(q.Run(0, 1.0) == Approx(1.0));
  CHECK(q.TokensAt(1.0) == Approx(1.75));
  // 4 ms more: 1.75 / 0.75 = 2.333 ms at a full core, then 1.667 ms at 0.25.
  CHECK(q.Run(1.0, 4.0) == Approx(1.0 + 1.75 / 0.75 + (4.0 - 1.75 / 0.75) / 0.25));
  // Sustained: 100 items of 1 ms back to back take 4 ms each once the
  // bucket (2.5 / 0.75 ms of work at a full core) is spent.
  double t = q.Run(100, 0);  // idle until 100: the bucket is full again
  CHECK(t == 100);
  CHECK(q.TokensAt(100) == Approx(2.5));
  for (int i = 0; i < 100; ++i) t = q.Run(t, 1.0);
  CHECK(t - 100 == Approx(2.5 / 0.75 + (100 - 2.5 / 0.75) / 0.25));
}

TEST_CASE("CpuQuota: work queued while busy starts when the earlier work ends", "[sim][cpu]") {
  CpuQuota q(0.5, 10.0);
  const double a = q.Run(0, 2.0);  // 5 ms of bucket: 2 ms at a full core, 1 ms drained
  CHECK(a == Approx(2.0));
  const double b = q.Run(0.5, 1.0);  // queued behind it
  CHECK(b == Approx(3.0));
  CHECK(q.TokensAt(3.0) == Approx(5.0 - 1.0 - 0.5));
}

TEST_CASE("CpuQuota: no quota, no cost, a quota of a core or more never throttles", "[sim][cpu]") {
  CpuQuota none;
  CHECK_FALSE(none.enabled());
  CHECK(none.Run(3.0, 5.0) == 3.0);
  CpuQuota big(1.5, 10.0);
  double t = 0;
  for (int i = 0; i < 50; ++i) t = big.Run(t, 1.0);
  CHECK(t == Approx(50.0));
  CHECK(big.Run(60.0, 0.0) == 60.0);
}

TEST_CASE("CpuQuota: the agent's idle use is taken off the quota, never below a tenth of it", "[sim][cpu]") {
  CpuQuota q(0.25, 10.0, 0.05);  // 0.2 cores left: a 2 ms bucket
  CHECK(q.TokensAt(0) == Approx(2.0));
  double t = q.Run(0, 0);
  for (int i = 0; i < 100; ++i) t = q.Run(t, 1.0);
  CHECK(t == Approx(2.0 / 0.8 + (100 - 2.0 / 0.8) / 0.2));
  CpuQuota starved(0.1, 10.0, 0.5);  // more idle use than quota: 0.01 cores
  CHECK(starved.TokensAt(0) == Approx(0.1));
  CHECK(starved.Run(0, 1.1) == Approx(0.1 / 0.99 + (1.1 - 0.1 / 0.99) / 0.01));
}

}  // namespace
}  // namespace loft::sim
