// ServiceClock (server/service_clock.h): wall-clock anchored, stalls excluded.
#include "server/service_clock.h"

#include <catch2/catch.hpp>

namespace {
// A clock whose monotonic and wall readings differ, as on a real machine.
class TwoClocks final : public loft::Clock {
 public:
  int64_t NowMicros() const override { return mono_us; }
  int64_t WallMicros() const override { return wall_us; }
  void SleepForMicros(int64_t us) override {
    mono_us += us;
    wall_us += us;
  }
  int64_t mono_us = 0;
  int64_t wall_us = 0;
};
}  // namespace

TEST_CASE("service time is wall-clock anchored: a deadline keeps its meaning across a reboot") {
  TwoClocks before;  // up for 10 days
  before.mono_us = int64_t{864000} * 1000000;
  before.wall_us = int64_t{1764000000} * 1000000;
  loft::server::ServiceClock t1(&before, 1000);
  const double deadline = t1.NowMillis() + 3000;  // journaled
  before.SleepForMicros(1000000);
  // Rebooted 1 s later: CLOCK_MONOTONIC starts again near 0.
  TwoClocks after;
  after.mono_us = 5000000;
  after.wall_us = before.wall_us;
  loft::server::ServiceClock t2(&after, 1000);
  CHECK(t2.NowMillis() < deadline);
  for (int i = 0; i < 21; ++i) {  // 2.1 s of a running scheduler (a reading every 100 ms)
    after.SleepForMicros(100000);
    (void)t2.NowMillis();
  }
  CHECK(t2.NowMillis() > deadline);  // expires 3 s after it was set, not 10 days later
}

TEST_CASE("service time excludes the scheduler's own stalls") {
  TwoClocks c;
  loft::server::ServiceClock t(&c, 1000);
  const double t0 = t.NowMillis();
  c.SleepForMicros(40000);
  CHECK(t.NowMillis() == Approx(t0 + 40));  // normal ticks count fully
  c.SleepForMicros(6000000);                // SIGSTOP for 6 s
  CHECK(t.NowMillis() == Approx(t0 + 40 + 1000));
  CHECK(t.stalled_ms() == Approx(5000));
  c.SleepForMicros(500000);
  CHECK(t.NowMillis() == Approx(t0 + 1540));
}

TEST_CASE("a wall clock stepped back between runs does not push recovered deadlines further ahead") {
  TwoClocks before;
  before.mono_us = int64_t{50} * 1000000;
  before.wall_us = int64_t{1764000000} * 1000000;
  loft::server::ServiceClock t1(&before, 1000);
  const double planned = t1.NowMillis();
  const double deadline = planned + 3000;  // journaled with the partition
  // Restarted 1 s later, but NTP stepped the wall clock back by an hour.
  TwoClocks after;
  after.mono_us = int64_t{51} * 1000000;
  after.wall_us = before.wall_us + 1000000 - int64_t{3600} * 1000000;
  loft::server::ServiceClock t2(&after, 1000);
  REQUIRE(t2.NowMillis() < planned - 3000000);  // the step, as read
  t2.NotBefore(planned);                        // the journal's latest recorded time
  CHECK(t2.NowMillis() == Approx(planned));
  for (int i = 0; i < 31; ++i) {  // 3.1 s of a running scheduler
    after.SleepForMicros(100000);
    (void)t2.NowMillis();
  }
  CHECK(t2.NowMillis() > deadline);  // expires ~3 s after the restart, not an hour and 3 s later
  // A clock already past the floor is left alone.
  const double now = t2.NowMillis();
  t2.NotBefore(now - 5000);
  CHECK(t2.NowMillis() == Approx(now));
}
