#include "core/placement.h"

#include <catch2/catch.hpp>
#include <set>

using namespace loft;

TEST_CASE("every sample is held by exactly `replication` distinct nodes") {
  for (int r : {1, 2, 3}) {
    auto p = Placement::Make(10007, {1, 1, 1, 1, 1}, r, 42);
    REQUIRE(p.ok());
    int64_t total = 0;
    for (int j = 0; j < 5; ++j) total += static_cast<int64_t>(p->SamplesOf(j).size());
    CHECK(total == 10007 * r);
    for (uint64_t id = 0; id < 10007; ++id) {
      auto h = p->Holders(id);
      std::set<int32_t> distinct(h.begin(), h.end());
      REQUIRE(distinct.size() == static_cast<size_t>(r));
      for (int32_t n : h) REQUIRE(p->Holds(n, id));
    }
  }
}

TEST_CASE("shards are equal, zipf skews, explicit follows shares") {
  auto shards = Placement::Make(60000, std::vector<double>(8, 1.0), 1, 7);
  REQUIRE(shards.ok());
  for (int j = 0; j < 8; ++j) CHECK(shards->PrimaryCount(j) == 7500);

  std::vector<double> zipf;
  for (int k = 1; k <= 8; ++k) zipf.push_back(1.0 / std::pow(k, 1.2));
  auto z = Placement::Make(60000, zipf, 1, 7);
  REQUIRE(z.ok());
  for (int j = 1; j < 8; ++j) CHECK(z->PrimaryCount(j) < z->PrimaryCount(j - 1));
  CHECK(z->PrimaryCount(0) > 3 * z->PrimaryCount(7));

  auto e = Placement::Make(100, {3, 1, 0}, 1, 1);
  REQUIRE(e.ok());
  CHECK(e->PrimaryCount(0) == 75);
  CHECK(e->PrimaryCount(1) == 25);
  CHECK(e->PrimaryCount(2) == 0);
}

TEST_CASE("same seed same answer, different seed different answer") {
  auto a = Placement::Make(5000, {1, 2, 3}, 2, 9);
  auto b = Placement::Make(5000, {1, 2, 3}, 2, 9);
  auto c = Placement::Make(5000, {1, 2, 3}, 2, 10);
  REQUIRE((a.ok() && b.ok() && c.ok()));
  CHECK(a->SamplesOf(1) == b->SamplesOf(1));
  CHECK(a->SamplesOf(1) != c->SamplesOf(1));
}

TEST_CASE("bad placement arguments are rejected") {
  CHECK(Placement::Make(10, {1, 1}, 3, 0).status().code() == StatusCode::kInvalidArgument);
  CHECK(Placement::Make(10, {0, 0}, 1, 0).status().message() == "placement: weights must not all be 0");
  CHECK_FALSE(Placement::Make(0, {1}, 1, 0).ok());
}

TEST_CASE("SeededPermutation is a permutation") {
  auto p = SeededPermutation(1000, 3);
  std::set<uint64_t> s(p.begin(), p.end());
  CHECK(s.size() == 1000);
  CHECK(*s.rbegin() == 999);
  CHECK(p != SeededPermutation(1000, 4));
}
