// BoundedQueue: a FIFO of at most `capacity` items shared by threads.
// Push blocks while the queue is full, so a producer faster than its
// consumers waits instead of growing memory; Pop blocks while it is empty.
// Close() wakes everyone: Push then fails, Pop drains what is left and
// then returns nullopt.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

namespace loft::preprocess {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

  // Blocks while full; false (item dropped) once closed.
  bool Push(T item) {
    std::unique_lock lock(mu_);
    not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    if (closed_) return false;
    PushLocked(std::move(item));
    lock.unlock();
    not_empty_.notify_one();
    return true;
  }

  // Never blocks: false when full or closed.
  bool TryPush(T item) {
    std::unique_lock lock(mu_);
    if (closed_ || items_.size() >= capacity_) return false;
    PushLocked(std::move(item));
    lock.unlock();
    not_empty_.notify_one();
    return true;
  }

  // Blocks while empty and open; nullopt once closed and drained.
  std::optional<T> Pop() {
    std::unique_lock lock(mu_);
    not_empty_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    lock.unlock();
    not_full_.notify_one();
    return item;
  }

  void Close() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  size_t capacity() const { return capacity_; }
  size_t size() const {
    std::lock_guard lock(mu_);
    return items_.size();
  }
  // The most items the queue ever held at once (<= capacity).
  size_t max_depth() const {
    std::lock_guard lock(mu_);
    return max_depth_;
  }

 private:
  void PushLocked(T item) {
    items_.push_back(std::move(item));
    max_depth_ = std::max(max_depth_, items_.size());
  }

  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<T> items_;
  size_t max_depth_ = 0;
  bool closed_ = false;
};

}  // namespace loft::preprocess
