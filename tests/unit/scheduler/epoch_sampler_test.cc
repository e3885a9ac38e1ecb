#include "scheduler/epoch_sampler.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <span>
#include <vector>

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
  for (size_t k = 0; k < ta.size(); ++k) CHECK(a.position(ta[k]) == static_cast<int64_t>(k));
  a.StartEpoch(1);
  std::vector<uint64_t> t1;
  a.TakeInOrder(200, All(), t1);
  CHECK(t1 != ta);
  CHECK(a.epoch() == 1);
  // Positions follow the new epoch's permutation (they are recomputed
  // lazily after StartEpoch).
  for (size_t k = 0; k < t1.size(); ++k) CHECK(a.position(t1[k]) == static_cast<int64_t>(k));
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

TEST_CASE("EpochSampler: a rolled-back trial leaves no trace, picks equal a sampler without trials",
          "[sampler]") {
  for (int replication : {1, 2}) {
    Placement pl = MakePlacement(600, 5, replication, 9);
    EpochSampler live(&pl, 17), ref(&pl, 17);
    auto not_node2 = [&](uint64_t id) {
      for (int32_t h : pl.Holders(id))
        if (h != 2) return true;
      return false;
    };
    // Same real history on both: takes (via MarkTaken, as Apply does),
    // a failed partition returned, a commit.
    uint64_t next_partition = 1;
    for (int round = 0; round < 8; ++round) {
      std::vector<uint64_t> planned;
      {
        // Dry run on `live` only: take per node + in order, then roll back.
        const uint64_t before = live.Digest();
        std::vector<int64_t> avail_before;
        for (int n = 0; n < 5; ++n) avail_before.push_back(live.available(n));
        live.BeginTrial();
        for (int n = 0; n < 5; ++n) live.TakeHeldBy(n, 7, planned);
        live.TakeInOrder(20, not_node2, planned);
        live.TakeInOrder(5, {}, planned);
        live.RollbackTrial();
        CHECK(live.Digest() == before);
        for (int n = 0; n < 5; ++n) CHECK(live.available(n) == avail_before[n]);
      }
      // The reference takes the same way for real; picks must match.
      std::vector<uint64_t> ref_ids;
      for (int n = 0; n < 5; ++n) ref.TakeHeldBy(n, 7, ref_ids);
      ref.TakeInOrder(20, not_node2, ref_ids);
      ref.TakeInOrder(5, {}, ref_ids);
      REQUIRE(ref_ids == planned);
      REQUIRE(live.MarkTaken(planned).ok());
      CHECK(live.Digest() == ref.Digest());
      // Half of the round comes back (a failed partition), half commits.
      const size_t half = planned.size() / 2;
      std::span<const uint64_t> failed(planned.data(), half);
      std::span<const uint64_t> done(planned.data() + half, planned.size() - half);
      REQUIRE(live.Return(failed, next_partition).ok());
      REQUIRE(ref.Return(failed, next_partition).ok());
      ++next_partition;
      int64_t dups = -1;
      REQUIRE(live.Commit(done, &dups).ok());
      REQUIRE(ref.Commit(done, &dups).ok());
      CHECK(live.Digest() == ref.Digest());
    }
  }
}

TEST_CASE("EpochSampler: MarkTaken rejects duplicates and bad states without changes", "[sampler]") {
  Placement pl = MakePlacement(50, 2, 1);
  EpochSampler s(&pl, 5);
  const uint64_t before = s.Digest();
  std::vector<uint64_t> dup = {3, 4, 3};
  CHECK(s.MarkTaken(dup).code() == loft::StatusCode::kInvalidArgument);
  CHECK(s.Digest() == before);
  std::vector<uint64_t> range = {1, 50};
  CHECK(s.MarkTaken(range).code() == loft::StatusCode::kOutOfRange);
  CHECK(s.Digest() == before);
  std::vector<uint64_t> ok = {1, 2};
  REQUIRE(s.MarkTaken(ok).ok());
  std::vector<uint64_t> again = {7, 2};
  CHECK(s.MarkTaken(again).code() == loft::StatusCode::kFailedPrecondition);
  CHECK(s.state(7) == EpochSampler::SampleState::kPooled);
  CHECK(s.pooled() == 48);
}

