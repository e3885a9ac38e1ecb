#include "server/service_clock.h"

#include <spdlog/spdlog.h>

namespace loft::server {

ServiceClock::ServiceClock(Clock* clock, double max_step_ms)
    : clock_(clock),
      max_step_ms_(max_step_ms > 0 ? max_step_ms : 1.0),
      anchor_ms_(static_cast<double>(clock->WallMicros()) / 1000.0 - clock->NowMillis()) {}

double ServiceClock::NowMillis() {
  const double raw = clock_->NowMillis();
  if (last_raw_ >= 0 && raw - last_raw_ > max_step_ms_) {
    const double gap = raw - last_raw_;
    stalled_ms_ += gap - max_step_ms_;
    spdlog::warn(
        "the scheduler did not run for {:.0f} ms (stopped or starved): its heartbeat and partition timers "
        "count {:.0f} ms of it",
        gap, max_step_ms_);
  }
  if (raw > last_raw_) last_raw_ = raw;
  return anchor_ms_ + last_raw_ - stalled_ms_;
}

void ServiceClock::NotBefore(double ms) {
  const double now = NowMillis();
  if (now >= ms) return;
  spdlog::warn(
      "the wall clock reads {:.0f} ms before the journal's latest recorded time (stepped back between "
      "runs?): service time resumes at the journal's time",
      ms - now);
  anchor_ms_ += ms - now;
}

}  // namespace loft::server
