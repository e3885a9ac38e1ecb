#include "scheduler/cost_profile.h"

#include <google/protobuf/descriptor.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>

using loft::sched::CostFromArray;
using loft::sched::CostFromJson;
using loft::sched::CostParams;
using loft::sched::CostToArray;
using loft::sched::CostToJson;
using loft::sched::kCostFields;

namespace {

CostParams Distinct() {
  CostParams c;
  c.compute_fixed_ms = 1.5;
  c.compute_per_sample_ms = 0.25;
  c.local_fixed_ms = 0.125;
  c.local_per_sample_ms = 0.0625;
  c.remote_fixed_ms = 3.0;
  c.remote_per_sample_ms = 0.5;
  c.uplink_per_sample_ms = 0.75;
  return c;
}

bool Same(const CostParams& a, const CostParams& b) {
  for (const auto& f : kCostFields) {
    if (a.*f.member != b.*f.member) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("cost profile: every CostParams field is listed once, under a distinct name") {
  CHECK(kCostFields.size() * sizeof(double) == sizeof(CostParams));
  std::set<std::string> names;
  std::set<const void*> members;
  const CostParams c = Distinct();
  for (const auto& f : kCostFields) {
    names.insert(std::string(f.name));
    members.insert(&(c.*f.member));
  }
  CHECK(names.size() == kCostFields.size());
  CHECK(members.size() == kCostFields.size());
}

TEST_CASE("cost profile: JSON and array forms round-trip with the status document's keys") {
  const CostParams c = Distinct();
  const nlohmann::json j = CostToJson(c);
  CHECK(j.size() == kCostFields.size());
  CHECK(j["compute_fixed_ms"] == 1.5);
  CHECK(j["local_fixed_ms"] == 0.125);
  CHECK(j["uplink_per_sample_ms"] == 0.75);
  auto back = CostFromJson(j, "p");
  REQUIRE(back.ok());
  CHECK(Same(*back, c));
  const auto v = CostToArray(c);
  CHECK(v[0] == 1.5);
  CHECK(v[2] == 0.125);
  CHECK(v[6] == 0.75);
  CHECK(Same(CostFromArray(v), c));
}

TEST_CASE("cost profile: a missing or non-numeric field is named") {
  nlohmann::json j = CostToJson(Distinct());
  j.erase("remote_fixed_ms");
  auto missing = CostFromJson(j, "status.json: workers[a].profile");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() == "status.json: workers[a].profile.remote_fixed_ms is missing");
  j["remote_fixed_ms"] = "3";
  CHECK(CostFromJson(j, "x").status().message() == "x.remote_fixed_ms is missing");
  CHECK_FALSE(CostFromJson(nlohmann::json::array(), "x").ok());
}

TEST_CASE("cost profile: v1::CostProfile has kCostFields' names in their order, and round-trips") {
  const auto* d = loft::v1::CostProfile::descriptor();
  REQUIRE(static_cast<size_t>(d->field_count()) == kCostFields.size());
  for (size_t i = 0; i < kCostFields.size(); ++i) {
    CHECK(d->field(static_cast<int>(i))->name() == std::string(kCostFields[i].name));
    CHECK(d->field(static_cast<int>(i))->number() == static_cast<int>(i) + 1);
  }
  const CostParams c = Distinct();
  loft::v1::CostProfile p;
  loft::sched::CostToProto(c, &p);
  CHECK(p.compute_fixed_ms() == 1.5);
  CHECK(p.local_fixed_ms() == 0.125);
  CHECK(p.remote_per_sample_ms() == 0.5);
  CHECK(p.uplink_per_sample_ms() == 0.75);
  CHECK(Same(loft::sched::CostFromProto(p), c));
}

TEST_CASE("cost profile: the state dump's short keys are the ones the golden digests hash") {
  // SchedulerState::ToJson writes these keys; renaming one changes every
  // golden state digest.
  const std::map<std::string, std::string> want = {
      {"compute_fixed_ms", "c0"},    {"compute_per_sample_ms", "c1"}, {"local_fixed_ms", "l0"},
      {"local_per_sample_ms", "l1"}, {"remote_fixed_ms", "a"},        {"remote_per_sample_ms", "r"},
      {"uplink_per_sample_ms", "u"}};
  REQUIRE(want.size() == kCostFields.size());
  for (const auto& f : kCostFields) CHECK(want.at(std::string(f.name)) == f.digest_key);
}