TEST_CASE("EpochSampler: TakeInOrder reports each taken id's primary holder", "[sampler]") {
  for (int replication : {1, 2}) {
    Placement pl = MakePlacement(500, 6, replication);
    EpochSampler with(&pl, 9), without(&pl, 9);
    // A returned partition puts samples behind the cursor: both paths of
    // TakeInOrder (behind set, then cursor) are exercised.
    std::vector<uint64_t> first;
    with.TakeInOrder(40, All(), first);
    std::vector<uint64_t> back(first.begin() + 10, first.begin() + 20);
    REQUIRE(with.Return(back, 7).ok());
    std::vector<uint64_t> first2;
    without.TakeInOrder(40, All(), first2);
    REQUIRE(without.Return(back, 7).ok());
    std::vector<uint64_t> ids, ids2;
    std::vector<int32_t> primaries;
    auto not_node1 = [&](uint64_t id) { return pl.Holders(id)[0] != 1; };
    CHECK(with.TakeInOrder(300, not_node1, ids, &primaries) == without.TakeInOrder(300, not_node1, ids2));
    CHECK(ids == ids2);
    REQUIRE(primaries.size() == ids.size());
    for (size_t k = 0; k < ids.size(); ++k) CHECK(primaries[k] == pl.Holders(ids[k])[0]);
    for (int n = 0; n < 6; ++n) CHECK(with.available(n) == without.available(n));
    CHECK(with.Digest() == without.Digest());
  }
}

TEST_CASE("EpochSampler: MarkTaken with holder hints equals MarkTaken without", "[sampler]") {
  for (int replication : {1, 2}) {
    Placement pl = MakePlacement(400, 4, replication, 11);
    EpochSampler hinted(&pl, 21), plain(&pl, 21);
    uint64_t next_partition = 1;
    for (int round = 0; round < 6; ++round) {
      // Plan on `plain` as a dry run (per node, then global order), apply
      // the same ids to both: one with holders (the node each id was
      // taken from), one without.
      std::vector<uint64_t> ids;
      std::vector<int32_t> holders;
      plain.BeginTrial();
      for (int n = 0; n < 4; ++n) {
        plain.TakeHeldBy(n, 9, ids);
        holders.resize(ids.size(), n);
      }
      std::vector<int32_t> primaries;
      plain.TakeInOrder(13, {}, ids, &primaries);
      holders.insert(holders.end(), primaries.begin(), primaries.end());
      plain.RollbackTrial();
      REQUIRE(holders.size() == ids.size());
      REQUIRE(hinted.MarkTaken(ids, holders).ok());
      REQUIRE(plain.MarkTaken(ids).ok());
      CHECK(hinted.Digest() == plain.Digest());
      for (int n = 0; n < 4; ++n) CHECK(hinted.available(n) == plain.available(n));
      // A third comes back (fills the behind sets), the rest commits.
      const size_t third = ids.size() / 3;
      std::span<const uint64_t> failed(ids.data(), third);
      std::span<const uint64_t> done(ids.data() + third, ids.size() - third);
      REQUIRE(hinted.Return(failed, next_partition).ok());
      REQUIRE(plain.Return(failed, next_partition).ok());
      ++next_partition;
      REQUIRE(hinted.Commit(done, nullptr).ok());
      REQUIRE(plain.Commit(done, nullptr).ok());
    }
    // Later picks agree too (cursors and behind sets are equivalent).
    std::vector<uint64_t> a, b;
    for (int n = 0; n < 4; ++n) {
      hinted.TakeHeldBy(n, 25, a);
      plain.TakeHeldBy(n, 25, b);
    }
    hinted.TakeInOrder(40, {}, a);
    plain.TakeInOrder(40, {}, b);
    CHECK(a == b);
    CHECK(hinted.Digest() == plain.Digest());
  }
}

