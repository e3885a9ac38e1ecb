#include "core/clock.h"

#include <catch2/catch.hpp>

using namespace loft;

TEST_CASE("ManualClock advances only when told") {
  ManualClock c(100);
  CHECK(c.NowMicros() == 100);
  c.Advance(50);
  CHECK(c.NowMicros() == 150);
  c.SleepForMicros(1000);
  CHECK(c.NowMicros() == 1150);
  c.Set(10);  // backwards is ignored
  CHECK(c.NowMicros() == 1150);
  c.Set(2000);
  CHECK(c.NowMillis() == Approx(2.0));
}

TEST_CASE("SystemClock is monotonic") {
  SystemClock c;
  int64_t a = c.NowMicros();
  c.SleepForMicros(1000);
  int64_t b = c.NowMicros();
  CHECK(b - a >= 1000);
  CHECK(c.WallMicros() > 1'600'000'000'000'000);
}
