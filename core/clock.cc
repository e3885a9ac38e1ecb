#include "core/clock.h"

#include <chrono>
#include <thread>

namespace loft {

int64_t SystemClock::NowMicros() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t SystemClock::WallMicros() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void SystemClock::SleepForMicros(int64_t micros) {
  if (micros > 0) std::this_thread::sleep_for(std::chrono::microseconds(micros));
}

SystemClock* SystemClock::Default() {
  static SystemClock clock;
  return &clock;
}

void ManualClock::Set(int64_t micros) {
  int64_t cur = now_.load(std::memory_order_acquire);
  while (micros > cur && !now_.compare_exchange_weak(cur, micros, std::memory_order_acq_rel)) {
  }
}

}  // namespace loft