TEST_CASE("EpochSampler: a rejected MarkTaken with hints restores counts and names the id", "[sampler]") {
  Placement pl = MakePlacement(60, 3, 1);
  EpochSampler s(&pl, 5);
  auto holder = [&](uint64_t id) { return pl.Holders(id)[0]; };
  const uint64_t before = s.Digest();
  std::vector<int64_t> avail;
  for (int n = 0; n < 3; ++n) avail.push_back(s.available(n));
  auto unchanged = [&] {
    CHECK(s.Digest() == before);
    CHECK(s.pooled() == 60);
    CHECK(s.taken() == 0);
    for (int n = 0; n < 3; ++n) CHECK(s.available(n) == avail[n]);
    for (uint64_t id : {3, 4, 5}) CHECK(s.state(id) == EpochSampler::SampleState::kPooled);
  };
  std::vector<uint64_t> dup = {3, 4, 5, 4};
  std::vector<int32_t> dup_h = {holder(3), holder(4), holder(5), holder(4)};
  loft::Status st = s.MarkTaken(dup, dup_h);
  CHECK(st.code() == loft::StatusCode::kInvalidArgument);
  CHECK(st.message().find("sample id 4 listed twice") != std::string::npos);
  unchanged();
  std::vector<uint64_t> range = {3, 4, 60};
  std::vector<int32_t> range_h = {holder(3), holder(4), 0};
  CHECK(s.MarkTaken(range, range_h).code() == loft::StatusCode::kOutOfRange);
  unchanged();
  std::vector<int32_t> short_h = {holder(3)};
  CHECK(s.MarkTaken(range, short_h).code() == loft::StatusCode::kInvalidArgument);
  unchanged();
  std::vector<uint64_t> seven = {7};
  std::vector<int32_t> seven_h = {holder(7)};
  REQUIRE(s.MarkTaken(seven, seven_h).ok());
  CHECK(s.available(holder(7)) == avail[holder(7)] - 1);
  std::vector<uint64_t> again = {3, 7};
  std::vector<int32_t> again_h = {holder(3), holder(7)};
  st = s.MarkTaken(again, again_h);
  CHECK(st.code() == loft::StatusCode::kFailedPrecondition);
  CHECK(st.message().find("sample id 7 is taken") != std::string::npos);
  CHECK(s.state(3) == EpochSampler::SampleState::kPooled);
  CHECK(s.pooled() == 59);
  CHECK(s.available(holder(3)) == avail[holder(3)] - (holder(3) == holder(7) ? 1 : 0));
}

TEST_CASE("EpochSampler: a new epoch clears origins left by returned samples", "[sampler]") {
  Placement pl = MakePlacement(120, 3, 1);
  EpochSampler s(&pl, 8);
  std::vector<uint64_t> ids;
  s.TakeInOrder(30, All(), ids);
  REQUIRE(s.Return(std::span<const uint64_t>(ids.data(), 10), 42).ok());
  CHECK(s.with_origin() == 10);
  CHECK(s.origin(ids[0]) == 42);
  // Started before every sample was committed (origins still set) ...
  s.StartEpoch(1);
  CHECK(s.with_origin() == 0);
  for (uint64_t id = 0; id < 120; ++id) CHECK(s.origin(id) == 0);
  // ... and after a whole epoch committed (origins already all 0).
  std::vector<uint64_t> all;
  s.TakeInOrder(120, All(), all);
  REQUIRE(s.Return(std::span<const uint64_t>(all.data(), 5), 7).ok());
  std::vector<uint64_t> again;
  CHECK(s.TakeInOrder(5, All(), again) == 5);
  REQUIRE(s.Commit(all, nullptr).ok());
  REQUIRE(s.EpochDone());
  CHECK(s.with_origin() == 0);
  s.StartEpoch(2);
  EpochSampler fresh(&pl, 8);
  fresh.StartEpoch(2);
  CHECK(s.Digest() == fresh.Digest());
}

TEST_CASE("EpochSampler: a prepared epoch starts exactly as an unprepared one", "[sampler]") {
  for (int replication : {1, 2}) {
    INFO("replication " << replication);
    Placement pl = MakePlacement(300, 5, replication);
    EpochSampler plain(&pl, 9), prepared(&pl, 9);
    // Epoch 0 half taken in both; the prepared one readies epoch 1 early
    // (and a wrong guess, epoch 3, first: replaced, never used).
    std::vector<uint64_t> a, b;
    plain.TakeInOrder(150, All(), a);
    prepared.TakeInOrder(150, All(), b);
    prepared.PrepareEpoch(3);
    prepared.PrepareEpoch(1);
    REQUIRE(plain.Commit(a, nullptr).ok());
    REQUIRE(prepared.Commit(b, nullptr).ok());
    plain.StartEpoch(1);
    prepared.StartEpoch(1);
    CHECK(prepared.Digest() == plain.Digest());
    for (int node = 0; node < 5; ++node) CHECK(prepared.available(node) == plain.available(node));
    // Same picks, per node and in global order, and the same positions.
    std::vector<uint64_t> pa, pb;
    plain.TakeHeldBy(2, 40, pa);
    prepared.TakeHeldBy(2, 40, pb);
    CHECK(pa == pb);
    pa.clear();
    pb.clear();
    plain.TakeInOrder(300, All(), pa);
    prepared.TakeInOrder(300, All(), pb);
    CHECK(pa == pb);
    for (uint64_t id : pa) CHECK(prepared.position(id) == plain.position(id));
    // A preparation for another epoch is not used by the wrong StartEpoch.
    prepared.PrepareEpoch(5);
    plain.StartEpoch(2);
    prepared.StartEpoch(2);
    pa.clear();
    pb.clear();
    plain.TakeInOrder(300, All(), pa);
    prepared.TakeInOrder(300, All(), pb);
    CHECK(pa == pb);
  }
}
