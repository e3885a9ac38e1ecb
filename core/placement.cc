#include "core/placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace loft {

void SeededPermutation(uint64_t n, uint64_t seed, std::vector<uint64_t>& p) {
  p.resize(n);
  std::iota(p.begin(), p.end(), 0);
  uint64_t state = seed ^ 0x6c6f66742d706572ULL;  // domain separation
  for (uint64_t i = n; i > 1; --i) {
    uint64_t j = UniformBelow(state, i);
    std::swap(p[i - 1], p[j]);
  }
}

std::vector<uint64_t> SeededPermutation(uint64_t n, uint64_t seed) {
  std::vector<uint64_t> p;
  SeededPermutation(n, seed, p);
  return p;
}

StatusOr<Placement> Placement::Make(int64_t samples, const std::vector<double>& weights, int replication,
                                    uint64_t seed) {
  const int n = static_cast<int>(weights.size());
  if (n == 0) return InvalidArgument("placement: no nodes");
  if (samples <= 0) return InvalidArgument("placement: samples must be > 0");
  if (replication < 1 || replication > n)
    return InvalidArgument("placement: replication " + std::to_string(replication) + " must be in [1, " +
                           std::to_string(n) + "]");
  double total = 0;
  for (double w : weights) {
    if (!(w >= 0) || !std::isfinite(w)) return InvalidArgument("placement: weights must be finite and >= 0");
    total += w;
  }
  if (!(total > 0)) return InvalidArgument("placement: weights must not all be 0");

  // Largest-remainder rounding of the primary quotas.
  std::vector<int64_t> quota(n);
  std::vector<std::pair<double, int>> rem(n);
  int64_t assigned = 0;
  for (int j = 0; j < n; ++j) {
    double exact = static_cast<double>(samples) * weights[j] / total;
    quota[j] = static_cast<int64_t>(std::floor(exact));
    rem[j] = {exact - static_cast<double>(quota[j]), -j};
    assigned += quota[j];
  }
  std::sort(rem.begin(), rem.end(), std::greater<>());
  for (int64_t k = 0; assigned < samples; ++k, ++assigned) quota[-rem[k % n].second]++;

  Placement p;
  p.num_nodes_ = n;
  p.num_samples_ = samples;
  p.replication_ = replication;
  p.by_node_.assign(n, {});
  p.primary_count_ = quota;
  // A spec's dataset.samples is bounded (kMaxDatasetSamples), but the
  // tables may still not fit: a clear error, never an uncaught bad_alloc.
  try {
    p.holders_.resize(static_cast<size_t>(samples) * replication);
    std::vector<uint64_t> perm = SeededPermutation(static_cast<uint64_t>(samples), seed);
    size_t pos = 0;
    for (int j = 0; j < n; ++j) {
      for (int64_t k = 0; k < quota[j]; ++k, ++pos) {
        uint64_t id = perm[pos];
        for (int r = 0; r < replication; ++r) p.holders_[id * replication + r] = (j + r) % n;
      }
    }
    for (uint64_t id = 0; id < static_cast<uint64_t>(samples); ++id)
      for (int r = 0; r < replication; ++r) p.by_node_[p.holders_[id * replication + r]].push_back(id);
  } catch (const std::exception&) {  // bad_alloc, length_error
    return ResourceExhausted("placement: " + std::to_string(samples) + " samples x replication " +
                             std::to_string(replication) + " do not fit in memory");
  }
  return p;
}

StatusOr<Placement> Placement::FromSpec(const ClusterSpec& spec) {
  std::vector<double> w(spec.num_nodes(), 1.0);
  switch (spec.placement.kind) {
    case PlacementKind::kShards: break;
    case PlacementKind::kZipf:
      for (int k = 0; k < spec.num_nodes(); ++k)
        w[k] = 1.0 / std::pow(static_cast<double>(k + 1), spec.placement.skew);
      break;
    case PlacementKind::kExplicit: w = spec.placement.shares; break;
  }
  auto p = Make(spec.dataset.samples, w, spec.placement.replication, spec.placement.seed);
  if (!p.ok()) return p.status().WithContext(spec.source);
  return p;
}

}  // namespace loft
