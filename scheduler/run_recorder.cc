#include "scheduler/run_recorder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace loft::sched {

double Percentile(std::span<const double> values, double p) {
  if (values.empty()) return 0.0;
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(v.size()));
  const size_t idx = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(v.size()))) - 1;
  return v[idx];
}

double LastDecileMs(std::span<const double> iteration_ms, std::span<const int64_t> epoch,
                    int64_t epochs_completed) {
  double sum = 0;
  int64_t count = 0;
  size_t begin = 0;
  const size_t n = std::min(iteration_ms.size(), epoch.size());
  while (begin < n) {
    size_t end = begin;
    while (end < n && epoch[end] == epoch[begin]) ++end;
    if (epochs_completed <= 0 || epoch[begin] < epochs_completed) {
      const size_t tail = std::max<size_t>(1, (end - begin) / 10);
      for (size_t i = end - tail; i < end; ++i) sum += iteration_ms[i];
      count += static_cast<int64_t>(tail);
    }
    begin = end;
  }
  return count > 0 ? sum / static_cast<double>(count) : 0.0;
}

void RunRecorder::Add(IterationRecord it) {
  if (added_ == 0) first_start_ms_ = it.start_ms;
  ++added_;
  makespan_sum_ += it.makespan_ms;
  last_end_ms_ = std::max(last_end_ms_, it.start_ms + it.makespan_ms);
  for (WorkerIteration& w : it.workers) {
    w.wait_ms = it.makespan_ms - w.own_ms;
    wait_sum_ += w.wait_ms;
    ++rows_;
    local_bytes_ += w.local_bytes;
    remote_bytes_ += w.remote_bytes;
  }
  if (options_.max_makespans < 0 || static_cast<int64_t>(makespans_.size()) < options_.max_makespans) {
    makespans_.push_back(it.makespan_ms);
    epochs_.push_back(it.epoch);
  }
  if (options_.max_records < 0 || static_cast<int64_t>(records_.size()) < options_.max_records) {
    row_starts_.push_back(rows_kept_);
    rows_kept_ += static_cast<int64_t>(it.workers.size());
    records_.push_back(std::move(it));
  }
}

std::vector<IterationRecord> RunRecorder::TakeIterations() {
  row_starts_.clear();
  rows_kept_ = 0;
  return std::move(records_);
}

RunFigures RunRecorder::Figures(int64_t epochs_completed) const {
  RunFigures f;
  f.iterations = added_;
  f.local_bytes = local_bytes_;
  f.remote_bytes = remote_bytes_;
  if (added_ == 0) return f;
  f.mean_iteration_ms = makespan_sum_ / static_cast<double>(added_);
  f.p95_iteration_ms = Percentile(makespans_, 95.0);
  f.last_decile_iteration_ms = LastDecileMs(makespans_, epochs_, epochs_completed);
  f.total_s = std::max(0.0, last_end_ms_ - first_start_ms_) / 1000.0;
  f.straggler_wait_ms = rows_ > 0 ? wait_sum_ / static_cast<double>(rows_) : 0.0;
  return f;
}

void WriteIterationsCsvHeader(std::ostream& out) {
  out << kIterationsCsvHeader << '\n';
}

void WriteIterationsCsvRows(std::string_view policy, std::span<const IterationRecord> iterations,
                            std::span<const std::string> node_names, std::ostream& out) {
  fmt::memory_buffer buf;
  for (const IterationRecord& it : iterations) {
    for (const WorkerIteration& w : it.workers) {
      const std::string_view name = w.node >= 0 && static_cast<size_t>(w.node) < node_names.size()
                                        ? std::string_view(node_names[static_cast<size_t>(w.node)])
                                        : std::string_view("?");
      fmt::format_to(std::back_inserter(buf),
                     "{},{},{},{},{},{},{},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},"
                     "{:.6f},{:.6f},{},{:.6f}\n",
                     policy, it.iteration, it.epoch, name, w.batch, w.local, w.remote, w.local_read_ms,
                     w.remote_read_ms, w.compute_ms, w.wait_ms, it.makespan_ms, w.plan_ms, w.stream_ms,
                     w.ack_ms, w.allreduce_ms, w.own_ms, w.failed ? 1 : 0, w.journal_ms);
    }
    if (buf.size() > (1 << 20)) {
      out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
      buf.clear();
    }
  }
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
}

uint64_t FoldPlanDigest(uint64_t h, const loft::v1::Partition& p) {
  auto mix = [&h](uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 1099511628211ULL;
    }
  };
  mix(static_cast<uint64_t>(p.iteration()));
  mix(static_cast<uint64_t>(p.worker()));
  mix(static_cast<uint64_t>(p.attempt()));
  mix(static_cast<uint64_t>(p.sample_ids_size()));
  for (uint64_t id : p.sample_ids()) mix(id);
  for (int32_t src : p.sources()) mix(static_cast<uint64_t>(src));
  return h;
}

