#include "edge_agent/grant_table.h"

#include <catch2/catch.hpp>

using namespace loft;
using namespace loft::agent;

namespace {
v1::ServeGrant Grant(uint64_t partition, int32_t requester, std::vector<uint64_t> ids) {
  v1::ServeGrant g;
  g.set_partition_id(partition);
  g.set_requester(requester);
  for (auto id : ids) g.add_sample_ids(id);
  return g;
}
}  // namespace

TEST_CASE("Granted ids are served once, others are refused") {
  GrantTable t(16);
  t.Add(Grant(7, 1, {10, 11, 12}));
  std::vector<uint64_t> two{10, 11};
  CHECK(t.Authorize(7, 1, two).ok());
  auto again = t.Authorize(7, 1, two);
  CHECK(again.code() == StatusCode::kPermissionDenied);
  std::vector<uint64_t> not_granted{12, 13};
  auto denied = t.Authorize(7, 1, not_granted);
  CHECK(denied.code() == StatusCode::kPermissionDenied);
  CHECK(denied.message() == "sample 13 is not granted to node 1 for partition 7 (or was served already)");
  // Nothing was consumed by the refused request.
  std::vector<uint64_t> twelve{12};
  CHECK(t.Authorize(7, 1, twelve).ok());
}

TEST_CASE("Another requester or partition gets nothing") {
  GrantTable t(16);
  t.Add(Grant(7, 1, {10}));
  std::vector<uint64_t> ids{10};
  CHECK(t.Authorize(7, 2, ids).code() == StatusCode::kUnavailable);
  CHECK(t.Authorize(8, 1, ids).code() == StatusCode::kUnavailable);
  std::vector<uint64_t> dup{10, 10};
  CHECK(t.Authorize(7, 1, dup).code() == StatusCode::kPermissionDenied);
  // The refused request consumed nothing: 10 is still served once.
  CHECK(t.Authorize(7, 1, ids).ok());
  CHECK(t.Authorize(7, 1, ids).code() == StatusCode::kPermissionDenied);
}

TEST_CASE("A refused request late in its list gives back every id it had checked") {
  GrantTable t(16);
  t.Add(Grant(7, 1, {1, 2, 3, 4}));
  std::vector<uint64_t> bad{1, 2, 3, 9};
  CHECK(t.Authorize(7, 1, bad).code() == StatusCode::kPermissionDenied);
  std::vector<uint64_t> all{4, 3, 2, 1};
  CHECK(t.Authorize(7, 1, all).ok());
}

TEST_CASE("The table is bounded and drops requesters that left") {
  GrantTable t(2);
  t.Add(Grant(1, 1, {1}));
  t.Add(Grant(2, 1, {2}));
  t.Add(Grant(3, 2, {3}));
  CHECK(t.size() == 2);
  std::vector<uint64_t> one{1};
  CHECK(t.Authorize(1, 1, one).code() == StatusCode::kUnavailable);  // evicted
  t.DropRequester(2);
  CHECK(t.size() == 1);
  std::vector<uint64_t> three{3};
  CHECK(t.Authorize(3, 2, three).code() == StatusCode::kUnavailable);
}
