#include "edge_agent/trainer.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace loft::agent {

StatusOr<double> SyntheticTrainer::Compute(const Batch& batch) {
  double ms = NominalMs(batch.samples.size());
  if (spec_.jitter > 0) ms *= std::max(0.0, 1.0 + spec_.jitter * normal_(rng_));
  // Timer slack is per thread: set it on the thread that computes.
  thread_local const bool slack_set = prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0) == 0;
  (void)slack_set;
  const int64_t want_us = static_cast<int64_t>(std::llround(ms * 1000.0));
  const int64_t credit_us = std::min(overrun_us_, want_us);
  const int64_t t0 = clock_->NowMicros();
  clock_->SleepForMicros(want_us - credit_us);
  const int64_t slept_us = clock_->NowMicros() - t0;
  // What this sleep overran its target, plus what is still owed; a sleep
  // shorter than asked (a clock that jumps) pays nothing back.
  overrun_us_ = std::max<int64_t>(0, overrun_us_ - credit_us + (slept_us - (want_us - credit_us)));
  overrun_us_ = std::min(overrun_us_, want_us);
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace loft::agent
