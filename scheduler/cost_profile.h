// A worker's cost profile (CostParams, scheduler/plan.h) in its one
// external form: the field names and the order every shape outside the
// planner uses. The status reply's workers[].profile (server/), the reader
// of `loftctl calibrate`, and the C API's double[LOFT_COST_FIELDS] arrays
// (loft_planner_add_worker_profile, loft_planner_cost) all go through
// kCostFields, so a field added to CostParams is added here once.
//
// Not responsible for: fitting (cost_model.h), priors (PriorFromSpec).
// SchedulerState::ToJson keeps its short keys (c0 … u): the golden state
// digests hash that text.
// Thread-safety: pure functions and constants.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "scheduler/plan.h"

namespace loft::sched {

struct CostField {
  std::string_view name;  // JSON key and C API field name (all in ms)
  double CostParams::*member;
};

// The order is the C API's (LOFT_COST_* in capi/include/loft/loft.h).
inline constexpr std::array<CostField, 7> kCostFields = {{
    {"compute_fixed_ms", &CostParams::compute_fixed_ms},
    {"compute_per_sample_ms", &CostParams::compute_per_sample_ms},
    {"local_fixed_ms", &CostParams::local_fixed_ms},
    {"local_per_sample_ms", &CostParams::local_per_sample_ms},
    {"remote_fixed_ms", &CostParams::remote_fixed_ms},
    {"remote_per_sample_ms", &CostParams::remote_per_sample_ms},
    {"uplink_per_sample_ms", &CostParams::uplink_per_sample_ms},
}};

std::array<double, kCostFields.size()> CostToArray(const CostParams& c);
CostParams CostFromArray(std::span<const double, kCostFields.size()> v);

// {"compute_fixed_ms": …, …}: every field, numbers in ms.
nlohmann::json CostToJson(const CostParams& c);
// The inverse. Every field must be present and a number: otherwise
// InvalidArgument "<where>.<field> is missing". Extra keys are ignored.
StatusOr<CostParams> CostFromJson(const nlohmann::json& j, std::string_view where);

}  // namespace loft::sched
