// Clock: the only way loft code reads time. Injected everywhere so that the
// simulator (ManualClock, virtual time) and the daemons (SystemClock) run the
// same code. Time is an int64 count of microseconds since an arbitrary epoch.
//
// Thread-safety: SystemClock is thread-safe. ManualClock is thread-safe for
// NowMicros/Advance/Set (atomic); SleepForMicros advances virtual time.
#pragma once

#include <atomic>
#include <cstdint>

namespace loft {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time in microseconds.
  virtual int64_t NowMicros() const = 0;
  // Wall-clock time in microseconds since the Unix epoch (for logs/traces).
  virtual int64_t WallMicros() const = 0;
  virtual void SleepForMicros(int64_t micros) = 0;

  double NowMillis() const { return static_cast<double>(NowMicros()) / 1000.0; }
};

class SystemClock final : public Clock {
 public:
  int64_t NowMicros() const override;
  int64_t WallMicros() const override;
  void SleepForMicros(int64_t micros) override;
  // A process-wide instance (stateless, so sharing it is harmless).
  static SystemClock* Default();
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_micros = 0) : now_(start_micros) {}
  int64_t NowMicros() const override { return now_.load(std::memory_order_acquire); }
  int64_t WallMicros() const override { return NowMicros(); }
  // Sleeping advances virtual time; nothing blocks.
  void SleepForMicros(int64_t micros) override { Advance(micros); }
  void Advance(int64_t micros) { now_.fetch_add(micros, std::memory_order_acq_rel); }
  // Sets the time; going backwards is ignored (time is monotonic).
  void Set(int64_t micros);

 private:
  std::atomic<int64_t> now_;
};

}  // namespace loft