void ToProto(const RunFigures& f, loft::v1::RunSummary* out) {
  out->set_iterations_completed(f.iterations);
  out->set_mean_iteration_ms(f.mean_iteration_ms);
  out->set_p95_iteration_ms(f.p95_iteration_ms);
  if (f.last_decile_iteration_ms) out->set_last_decile_iteration_ms(*f.last_decile_iteration_ms);
  out->set_total_s(f.total_s);
  out->set_straggler_wait_ms(f.straggler_wait_ms);
  out->set_local_bytes(f.local_bytes);
  out->set_remote_bytes(f.remote_bytes);
}

RunFigures FiguresFromProto(const loft::v1::RunSummary& s) {
  RunFigures f;
  f.iterations = s.iterations_completed();
  f.mean_iteration_ms = s.mean_iteration_ms();
  f.p95_iteration_ms = s.p95_iteration_ms();
  if (s.iterations_completed() > 0) f.last_decile_iteration_ms = s.last_decile_iteration_ms();
  f.total_s = s.total_s();
  f.straggler_wait_ms = s.straggler_wait_ms();
  f.local_bytes = s.local_bytes();
  f.remote_bytes = s.remote_bytes();
  return f;
}

namespace {

// The WorkerIteration fields a WorkerIterationRow carries, with the row's
// getter and setter: the one list both directions below use. (read_ms is
// derived; the iteration's own fields are copied by the callers.)
template <typename F>
void ForEachRowField(F&& f) {
  using Row = loft::v1::WorkerIterationRow;
  f(&WorkerIteration::node, &Row::worker, &Row::set_worker);
  f(&WorkerIteration::batch, &Row::batch, &Row::set_batch);
  f(&WorkerIteration::local, &Row::local, &Row::set_local);
  f(&WorkerIteration::remote, &Row::remote, &Row::set_remote);
  f(&WorkerIteration::local_read_ms, &Row::fetch_local_ms, &Row::set_fetch_local_ms);
  f(&WorkerIteration::remote_read_ms, &Row::fetch_remote_ms, &Row::set_fetch_remote_ms);
  f(&WorkerIteration::compute_ms, &Row::compute_ms, &Row::set_compute_ms);
  f(&WorkerIteration::wait_ms, &Row::wait_ms, &Row::set_wait_ms);
  f(&WorkerIteration::plan_ms, &Row::plan_ms, &Row::set_plan_ms);
  f(&WorkerIteration::stream_ms, &Row::stream_ms, &Row::set_stream_ms);
  f(&WorkerIteration::ack_ms, &Row::ack_ms, &Row::set_ack_ms);
  f(&WorkerIteration::allreduce_ms, &Row::allreduce_ms, &Row::set_allreduce_ms);
  f(&WorkerIteration::own_ms, &Row::own_ms, &Row::set_own_ms);
  f(&WorkerIteration::journal_ms, &Row::journal_ms, &Row::set_journal_ms);
  f(&WorkerIteration::failed, &Row::failed, &Row::set_failed);
  f(&WorkerIteration::local_bytes, &Row::local_bytes, &Row::set_local_bytes);
  f(&WorkerIteration::remote_bytes, &Row::remote_bytes, &Row::set_remote_bytes);
}

void AppendRow(const IterationRecord& it, const WorkerIteration& w, loft::v1::RunSummary* out) {
  loft::v1::WorkerIterationRow* r = out->add_rows();
  r->set_iteration(it.iteration);
  r->set_epoch(it.epoch);
  r->set_makespan_ms(it.makespan_ms);
  r->set_start_ms(it.start_ms);
  r->set_predicted_ms(it.predicted_ms);
  ForEachRowField([&](auto field, auto, auto set) { (r->*set)(w.*field); });
}

}  // namespace

void ToProto(const IterationRecord& it, loft::v1::RunSummary* out) {
  for (const WorkerIteration& w : it.workers) AppendRow(it, w, out);
}

void RunRecorder::RowsToProto(int64_t from, int64_t count, loft::v1::RunSummary* out) const {
  if (from < 0 || count <= 0 || from >= rows_kept_) return;
  // The last record whose first row is at or before `from`.
  size_t rec = static_cast<size_t>(std::upper_bound(row_starts_.begin(), row_starts_.end(), from) -
                                   row_starts_.begin()) -
               1;
  auto in = static_cast<size_t>(from - row_starts_[rec]);
  for (; rec < records_.size() && count > 0; ++rec, in = 0) {
    const IterationRecord& it = records_[rec];
    for (; in < it.workers.size() && count > 0; ++in, --count) AppendRow(it, it.workers[in], out);
  }
}

std::vector<IterationRecord> IterationsFromProto(const loft::v1::RunSummary& s) {
  std::vector<IterationRecord> out;
  for (const loft::v1::WorkerIterationRow& r : s.rows()) {
    if (out.empty() || out.back().iteration != r.iteration()) {
      IterationRecord it;
      it.iteration = r.iteration();
      it.epoch = r.epoch();
      it.start_ms = r.start_ms();
      it.makespan_ms = r.makespan_ms();
      it.predicted_ms = r.predicted_ms();
      out.push_back(std::move(it));
    }
    WorkerIteration w;
    ForEachRowField([&](auto field, auto get, auto) { w.*field = (r.*get)(); });
    w.read_ms = std::max(w.local_read_ms, w.remote_read_ms);
    out.back().workers.push_back(w);
  }
  return out;
}

}  // namespace loft::sched
