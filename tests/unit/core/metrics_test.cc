#include "core/metrics.h"

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

using namespace loft;
using namespace loft::metrics;

TEST_CASE("Counters and gauges render in the Prometheus text format") {
  Registry reg;
  auto frames = reg.AddCounter("loft_frames_total", "Frames received.", {"kind", "result"});
  REQUIRE(frames.ok());
  (*frames)->WithLabels({"fetch", "ok"}).Increment(3);
  (*frames)->WithLabels({"garbage", "dropped"}).Increment();
  (*frames)->WithLabels({"fetch", "ok"}).Increment(-5);  // ignored: counters only go up
  auto credits = reg.AddGauge("loft_credits", "Credits free.\nSecond line \\ backslash");
  REQUIRE(credits.ok());
  (*credits)->Get().Set(2.5);
  CHECK(reg.Render() ==
        "# HELP loft_credits Credits free.\\nSecond line \\\\ backslash\n"
        "# TYPE loft_credits gauge\n"
        "loft_credits 2.5\n"
        "# HELP loft_frames_total Frames received.\n"
        "# TYPE loft_frames_total counter\n"
        "loft_frames_total{kind=\"fetch\",result=\"ok\"} 3\n"
        "loft_frames_total{kind=\"garbage\",result=\"dropped\"} 1\n");
}

TEST_CASE("Histograms render cumulative buckets, sum and count") {
  Registry reg;
  auto h = reg.AddHistogram("loft_fetch_ms", "Fetch latency.", {1, 5, 10}, {"peer"});
  REQUIRE(h.ok());
  auto& m = (*h)->WithLabels({"edge-a"});
  m.Observe(0.5);
  m.Observe(1);  // le is inclusive
  m.Observe(7);
  m.Observe(100);
  CHECK(reg.Render() ==
        "# HELP loft_fetch_ms Fetch latency.\n"
        "# TYPE loft_fetch_ms histogram\n"
        "loft_fetch_ms_bucket{peer=\"edge-a\",le=\"1\"} 2\n"
        "loft_fetch_ms_bucket{peer=\"edge-a\",le=\"5\"} 2\n"
        "loft_fetch_ms_bucket{peer=\"edge-a\",le=\"10\"} 3\n"
        "loft_fetch_ms_bucket{peer=\"edge-a\",le=\"+Inf\"} 4\n"
        "loft_fetch_ms_sum{peer=\"edge-a\"} 108.5\n"
        "loft_fetch_ms_count{peer=\"edge-a\"} 4\n");
}

TEST_CASE("Label values are escaped") {
  Registry reg;
  auto c = reg.AddCounter("x_total", "h", {"v"});
  REQUIRE(c.ok());
  (*c)->WithLabels({"a\"b\\c\nd"}).Increment();
  CHECK(reg.Render() == "# HELP x_total h\n# TYPE x_total counter\nx_total{v=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST_CASE("Declaration errors are Statuses") {
  Registry reg;
  CHECK(reg.AddCounter("bad name", "h").status().code() == StatusCode::kInvalidArgument);
  CHECK(reg.AddCounter("9lives", "h").status().code() == StatusCode::kInvalidArgument);
  CHECK(reg.AddCounter("ok_total", "h", {"__reserved"}).status().code() == StatusCode::kInvalidArgument);
  CHECK(reg.AddHistogram("h", "h", {1}, {"le"}).status().code() == StatusCode::kInvalidArgument);
  CHECK(reg.AddHistogram("h", "h", {}).status().code() == StatusCode::kInvalidArgument);
  CHECK(reg.AddHistogram("h", "h", {2, 1}).status().code() == StatusCode::kInvalidArgument);
  auto a = reg.AddCounter("dup_total", "h", {"x"});
  REQUIRE(a.ok());
  auto again = reg.AddCounter("dup_total", "h", {"x"});
  REQUIRE(again.ok());
  CHECK(*again == *a);
  CHECK(reg.AddGauge("dup_total", "h", {"x"}).status().code() == StatusCode::kAlreadyExists);
  CHECK(reg.AddCounter("dup_total", "h", {"y"}).status().code() == StatusCode::kAlreadyExists);
}

TEST_CASE("Value formatting follows Prometheus conventions") {
  CHECK(FormatValue(3) == "3");
  CHECK(FormatValue(-2) == "-2");
  CHECK(FormatValue(0.25) == "0.25");
  CHECK(FormatValue(1.0 / 0.0) == "+Inf");
  CHECK(FormatValue(-1.0 / 0.0) == "-Inf");
  CHECK(FormatValue(0.0 / 0.0) == "NaN");
}

TEST_CASE("Concurrent increments are all counted") {
  Registry reg;
  auto c = reg.AddCounter("n_total", "h", {"t"});
  auto h = reg.AddHistogram("lat", "h", {1});
  REQUIRE(c.ok());
  REQUIRE(h.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        (*c)->WithLabels({"same"}).Increment();
        (*h)->Get().Observe(0.5);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK((*c)->WithLabels({"same"}).Value() == 40000);
  CHECK((*h)->Get().Snap().count == 40000);
  CHECK((*h)->Get().Snap().cumulative[0] == 40000);
}
