// A worker's cost profile (CostParams, scheduler/plan.h) in its one
// external form: the field names and the order every shape outside the
// planner uses. The status reply's typed workers[].profile
// (v1::CostProfile, core/proto/loft.proto: the same field names in the
// same order), the status document's workers[].profile (server/), the
// reader of `loftctl calibrate`, the C API's double[LOFT_COST_FIELDS]
// arrays (loft_planner_add_worker_profile, loft_planner_cost) and the
// state dump SchedulerState::ToJson all go through kCostFields, so a field
// added to CostParams is added here and to v1::CostProfile once.
// SchedulerState::ToJson writes each field under its short `digest_key`
// (c0 … u): the golden state digests hash that text, so those keys stay.
//
// Not responsible for: fitting (cost_model.h), priors (PriorFromSpec).
// Thread-safety: pure functions and constants.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "scheduler/plan.h"

namespace loft::sched {

struct CostField {
  std::string_view name;  // JSON key, v1::CostProfile field and C API field name (all in ms)
  double CostParams::*member;
  std::string_view digest_key;  // its key in SchedulerState::ToJson (hashed by the golden digests)
};

// The order is the C API's (LOFT_COST_* in capi/include/loft/loft.h).
inline constexpr std::array<CostField, 7> kCostFields = {{
    {"compute_fixed_ms", &CostParams::compute_fixed_ms, "c0"},
    {"compute_per_sample_ms", &CostParams::compute_per_sample_ms, "c1"},
    {"local_fixed_ms", &CostParams::local_fixed_ms, "l0"},
    {"local_per_sample_ms", &CostParams::local_per_sample_ms, "l1"},
    {"remote_fixed_ms", &CostParams::remote_fixed_ms, "a"},
    {"remote_per_sample_ms", &CostParams::remote_per_sample_ms, "r"},
    {"uplink_per_sample_ms", &CostParams::uplink_per_sample_ms, "u"},
}};

std::array<double, kCostFields.size()> CostToArray(const CostParams& c);
CostParams CostFromArray(std::span<const double, kCostFields.size()> v);

// {"compute_fixed_ms": …, …}: every field, numbers in ms.
nlohmann::json CostToJson(const CostParams& c);
// The inverse. Every field must be present and a number: otherwise
// InvalidArgument "<where>.<field> is missing". Extra keys are ignored.
StatusOr<CostParams> CostFromJson(const nlohmann::json& j, std::string_view where);

// The typed form (StatusReply.workers[].profile).
void CostToProto(const CostParams& c, v1::CostProfile* out);
CostParams CostFromProto(const v1::CostProfile& p);

}  // namespace loft::sched
