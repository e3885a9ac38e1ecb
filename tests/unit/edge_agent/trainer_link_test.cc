#include <catch2/catch.hpp>

#include "core/clock.h"
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
