#include "edge_agent/exact_sleep.h"

#include <sys/prctl.h>

#include <algorithm>

namespace loft::agent {

void FineTimerSlack() {
  // Once per thread (the slack is a per-thread setting).
  thread_local const bool set = [] {
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    return true;
  }();
  (void)set;
}

void ExactSleep::Sleep(int64_t micros) {
  if (micros <= 0) return;
  FineTimerSlack();  // on the sleeping thread (once per thread)
  const int64_t credit = std::min(overrun_us_, micros);
  const int64_t target = micros - credit;
  const int64_t t0 = clock_->NowMicros();
  clock_->SleepForMicros(target);
  const int64_t slept = clock_->NowMicros() - t0;
  // What this sleep overran, plus what is still owed; a sleep shorter than
  // asked (a clock that jumps) pays nothing back.
  overrun_us_ = std::clamp<int64_t>(overrun_us_ - credit + (slept - target), 0, micros);
}

}  // namespace loft::agent
