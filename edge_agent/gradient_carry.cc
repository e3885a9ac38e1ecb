#include "edge_agent/gradient_carry.h"

namespace loft::agent {

void GradientCarry::Add(size_t n, std::span<const float> grad) {
  if (n == 0) return;
  if (sum_.empty()) sum_.assign(grad.size(), 0.0f);
  for (size_t j = 0; j < grad.size() && j < sum_.size(); ++j) sum_[j] += static_cast<float>(n) * grad[j];
  b_ += static_cast<double>(n);
}

void GradientCarry::Mix(size_t n, std::span<const float> grad, std::vector<float>* out) const {
  const double b = static_cast<double>(n) + b_;
  out->assign(grad.size(), 0.0f);
  if (b <= 0) return;
  for (size_t j = 0; j < out->size(); ++j) {
    const double sum =
        (n > 0 ? static_cast<double>(n) * grad[j] : 0.0) + (b_ > 0 && j < sum_.size() ? sum_[j] : 0.0);
    (*out)[j] = static_cast<float>(sum / b);
  }
}

void GradientCarry::Clear() {
  sum_.clear();
  b_ = 0;
}

}  // namespace loft::agent
