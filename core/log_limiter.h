// LogRateLimiter: lets at most `burst` lines of one kind through per
// `window` and counts the rest, so a peer that repeats a bad action (a
// refused CURVE handshake, a flood of metrics connections) cannot flood
// the log. Time is passed in (tests drive it).
//
// PeerLogLimits: the same for every log line a peer can trigger by what it
// sends (an Error envelope, a PeerReport, a poisoning report, a consumer's
// frame): one LogRateLimiter per (kind, peer), so one flooding peer does
// not silence the others; lines held back are counted in a metric
// (`<prefix>_log_suppressed_total{kind}`) and named in the next line of
// that (kind, peer) let through ("(N similar lines not logged)"). Lines of
// a level the logger does not print are neither logged nor counted.
// PeerText: what a peer wrote, fit for one log line (bounded, escaped).
//
// Thread-safety: LogRateLimiter and PeerLogLimits are not thread-safe; one
// per thread or guard it (their metric may be shared: metrics are).
#pragma once

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "core/metrics.h"

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

// Declares `<prefix>_log_suppressed_total{kind}` (e.g. prefix
// "loft_scheduler"): the counter family of a daemon's PeerLogLimits.
StatusOr<metrics::CounterFamily*> AddLogSuppressedCounter(metrics::Registry* registry,
                                                          std::string_view prefix);

// Peer-supplied text in a log line is cut to this many bytes.
inline constexpr size_t kPeerTextLogBytes = 200;

// `text` as one log line may hold it: bytes outside printable ASCII are
// written \xNN (a peer cannot forge a line break or a terminal escape),
// and past `max_bytes` of input the rest is replaced by "...(N bytes)".
std::string PeerText(std::string_view text, size_t max_bytes = kPeerTextLogBytes);

class PeerLogLimits {
 public:
  using TimePoint = LogRateLimiter::TimePoint;
  // Each (kind, peer) may log `burst` lines per `window`. `suppressed`:
  // counter family with the label {kind} (may be null: not counted).
  PeerLogLimits(int burst, std::chrono::milliseconds window, metrics::CounterFamily* suppressed = nullptr)
      : burst_(burst), window_(window), suppressed_(suppressed) {}
  // The agents' and the scheduler's: 10 lines per 10 s per (kind, peer),
  // as for refused CURVE handshakes (core/curve.h).
  explicit PeerLogLimits(metrics::CounterFamily* suppressed)
      : PeerLogLimits(10, std::chrono::seconds(10), suppressed) {}

  // True when a line of `kind` about `peer` may be logged at `now`; then
  // *note (if not null) is "" or " (N similar lines not logged)". A false
  // is counted in suppressed{kind}.
  bool Allow(std::string_view kind, std::string_view peer, TimePoint now, std::string* note = nullptr);

  // Logs fmt(args...) at `level` when the logger prints that level and
  // Allow(kind, peer, now) lets it through.
  template <typename... Args>
  void Log(spdlog::level::level_enum level, std::string_view kind, std::string_view peer, TimePoint now,
           fmt::format_string<Args...> format, Args&&... args) {
    if (!spdlog::should_log(level)) return;
    std::string note;
    if (!Allow(kind, peer, now, &note)) return;
    spdlog::log(level, "{}{}", fmt::format(format, std::forward<Args>(args)...), note);
  }
  // The same at the steady clock's now.
  template <typename... Args>
  void Log(spdlog::level::level_enum level, std::string_view kind, std::string_view peer,
           fmt::format_string<Args...> format, Args&&... args) {
    Log(level, kind, peer, std::chrono::steady_clock::now(), format, std::forward<Args>(args)...);
  }

  // Lines held back so far, every kind.
  int64_t suppressed() const { return total_suppressed_; }

  // Distinct (kind, peer) limiters kept; past it, new peers of a kind share
  // one (peer names come from keys and node names, but a peer may make them up).
  static constexpr size_t kMaxLimiters = 4096;

 private:
  int burst_;
  std::chrono::milliseconds window_;
  metrics::CounterFamily* suppressed_;
  std::map<std::string, LogRateLimiter> limiters_;  // by kind + '\n' + peer
  int64_t total_suppressed_ = 0;
};

}  // namespace loft
