// Sgd: stochastic gradient descent with (optionally Nesterov) momentum,
// L2 weight decay and a learning-rate schedule.
//
//   lr_t = schedule(t);  v <- momentum * v + (g + weight_decay * p);
//   p <- p - lr_t * v     (Nesterov: p <- p - lr_t * (g + wd*p + momentum * v))
//
// Not responsible for: computing or combining gradients; the gradient it is
// given must already be the global (all-reduced) one. A gradient with a
// non-finite value is refused (DataLoss) and nothing is changed.
// Thread-safety: not thread-safe; one optimiser per parameter vector.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace loft::models {

enum class LrSchedule {
  kConstant,  // lr
  kStep,      // lr * step_gamma^(floor(t / step_every))
  kCosine,    // min_lr + (lr - min_lr) * (1 + cos(pi * min(t, total_steps) / total_steps)) / 2
};
// "constant" | "step" | "cosine".
StatusOr<LrSchedule> ParseLrSchedule(std::string_view name);

struct SgdOptions {
  double learning_rate = 0.1;
  double momentum = 0.9;  // 0 disables momentum
  bool nesterov = false;
  double weight_decay = 0.0;
  LrSchedule schedule = LrSchedule::kConstant;
  int64_t step_every = 1000;       // kStep: steps between decays
  double step_gamma = 0.1;         // kStep: decay factor
  int64_t total_steps = 0;         // kCosine: length of the schedule (> 0)
  double min_learning_rate = 0.0;  // kCosine floor
  int64_t warmup_steps = 0;        // linear warm-up from lr/warmup to lr (any schedule)
  Status Validate() const;
};

class Sgd {
 public:
  static StatusOr<Sgd> Create(const SgdOptions& options, int64_t num_params);

  // Learning rate used by the update with index `step` (0-based).
  double LearningRateAt(int64_t step) const;
  // Applies one update; advances step().
  Status Step(std::span<float> params, std::span<const float> grad);

  const SgdOptions& options() const { return options_; }
  int64_t step() const { return step_; }
  std::span<const float> velocity() const { return velocity_; }
  // Restores optimiser state (used by checkpoint loading).
  Status Restore(int64_t step, std::span<const float> velocity);

 private:
  Sgd(const SgdOptions& options, int64_t num_params) : options_(options), velocity_(num_params, 0.0f) {}

  SgdOptions options_;
  int64_t step_ = 0;
  std::vector<float> velocity_;
};

}  // namespace loft::models
