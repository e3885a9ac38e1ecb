// ExactSleep: an emulated delay (synthetic compute, a spec's link latency)
// that lasts what was asked on average. A real sleep ends late: the
// thread's timer slack (50 µs by default) plus the wake-up, 0.15–0.4 ms per
// sleep measured on a loaded 2-core testbed, which no spec node has and
// the simulator does not charge. Each Sleep sets the calling thread's timer
// slack to 1 µs and takes what earlier sleeps overran off this one (never
// more than this sleep: the debt is capped at one sleep's time).
//
// Not responsible for: what is being emulated, jitter.
// Thread-safety: not thread-safe; one thread at a time (the owner's).
#pragma once

#include <cstdint>

#include "core/clock.h"

namespace loft::agent {

// Sets the calling thread's timer slack to 1 µs (default 50 µs), once per
// thread: its sleeps and poll timeouts end when asked, not up to 50 µs later.
void FineTimerSlack();

class ExactSleep {
 public:
  explicit ExactSleep(Clock* clock) : clock_(clock) {}
  void Sleep(int64_t micros);
  // Adds `micros` (> 0) that the emulated device did not spend but the
  // host made it wait (e.g. a thread waiting for a core before it could
  // start the next emulated step) to what later sleeps take off, like an
  // overrun (capped the same way: never more than the next sleep).
  void Owe(int64_t micros) {
    if (micros > 0) overrun_us_ += micros;
  }
  int64_t overrun_us() const { return overrun_us_; }

 private:
  Clock* clock_;
  int64_t overrun_us_ = 0;  // slept beyond the targets so far, still to take off
};

}  // namespace loft::agent
