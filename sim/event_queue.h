// EventQueue: the simulator's deterministic discrete-event engine.
//
// Events are callbacks scheduled at a virtual time (milliseconds, double).
// They run in order of (time, insertion sequence): two events at the same
// time run in the order they were scheduled, so a run is a pure function
// of its inputs. Cancelling is done by the caller (callbacks check a
// generation counter they captured); the queue itself never reorders.
//
// Not responsible for: what an event means (the Simulator), randomness
// (seeded generators live with the model that draws from them).
// Thread-safety: not thread-safe; one queue per simulation, one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace loft::sim {

class EventQueue {
 public:
  using Callback = std::function<void()>;

  // Current virtual time in milliseconds (the time of the running event,
  // or the last run_until limit reached).
  double now_ms() const { return now_ms_; }
  // Schedules `cb` at `time_ms` (clamped to now: the past is not
  // reachable). Returns the event's sequence number.
  uint64_t At(double time_ms, Callback cb);
  uint64_t After(double delay_ms, Callback cb) { return At(now_ms_ + delay_ms, std::move(cb)); }

  // Runs events with time <= limit_ms in order; afterwards now_ms() is
  // limit_ms if the queue still holds later events, else the time of the
  // last event run. Returns the number of events run.
  uint64_t RunUntil(double limit_ms);
  // Runs until the queue is empty or `stop` returns true (checked after
  // every event). Returns the number of events run.
  uint64_t RunWhile(const std::function<bool()>& keep_going);
  // Runs the earliest event, if any. Returns false when empty.
  bool Step();

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  uint64_t events_run() const { return events_run_; }

 private:
  struct Event {
    double time_ms;
    uint64_t seq;
    Callback cb;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time_ms != b.time_ms ? a.time_ms > b.time_ms : a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  double now_ms_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t events_run_ = 0;
};

}  // namespace loft::sim
