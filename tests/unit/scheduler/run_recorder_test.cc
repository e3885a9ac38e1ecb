// RunRecorder: the one definition of every summary figure and of
// iterations.csv, shared by loft-sim and the daemon.
#include "scheduler/run_recorder.h"

#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

using loft::sched::IterationRecord;
using loft::sched::RunRecorder;
using loft::sched::WorkerIteration;

namespace {
IterationRecord Iter(int64_t i, int64_t epoch, double start, double makespan, std::vector<double> own) {
  IterationRecord it;
  it.iteration = i;
  it.epoch = epoch;
  it.start_ms = start;
  it.makespan_ms = makespan;
  for (size_t k = 0; k < own.size(); ++k) {
    WorkerIteration w;
    w.node = static_cast<int32_t>(k);
    w.own_ms = own[k];
    w.batch = 10;
    w.local = 6;
    w.remote = 4;
    w.local_bytes = 600;
    w.remote_bytes = 400;
    it.workers.push_back(w);
  }
  return it;
}
}  // namespace

TEST_CASE("straggler wait is the mean over workers and iterations of makespan - own time", "[recorder]") {
  RunRecorder r;
  r.Add(Iter(0, 0, 0, 30, {10, 30}));       // waits 20, 0
  r.Add(Iter(1, 0, 30, 50, {50, 40, 20}));  // waits 0, 10, 30
  auto f = r.Figures(0);
  CHECK(f.straggler_wait_ms == Approx((20.0 + 0 + 0 + 10 + 30) / 5));  // not the per-iteration sum (30)
  CHECK(f.iterations == 2);
  CHECK(f.mean_iteration_ms == Approx(40));
  CHECK(f.p95_iteration_ms == Approx(50));
  CHECK(f.total_s == Approx(0.080));
  CHECK(f.local_bytes == 5 * 600);
  CHECK(f.remote_bytes == 5 * 400);
  REQUIRE(r.iterations().size() == 2);
  CHECK(r.iterations()[1].workers[2].wait_ms == Approx(30));
}

TEST_CASE("a bounded recorder keeps counting every iteration in the figures", "[recorder]") {
  loft::sched::RunRecorderOptions o;
  o.max_records = 1;
  o.max_makespans = 1;
  RunRecorder r(o);
  r.Add(Iter(0, 0, 0, 10, {10}));
  r.Add(Iter(1, 0, 10, 30, {10}));
  auto f = r.Figures(0);
  CHECK(r.iterations().size() == 1);
  CHECK(f.iterations == 2);
  CHECK(f.mean_iteration_ms == Approx(20));
  CHECK(f.straggler_wait_ms == Approx(10));
}

TEST_CASE("iterations.csv has the shared header and one row per worker per iteration", "[recorder]") {
  RunRecorder r;
  r.Add(Iter(0, 0, 0, 30, {10, 30}));
  std::ostringstream out;
  loft::sched::WriteIterationsCsvHeader(out);
  std::vector<std::string> names = {"a", "b"};
  loft::sched::WriteIterationsCsvRows("loft", r.iterations(), names, out);
  std::istringstream in(out.str());
  std::string line;
  std::getline(in, line);
  CHECK(line ==
        "policy,iteration,epoch,worker,batch,local,remote,fetch_local_ms,fetch_remote_ms,compute_ms,wait_ms,"
        "makespan_ms,plan_ms,stream_ms,ack_ms,allreduce_ms,own_ms,failed,journal_ms");
  std::getline(in, line);
  CHECK(line.rfind("loft,0,0,a,10,6,4,", 0) == 0);
  CHECK(line.find(",20.000000,30.000000,") != std::string::npos);  // wait, makespan
  std::getline(in, line);
  CHECK(line.rfind("loft,0,0,b,", 0) == 0);
  CHECK(!std::getline(in, line));
}

TEST_CASE("figures and rows survive the wire form", "[recorder]") {
  RunRecorder r;
  r.Add(Iter(3, 1, 5, 30, {10, 30}));
  r.Add(Iter(4, 1, 35, 20, {20}));
  loft::v1::RunSummary s;
  loft::sched::ToProto(r.Figures(0), &s);
  for (const auto& it : r.iterations()) loft::sched::ToProto(it, &s);
  auto f = loft::sched::FiguresFromProto(s);
  CHECK(f.straggler_wait_ms == Approx(r.Figures(0).straggler_wait_ms));
  CHECK(f.iterations == 2);
  auto back = loft::sched::IterationsFromProto(s);
  REQUIRE(back.size() == 2);
  CHECK(back[0].iteration == 3);
  CHECK(back[0].workers.size() == 2);
  CHECK(back[0].workers[0].wait_ms == Approx(20));
  CHECK(back[1].start_ms == Approx(35));
}
