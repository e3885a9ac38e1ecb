#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>

#include "models/cuda/dense_net_cuda.h"

namespace loft::models::cuda {
namespace {

constexpr int kThreads = 256;
int Blocks(int64_t n) {
  return static_cast<int>((n + kThreads - 1) / kThreads);
}

__global__ void ScaleImages(const uint8_t* in, float* out, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = static_cast<float>(in[i]) * (1.0f / 255.0f);
}

__global__ void BroadcastBias(const float* b, float* z, int64_t n, int out) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n * out) z[i] = b[i % out];
}

__global__ void Relu(float* z, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) z[i] = z[i] > 0.0f ? z[i] : 0.0f;
}

__global__ void ReluBackward(float* d, const float* act, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n && !(act[i] > 0.0f)) d[i] = 0.0f;
}

// One thread per sample: loss_i and delta = (softmax - onehot) / n.
__global__ void SoftmaxXent(const float* z, const uint8_t* labels, int64_t n, int classes, float* delta,
                            double* loss) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const float* zi = z + i * classes;
  float zmax = zi[0];
  for (int c = 1; c < classes; ++c) zmax = fmaxf(zmax, zi[c]);
  double sum = 0.0;
  for (int c = 0; c < classes; ++c) sum += exp(static_cast<double>(zi[c] - zmax));
  const double lse = log(sum) + zmax;
  loss[i] = lse - zi[labels[i]];
  if (delta != nullptr) {
    for (int c = 0; c < classes; ++c) {
      const double p = exp(static_cast<double>(zi[c]) - lse);
      delta[i * classes + c] =
          static_cast<float>((p - (c == labels[i] ? 1.0 : 0.0)) / static_cast<double>(n));
    }
  }
}

// One thread per column: db[j] = sum_i d[i, j].
__global__ void ColumnSum(const float* d, int64_t n, int out, float* db) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= out) return;
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += d[i * out + j];
  db[j] = s;
}

template <typename T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  ~DevBuf() { cudaFree(p); }
  cudaError_t Reserve(size_t count) {
    if (count <= n) return cudaSuccess;
    cudaFree(p);
    p = nullptr;
    n = 0;
    cudaError_t e = cudaMalloc(&p, count * sizeof(T) + 1);
    if (e == cudaSuccess) n = count;
    return e;
  }
};

}  // namespace

bool QueryDevices(int* count, std::string* why) {
  int c = 0;
  const cudaError_t e = cudaGetDeviceCount(&c);
  if (e != cudaSuccess) {
    if (why)
      *why = "cudaGetDeviceCount failed: error " + std::to_string(static_cast<int>(e)) + " (" +
             cudaGetErrorString(e) + ")";
    return false;
  }
  *count = c;
  if (c == 0) {
    if (why) *why = "no CUDA device present";
    return false;
  }
  return true;
}

struct CudaDenseNet::Impl {
  std::vector<int> sizes;
  std::vector<size_t> w_off, b_off;
  size_t num_params = 0;
  cublasHandle_t handle = nullptr;
  DevBuf<float> params, grad, x, delta, delta_prev;
  DevBuf<uint8_t> images, labels;
  DevBuf<double> loss;
  std::vector<DevBuf<float>> act;
  ~Impl() {
    if (handle) cublasDestroy(handle);
  }
};

CudaDenseNet::CudaDenseNet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaDenseNet::~CudaDenseNet() = default;

std::unique_ptr<CudaDenseNet> CudaDenseNet::Create(const std::vector<int>& sizes, std::string* err) {
  auto impl = std::make_unique<Impl>();
  impl->sizes = sizes;
  size_t off = 0;
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    impl->w_off.push_back(off);
    off += static_cast<size_t>(sizes[l]) * sizes[l + 1];
    impl->b_off.push_back(off);
    off += sizes[l + 1];
  }
  impl->num_params = off;
  impl->act.resize(sizes.size() - 1);
  if (cublasCreate(&impl->handle) != CUBLAS_STATUS_SUCCESS) {
    *err = "cublasCreate failed";
    return nullptr;
  }
  return std::unique_ptr<CudaDenseNet>(new CudaDenseNet(std::move(impl)));
}

