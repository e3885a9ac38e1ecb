// Placement: which nodes cache which sample ids. A pure, seeded,
// deterministic function of the cluster spec, shared by ingest (cache/),
// the planner (scheduler/) and the simulator (sim/). It lives in core/
// because the scheduler needs it and must not depend on cache/.
//
// Algorithm (docs/placement.md):
//   1. Sample ids 0 … n−1 are permuted by a seeded Fisher–Yates shuffle
//      (SplitMix64-driven, identical on every platform).
//   2. Node j's primary share q_j = n·w_j/Σw (largest-remainder rounding
//      so Σ q_j = n) takes the next q_j ids of the permutation, nodes in
//      spec order. Weights: shards → 1; zipf → 1/k^skew for the k-th node
//      (k = 1, 2, …); explicit → the listed shares.
//   3. With replication r, replica k (k = 1 … r−1) of a sample whose
//      primary is node j lives on node (j + k) mod N: always r distinct
//      nodes.
// Not responsible for: which samples are unconsumed (EpochSampler) or
// where they are read from in a plan (Assigner).
// Thread-safety: immutable after construction; safe to share.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/cluster_spec.h"
#include "core/status.h"

namespace loft {

class Placement {
 public:
  static StatusOr<Placement> FromSpec(const ClusterSpec& spec);
  // weights: one per node, >= 0, not all 0; 1 <= replication <= weights.size().
  static StatusOr<Placement> Make(int64_t samples, const std::vector<double>& weights, int replication,
                                  uint64_t seed);

  int num_nodes() const { return num_nodes_; }
  int64_t num_samples() const { return num_samples_; }
  int replication() const { return replication_; }

  // The `replication` distinct nodes holding `id`, primary first.
  std::span<const int32_t> Holders(uint64_t id) const {
    return {holders_.data() + id * replication_, static_cast<size_t>(replication_)};
  }
  bool Holds(int node, uint64_t id) const {
    for (int32_t h : Holders(id))
      if (h == node) return true;
    return false;
  }
  // Sample ids held by `node` (primary or replica), ascending.
  const std::vector<uint64_t>& SamplesOf(int node) const { return by_node_[node]; }
  // Number of samples whose primary holder is `node`.
  int64_t PrimaryCount(int node) const { return primary_count_[node]; }

 private:
  int num_nodes_ = 0;
  int64_t num_samples_ = 0;
  int replication_ = 1;
  std::vector<int32_t> holders_;  // num_samples * replication
  std::vector<std::vector<uint64_t>> by_node_;
  std::vector<int64_t> primary_count_;
};

// Deterministic helpers shared by everything that shuffles (placement,
// epoch permutations): SplitMix64 and an unbiased bounded draw. Inline:
// an epoch's permutation calls them once per sample.
inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The SplitMix64 finaliser of one value (the state left unchanged): for
// hashes chained over several keys, e.g. Mix64(Mix64(seed) ^ epoch) ^ id.
inline uint64_t Mix64(uint64_t x) {
  return SplitMix64(x);
}
// Uniform integer in [0, bound) from the generator state (bound > 0):
// Lemire's multiply-shift with rejection, unbiased and portable.
inline uint64_t UniformBelow(uint64_t& state, uint64_t bound) {
  uint64_t x = SplitMix64(state);
  __uint128_t m = static_cast<__uint128_t>(x) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = (0 - bound) % bound;
    while (low < threshold) {
      x = SplitMix64(state);
      m = static_cast<__uint128_t>(x) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}
// Seeded Fisher–Yates permutation of 0 … n−1.
std::vector<uint64_t> SeededPermutation(uint64_t n, uint64_t seed);
// The same permutation written into `out` (resized to n; its buffer is
// reused, which matters when it is recomputed every epoch).
void SeededPermutation(uint64_t n, uint64_t seed, std::vector<uint64_t>& out);

}  // namespace loft
