// LogRateLimiter: lets at most `burst` lines of one kind through per
// `window` and counts the rest, so a peer that repeats a bad action (a
// refused CURVE handshake, a flood of metrics connections) cannot flood
// the log. Time is passed in (tests drive it).
//
// Thread-safety: not thread-safe; one limiter per thread or guard it.
#pragma once

#include <chrono>
#include <cstdint>

namespace loft {

class LogRateLimiter {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  LogRateLimiter(int burst, std::chrono::milliseconds window) : burst_(burst), window_(window) {}

  // True when a line may be logged at `now`; then *suppressed (if not null)
  // is the number of lines dropped since the last one allowed.
  bool Allow(TimePoint now, int64_t* suppressed = nullptr) {
    if (!started_ || now - window_start_ >= window_) {
      started_ = true;
      window_start_ = now;
      in_window_ = 0;
    }
    if (in_window_ >= burst_) {
      ++dropped_;
      return false;
    }
    ++in_window_;
    if (suppressed) *suppressed = dropped_;
    dropped_ = 0;
    return true;
  }

 private:
  int burst_;
  std::chrono::milliseconds window_;
  bool started_ = false;
  TimePoint window_start_{};
  int in_window_ = 0;
  int64_t dropped_ = 0;
};

}  // namespace loft
