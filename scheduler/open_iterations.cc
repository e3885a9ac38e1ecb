#include "scheduler/open_iterations.h"

#include <algorithm>

namespace loft::sched {

WorkerIteration RowFromTimings(int32_t worker, const loft::v1::PartitionTimings& t) {
  WorkerIteration row;
  row.node = worker;
  row.local = t.local_samples();
  row.remote = t.remote_samples();
  row.batch = row.local + row.remote;
  row.local_read_ms = t.local_read_ms();
  row.remote_read_ms = t.remote_read_ms();
  row.read_ms = std::max(row.local_read_ms, row.remote_read_ms);
  row.compute_ms = t.compute_ms();
  row.allreduce_ms = t.has_training() ? t.training().allreduce_ms() : 0.0;
  row.local_bytes = t.local_bytes();
  row.remote_bytes = t.remote_bytes();
  return row;
}

WorkerIteration FailedRow(int32_t worker, int64_t batch, int64_t local) {
  WorkerIteration row;
  row.node = worker;
  row.batch = batch;
  row.local = local;
  row.remote = batch - local;
  row.failed = true;
  return row;
}

WorkerIteration FailedRow(const loft::v1::Partition& p) {
  return FailedRow(p.worker(), p.sample_ids_size(),
                   std::count(p.sources().begin(), p.sources().end(), p.worker()));
}

OpenIteration* OpenIterations::Find(int64_t iteration) {
  auto it = open_.find(iteration);
  return it == open_.end() ? nullptr : &it->second;
}

void OpenIterations::AddRow(int64_t iteration, WorkerIteration row, double sent_ms, double done_ms) {
  OpenIteration& s = open_[iteration];
  s.rows.push_back(std::move(row));
  s.sent_done.emplace_back(sent_ms, done_ms);
  s.last_done_ms = std::max(s.last_done_ms, done_ms);
}

int OpenIterations::Close(const Ledger& ledger, RunRecorder* recorder, const OnClose& on_close) {
  int added = 0;
  for (auto it = open_.begin(); it != open_.end();) {
    if (ledger.OpenInIteration(it->first) > 0) break;
    OpenIteration& s = it->second;
    if (s.rows.empty()) {
      if (on_close) on_close(it->first, s, nullptr);
    } else {
      const double start = std::max(s.planned_ms, prev_done_ms_);
      IterationRecord rec;
      rec.iteration = it->first;
      rec.epoch = s.epoch;
      rec.start_ms = start;
      rec.makespan_ms = s.last_done_ms - start;
      rec.predicted_ms = s.predicted_ms;
      rec.bound_ms = s.bound_ms;
      for (size_t k = 0; k < s.rows.size(); ++k) {
        WorkerIteration& w = s.rows[k];
        const auto [sent, done] = s.sent_done[k];
        w.own_ms = std::max(0.0, done - std::max(sent, start));
        w.plan_ms = s.plan_ms;
        w.journal_ms = s.journal_ms;
        w.stream_ms = std::max(0.0, sent - start);
        w.ack_ms = std::max(0.0, w.own_ms - w.read_ms - w.compute_ms - w.allreduce_ms);
      }
      rec.workers = std::move(s.rows);
      prev_done_ms_ = s.last_done_ms;
      if (on_close) on_close(it->first, s, &rec);
      recorder->Add(std::move(rec));  // fills each row's wait_ms
      ++added;
    }
    it = open_.erase(it);
  }
  return added;
}

}  // namespace loft::sched
