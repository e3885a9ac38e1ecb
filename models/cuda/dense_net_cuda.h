// CudaDenseNet: the DenseNet math (models/dense_net.h) on a GPU with cuBLAS
// GEMMs and a few elementwise kernels. C++17 header with no loft types so
// nvcc (CUDA standard 17) can compile its implementation; the Model adapter
// is models/cuda/cuda_model.cc. Parameters are uploaded from the host for
// each call; gradients and logits are downloaded into host buffers.
//
// Not responsible for: input validation (the adapter checks batches),
// multi-GPU, keeping parameters resident.
// Thread-safety: one instance per thread (owns a cuBLAS handle + buffers).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loft::models::cuda {

// Number of usable devices; false with the CUDA error text in *why when
// cudaGetDeviceCount fails (e.g. error 35 on a machine with no driver/GPU)
// or reports zero devices.
bool QueryDevices(int* count, std::string* why);

class CudaDenseNet {
 public:
  // sizes: input, hidden..., classes. nullptr with *err on failure.
  static std::unique_ptr<CudaDenseNet> Create(const std::vector<int>& sizes, std::string* err);
  ~CudaDenseNet();

  // images: n * sizes[0] bytes (scaled by 1/255 on the device).
  bool Logits(const float* params, const uint8_t* images, int64_t n, float* logits, std::string* err);
  // grad may be null (loss only). Mean loss and mean gradient over n.
  bool LossAndGradient(const float* params, const uint8_t* images, const uint8_t* labels, int64_t n,
                       float* grad, double* loss, std::string* err);

  struct Impl;  // opaque; defined in dense_net_cuda.cu

 private:
  explicit CudaDenseNet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loft::models::cuda
