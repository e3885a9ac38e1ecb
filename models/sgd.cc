#include "models/sgd.h"

#include <cmath>
#include <numbers>
#include <string>

namespace loft::models {

StatusOr<LrSchedule> ParseLrSchedule(std::string_view name) {
  if (name == "constant") return LrSchedule::kConstant;
  if (name == "step") return LrSchedule::kStep;
  if (name == "cosine") return LrSchedule::kCosine;
  return InvalidArgument("unknown learning-rate schedule '" + std::string(name) +
                         "' (expected constant | step | cosine)");
}

Status SgdOptions::Validate() const {
  if (!(learning_rate > 0) || !std::isfinite(learning_rate)) {
    return InvalidArgument("sgd learning_rate must be finite and > 0, got " + std::to_string(learning_rate));
  }
  if (!(momentum >= 0 && momentum < 1)) {
    return InvalidArgument("sgd momentum must be in [0, 1), got " + std::to_string(momentum));
  }
  if (!(weight_decay >= 0) || !std::isfinite(weight_decay)) {
    return InvalidArgument("sgd weight_decay must be finite and >= 0, got " + std::to_string(weight_decay));
  }
  if (warmup_steps < 0) return InvalidArgument("sgd warmup_steps must be >= 0");
  if (schedule == LrSchedule::kStep) {
    if (step_every <= 0) return InvalidArgument("sgd step schedule needs step_every > 0");
    if (!(step_gamma > 0 && step_gamma <= 1)) return InvalidArgument("sgd step_gamma must be in (0, 1]");
  }
  if (schedule == LrSchedule::kCosine) {
    if (total_steps <= 0) return InvalidArgument("sgd cosine schedule needs total_steps > 0");
    if (!(min_learning_rate >= 0 && min_learning_rate <= learning_rate)) {
      return InvalidArgument("sgd min_learning_rate must be in [0, learning_rate]");
    }
  }
  return OkStatus();
}

StatusOr<Sgd> Sgd::Create(const SgdOptions& options, int64_t num_params) {
  LOFT_RETURN_IF_ERROR(options.Validate());
  if (num_params <= 0) return InvalidArgument("sgd needs num_params > 0");
  return Sgd(options, num_params);
}

double Sgd::LearningRateAt(int64_t step) const {
  const SgdOptions& o = options_;
  double lr = o.learning_rate;
  switch (o.schedule) {
    case LrSchedule::kConstant: break;
    case LrSchedule::kStep: lr *= std::pow(o.step_gamma, static_cast<double>(step / o.step_every)); break;
    case LrSchedule::kCosine: {
      const double t =
          static_cast<double>(std::min(step, o.total_steps)) / static_cast<double>(o.total_steps);
      lr = o.min_learning_rate +
           (o.learning_rate - o.min_learning_rate) * 0.5 * (1 + std::cos(std::numbers::pi * t));
      break;
    }
  }
  if (step < o.warmup_steps) lr *= static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  return lr;
}

Status Sgd::Step(std::span<float> params, std::span<const float> grad) {
  if (params.size() != velocity_.size() || grad.size() != velocity_.size()) {
    return InvalidArgument("sgd step: params has " + std::to_string(params.size()) + " and grad " +
                           std::to_string(grad.size()) + " floats, expected " +
                           std::to_string(velocity_.size()));
  }
  for (size_t i = 0; i < grad.size(); ++i) {
    if (!std::isfinite(grad[i])) {
      return DataLoss("sgd step " + std::to_string(step_) + ": gradient coordinate " + std::to_string(i) +
                      " is not finite; parameters left unchanged");
    }
  }
  const float lr = static_cast<float>(LearningRateAt(step_));
  const float mu = static_cast<float>(options_.momentum);
  const float wd = static_cast<float>(options_.weight_decay);
  for (size_t i = 0; i < params.size(); ++i) {
    const float g = grad[i] + wd * params[i];
    velocity_[i] = mu * velocity_[i] + g;
    params[i] -= lr * (options_.nesterov ? g + mu * velocity_[i] : velocity_[i]);
  }
  ++step_;
  return OkStatus();
}

Status Sgd::Restore(int64_t step, std::span<const float> velocity) {
  if (step < 0) return InvalidArgument("sgd restore: negative step");
  if (velocity.size() != velocity_.size()) {
    return InvalidArgument("sgd restore: velocity has " + std::to_string(velocity.size()) +
                           " floats, expected " + std::to_string(velocity_.size()));
  }
  step_ = step;
  velocity_.assign(velocity.begin(), velocity.end());
  return OkStatus();
}

}  // namespace loft::models
