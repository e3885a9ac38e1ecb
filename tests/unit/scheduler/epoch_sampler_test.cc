#include "scheduler/epoch_sampler.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "core/placement.h"

using loft::Placement;
using loft::sched::EpochSampler;

namespace {
Placement MakePlacement(int64_t samples, int nodes, int replication, uint64_t seed = 3) {
  auto p = Placement::Make(samples, std::vector<double>(nodes, 1.0), replication, seed);
  REQUIRE(p.ok());
  return std::move(p).value();
}
auto All() {
  return [](uint64_t) { return true; };
}
}  // namespace

TEST_CASE("EpochSampler: permutation is seeded and reproducible per epoch", "[sampler]") {
  Placement pl = MakePlacement(200, 4, 1);
  EpochSampler a(&pl, 42), b(&pl, 42), c(&pl, 43);
  std::vector<uint64_t> ta, tb, tc;
  a.TakeInOrder(200, All(), ta);
  b.TakeInOrder(200, All(), tb);
  c.TakeInOrder(200, All(), tc);
  CHECK(ta == tb);
  CHECK(ta != tc);
  std::vector<uint64_t> sorted = ta;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t i = 0; i < 200; ++i) CHECK(sorted[i] == i);
  a.StartEpoch(1);
  std::vector<uint64_t> t1;
  a.TakeInOrder(200, All(), t1);
  CHECK(t1 != ta);
  CHECK(a.epoch() == 1);
}

TEST_CASE("EpochSampler: per-node counts follow takes and returns with replication", "[sampler]") {
  Placement pl = MakePlacement(300, 5, 2);
  EpochSampler s(&pl, 7);
  for (int j = 0; j < 5; ++j) CHECK(s.available(j) == static_cast<int64_t>(pl.SamplesOf(j).size()));
  std::vector<uint64_t> got;
  REQUIRE(s.TakeHeldBy(2, 25, got) == 25);
  for (uint64_t id : got) CHECK(pl.Holds(2, id));
  auto recount = [&](int j) {
    int64_t n = 0;
    for (uint64_t id : pl.SamplesOf(j)) n += s.state(id) == EpochSampler::SampleState::kPooled;
    return n;
  };
  for (int j = 0; j < 5; ++j) CHECK(s.available(j) == recount(j));
  // Taken ids are in epoch order among node 2's samples.
  for (size_t k = 1; k < got.size(); ++k) CHECK(s.position(got[k - 1]) < s.position(got[k]));
  REQUIRE(s.Return(std::span(got).subspan(0, 10), 99).ok());
  CHECK(s.origin(got[0]) == 99);
  for (int j = 0; j < 5; ++j) CHECK(s.available(j) == recount(j));
  // Returned samples are taken again first (smallest position).
  std::vector<uint64_t> again;
  s.TakeHeldBy(2, 10, again);
  std::vector<uint64_t> want(got.begin(), got.begin() + 10);
  CHECK(again == want);
  CHECK(s.pooled() + s.taken() + s.committed() == 300);
}

TEST_CASE("EpochSampler: exactly once per epoch, epoch done only when committed", "[sampler]") {
  Placement pl = MakePlacement(100, 3, 2);
  EpochSampler s(&pl, 1);
  std::vector<uint64_t> all;
  for (int j = 0; j < 3; ++j) s.TakeHeldBy(j, 1000, all);
  CHECK(all.size() == 100);
  CHECK(std::set<uint64_t>(all.begin(), all.end()).size() == 100);
  CHECK(s.pooled() == 0);
  CHECK_FALSE(s.EpochDone());
  int64_t dups = -1;
  REQUIRE(s.Commit(all, &dups).ok());
  CHECK(dups == 0);
  CHECK(s.EpochDone());
  REQUIRE(s.Commit(std::span(all).subspan(0, 3), &dups).ok());
  CHECK(dups == 3);
}

TEST_CASE("EpochSampler: non-assignable samples are skipped and kept", "[sampler]") {
  Placement pl = MakePlacement(120, 4, 1);
  EpochSampler s(&pl, 5);
  auto not_node0 = [&](uint64_t id) { return !pl.Holds(0, id); };
  std::vector<uint64_t> got;
  s.TakeInOrder(1000, not_node0, got);
  CHECK(static_cast<int64_t>(got.size()) == 120 - s.available(0));
  CHECK(s.pooled() == s.available(0));
  CHECK(s.CountAssignable(not_node0) == 0);
  CHECK(s.CountAssignable(All()) == s.available(0));
  std::vector<uint64_t> rest;
  s.TakeInOrder(1000, All(), rest);
  CHECK(rest.size() + got.size() == 120);
  for (size_t k = 1; k < rest.size(); ++k) CHECK(s.position(rest[k - 1]) < s.position(rest[k]));
}

TEST_CASE("EpochSampler: bad ids are rejected without changes", "[sampler]") {
  Placement pl = MakePlacement(50, 2, 1);
  EpochSampler s(&pl, 5);
  std::vector<uint64_t> ids = {1, 2, 2};
  CHECK(s.MarkTaken(ids).code() == loft::StatusCode::kInvalidArgument);
  std::vector<uint64_t> big = {50};
  CHECK(s.MarkTaken(big).code() == loft::StatusCode::kOutOfRange);
  std::vector<uint64_t> one = {4};
  CHECK(s.Return(one, 1).code() == loft::StatusCode::kFailedPrecondition);
  CHECK(s.Commit(one, nullptr).code() == loft::StatusCode::kFailedPrecondition);
  CHECK(s.pooled() == 50);
  REQUIRE(s.MarkTaken(one).ok());
  const uint64_t d = s.Digest();
  REQUIRE(s.Untake(one).ok());
  REQUIRE(s.MarkTaken(one).ok());
  CHECK(s.Digest() == d);
}
