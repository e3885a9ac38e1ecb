#include "sim/cpu_quota.h"

#include <algorithm>

namespace loft::sim {

CpuQuota::CpuQuota(double cores, double period_ms, double idle_cores)
    : cores_(std::max(cores - idle_cores, 0.1 * cores)),
      capacity_ms_(cores_ * period_ms),
      tokens_ms_(capacity_ms_) {}

double CpuQuota::TokensAt(double now_ms) const {
  if (!enabled()) return 0;
  if (now_ms <= busy_until_ms_) return tokens_ms_;
  return std::min(capacity_ms_, tokens_ms_ + cores_ * (now_ms - busy_until_ms_));
}

double CpuQuota::Run(double now_ms, double work_ms) {
  if (!enabled() || !(work_ms > 0)) return now_ms;
  const double start = std::max(now_ms, busy_until_ms_);
  double tokens = TokensAt(start);
  double end = start;
  if (cores_ >= 1) {
    end = start + work_ms;  // never throttled
  } else {
    // At one core the bucket drains at 1 − cores per ms of work.
    const double full_speed = tokens / (1.0 - cores_);
    if (work_ms <= full_speed) {
      end = start + work_ms;
      tokens -= work_ms * (1.0 - cores_);
    } else {
      end = start + full_speed + (work_ms - full_speed) / cores_;
      tokens = 0;
    }
  }
  tokens_ms_ = std::clamp(tokens, 0.0, capacity_ms_);
  busy_until_ms_ = end;
  return end;
}

}  // namespace loft::sim
