#include "scheduler/policies/apportion.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace loft::sched {

StatusOr<std::vector<int64_t>> Apportion(std::span<const double> weights, std::span<const int64_t> mins,
                                         std::span<const int64_t> maxs, int64_t total) {
  const size_t n = weights.size();
  if (mins.size() != n || maxs.size() != n)
    return InvalidArgument("Apportion: weights, mins and maxs differ in size");
  if (n == 0) return InvalidArgument("Apportion: no workers");
  int64_t sum_min = 0, sum_max = 0;
  double wsum = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(weights[i]) || weights[i] < 0) {
      return InvalidArgument(
          fmt::format("Apportion: weight {} is {}, must be finite and >= 0", i, weights[i]));
    }
    if (mins[i] < 0 || maxs[i] < mins[i]) {
      return InvalidArgument(fmt::format("Apportion: worker {} has min {} max {}", i, mins[i], maxs[i]));
    }
    sum_min += mins[i];
    sum_max += maxs[i];
    wsum += weights[i];
  }
  if (sum_min > total) {
    return InvalidArgument(
        fmt::format("infeasible: sum of min_batch ({}) exceeds global_batch ({})", sum_min, total));
  }
  if (sum_max < total) {
    return InvalidArgument(
        fmt::format("infeasible: sum of max_batch ({}) is below global_batch ({})", sum_max, total));
  }
  std::vector<double> w(weights.begin(), weights.end());
  if (wsum <= 0) std::fill(w.begin(), w.end(), 1.0);
  auto clamped = [&](size_t i, double s) {
    return std::clamp(s * w[i], static_cast<double>(mins[i]), static_cast<double>(maxs[i]));
  };
  auto sum_at = [&](double s) {
    double t = 0;
    for (size_t i = 0; i < n; ++i) t += clamped(i, s);
    return t;
  };
  // Bisection on the scale s: Σ clamp(s·w) is continuous and non-decreasing.
  double lo = 0, hi = 1;
  const double target = static_cast<double>(total);
  for (int k = 0; k < 200 && sum_at(hi) < target; ++k) hi *= 2;
  for (int k = 0; k < 100; ++k) {
    const double mid = 0.5 * (lo + hi);
    (sum_at(mid) < target ? lo : hi) = mid;
  }
  std::vector<double> x(n);
  std::vector<int64_t> out(n);
  int64_t sum = 0;
  for (size_t i = 0; i < n; ++i) {
    x[i] = clamped(i, hi);
    out[i] = std::clamp(static_cast<int64_t>(std::floor(x[i] + 1e-9)), mins[i], maxs[i]);
    sum += out[i];
  }
  // Largest remainder; repeat rounds in case the bisection left a gap.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return (x[a] - std::floor(x[a])) > (x[b] - std::floor(x[b])); });
  while (sum < total) {
    for (size_t i : order) {
      if (sum == total) break;
      if (out[i] < maxs[i]) ++out[i], ++sum;
    }
  }
  while (sum > total) {
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      if (sum == total) break;
      if (out[*it] > mins[*it]) --out[*it], --sum;
    }
  }
  return out;
}

StatusOr<Plan> ShufflePlanFromWeights(const PlanRequest& req, std::span<const double> weights,
                                      std::string_view policy) {
  LOFT_RETURN_IF_ERROR(ValidatePlanRequest(req));
  const size_t n = req.workers.size();
  std::vector<int64_t> mins(n), maxs(n);
  for (size_t i = 0; i < n; ++i) {
    mins[i] = req.workers[i].min_batch;
    maxs[i] = req.workers[i].max_batch;
  }
  LOFT_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, Apportion(weights, mins, maxs, req.global_batch));
  Plan plan;
  plan.policy = std::string(policy);
  plan.workers.resize(n);
  for (size_t i = 0; i < n; ++i) {
    plan.workers[i].node = req.workers[i].node;
    plan.workers[i].batch = sizes[i];
  }
  return EvaluateShuffle(req, std::move(plan));
}

}  // namespace loft::sched
