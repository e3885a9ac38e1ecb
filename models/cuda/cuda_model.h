// The CUDA Model adapter (compiled into loft_models when LOFT_WITH_CUDA):
// implements Model on top of CudaDenseNet. Reached through
// MakeModel(kind, Device::kCuda).
//
// Not responsible for: the GPU math (dense_net_cuda.cu).
// Thread-safety: one instance per thread.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "models/model.h"

namespace loft::models::cuda {

// True when a CUDA device is usable; else false with the reason in *why.
bool DeviceAvailable(std::string* why);

StatusOr<std::unique_ptr<Model>> MakeCudaModel(const ModelOptions& options, std::string name);

}  // namespace loft::models::cuda
