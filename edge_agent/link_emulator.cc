#include "edge_agent/link_emulator.h"

#include <algorithm>
#include <cmath>

namespace loft::agent {

TokenBucket::TokenBucket(Clock* clock, double rate_mbps, int64_t burst_bytes)
    : clock_(clock),
      rate_mbps_(rate_mbps),
      bytes_per_us_(rate_mbps * 1e6 / 8.0 / 1e6),
      burst_(static_cast<double>(std::max<int64_t>(burst_bytes, 1))),
      tokens_(burst_),
      last_us_(clock->NowMicros()) {}

int64_t TokenBucket::Acquire(int64_t bytes) {
  int64_t wait_us = 0;
  {
    std::lock_guard lock(mu_);
    int64_t now = clock_->NowMicros();
    tokens_ = std::min(burst_, tokens_ + static_cast<double>(now - last_us_) * bytes_per_us_);
    last_us_ = now;
    tokens_ -= static_cast<double>(bytes);  // may go negative: the debt is the wait
    if (tokens_ < 0) wait_us = static_cast<int64_t>(std::ceil(-tokens_ / bytes_per_us_));
  }
  if (wait_us > 0) clock_->SleepForMicros(wait_us);
  return wait_us;
}

}  // namespace loft::agent
