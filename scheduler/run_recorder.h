// RunRecorder: the one component that records a run's iterations (one row
// per worker per iteration) and computes every per-policy figure of
// summary.json, for both engines: loft-sim (sim/simulator.cc) and the
// loft-scheduler daemon (server/service.cc, read back by `loftctl cluster
// run`). The two engines only differ in where a row's timings come from
// (the simulator's cluster model, or the agents' PartitionTimings).
//
// Definitions (docs/DESIGN.md "One cluster spec, two engines"):
//  - an iteration's makespan is the time from its start to its last
//    worker's finish (the engine gives it);
//  - a worker's own_ms is the time from the iteration's start (or from
//    when its partition could start, if later) to its finish;
//  - wait_ms = makespan − own_ms, and straggler_wait_ms is the MEAN of
//    wait_ms over every recorded row (workers × iterations), not a sum;
//  - mean / p95 (nearest rank) / last decile of the makespans, total_s =
//    (end of the last iteration − start of the first) / 1000, local and
//    remote bytes summed over rows.
//
// iterations.csv (WriteIterationsCsv) has the same header in both
// engines; kIterationsCsvHeader names the columns. Columns an engine does
// not model are written as 0 (the simulator: plan_ms, stream_ms, ack_ms,
// journal_ms; allreduce_ms unless the spec has a model; sim/README.md).
//
// Not responsible for: measuring anything, writing summary.json (the
// engines' writers turn RunFigures into it), files.
// Thread-safety: not thread-safe; one recorder per run, one caller.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/proto/loft.pb.h"

namespace loft::sched {

// One worker in one iteration: a row of iterations.csv.
struct WorkerIteration {
  int32_t node = 0;
  int64_t batch = 0;
  int64_t local = 0;          // samples read from the worker's own cache
  int64_t remote = 0;         // samples read from peers
  double local_read_ms = 0;   // column fetch_local_ms
  double remote_read_ms = 0;  // column fetch_remote_ms
  double read_ms = 0;         // max(local, remote): they run concurrently
  double compute_ms = 0;
  double own_ms = 0;   // start of the iteration (or of the partition, if later) → this worker done
  double wait_ms = 0;  // makespan − own_ms (RunRecorder::Add fills it)
  // Measured by the daemon only (0 in the simulator):
  double plan_ms = 0;       // the scheduler's wall time planning this iteration
  double stream_ms = 0;     // iteration start → this partition sent
  double ack_ms = 0;        // own_ms not explained by the agent's read + compute (queues, transport)
  double allreduce_ms = 0;  // the agent's all-reduce time (training runs; not in compute_ms)
  double journal_ms = 0;    // the scheduler's journal append after planning this iteration
  int64_t local_bytes = 0;  // bytes actually read (0 for a failed partition)
  int64_t remote_bytes = 0;
  bool failed = false;
};

struct IterationRecord {
  int64_t iteration = 0;
  int64_t epoch = 0;
  double start_ms = 0;
  double makespan_ms = 0;
  double predicted_ms = 0;               // the plan's makespan
  double bound_ms = -1;                  // -1 when not computed
  std::vector<WorkerIteration> workers;  // one per partition, plan order
};

// The per-policy figures of summary.json.
struct RunFigures {
  int64_t iterations = 0;
  double mean_iteration_ms = 0;
  double p95_iteration_ms = 0;
  std::optional<double> last_decile_iteration_ms;  // unset with no iteration
  double total_s = 0;
  double straggler_wait_ms = 0;
  int64_t local_bytes = 0;
  int64_t remote_bytes = 0;
};

struct RunRecorderOptions {
  // Iteration records (with their rows) kept for iterations() and the
  // CSV; later ones still count in every figure. < 0 = no limit.
  int64_t max_records = -1;
  // Makespans kept for p95 / last decile. < 0 = no limit.
  int64_t max_makespans = -1;
};

inline constexpr std::string_view kIterationsCsvHeader =
    "policy,iteration,epoch,worker,batch,local,remote,fetch_local_ms,fetch_remote_ms,compute_ms,wait_ms,"
    "makespan_ms,plan_ms,stream_ms,ack_ms,allreduce_ms,own_ms,failed,journal_ms";

class RunRecorder {
 public:
  explicit RunRecorder(RunRecorderOptions options = {}) : options_(options) {}

  // One closed iteration: sets every row's wait_ms = makespan − own_ms
  // and accumulates the figures.
  void Add(IterationRecord it);

  // The figures over every iteration added. `epochs_completed` selects
  // the epochs whose last decile counts (LastDecileMs).
  RunFigures Figures(int64_t epochs_completed) const;

  const std::vector<IterationRecord>& iterations() const { return records_; }
  std::vector<IterationRecord> TakeIterations();
  int64_t iterations_added() const { return added_; }
  int64_t rows_added() const { return rows_; }
  // Rows of the kept iteration records (iterations()), in order.
  int64_t rows_kept() const { return rows_kept_; }
  // Appends kept rows from .. from + count - 1 (fewer at the end; none
  // when `from` is past it) to out->rows, as ToProto(IterationRecord)
  // would. Finds `from` by binary search: the cost is that of the rows
  // appended, not of the run.
  void RowsToProto(int64_t from, int64_t count, loft::v1::RunSummary* out) const;

 private:
  RunRecorderOptions options_;
  std::vector<IterationRecord> records_;
  std::vector<int64_t> row_starts_;  // per kept record: the index of its first row
  int64_t rows_kept_ = 0;
  std::vector<double> makespans_;
  std::vector<int64_t> epochs_;
  int64_t added_ = 0;
  double makespan_sum_ = 0;
  double first_start_ms_ = 0;
  double last_end_ms_ = 0;
  double wait_sum_ = 0;
  int64_t rows_ = 0;
  int64_t local_bytes_ = 0;
  int64_t remote_bytes_ = 0;
};

// Nearest-rank percentile (p in (0, 100]) of unsorted values; 0 if empty.
double Percentile(std::span<const double> values, double p);
// Mean over each epoch's last 10 % (≥ 1) of iterations, iterations given
// in order with their epoch; only epochs < `epochs_completed` unless none
// is (then every epoch). 0 if empty.
double LastDecileMs(std::span<const double> iteration_ms, std::span<const int64_t> epoch,
                    int64_t epochs_completed);

// iterations.csv: the header line, then one line per row. `node_names`
// maps a row's node to the worker column.
void WriteIterationsCsvHeader(std::ostream& out);
void WriteIterationsCsvRows(std::string_view policy, std::span<const IterationRecord> iterations,
                            std::span<const std::string> node_names, std::ostream& out);

// The plans' digest (FNV-1a): fold every planned partition, in
// ascending id (= plan) order, over its iteration, worker, attempt,
// sample ids and sources. Two engines that made the same decisions have
// the same digest (tests/unit/server/engines_agree_test.cc).
inline constexpr uint64_t kPlanDigestSeed = 1469598103934665603ULL;
uint64_t FoldPlanDigest(uint64_t digest, const loft::v1::Partition& p);

// The wire forms (StatusReply.run of the daemon).
void ToProto(const RunFigures& f, loft::v1::RunSummary* out);
RunFigures FiguresFromProto(const loft::v1::RunSummary& s);
void ToProto(const IterationRecord& it, loft::v1::RunSummary* out);  // appends its rows
// Groups rows (in order) back into iteration records.
std::vector<IterationRecord> IterationsFromProto(const loft::v1::RunSummary& s);

}  // namespace loft::sched
