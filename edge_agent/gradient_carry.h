// GradientCarry: the samples of partitions whose round this member had
// already applied (a second partition of an iteration, or one that came
// after a weight-0 join). Their b·g is kept and mixed into this member's
// contribution to its next all-reduced round, so no sample is lost or
// counted twice.
//
// Not responsible for: deciding when a round is carried
// (edge_agent/round_decision.h).
// Thread-safety: not thread-safe; one trainer thread uses it.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace loft::agent {

class GradientCarry {
 public:
  // Keeps n samples whose mean gradient is `grad`.
  void Add(size_t n, std::span<const float> grad);
  // Samples held.
  double samples() const { return b_; }
  // The mean gradient over n samples with mean `grad` plus the carried
  // ones, into out (resized to grad's length); zeros when there are none.
  void Mix(size_t n, std::span<const float> grad, std::vector<float>* out) const;
  // Forgets the carried samples (their round was applied).
  void Clear();

 private:
  std::vector<float> sum_;  // sum of b * g
  double b_ = 0;
};

}  // namespace loft::agent
