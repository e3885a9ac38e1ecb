#include "preprocess/preprocess_pool.h"

#include <algorithm>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <string>

namespace loft::preprocess {

Status PoolOptions::Validate() const {
  if (threads < 1 || threads > 256)
    return InvalidArgument("preprocess: threads must be in [1, 256] (got " + std::to_string(threads) + ")");
  if (samples_per_task < 1) return InvalidArgument("preprocess: samples_per_task must be >= 1");
  return OkStatus();
}

// One Run's items and its completion count.
struct PreprocessPool::Batch {
  std::span<const PreprocessItem> items;
  std::mutex mu;
  std::condition_variable done_cv;
  size_t tasks_left = 0;
  size_t first_bad = std::numeric_limits<size_t>::max();
  Status error;
};

StatusOr<std::unique_ptr<PreprocessPool>> PreprocessPool::Create(const PreprocessOptions& options,
                                                                 const PoolOptions& pool) {
  LOFT_RETURN_IF_ERROR(options.Validate());
  LOFT_RETURN_IF_ERROR(pool.Validate());
  return std::unique_ptr<PreprocessPool>(new PreprocessPool(options, pool));
}

PreprocessPool::PreprocessPool(const PreprocessOptions& options, const PoolOptions& pool)
    : options_(options),
      pool_(pool),
      queue_(pool.queue_capacity > 0 ? pool.queue_capacity : 4 * static_cast<size_t>(pool.threads)) {
  workers_.reserve(static_cast<size_t>(pool.threads));
  for (int i = 0; i < pool.threads; ++i) workers_.emplace_back([this] { Work(); });
}

PreprocessPool::~PreprocessPool() {
  queue_.Close();
  for (auto& t : workers_) t.join();
}

void PreprocessPool::Work() {
  Preprocessor pre(options_);
  while (std::optional<Task> task = queue_.Pop()) {
    Batch& b = *task->batch;
    size_t bad = std::numeric_limits<size_t>::max();
    Status error;
    for (size_t i = task->begin; i < task->end; ++i) {
      const PreprocessItem& it = b.items[i];
      Status s = it.bytes.empty() ? pre.Run(it.id, it.epoch, it.payload, it.out)
                                  : pre.RunBytes(it.id, it.epoch, it.payload, it.bytes);
      if (it.status != nullptr) *it.status = s;
      if (!s.ok() && i < bad) {
        bad = i;
        error = std::move(s);
      }
    }
    std::lock_guard lock(b.mu);
    if (bad < b.first_bad) {
      b.first_bad = bad;
      b.error = std::move(error);
    }
    if (--b.tasks_left == 0) b.done_cv.notify_all();
  }
}

Status PreprocessPool::Run(std::span<const PreprocessItem> items) {
  if (items.empty()) return OkStatus();
  Batch b;
  b.items = items;
  const size_t per = pool_.samples_per_task;
  b.tasks_left = (items.size() + per - 1) / per;
  const size_t tasks = b.tasks_left;
  size_t pushed = 0;
  for (size_t begin = 0; begin < items.size(); begin += per, ++pushed) {
    // Push fails only once the queue is closed (the pool being destroyed,
    // which no Run may overlap); the tasks already queued still run.
    if (!queue_.Push(Task{&b, begin, std::min(items.size(), begin + per)})) break;
  }
  std::unique_lock lock(b.mu);
  b.tasks_left -= tasks - pushed;
  b.done_cv.wait(lock, [&] { return b.tasks_left == 0; });
  if (pushed < tasks) return Internal("preprocess: the pool is shutting down");
  return b.first_bad == std::numeric_limits<size_t>::max() ? OkStatus() : b.error;
}

}  // namespace loft::preprocess
