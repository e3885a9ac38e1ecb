#include "scheduler/ledger.h"

#include <catch2/catch.hpp>

using loft::sched::AckOutcome;
using loft::sched::Ledger;
using loft::sched::PartitionState;

namespace {
loft::v1::Partition P(uint64_t id, int64_t iteration, int32_t worker, int32_t attempt = 0,
                      uint64_t parent = 0) {
  loft::v1::Partition p;
  p.set_id(id);
  p.set_iteration(iteration);
  p.set_worker(worker);
  p.set_attempt(attempt);
  p.set_parent(parent);
  for (uint64_t s = 0; s < 3; ++s) {
    p.add_sample_ids(id * 10 + s);
    p.add_sources(worker);
  }
  return p;
}
}  // namespace

TEST_CASE("Ledger: lifecycle planned -> sent -> done, acks idempotent", "[ledger]") {
  Ledger l;
  REQUIRE(l.AddPlanned(P(1, 0, 2), 0, 100).ok());
  REQUIRE(l.AddPlanned(P(2, 0, 3), 0, 100).ok());
  CHECK(l.OpenInIteration(0) == 2);
  CHECK(l.MarkSent(1, 0, 5) == AckOutcome::kAccepted);
  CHECK(l.Find(1)->state == PartitionState::kSent);
  CHECK(l.MarkSent(1, 0, 6) == AckOutcome::kDuplicate);
  CHECK(l.MarkDone(1, 0, 2, 10) == AckOutcome::kAccepted);
  CHECK(l.Find(1)->state == PartitionState::kDone);
  CHECK(l.Find(1)->finished_ms == 10);
  CHECK(l.MarkDone(1, 0, 2, 11) == AckOutcome::kDuplicate);
  CHECK(l.MarkFailed(1, 0, 2, 11) == AckOutcome::kTerminal);
  CHECK(l.OpenInIteration(0) == 1);
  CHECK(l.InFlight() == std::vector<uint64_t>{2});
  CHECK(l.counters().acks_ignored == 3);
}

TEST_CASE("Ledger: stale, unknown and foreign acks are ignored and counted", "[ledger]") {
  Ledger l;
  REQUIRE(l.AddPlanned(P(1, 0, 2), 0, 0).ok());
  CHECK(l.MarkDone(9, 0, 2, 1) == AckOutcome::kUnknown);
  CHECK(l.MarkDone(1, 1, 2, 1) == AckOutcome::kWrongAttempt);
  CHECK(l.MarkDone(1, 0, 4, 1) == AckOutcome::kWrongNode);
  CHECK(l.Find(1)->state == PartitionState::kPlanned);
  CHECK(l.MarkFailed(1, 0, 2, 2) == AckOutcome::kAccepted);
  // Child partition; the parent's late ack is superseded.
  REQUIRE(l.AddPlanned(P(2, 1, 3, 1, 1), 3, 0).ok());
  CHECK(l.MarkDone(1, 0, 2, 4) == AckOutcome::kTerminal);
  CHECK(l.MarkDone(2, 1, 3, 4) == AckOutcome::kAccepted);
  CHECK(l.counters().acks_ignored == 4);
  CHECK(l.counters().retries == 1);
  CHECK(l.counters().failed == 1);
}

TEST_CASE("Ledger: timeouts, ids and pruning", "[ledger]") {
  Ledger l;
  CHECK(l.AddPlanned(P(0, 0, 1), 0, 0).code() == loft::StatusCode::kInvalidArgument);
  REQUIRE(l.AddPlanned(P(5, 0, 1), 0, 50).ok());
  REQUIRE(l.AddPlanned(P(6, 0, 2), 0, 0).ok());  // never times out
  CHECK(l.AddPlanned(P(6, 0, 2), 0, 0).code() == loft::StatusCode::kInvalidArgument);
  auto bad = P(7, 0, 1);
  bad.add_sources(1);
  CHECK(l.AddPlanned(bad, 0, 0).code() == loft::StatusCode::kInvalidArgument);
  CHECK(l.Expired(49).empty());
  CHECK(l.Expired(50) == std::vector<uint64_t>{5});
  CHECK(l.MarkTimedOut(5, 0, 50) == AckOutcome::kAccepted);
  CHECK(l.MarkTimedOut(5, 0, 51) == AckOutcome::kTerminal);
  CHECK(l.InFlightOf(2) == std::vector<uint64_t>{6});
  CHECK(l.counters().timed_out == 1);
  l.PruneBefore(1);  // 5 is terminal (pruned), 6 is open (kept)
  CHECK(l.Find(5) == nullptr);
  CHECK(l.Find(6) != nullptr);
  const std::string j = l.ToJson();
  CHECK(j.find("\"timed_out\":1") != std::string::npos);
}

TEST_CASE("WouldApply: only an open partition's own attempt from its worker", "[ledger]") {
  loft::sched::Ledger l;
  loft::v1::Partition p;
  p.set_id(5);
  p.set_worker(1);
  p.set_attempt(0);
  p.add_sample_ids(3);
  p.add_sources(1);
  REQUIRE(l.AddPlanned(p, 0, 0).ok());
  CHECK(loft::sched::WouldApply(l, 5, 0, 1));
  CHECK_FALSE(loft::sched::WouldApply(l, 6, 0, 1));  // unknown
  CHECK_FALSE(loft::sched::WouldApply(l, 5, 1, 1));  // other attempt
  CHECK_FALSE(loft::sched::WouldApply(l, 5, 0, 2));  // not its worker
  l.MarkDone(5, 0, 1, 1);
  CHECK_FALSE(loft::sched::WouldApply(l, 5, 0, 1));  // finished
}
