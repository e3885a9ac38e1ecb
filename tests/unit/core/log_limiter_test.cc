// PeerText and PeerLogLimits (core/log_limiter.h): what a peer can put in
// the log, and how often. Time is driven by the test.
#include "core/log_limiter.h"

#include <spdlog/sinks/ostream_sink.h>

#include <catch2/catch.hpp>
#include <sstream>
#include <string>

using namespace std::chrono_literals;

TEST_CASE("PeerText cuts a peer's text and escapes what could forge or garble a line") {
  CHECK(loft::PeerText("node edge-1: ok") == "node edge-1: ok");
  CHECK(loft::PeerText("a\nb\x1b[31m\\") == "a\\x0ab\\x1b[31m\\x5c");
  CHECK(loft::PeerText(std::string("\xff\0", 2)) == "\\xff\\x00");
  const std::string cut = loft::PeerText(std::string(5000, 'x'));
  CHECK(cut == std::string(loft::kPeerTextLogBytes, 'x') + "...(5000 bytes)");
  CHECK(loft::PeerText(std::string(10, 'y'), 4) == "yyyy...(10 bytes)");
}

TEST_CASE("PeerLogLimits: a burst per kind and peer, the rest counted and named in the next line") {
  loft::metrics::Registry reg;
  auto fam = loft::AddLogSuppressedCounter(&reg, "loft_test");
  REQUIRE(fam.ok());
  loft::PeerLogLimits limits(3, 1000ms, *fam);
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  std::string note = "x";
  for (int i = 0; i < 3; ++i) CHECK(limits.Allow("peer_error", "edge-0", t0, &note));
  CHECK(note.empty());
  for (int i = 0; i < 50; ++i) CHECK_FALSE(limits.Allow("peer_error", "edge-0", t0 + 1ms));
  // Another peer, another kind: limits of their own.
  CHECK(limits.Allow("peer_error", "edge-1", t0 + 2ms));
  CHECK(limits.Allow("peer_report", "edge-0", t0 + 2ms));
  CHECK(limits.suppressed() == 50);
  CHECK(reg.Render().find("loft_test_log_suppressed_total{kind=\"peer_error\"} 50") != std::string::npos);
  // The next window: the first line says how many were held back.
  CHECK(limits.Allow("peer_error", "edge-0", t0 + 1000ms, &note));
  CHECK(note == " (50 similar lines not logged)");
  CHECK(limits.Allow("peer_error", "edge-0", t0 + 1001ms, &note));
  CHECK(note.empty());
}

TEST_CASE("PeerLogLimits: made-up peer names share one limiter past the cap") {
  loft::PeerLogLimits limits(1, 1000ms);
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  for (size_t i = 0; i < loft::PeerLogLimits::kMaxLimiters; ++i)
    REQUIRE(limits.Allow("k", "peer-" + std::to_string(i), t0));
  // Past the cap: one shared limiter for the newcomers (1 line, then none).
  CHECK(limits.Allow("k", "new-1", t0));
  CHECK_FALSE(limits.Allow("k", "new-2", t0));
  CHECK_FALSE(limits.Allow("k", "new-3", t0));
  CHECK(limits.suppressed() == 2);
}

TEST_CASE("PeerLogLimits::Log writes at most the burst, and nothing at a level the logger drops") {
  std::ostringstream captured;
  auto previous = spdlog::default_logger();
  auto logger =
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(captured));
  logger->set_level(spdlog::level::info);
  spdlog::set_default_logger(logger);
  loft::PeerLogLimits limits(2, 10000ms);
  for (int i = 0; i < 100; ++i)
    limits.Log(spdlog::level::info, "peer_error", "edge-0", "error from a peer: {}", loft::PeerText("a\nb"));
  for (int i = 0; i < 100; ++i) limits.Log(spdlog::level::debug, "debug_kind", "edge-0", "quiet {}", i);
  spdlog::set_default_logger(previous);
  const std::string text = captured.str();
  CHECK(std::count(text.begin(), text.end(), '\n') == 2);
  CHECK(text.find("error from a peer: a\\x0ab") != std::string::npos);
  CHECK(text.find("quiet") == std::string::npos);
  CHECK(limits.suppressed() == 98);  // the debug lines were not due: not counted
}