#define LOFT_CUDA_CHECK(expr)                                    \
  do {                                                           \
    const cudaError_t e_ = (expr);                               \
    if (e_ != cudaSuccess) {                                     \
      *err = std::string(#expr) + ": " + cudaGetErrorString(e_); \
      return false;                                              \
    }                                                            \
  } while (0)
#define LOFT_CUBLAS_CHECK(expr)              \
  do {                                       \
    if ((expr) != CUBLAS_STATUS_SUCCESS) {   \
      *err = std::string(#expr) + " failed"; \
      return false;                          \
    }                                        \
  } while (0)

namespace {

// Row-major forward of all layers: act[l] = relu(in * W^T + b) (no ReLU on
// the last layer). Column-major view: act^T = W * in^T.
bool Forward(CudaDenseNet::Impl& m, const float* params, const uint8_t* images, int64_t n, std::string* err) {
  LOFT_CUDA_CHECK(m.params.Reserve(m.num_params));
  LOFT_CUDA_CHECK(cudaMemcpy(m.params.p, params, m.num_params * sizeof(float), cudaMemcpyHostToDevice));
  const int64_t nin = n * m.sizes[0];
  LOFT_CUDA_CHECK(m.images.Reserve(nin));
  LOFT_CUDA_CHECK(m.x.Reserve(nin));
  LOFT_CUDA_CHECK(cudaMemcpy(m.images.p, images, nin, cudaMemcpyHostToDevice));
  ScaleImages<<<Blocks(nin), kThreads>>>(m.images.p, m.x.p, nin);
  const float one = 1.0f;
  const float* in = m.x.p;
  const size_t layers = m.sizes.size() - 1;
  for (size_t l = 0; l < layers; ++l) {
    const int din = m.sizes[l], dout = m.sizes[l + 1];
    LOFT_CUDA_CHECK(m.act[l].Reserve(static_cast<size_t>(n) * dout));
    float* z = m.act[l].p;
    BroadcastBias<<<Blocks(n * dout), kThreads>>>(m.params.p + m.b_off[l], z, n, dout);
    LOFT_CUBLAS_CHECK(cublasSgemm(m.handle, CUBLAS_OP_T, CUBLAS_OP_N, dout, static_cast<int>(n), din, &one,
                                  m.params.p + m.w_off[l], din, in, din, &one, z, dout));
    if (l + 1 < layers) Relu<<<Blocks(n * dout), kThreads>>>(z, n * dout);
    in = z;
  }
  LOFT_CUDA_CHECK(cudaGetLastError());
  return true;
}

}  // namespace

bool CudaDenseNet::Logits(const float* params, const uint8_t* images, int64_t n, float* logits,
                          std::string* err) {
  Impl& m = *impl_;
  if (!Forward(m, params, images, n, err)) return false;
  LOFT_CUDA_CHECK(cudaMemcpy(logits, m.act.back().p, static_cast<size_t>(n) * m.sizes.back() * sizeof(float),
                             cudaMemcpyDeviceToHost));
  return true;
}

bool CudaDenseNet::LossAndGradient(const float* params, const uint8_t* images, const uint8_t* labels,
                                   int64_t n, float* grad, double* loss, std::string* err) {
  Impl& m = *impl_;
  if (!Forward(m, params, images, n, err)) return false;
  const int classes = m.sizes.back();
  LOFT_CUDA_CHECK(m.labels.Reserve(n));
  LOFT_CUDA_CHECK(cudaMemcpy(m.labels.p, labels, n, cudaMemcpyHostToDevice));
  LOFT_CUDA_CHECK(m.loss.Reserve(n));
  LOFT_CUDA_CHECK(m.delta.Reserve(static_cast<size_t>(n) * classes));
  SoftmaxXent<<<Blocks(n), kThreads>>>(m.act.back().p, m.labels.p, n, classes, grad ? m.delta.p : nullptr,
                                       m.loss.p);
  std::vector<double> losses(n);
  LOFT_CUDA_CHECK(cudaMemcpy(losses.data(), m.loss.p, n * sizeof(double), cudaMemcpyDeviceToHost));
  double s = 0;
  for (double v : losses) s += v;
  *loss = s / static_cast<double>(n);
  if (grad == nullptr) return true;

  LOFT_CUDA_CHECK(m.grad.Reserve(m.num_params));
  const float one = 1.0f, zero = 0.0f;
  const size_t layers = m.sizes.size() - 1;
  for (size_t li = layers; li-- > 0;) {
    const int din = m.sizes[li], dout = m.sizes[li + 1];
    const float* in = li == 0 ? m.x.p : m.act[li - 1].p;
    // dW (row-major dout x din) = delta^T * in; column-major dW^T = in^T * delta.
    LOFT_CUBLAS_CHECK(cublasSgemm(m.handle, CUBLAS_OP_N, CUBLAS_OP_T, din, dout, static_cast<int>(n), &one,
                                  in, din, m.delta.p, dout, &zero, m.grad.p + m.w_off[li], din));
    ColumnSum<<<Blocks(dout), kThreads>>>(m.delta.p, n, dout, m.grad.p + m.b_off[li]);
    if (li == 0) break;
    // delta_prev (row-major n x din) = delta * W; column-major: W^T * delta^T.
    LOFT_CUDA_CHECK(m.delta_prev.Reserve(static_cast<size_t>(n) * din));
    LOFT_CUBLAS_CHECK(cublasSgemm(m.handle, CUBLAS_OP_N, CUBLAS_OP_N, din, static_cast<int>(n), dout, &one,
                                  m.params.p + m.w_off[li], din, m.delta.p, dout, &zero, m.delta_prev.p,
                                  din));
    ReluBackward<<<Blocks(n * din), kThreads>>>(m.delta_prev.p, m.act[li - 1].p, n * din);
    std::swap(m.delta.p, m.delta_prev.p);
    std::swap(m.delta.n, m.delta_prev.n);
  }
  LOFT_CUDA_CHECK(cudaGetLastError());
  LOFT_CUDA_CHECK(cudaMemcpy(grad, m.grad.p, m.num_params * sizeof(float), cudaMemcpyDeviceToHost));
  return true;
}

}  // namespace loft::models::cuda
