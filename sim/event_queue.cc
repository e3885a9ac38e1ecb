#include "sim/event_queue.h"

#include <algorithm>
#include <utility>

namespace loft::sim {

uint64_t EventQueue::At(double time_ms, Callback cb) {
  const uint64_t seq = next_seq_++;
  heap_.push(Event{std::max(time_ms, now_ms_), seq, std::move(cb)});
  return seq;
}

bool EventQueue::Step() {
  if (heap_.empty()) return false;
  // priority_queue::top is const; move the callback out before popping.
  Event ev = std::move(const_cast<Event&>(heap_.top()));
  heap_.pop();
  now_ms_ = ev.time_ms;
  ++events_run_;
  ev.cb();
  return true;
}

uint64_t EventQueue::RunUntil(double limit_ms) {
  uint64_t n = 0;
  while (!heap_.empty() && heap_.top().time_ms <= limit_ms) {
    Step();
    ++n;
  }
  if (!heap_.empty()) now_ms_ = std::max(now_ms_, limit_ms);
  return n;
}

uint64_t EventQueue::RunWhile(const std::function<bool()>& keep_going) {
  uint64_t n = 0;
  while (!heap_.empty()) {
    Step();
    ++n;
    if (!keep_going()) break;
  }
  return n;
}

}  // namespace loft::sim
