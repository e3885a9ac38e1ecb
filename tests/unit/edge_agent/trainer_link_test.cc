#include <algorithm>
#include <catch2/catch.hpp>

#include "core/clock.h"
#include "core/cluster_spec.h"
#include "edge_agent/exact_sleep.h"
#include "edge_agent/link_emulator.h"
#include "edge_agent/trainer.h"

using namespace loft;
using namespace loft::agent;

TEST_CASE("Synthetic compute spends fixed_ms + per_sample_ms*b on the clock") {
  ManualClock clock;
  ComputeSpec spec{2.0, 0.05, 0.0};
  SyntheticTrainer t(&clock, spec, 1);
  Batch b;
  b.samples.resize(100);
  REQUIRE(t.Compute(b).ok());
  CHECK(clock.NowMicros() == 7000);
}

namespace {
// A clock whose sleeps end `late_us` after the asked time, as a real
// thread's do (timer slack, wake-up).
class LateClock final : public Clock {
 public:
  explicit LateClock(int64_t late_us) : late_us_(late_us) {}
  int64_t NowMicros() const override { return clock_.NowMicros(); }
  int64_t WallMicros() const override { return clock_.NowMicros(); }
  void SleepForMicros(int64_t micros) override { clock_.Advance(std::max<int64_t>(0, micros) + late_us_); }

 private:
  ManualClock clock_;
  int64_t late_us_;
};
}  // namespace

TEST_CASE("Synthetic compute takes a late sleep off the next ones: the mean time is the spec's") {
  LateClock clock(300);  // every sleep 0.3 ms late
  SyntheticTrainer t(&clock, ComputeSpec{1.0, 0.02, 0.0}, 1);
  Batch b;
  b.samples.resize(100);  // nominal 3 ms
  const int64_t t0 = clock.NowMicros();
  for (int i = 0; i < 100; ++i) REQUIRE(t.Compute(b).ok());
  const double mean_us = static_cast<double>(clock.NowMicros() - t0) / 100.0;
  // Without the correction every partition would take 3.3 ms.
  CHECK(mean_us == Approx(3000.0).margin(5.0));
  // A sleep shorter than its overrun is never negative: each asks 1 ms and takes 6 (5 ms late).
  LateClock late(5000);
  SyntheticTrainer t2(&late, ComputeSpec{1.0, 0.0, 0.0}, 1);
  for (int i = 0; i < 10; ++i) REQUIRE(t2.Compute(b).ok());
  CHECK(late.NowMicros() == 10 * 5000 + 1000);  // only the first 1 ms was asked; the debt caps at 1 ms
}

TEST_CASE("Synthetic compute reports the emulated node's time, not the sleep's wall time") {
  // Sleeps 5 ms late: the wall times alternate (6 ms, then 1 ms asked and 5 ms
  // late...), the reported time stays the node's 1 + 0.02*100 = 3 ms.
  LateClock clock(5000);
  SyntheticTrainer t(&clock, ComputeSpec{1.0, 0.02, 0.0}, 1);
  CHECK_FALSE(t.ReportedComputeMs().has_value());  // nothing computed yet: the agent uses wall time
  Batch b;
  b.samples.resize(100);
  for (int i = 0; i < 5; ++i) {
    const int64_t before = clock.NowMicros();
    REQUIRE(t.Compute(b).ok());
    CHECK(clock.NowMicros() - before != 3000);  // the host's noise is real time...
    REQUIRE(t.ReportedComputeMs().has_value());
    CHECK(*t.ReportedComputeMs() == Approx(3.0));  // ...but not the node's speed
  }
  // With jitter: the drawn time, which the sleep asked for on a punctual clock.
  ManualClock exact;
  SyntheticTrainer j(&exact, ComputeSpec{1.0, 0.02, 0.2}, 9);
  for (int i = 0; i < 5; ++i) {
    const int64_t before = exact.NowMicros();
    REQUIRE(j.Compute(b).ok());
    CHECK(*j.ReportedComputeMs() == Approx(static_cast<double>(exact.NowMicros() - before) / 1000.0));
  }
}

TEST_CASE("ExactSleep: late sleeps are taken off the next ones, never below zero") {
  LateClock clock(400);
  ExactSleep sleep(&clock);
  sleep.Sleep(1000);
  CHECK(clock.NowMicros() == 1400);
  CHECK(sleep.overrun_us() == 400);
  sleep.Sleep(1000);  // asks 600, takes 1000
  CHECK(clock.NowMicros() == 2400);
  CHECK(sleep.overrun_us() == 400);
  sleep.Sleep(0);  // nothing asked, nothing slept
  CHECK(clock.NowMicros() == 2400);
  sleep.Sleep(100);  // the debt it may take is this sleep's 100 µs
  CHECK(clock.NowMicros() == 2800);
  CHECK(sleep.overrun_us() == 100);
}

TEST_CASE("SyntheticTrainer: a late start is taken off the next sleep, the reported time is the drawn one") {
  ManualClock clock;
  SyntheticTrainer t(&clock, ComputeSpec{1.0, 0.0, 0.0}, 1);  // 1 ms per batch, no jitter
  Batch b;
  b.samples.resize(4);
  REQUIRE(t.Compute(b).ok());
  CHECK(clock.NowMicros() == 1000);
  t.StartedLate(300);  // waited 300 µs for a core before this batch
  REQUIRE(t.Compute(b).ok());
  CHECK(clock.NowMicros() == 1700);
  CHECK(t.ReportedComputeMs() == 1.0);
  t.StartedLate(0);  // on time: nothing owed
  REQUIRE(t.Compute(b).ok());
  CHECK(clock.NowMicros() == 2700);
  t.StartedLate(5000);  // more than a batch: never below zero, the rest waits
  REQUIRE(t.Compute(b).ok());
  CHECK(clock.NowMicros() == 2700);
  REQUIRE(t.Compute(b).ok());  // the debt is capped at one sleep: it took this one whole
  CHECK(clock.NowMicros() == 2700);
  REQUIRE(t.Compute(b).ok());
  CHECK(clock.NowMicros() == 3700);
}

