// ReadAllRowPages (tools/loftctl/status_pages.h) against the scheduler's own
// page function (server/status_reply.h FillStatusRows) on a recorded run
// of 1000 workers x 50 iterations (13 pages): iterations.csv of `loftctl
// cluster run` gets every row, in order, as when one reply held them all.
#include "tools/loftctl/status_pages.h"

#include <catch2/catch.hpp>
#include <string>

#include "scheduler/run_recorder.h"
#include "server/status_reply.h"

namespace {
loft::sched::RunRecorder Recorded(int workers, int iterations) {
  loft::sched::RunRecorder rec;
  for (int i = 0; i < iterations; ++i) {
    loft::sched::IterationRecord it;
    it.iteration = i;
    it.makespan_ms = 5 + i;
    it.workers.resize(static_cast<size_t>(workers));
    for (int w = 0; w < workers; ++w) {
      it.workers[w].node = w;
      it.workers[w].batch = i * 1000 + w;
    }
    rec.Add(std::move(it));
  }
  return rec;
}

// The scheduler's side of one request (figures, then a page of rows).
loft::v1::StatusReply Serve(const loft::sched::RunRecorder& rec, int64_t from) {
  loft::v1::StatusRequest req;
  req.set_include_rows(true);
  req.set_rows_from(from);
  loft::v1::StatusReply r;
  r.set_json("{}");
  loft::sched::ToProto(rec.Figures(0), r.mutable_run());
  loft::server::FillStatusRows(rec, req, r.mutable_run());
  return r;
}
}  // namespace

TEST_CASE("ReadAllRowPages reads every row of a run larger than a page in order") {
  const auto rec = Recorded(1000, 50);
  int requests = 0;
  auto all = loft::ctl::ReadAllRowPages([&](int64_t from) -> loft::StatusOr<loft::v1::StatusReply> {
    ++requests;
    return Serve(rec, from);
  });
  REQUIRE(all.ok());
  CHECK(requests == (50000 + loft::server::kMaxStatusRows - 1) / loft::server::kMaxStatusRows);
  REQUIRE(all->run().rows_size() == 50000);
  CHECK(all->run().iterations_completed() == 50);
  loft::v1::RunSummary whole;
  for (const auto& it : rec.iterations()) loft::sched::ToProto(it, &whole);
  bool same = true;
  for (int k = 0; k < whole.rows_size(); ++k)
    same = same && all->run().rows(k).SerializeAsString() == whole.rows(k).SerializeAsString();
  CHECK(same);
  const auto iterations = loft::sched::IterationsFromProto(all->run());
  REQUIRE(iterations.size() == 50);
  for (const auto& it : iterations) CHECK(it.workers.size() == 1000);
}

TEST_CASE("ReadAllRowPages stops with DataLoss on a page that does not continue the rows") {
  const auto rec = Recorded(1000, 10);
  // A page from another row than asked.
  auto shifted = loft::ctl::ReadAllRowPages([&](int64_t from) -> loft::StatusOr<loft::v1::StatusReply> {
    return Serve(rec, from == 0 ? 0 : from + 1);
  });
  CHECK(shifted.status().code() == loft::StatusCode::kDataLoss);
  // No rows although more are kept: an error, not an endless loop.
  int requests = 0;
  auto empty = loft::ctl::ReadAllRowPages([&](int64_t from) -> loft::StatusOr<loft::v1::StatusReply> {
    ++requests;
    auto r = Serve(rec, from);
    if (from > 0) r.mutable_run()->clear_rows();
    return r;
  });
  CHECK(empty.status().code() == loft::StatusCode::kDataLoss);
  CHECK(empty.status().message().find("from 4096 of 10000") != std::string::npos);
  CHECK(requests == 2);
  // An error from the scheduler is passed on.
  auto refused = loft::ctl::ReadAllRowPages(
      [](int64_t) -> loft::StatusOr<loft::v1::StatusReply> { return loft::PermissionDenied("key"); });
  CHECK(refused.status().code() == loft::StatusCode::kPermissionDenied);
  // A scheduler older than paging: every row in one reply, rows_kept 0.
  auto old = loft::ctl::ReadAllRowPages([&](int64_t) -> loft::StatusOr<loft::v1::StatusReply> {
    loft::v1::StatusReply r;
    for (const auto& it : rec.iterations()) loft::sched::ToProto(it, r.mutable_run());
    return r;
  });
  REQUIRE(old.ok());
  CHECK(old->run().rows_size() == 10000);
}
