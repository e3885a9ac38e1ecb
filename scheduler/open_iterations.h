// OpenIterations: the iterations planned and not yet closed, with the rows
// their workers reported, and the one rule that closes them into
// IterationRecords for the RunRecorder. Both engines use it: the
// loft-scheduler daemon (server/service_loop.cc) with the agents'
// PartitionTimings, loft-sim (sim/simulator.cc) with its cluster model's.
//
// The rule (docs/DESIGN.md "One cluster spec, two engines"):
//  - a worker's row is added when its partition ends: acked with its
//    timings (RowFromTimings), or failed / timed out (FailedRow: its
//    worker's time ends when it failed); a partition the ring committed on
//    its worker's behalf adds no row (it has no timings of its own);
//  - iterations close in order, once the ledger holds no open partition
//    of them; with planning ahead iteration t+1 runs after t on every
//    worker, so an iteration starts at max(its plan, the previous closed
//    iteration's last row) and ends at its own last row;
//  - a worker's own_ms runs from max(its send, that start) to its row
//    (>= 0: without a ring barrier a worker can ack t+1 before t's last
//    ack), stream_ms from the start to its send, ack_ms is own_ms not
//    explained by its read, compute and all-reduce; the RunRecorder fills
//    wait_ms = makespan - own_ms.
// An iteration whose every partition ended without a row (committed by the
// ring, or never sent) closes without a record.
//
// Not responsible for: deciding anything about partitions (the ledger),
// the figures (RunRecorder), the ring's votes (RingCommitter).
// Thread-safety: not thread-safe; one caller.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "core/proto/loft.pb.h"
#include "scheduler/ledger.h"
#include "scheduler/run_recorder.h"

namespace loft::sched {

// One iteration from its plan to its close.
struct OpenIteration {
  double planned_ms = 0;
  int64_t epoch = 0;
  double plan_ms = 0;                // wall time spent planning it (the daemon; 0 in loft-sim)
  double journal_ms = 0;             // the journal append that followed its plan (the daemon; 0 in loft-sim)
  double predicted_ms = 0;           // the plan's makespan
  double bound_ms = -1;              // the plan's lower bound; -1 = not computed
  std::vector<uint64_t> partitions;  // every partition planned in it
  // One row per ended partition, with its (sent, ended) times.
  std::vector<WorkerIteration> rows;
  std::vector<std::pair<double, double>> sent_done;
  double last_done_ms = 0;
};

// A worker's row from its own timings (read, compute, all-reduce, bytes).
WorkerIteration RowFromTimings(int32_t worker, const loft::v1::PartitionTimings& t);
// The row of a partition that failed or timed out: its sizes, failed = 1.
WorkerIteration FailedRow(int32_t worker, int64_t batch, int64_t local);
WorkerIteration FailedRow(const loft::v1::Partition& p);  // local = sources on its worker

class OpenIterations {
 public:
  // The iteration, opened (default fields) if it is not open yet.
  OpenIteration& Open(int64_t iteration) { return open_[iteration]; }
  OpenIteration* Find(int64_t iteration);
  bool empty() const { return open_.empty(); }
  int64_t oldest() const { return open_.empty() ? -1 : open_.begin()->first; }
  size_t size() const { return open_.size(); }

  // A row for `iteration` (opened if needed): sent at `sent_ms`, ended at `done_ms`.
  void AddRow(int64_t iteration, WorkerIteration row, double sent_ms, double done_ms);

  // What Close calls for each iteration it closes, in order. `record` is
  // the iteration's record before it goes to the recorder (nullptr: no
  // row, no record); `open` is still whole (rows moved into `record`).
  using OnClose = std::function<void(int64_t iteration, const OpenIteration& open, IterationRecord* record)>;
  // Closes, in order, every iteration with no open partition in `ledger`
  // (the rule above), adding each record to `recorder`. Returns how many
  // records it added.
  int Close(const Ledger& ledger, RunRecorder* recorder, const OnClose& on_close = {});

  // The last row's time of the last closed iteration with rows; -1 before.
  double prev_done_ms() const { return prev_done_ms_; }

 private:
  std::map<int64_t, OpenIteration> open_;  // std::map: an OpenIteration's address is stable
  double prev_done_ms_ = -1;
};

}  // namespace loft::sched
