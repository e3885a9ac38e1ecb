// Integer apportionment shared by the global-shuffle policies (uniform,
// lbbsp, pid): sizes proportional to weights, clamped to per-worker bounds,
// summing exactly to a total.
// Not responsible for: choosing samples or predicting times.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "scheduler/plan.h"

namespace loft::sched {

// x_i = clamp(s·w_i, min_i, max_i) with the scale s chosen so Σ x = total,
// then rounded by largest remainder (ties: lower index first), so
// Σ result = total and min_i ≤ result_i ≤ max_i. Weights must be finite and
// ≥ 0; all-zero weights mean equal weights. InvalidArgument when
// Σ min > total or Σ max < total or the spans differ in length.
StatusOr<std::vector<int64_t>> Apportion(std::span<const double> weights, std::span<const int64_t> mins,
                                         std::span<const int64_t> maxs, int64_t total);

// Apportion over a request's workers and wrap the sizes into a plan whose
// local/remote/predicted_ms come from EvaluateShuffle.
StatusOr<Plan> ShufflePlanFromWeights(const PlanRequest& req, std::span<const double> weights,
                                      std::string_view policy);

}  // namespace loft::sched
