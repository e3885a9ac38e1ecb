// PreprocessPool: `threads` workers, each with its own Preprocessor, fed
// through a BoundedQueue of tasks (a few samples each). Run() splits a
// batch into tasks, pushes them (waiting while the queue is full) and
// waits for all of them, so the memory in flight is the caller's
// payloads and outputs plus at most queue_capacity tasks of views: a
// reader that outruns preprocessing waits rather than buffering.
//
// Not responsible for: reading records (the caller keeps every payload
// alive until Run returns), what the floats are for.
// Thread-safety: Run may be called from several threads at once (their
// tasks share the queue and workers). The destructor joins the workers;
// no Run may be in progress.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "core/status.h"
#include "preprocess/bounded_queue.h"
#include "preprocess/preprocessor.h"

namespace loft::preprocess {

struct PoolOptions {
  int threads = 2;              // >= 1 (the agent's preprocess_threads)
  size_t queue_capacity = 0;    // tasks; 0 = 4 per thread
  size_t samples_per_task = 8;  // >= 1

  Status Validate() const;
};

// One sample to preprocess: its payload and where its input_size() floats go.
struct PreprocessItem {
  uint64_t id = 0;
  int64_t epoch = 0;
  std::span<const uint8_t> payload;
  std::span<float> out;
  // When set, receives this item's own result (the caller learns every
  // failed item, not only the lowest-indexed one Run returns).
  Status* status = nullptr;
  // Set (input_size() bytes): the input goes here as its uint8 levels
  // (Preprocessor::RunBytes, what a holder serves decoded) and `out` is
  // not used.
  std::span<uint8_t> bytes = {};
};

class PreprocessPool {
 public:
  static StatusOr<std::unique_ptr<PreprocessPool>> Create(const PreprocessOptions& options,
                                                          const PoolOptions& pool);
  ~PreprocessPool();
  PreprocessPool(const PreprocessPool&) = delete;
  PreprocessPool& operator=(const PreprocessPool&) = delete;

  // Preprocesses every item and returns when all are done: OK, or the
  // error of the lowest-indexed item that failed (every other item is
  // still processed; a failed item's floats are unspecified).
  Status Run(std::span<const PreprocessItem> items);

  const PreprocessOptions& options() const { return options_; }
  int threads() const { return static_cast<int>(workers_.size()); }
  size_t queue_capacity() const { return queue_.capacity(); }
  // The most tasks the queue held at once (<= queue_capacity()).
  size_t max_queue_depth() const { return queue_.max_depth(); }

 private:
  struct Batch;
  struct Task {
    Batch* batch = nullptr;
    size_t begin = 0, end = 0;  // items [begin, end) of batch->items
  };
  PreprocessPool(const PreprocessOptions& options, const PoolOptions& pool);
  void Work();

  PreprocessOptions options_;
  PoolOptions pool_;
  BoundedQueue<Task> queue_;
  std::vector<std::thread> workers_;
};

}  // namespace loft::preprocess
