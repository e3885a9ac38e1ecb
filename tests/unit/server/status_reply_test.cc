// server/status_reply.h on a large recorded run (no sockets): a
// StatusRequest's rows come a page at a time, for the operator's key
// only, at a cost that does not grow with the run; per-key byte budgets.
#include "server/status_reply.h"

#include <catch2/catch.hpp>
#include <string>

namespace {
using loft::server::CheckStatusRequest;
using loft::server::FillStatusRows;
using loft::server::kMaxStatusRows;
using loft::server::StatusBudget;

// `workers` rows per iteration for `iterations` iterations, kept as the
// scheduler keeps them (at most 2^20 rows: server/service.cc).
loft::sched::RunRecorder Recorded(int workers, int iterations) {
  loft::sched::RunRecorder rec({.max_records = (int64_t{1} << 20) / workers, .max_makespans = 100000});
  for (int i = 0; i < iterations; ++i) {
    loft::sched::IterationRecord it;
    it.iteration = i;
    it.start_ms = 10.0 * i;
    it.makespan_ms = 9;
    it.workers.resize(static_cast<size_t>(workers));
    for (int w = 0; w < workers; ++w) {
      it.workers[w].node = w;
      it.workers[w].batch = 64;
      it.workers[w].own_ms = 8;
    }
    rec.Add(std::move(it));
  }
  return rec;
}

loft::v1::StatusRequest Rows(int64_t from, int32_t max_rows = 0) {
  loft::v1::StatusRequest req;
  req.set_include_rows(true);
  req.set_rows_from(from);
  req.set_max_rows(max_rows);
  return req;
}

}  // namespace

TEST_CASE(
    "status rows of 1000 workers x 1000 iterations: one bounded page per request and every row reachable") {
  const auto big = Recorded(1000, 1000);
  REQUIRE(big.rows_kept() == 1000000);
  for (int64_t from : {int64_t{0}, int64_t{123457}, int64_t{999000}}) {
    INFO("from " << from);
    loft::v1::RunSummary out;
    FillStatusRows(big, Rows(from), &out);
    const int64_t want = std::min<int64_t>(kMaxStatusRows, 1000000 - from);
    REQUIRE(out.rows_size() == want);
    CHECK(out.rows_kept() == 1000000);
    CHECK(out.rows_from() == from);
    CHECK(out.ByteSizeLong() <= static_cast<size_t>(kMaxStatusRows) * 200);
    // Row k is worker k % 1000 of iteration k / 1000.
    CHECK(out.rows(0).iteration() == from / 1000);
    CHECK(out.rows(0).worker() == from % 1000);
    CHECK(out.rows(want - 1).iteration() == (from + want - 1) / 1000);
    CHECK(out.rows(want - 1).worker() == (from + want - 1) % 1000);
  }
  // What a page costs is bounded by its rows and bytes (above), not by the
  // run's: no timing here (machines are noisy; the house keeps speed in
  // bench/).
  // Paging from 0 by the rows received reaches every row once, in order.
  int64_t from = 0, pages = 0;
  bool in_order = true;
  while (from < big.rows_kept() && pages < 1000) {
    loft::v1::RunSummary out;
    FillStatusRows(big, Rows(from, 3000), &out);
    REQUIRE(out.rows_size() > 0);
    for (int k = 0; k < out.rows_size(); ++k) {
      const int64_t row = from + k;
      in_order = in_order && out.rows(k).iteration() == row / 1000 && out.rows(k).worker() == row % 1000;
    }
    from += out.rows_size();
    ++pages;
  }
  CHECK(in_order);
  CHECK(from == 1000000);
  CHECK(pages == (1000000 + 2999) / 3000);
  loft::v1::RunSummary past;
  FillStatusRows(big, Rows(1000000), &past);
  CHECK(past.rows_size() == 0);
}

TEST_CASE("status rows: the figures only unless asked and only the operator key may ask") {
  const auto rec = Recorded(4, 10);
  loft::v1::RunSummary out;
  FillStatusRows(rec, loft::v1::StatusRequest(), &out);
  CHECK(out.rows_size() == 0);
  CHECK(out.rows_kept() == 40);
  CHECK(CheckStatusRequest(loft::v1::StatusRequest(), "edge-0", false).ok());
  const loft::Status denied = CheckStatusRequest(Rows(0), "edge-0", false);
  CHECK(denied.code() == loft::StatusCode::kPermissionDenied);
  CHECK(denied.message().find("key 'edge-0'") != std::string::npos);
  CHECK(CheckStatusRequest(Rows(0), "loftctl", true).ok());
  CHECK(CheckStatusRequest(Rows(-1), "loftctl", true).code() == loft::StatusCode::kInvalidArgument);
  CHECK(CheckStatusRequest(Rows(0, -1), "loftctl", true).code() == loft::StatusCode::kInvalidArgument);
}

TEST_CASE("StatusBudget: a burst per key refilled at its rate and larger for the operator") {
  using loft::server::kOperatorStatusBurstBytes;
  using loft::server::kStatusBurstBytes;
  using loft::server::kStatusBytesPerS;
  StatusBudget b;
  REQUIRE(b.Admit("edge-0", false, 0).ok());
  b.Charge("edge-0", kStatusBurstBytes - 1);
  REQUIRE(b.Admit("edge-0", false, 0).ok());  // one byte left: one more reply
  b.Charge("edge-0", 1 << 20);                // that reply overdraws by ~1 MiB
  const loft::Status wait = b.Admit("edge-0", false, 0);
  CHECK(wait.code() == loft::StatusCode::kResourceExhausted);
  CHECK(wait.message().find("retry in 1000 ms") != std::string::npos);
  CHECK(b.Admit("edge-1", false, 0).ok());  // another key has its own
  CHECK_FALSE(b.Admit("edge-0", false, 999).ok());
  CHECK(b.Admit("edge-0", false, 1001).ok());
  // The bucket holds at most a burst, however long the key was quiet.
  b.Charge("edge-0", 1);
  CHECK(b.Admit("edge-0", false, 1e9).ok());
  b.Charge("edge-0", kStatusBurstBytes);
  CHECK_FALSE(b.Admit("edge-0", false, 1e9).ok());
  // The operator's burst is larger.
  REQUIRE(b.Admit("loftctl", true, 0).ok());
  b.Charge("loftctl", kOperatorStatusBurstBytes - 1);
  CHECK(b.Admit("loftctl", true, 0).ok());
  b.Charge("loftctl", kStatusBytesPerS);
  CHECK_FALSE(b.Admit("loftctl", true, 0).ok());
}
