#include "scheduler/open_iterations.h"

#include <catch2/catch.hpp>
#include <vector>

#include "scheduler/ledger.h"
#include "scheduler/run_recorder.h"

using loft::sched::FailedRow;
using loft::sched::IterationRecord;
using loft::sched::Ledger;
using loft::sched::OpenIteration;
using loft::sched::OpenIterations;
using loft::sched::RowFromTimings;
using loft::sched::RunRecorder;
using loft::sched::WorkerIteration;

namespace {
loft::v1::Partition Part(uint64_t id, int64_t iteration, int32_t worker, std::vector<int32_t> sources) {
  loft::v1::Partition p;
  p.set_id(id);
  p.set_iteration(iteration);
  p.set_worker(worker);
  p.set_attempt(1);
  for (size_t k = 0; k < sources.size(); ++k) {
    p.add_sample_ids(id * 100 + k);
    p.add_sources(sources[k]);
  }
  return p;
}
}  // namespace

TEST_CASE("rows from timings and from a failure", "[open_iterations]") {
  loft::v1::PartitionTimings t;
  t.set_local_samples(3);
  t.set_remote_samples(2);
  t.set_local_read_ms(4);
  t.set_remote_read_ms(9);
  t.set_compute_ms(5);
  t.set_local_bytes(300);
  t.set_remote_bytes(200);
  t.mutable_training()->set_allreduce_ms(7);
  const WorkerIteration r = RowFromTimings(2, t);
  CHECK(r.node == 2);
  CHECK(r.batch == 5);
  CHECK(r.read_ms == 9);  // local and remote reads run concurrently
  CHECK(r.allreduce_ms == 7);
  CHECK(r.remote_bytes == 200);
  CHECK_FALSE(r.failed);
  const WorkerIteration f = FailedRow(Part(1, 0, 1, {1, 0, 1, 2}));
  CHECK(f.failed);
  CHECK(f.batch == 4);
  CHECK(f.local == 2);
  CHECK(f.remote == 2);
}

TEST_CASE("iterations close in order, each from max(plan, the previous one's last row)",
          "[open_iterations]") {
  Ledger ledger;
  RunRecorder recorder;
  OpenIterations open;
  REQUIRE(ledger.AddPlanned(Part(1, 0, 0, {0, 0}), 0, 0).ok());
  REQUIRE(ledger.AddPlanned(Part(2, 0, 1, {0, 1}), 0, 0).ok());
  REQUIRE(ledger.AddPlanned(Part(3, 1, 0, {0}), 5, 0).ok());
  REQUIRE(ledger.AddPlanned(Part(4, 2, 1, {1}), 6, 0).ok());
  open.Open(0).planned_ms = 0;
  open.Open(1).planned_ms = 5;
  open.Open(2).planned_ms = 6;
  for (uint64_t id : {1, 2, 3, 4}) REQUIRE(ledger.MarkSent(id, 1, 1) == loft::sched::AckOutcome::kAccepted);

  // Iteration 1 ends first: it waits for iteration 0.
  REQUIRE(ledger.MarkDone(3, 1, 0, 12) == loft::sched::AckOutcome::kAccepted);
  WorkerIteration w3;
  w3.node = 0;
  w3.read_ms = 2;
  w3.compute_ms = 3;
  open.AddRow(1, w3, 1, 12);
  std::vector<int64_t> closed;
  auto on_close = [&](int64_t it, const OpenIteration&, IterationRecord* rec) {
    closed.push_back(rec != nullptr ? it : -it - 100);
  };
  CHECK(open.Close(ledger, &recorder, on_close) == 0);
  CHECK(closed.empty());

  REQUIRE(ledger.MarkDone(1, 1, 0, 10) == loft::sched::AckOutcome::kAccepted);
  open.AddRow(0, WorkerIteration{.node = 0}, 1, 10);
  // Partition 2 fails: a failed row, its worker's time ends then.
  REQUIRE(ledger.MarkFailed(2, 1, 1, 8) == loft::sched::AckOutcome::kAccepted);
  open.AddRow(0, FailedRow(ledger.Find(2)->partition), 1, 8);
  // Partition 4 (iteration 2) is committed by the ring: no row of its own.
  REQUIRE(ledger.MarkDone(4, 1, 1, 13) == loft::sched::AckOutcome::kAccepted);
  CHECK(open.Close(ledger, &recorder, on_close) == 2);
  CHECK(closed == std::vector<int64_t>{0, 1, -102});
  CHECK(open.empty());
  CHECK(open.prev_done_ms() == 12);

  const auto& recs = recorder.iterations();
  REQUIRE(recs.size() == 2);
  CHECK(recs[0].start_ms == 0);
  CHECK(recs[0].makespan_ms == 10);
  REQUIRE(recs[0].workers.size() == 2);
  CHECK(recs[0].workers[0].own_ms == 9);  // sent at 1
  CHECK(recs[0].workers[0].stream_ms == 1);
  CHECK(recs[0].workers[0].wait_ms == 1);
  CHECK(recs[0].workers[1].failed);
  CHECK(recs[0].workers[1].own_ms == 7);
  // Iteration 1 was planned at 5 but starts at iteration 0's last row (10).
  CHECK(recs[1].start_ms == 10);
  CHECK(recs[1].makespan_ms == 2);
  CHECK(recs[1].workers[0].own_ms == 2);
  CHECK(recs[1].workers[0].stream_ms == 0);
  CHECK(recs[1].workers[0].ack_ms == 0);  // own_ms 2 < read 2 + compute 3: clamped at 0
}
