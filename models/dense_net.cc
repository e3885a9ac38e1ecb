#include "models/dense_net.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

namespace loft::models {
namespace {

// C = alpha * op(A) * op(B) + beta * C, row-major.
inline void Gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                 int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, lda, b, ldb, beta, c, ldc);
}
inline void Gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda,
                 const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

template <typename T>
DenseNet<T>::DenseNet(std::vector<int> sizes) : sizes_(std::move(sizes)) {
  size_t off = 0;
  for (size_t l = 0; l + 1 < sizes_.size(); ++l) {
    w_off_.push_back(off);
    off += static_cast<size_t>(sizes_[l]) * sizes_[l + 1];
    b_off_.push_back(off);
    off += sizes_[l + 1];
  }
  num_params_ = static_cast<int64_t>(off);
  act_.resize(sizes_.size() - 1);
}

template <typename T>
void DenseNet<T>::ForwardInternal(std::span<const T> params, const T* x, int64_t n) {
  const size_t layers = sizes_.size() - 1;
  const T* in = x;
  for (size_t l = 0; l < layers; ++l) {
    const int din = sizes_[l], dout = sizes_[l + 1];
    std::vector<T>& z = act_[l];
    z.resize(static_cast<size_t>(n) * dout);
    // z = broadcast(b), then z += in * W^T.
    const T* b = params.data() + b_off_[l];
    for (int64_t i = 0; i < n; ++i) std::memcpy(z.data() + i * dout, b, sizeof(T) * dout);
    Gemm(false, true, static_cast<int>(n), dout, din, T(1), in, din, params.data() + w_off_[l], din, T(1),
         z.data(), dout);
    if (l + 1 < layers) {
      for (T& v : z) v = v > T(0) ? v : T(0);
    }
    in = z.data();
  }
}

template <typename T>
void DenseNet<T>::Logits(std::span<const T> params, const T* x, int64_t n, T* logits) {
  ForwardInternal(params, x, n);
  const std::vector<T>& out = act_.back();
  std::copy(out.begin(), out.end(), logits);
}

template <typename T>
double DenseNet<T>::LossAndGradient(std::span<const T> params, const T* x, const uint8_t* labels, int64_t n,
                                    std::span<T> grad) {
  ForwardInternal(params, x, n);
  const size_t layers = sizes_.size() - 1;
  const int classes = sizes_.back();
  std::vector<T>& logits = act_.back();
  const bool want_grad = !grad.empty();
  delta_.resize(static_cast<size_t>(n) * classes);
  double loss = 0.0;
  const T inv_n = T(1) / static_cast<T>(n);
  for (int64_t i = 0; i < n; ++i) {
    const T* z = logits.data() + i * classes;
    const T zmax = *std::max_element(z, z + classes);
    double sum = 0.0;
    for (int c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(z[c] - zmax));
    const double lse = std::log(sum) + static_cast<double>(zmax);
    loss += lse - static_cast<double>(z[labels[i]]);
    if (want_grad) {
      T* d = delta_.data() + i * classes;
      for (int c = 0; c < classes; ++c) {
        const double p = std::exp(static_cast<double>(z[c]) - lse);
        d[c] = static_cast<T>(p - (c == labels[i] ? 1.0 : 0.0)) * inv_n;
      }
    }
  }
  if (!want_grad) return loss / static_cast<double>(n);

  // Backward: delta_ holds dL/dz for layer l (n x out).
  for (size_t li = layers; li-- > 0;) {
    const int din = sizes_[li], dout = sizes_[li + 1];
    const T* in = li == 0 ? x : act_[li - 1].data();
    // dW = delta^T * in  (dout x din)
    Gemm(true, false, dout, din, static_cast<int>(n), T(1), delta_.data(), dout, in, din, T(0),
         grad.data() + w_off_[li], din);
    T* db = grad.data() + b_off_[li];
    std::fill(db, db + dout, T(0));
    for (int64_t i = 0; i < n; ++i) {
      const T* d = delta_.data() + i * dout;
      for (int j = 0; j < dout; ++j) db[j] += d[j];
    }
    if (li == 0) break;
    // delta_prev = (delta * W) .* relu'(act_[li-1])
    delta_prev_.resize(static_cast<size_t>(n) * din);
    Gemm(false, false, static_cast<int>(n), din, dout, T(1), delta_.data(), dout, params.data() + w_off_[li],
         din, T(0), delta_prev_.data(), din);
    const std::vector<T>& a = act_[li - 1];
    for (size_t k = 0; k < delta_prev_.size(); ++k) {
      if (!(a[k] > T(0))) delta_prev_[k] = T(0);
    }
    std::swap(delta_, delta_prev_);
  }
  return loss / static_cast<double>(n);
}

template class DenseNet<float>;
template class DenseNet<double>;

}  // namespace loft::models
