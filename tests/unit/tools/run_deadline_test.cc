#include "tools/loftctl/run_deadline.h"

#include <catch2/catch.hpp>

using namespace loft;
using namespace loft::ctl;

TEST_CASE("a run that keeps completing iterations is never stopped by the no-progress deadline") {
  ProgressWatch w(RunDeadlines{.no_progress_s = 60, .deadline_s = 0}, /*start_s=*/10);
  // One iteration every 50 s for ten hours: always within 60 s of the last.
  for (int k = 1; k <= 720; ++k) {
    const double now = 10 + 50.0 * k;
    CHECK_FALSE(w.Due(now - 0.001).has_value());
    w.Observe(k, now);
  }
  CHECK(w.iterations_completed() == 720);
  CHECK_FALSE(w.Due(10 + 50.0 * 720 + 59.9).has_value());
  // The same count again is no progress: 60 s after the last new one it stops.
  w.Observe(720, 10 + 50.0 * 720 + 30);
  auto stop = w.Due(10 + 50.0 * 720 + 60);
  REQUIRE(stop.has_value());
  CHECK(stop->reason == "no_progress");
  CHECK(stop->status.code() == StatusCode::kDeadlineExceeded);
  CHECK(stop->status.message().find("no iteration completed for 60 s") != std::string::npos);
  CHECK(stop->status.message().find("720 iterations completed") != std::string::npos);
}

TEST_CASE("before the first iteration the no-progress clock runs from the start") {
  ProgressWatch w(RunDeadlines{.no_progress_s = 5, .deadline_s = 0}, 100);
  w.Observe(0, 101);  // the job has not completed an iteration yet
  CHECK_FALSE(w.Due(104.9).has_value());
  REQUIRE(w.Due(105).has_value());
  CHECK(w.Due(105)->reason == "no_progress");
}

TEST_CASE("an explicit deadline stops a run that progresses and 0 turns each rule off") {
  ProgressWatch w(RunDeadlines{.no_progress_s = 60, .deadline_s = 30}, 0);
  for (int k = 1; k < 30; ++k) w.Observe(k, k);
  CHECK_FALSE(w.Due(29.9).has_value());
  auto stop = w.Due(30);
  REQUIRE(stop.has_value());
  CHECK(stop->reason == "deadline");
  CHECK(stop->status.code() == StatusCode::kDeadlineExceeded);
  CHECK(stop->status.message().find("--timeout-s 30 s") != std::string::npos);

  ProgressWatch never(RunDeadlines{.no_progress_s = 0, .deadline_s = 0}, 0);
  CHECK_FALSE(never.Due(1e9).has_value());
}

TEST_CASE("negative deadlines are refused, naming the flag") {
  CHECK(RunDeadlines{}.Validate().ok());
  CHECK(RunDeadlines{}.no_progress_s == kDefaultNoProgressS);
  CHECK(RunDeadlines{}.deadline_s == 0);
  Status bad = RunDeadlines{.no_progress_s = -1, .deadline_s = 0}.Validate();
  CHECK(bad.code() == StatusCode::kInvalidArgument);
  CHECK(bad.message().find("--no-progress-timeout-s") != std::string::npos);
  CHECK(RunDeadlines{.no_progress_s = 1, .deadline_s = -2}.Validate().message().find("--timeout-s") !=
        std::string::npos);
}
