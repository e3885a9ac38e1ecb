#include "sim/loss_trace.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "core/cluster_spec.h"
#include "sim/simulator.h"

using namespace loft;
using namespace loft::sim;

TEST_CASE("a loss trace is read from training.csv's iteration and loss columns") {
  auto t = ParseLossTrace("iteration,wall_s,loss,test_accuracy\n0,0.1,2.5,\n1,0.2,2.0,0.5\n3,0.4,1.5,\n",
                          "training.csv");
  REQUIRE(t.ok());
  REQUIRE(t->size() == 4);
  CHECK((*t)[0] == 2.5);
  CHECK((*t)[1] == 2.0);
  CHECK(std::isnan((*t)[2]));  // no row for iteration 2: none reported
  CHECK((*t)[3] == 1.5);
  // An empty loss field is an iteration without a report.
  auto gap = ParseLossTrace("iteration,loss\n0,1\n1,\n", "x.csv");
  REQUIRE(gap.ok());
  CHECK(gap->size() == 1);
}

TEST_CASE("a bad loss trace is refused with the file, line and field") {
  auto no_col = ParseLossTrace("iteration,wall_s\n0,1\n", "a.csv");
  REQUIRE(!no_col.ok());
  CHECK(no_col.status().message().find("a.csv:1: the header has no 'loss' column") != std::string::npos);
  auto bad_loss = ParseLossTrace("iteration,loss\n0,1\n1,nan\n", "b.csv");
  REQUIRE(!bad_loss.ok());
  CHECK(bad_loss.status().message().find("b.csv:3: loss 'nan'") != std::string::npos);
  auto neg = ParseLossTrace("iteration,loss\n0,-1\n", "c.csv");
  REQUIRE(!neg.ok());
  CHECK(neg.status().message().find("c.csv:2: loss '-1'") != std::string::npos);
  auto bad_it = ParseLossTrace("iteration,loss\nx,1\n", "d.csv");
  REQUIRE(!bad_it.ok());
  CHECK(bad_it.status().message().find("d.csv:2: iteration 'x'") != std::string::npos);
  auto short_row = ParseLossTrace("iteration,wall_s,loss\n0,1\n", "e.csv");
  REQUIRE(!short_row.ok());
  CHECK(short_row.status().message().find("e.csv:2: 2 fields") != std::string::npos);
  CHECK(!ParseLossTrace("", "f.csv").ok());
  CHECK(!ParseLossTrace("iteration,loss\n", "g.csv").ok());
  auto missing = LoadLossTrace("/nonexistent/training.csv");
  REQUIRE(!missing.ok());
  CHECK(missing.status().message().find("/nonexistent/training.csv") != std::string::npos);
}

// period: auto shortens its rounds as the reported loss falls
// (scheduler/exchange_plan.h): with a trace whose loss drops to a
// sixteenth, loft-sim runs more exchanges than without one, where every
// round keeps the loss-free period (c = 1, so that period is below
// max_period and the loss factor shows).
TEST_CASE("loft-sim reports a loss trace, so period: auto shortens its rounds as the real job did") {
  auto spec = ParseClusterSpec(
      "dataset: {name: d, samples: 4000, sample_bytes: 784}\n"
      "training: {global_batch: 64, min_batch: 1, iterations: 60, seed: 3, model: mlp, aggregation: mean,\n"
      "           exchange: {period: auto, drift: 1, compression: int8}}\n"
      "nodes:\n"
      "  - name: a\n    count: 3\n    compute: {fixed_ms: 1, per_sample_ms: 0.01}\n"
      "    link: {up_mbps: 5, down_mbps: 5, latency_ms: 1}\n");
  REQUIRE(spec.ok());
  auto rounds = [&](std::vector<double> trace) {
    SimOptions o;
    o.policy = "uniform";
    o.loss_trace = std::move(trace);
    auto r = RunPolicy(*spec, o);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    REQUIRE(r->iterations.size() == 60);
    int n = 0;
    for (const IterationRecord& it : r->iterations) n += it.workers.at(0).allreduce_ms > 0 ? 1 : 0;
    return n;
  };
  std::vector<double> falling(60);
  for (size_t i = 0; i < falling.size(); ++i) falling[i] = i < 5 ? 2.0 : 2.0 / 16;
  const int without = rounds({});
  const int with = rounds(falling);
  INFO("rounds without a trace " << without << ", with " << with);
  CHECK(without >= 2);
  CHECK(with > without + without / 2);
}
