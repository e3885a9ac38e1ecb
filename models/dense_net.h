// DenseNet<T>: the math behind both model kinds, on the CPU via CBLAS
// (cblas_sgemm for float, cblas_dgemm for double; the double instantiation
// exists for finite-difference gradient checks). Layers are fully connected;
// every layer but the last is followed by ReLU; the last feeds softmax
// cross-entropy.
//
// Parameter layout (flat): for each layer l, W_l (out_l x in_l, row-major)
// then b_l (out_l).
//
// Not responsible for: input scaling (callers pass features as T), owning
// the parameters (they are passed in), the optimiser.
// Thread-safety: holds scratch buffers; one instance per thread.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <span>
#include <vector>

#include "core/placement.h"

namespace loft::models {

inline int64_t DenseParamCount(const std::vector<int>& sizes) {
  int64_t n = 0;
  for (size_t l = 0; l + 1 < sizes.size(); ++l) n += int64_t{sizes[l + 1]} * sizes[l] + sizes[l + 1];
  return n;
}

// Deterministic initialisation shared by the CPU and CUDA models: He normal
// (std = sqrt(2/in)) for hidden (ReLU) layers, Xavier uniform
// (+-sqrt(6/(in+out))) for the output layer, zero biases. SplitMix64 and
// Box-Muller only, so the values are identical on every platform.
template <typename T>
void InitDenseParams(const std::vector<int>& sizes, uint64_t seed, std::span<T> params) {
  uint64_t state = seed ^ 0x6c6f66744d6f646cULL;  // "loftModl"
  auto uniform01 = [&state] {
    return (static_cast<double>(SplitMix64(state) >> 11) + 0.5) * 0x1.0p-53;  // (0, 1)
  };
  size_t off = 0;
  const size_t layers = sizes.size() - 1;
  for (size_t l = 0; l < layers; ++l) {
    const int in = sizes[l], out = sizes[l + 1];
    const size_t nw = static_cast<size_t>(in) * out;
    if (l + 1 < layers) {
      const double sd = std::sqrt(2.0 / in);
      for (size_t i = 0; i < nw; ++i) {
        const double u1 = uniform01(), u2 = uniform01();
        params[off + i] =
            static_cast<T>(sd * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
      }
    } else {
      const double a = std::sqrt(6.0 / (in + out));
      for (size_t i = 0; i < nw; ++i) params[off + i] = static_cast<T>(a * (2.0 * uniform01() - 1.0));
    }
    off += nw;
    for (int j = 0; j < out; ++j) params[off + j] = T(0);
    off += out;
  }
}

template <typename T>
class DenseNet {
 public:
  // sizes: input, hidden..., classes (at least 2 entries, all > 0).
  explicit DenseNet(std::vector<int> sizes);

  const std::vector<int>& sizes() const { return sizes_; }
  int64_t num_params() const { return num_params_; }

  // x: n * sizes[0] features. logits: n * classes.
  void Logits(std::span<const T> params, const T* x, int64_t n, T* logits);
  // Mean cross-entropy over n samples (labels < classes, checked by the
  // caller). When grad is non-empty it receives the mean gradient.
  double LossAndGradient(std::span<const T> params, const T* x, const uint8_t* labels, int64_t n,
                         std::span<T> grad);

 private:
  void ForwardInternal(std::span<const T> params, const T* x, int64_t n);

  std::vector<int> sizes_;
  int64_t num_params_ = 0;
  std::vector<size_t> w_off_, b_off_;
  std::vector<std::vector<T>> act_;  // act_[l]: n x sizes[l+1], post-ReLU (pre-softmax for last)
  std::vector<T> delta_, delta_prev_;
};

extern template class DenseNet<float>;
extern template class DenseNet<double>;

}  // namespace loft::models