TEST_CASE("Synthetic jitter varies the time around the nominal value, seeded") {
  ComputeSpec spec{0.0, 1.0, 0.1};
  Batch b;
  b.samples.resize(100);
  auto run = [&](uint64_t seed) {
    ManualClock clock;
    SyntheticTrainer t(&clock, spec, seed);
    std::vector<int64_t> times;
    for (int i = 0; i < 200; ++i) {
      int64_t before = clock.NowMicros();
      REQUIRE(t.Compute(b).ok());
      times.push_back(clock.NowMicros() - before);
    }
    return times;
  };
  auto a = run(3), a2 = run(3), c = run(4);
  CHECK(a == a2);
  CHECK(a != c);
  double mean = 0;
  for (auto v : a) mean += static_cast<double>(v);
  mean /= static_cast<double>(a.size());
  CHECK(mean == Approx(100000).epsilon(0.03));
  CHECK(*std::min_element(a.begin(), a.end()) < 95000);
  CHECK(*std::max_element(a.begin(), a.end()) > 105000);
}

TEST_CASE("Token bucket enforces the emulated rate after its burst") {
  ManualClock clock;
  TokenBucket bucket(&clock, 8.0, 1000);  // 8 Mbit/s = 1 byte/us
  CHECK(bucket.Acquire(1000) == 0);       // the burst
  CHECK(bucket.Acquire(5000) == 5000);
  CHECK(clock.NowMicros() == 5000);
  clock.Advance(10000);  // refills only up to the burst
  CHECK(bucket.Acquire(1000) == 0);
  CHECK(bucket.Acquire(1) == 1);
}

TEST_CASE("Token bucket credits a transfer the time since it began and shares the link FIFO") {
  ManualClock clock;
  TokenBucket bucket(&clock, 8.0, 1000);  // 1 byte/us, 1000 us of burst
  clock.Advance(10000);
  CHECK(bucket.AcquireSince(5000, 5000) == 0);     // began 5 ms ago: already through
  CHECK(bucket.AcquireSince(5000, 5000) == 4000);  // queued behind the first: ends at 15000
  CHECK(clock.NowMicros() == 14000);
  CHECK(bucket.AcquireSince(100, 20000) == 100);  // a start in the future counts from now, behind the others
}

TEST_CASE("A node's link buckets are as deep as the spec's burst rule, as the testbed's tbf") {
  ManualClock clock;
  // Defaults: 2 ms of traffic, at least 16 KiB.
  CHECK(MakeLinkBucket(&clock, NetworkSpec{}, 10)->burst_bytes() == Approx(16 * 1024));
  CHECK(MakeLinkBucket(&clock, NetworkSpec{}, 1000)->burst_bytes() == Approx(250000));
  // A spec with another burst_ms: 10 ms of 80 Mbit/s = 100,000 bytes.
  auto spec = ParseClusterSpec(
      "dataset: {samples: 100}\ntraining: {global_batch: 8, min_batch: 1}\n"
      "network: {burst_ms: 10}\nnodes:\n  - name: e\n    link: {up_mbps: 80, down_mbps: 8}\n",
      "burst.yaml");
  REQUIRE(spec.ok());
  auto up = MakeLinkBucket(&clock, spec->network, spec->nodes[0].link.up_mbps);
  auto down = MakeLinkBucket(&clock, spec->network, spec->nodes[0].link.down_mbps);
  CHECK(up->burst_bytes() == Approx(100000));
  CHECK(down->burst_bytes() == Approx(16384));  // 10 ms of 8 Mbit/s = 10,000: the 16 KiB floor
  // The depth is what passes unpaced after a pause: 100,000 bytes at 10 bytes/us.
  CHECK(up->Acquire(100000) == 0);
  CHECK(up->Acquire(1000) == 100);
}

TEST_CASE("Ring link emulation: a message crosses min(sender up, own down), then the larger latency") {
  ManualClock clock;
  TokenBucket up(&clock, 8.0, 1000);
  TokenBucket down(&clock, 4.0, 1000);  // 0.5 byte/us: burst = 2000 us
  RingLinkEmulation link;
  link.clock = &clock;
  link.up = &up;
  link.down = &down;
  link.up_mbps = {8.0, 8.0};
  link.latency_ms = {2.0, 3.0};
  link.self = 1;
  // Sending 5000 bytes pays the own uplink: 5000 us less the 1000 us burst.
  link.BeforeSend(5000);
  CHECK(clock.NowMicros() == 4000);
  // 5000 bytes from rank 0 (8 Mbit/s up) arrived at t = 9000: sent from
  // 4000, through the 4 Mbit/s downlink at 14000, less its 2000 us burst
  // = 12000, then max(2, 3) ms of latency.
  clock.Set(9000);
  link.AfterReceive(0, 5000, 9000);
  CHECK(clock.NowMicros() == 15000);
  // A message read long after it arrived waits for nothing.
  clock.Set(100000);
  link.AfterReceive(0, 5000, 50000);
  CHECK(clock.NowMicros() == 100000);
  // Without emulation (no clock) nothing waits.
  RingLinkEmulation off;
  off.BeforeSend(1 << 20);
  off.AfterReceive(0, 1 << 20, 0);
  CHECK(clock.NowMicros() == 100000);
}
