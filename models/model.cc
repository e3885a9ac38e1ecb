#include "models/model.h"

#include <algorithm>
#include <string>

#include "models/config.h"
#include "models/dense_net.h"
#if LOFT_WITH_CUDA
#include "models/cuda/cuda_model.h"
#endif

namespace loft::models {

StatusOr<ModelKind> ParseModelKind(std::string_view name) {
  if (name == "softmax") return ModelKind::kSoftmax;
  if (name == "mlp") return ModelKind::kMlp;
  return InvalidArgument("unknown model kind '" + std::string(name) + "' (expected softmax | mlp)");
}

std::string_view ModelKindName(ModelKind kind) {
  return kind == ModelKind::kSoftmax ? "softmax" : "mlp";
}

StatusOr<Device> ParseDevice(std::string_view name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  return InvalidArgument("unknown device '" + std::string(name) + "' (expected cpu | cuda)");
}

Status ModelOptions::Validate() const {
  if (input_dim <= 0) return InvalidArgument("model input_dim must be > 0, got " + std::to_string(input_dim));
  if (num_classes < 2 || num_classes > 256) {
    return InvalidArgument("model num_classes must be in [2, 256] (labels are uint8), got " +
                           std::to_string(num_classes));
  }
  if (kind == ModelKind::kMlp) {
    if (hidden.empty()) return InvalidArgument("mlp needs at least one hidden layer");
    for (int h : hidden) {
      if (h <= 0) return InvalidArgument("mlp hidden layer size must be > 0, got " + std::to_string(h));
    }
  }
  return OkStatus();
}

std::vector<int> ModelOptions::LayerSizes() const {
  std::vector<int> s{input_dim};
  if (kind == ModelKind::kMlp) s.insert(s.end(), hidden.begin(), hidden.end());
  s.push_back(num_classes);
  return s;
}

Status Model::CheckBatch(const BatchView& batch) const {
  const int64_t n = batch.size();
  if (n <= 0) return InvalidArgument(name() + ": empty batch");
  if (!batch.inputs.empty()) {
    if (static_cast<int64_t>(batch.inputs.size()) != n * input_dim()) {
      return InvalidArgument(name() + ": batch has " + std::to_string(n) + " labels but " +
                             std::to_string(batch.inputs.size()) + " input floats (expected " +
                             std::to_string(n * input_dim()) + ")");
    }
  } else if (static_cast<int64_t>(batch.images.size()) != n * input_dim()) {
    return InvalidArgument(name() + ": batch has " + std::to_string(n) + " labels but " +
                           std::to_string(batch.images.size()) + " image bytes (expected " +
                           std::to_string(n * input_dim()) + ")");
  }
  for (int64_t i = 0; i < n; ++i) {
    if (batch.labels[i] >= num_classes()) {
      return InvalidArgument(name() + ": label " + std::to_string(batch.labels[i]) + " of sample " +
                             std::to_string(i) + " is not below num_classes " +
                             std::to_string(num_classes()));
    }
  }
  return OkStatus();
}

StatusOr<double> Model::Evaluate(const BatchView& data) {
  LOFT_RETURN_IF_ERROR(CheckBatch(data));
  constexpr int64_t kChunk = 1024;
  const int64_t n = data.size();
  const int classes = num_classes();
  int64_t correct = 0;
  std::vector<float> logits;
  for (int64_t s = 0; s < n; s += kChunk) {
    const int64_t m = std::min(kChunk, n - s);
    BatchView chunk{data.inputs.empty() ? data.images.subspan(s * input_dim(), m * input_dim())
                                        : std::span<const uint8_t>(),
                    data.labels.subspan(s, m),
                    data.inputs.empty() ? std::span<const float>()
                                        : data.inputs.subspan(s * input_dim(), m * input_dim())};
    LOFT_RETURN_IF_ERROR(Forward(chunk, &logits));
    for (int64_t i = 0; i < m; ++i) {
      const float* z = logits.data() + i * classes;
      if (std::max_element(z, z + classes) - z == chunk.labels[i]) ++correct;
    }
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

namespace {

std::string ArchName(const ModelOptions& o) {
  std::string s(ModelKindName(o.kind));
  for (int d : o.LayerSizes()) s += "-" + std::to_string(d);
  return s;
}

// CPU model: float parameters, DenseNet<float> on OpenBLAS.
class CpuModel final : public Model {
 public:
  explicit CpuModel(const ModelOptions& o)
      : name_(ArchName(o)), net_(o.LayerSizes()), params_(net_.num_params(), 0.0f) {}

  const std::string& name() const override { return name_; }
  Device device() const override { return Device::kCpu; }
  int input_dim() const override { return net_.sizes().front(); }
  int num_classes() const override { return net_.sizes().back(); }
  std::span<float> params() override { return params_; }
  std::span<const float> params() const override { return params_; }
  void Init(uint64_t seed) override { InitDenseParams<float>(net_.sizes(), seed, params_); }

  Status Forward(const BatchView& batch, std::vector<float>* logits) override {
    LOFT_RETURN_IF_ERROR(CheckBatch(batch));
    const float* x = Input(batch);
    logits->resize(static_cast<size_t>(batch.size()) * num_classes());
    net_.Logits(params_, x, batch.size(), logits->data());
    return OkStatus();
  }
  StatusOr<double> Loss(const BatchView& batch) override {
    LOFT_RETURN_IF_ERROR(CheckBatch(batch));
    return net_.LossAndGradient(params_, Input(batch), batch.labels.data(), batch.size(), {});
  }
  StatusOr<double> LossAndGradient(const BatchView& batch, std::span<float> grad) override {
    LOFT_RETURN_IF_ERROR(CheckBatch(batch));
    if (static_cast<int64_t>(grad.size()) != num_params()) {
      return InvalidArgument(name_ + ": gradient buffer has " + std::to_string(grad.size()) +
                             " floats, expected " + std::to_string(num_params()));
    }
    return net_.LossAndGradient(params_, Input(batch), batch.labels.data(), batch.size(), grad);
  }

 private:
  // The batch's floats: its `inputs` as they are, or its bytes / 255.
  const float* Input(const BatchView& batch) {
    if (!batch.inputs.empty()) return batch.inputs.data();
    x_.resize(batch.images.size());
    constexpr float kInv = 1.0f / 255.0f;
    for (size_t i = 0; i < x_.size(); ++i) x_[i] = static_cast<float>(batch.images[i]) * kInv;
    return x_.data();
  }

  std::string name_;
  DenseNet<float> net_;
  std::vector<float> params_;
  std::vector<float> x_;
};

}  // namespace

bool CudaAvailable(std::string* why) {
#if LOFT_WITH_CUDA
  return cuda::DeviceAvailable(why);
#else
  if (why) *why = "this build has no CUDA support (nvcc was not found or LOFT_WITH_CUDA_IF_FOUND=OFF)";
  return false;
#endif
}

StatusOr<std::unique_ptr<Model>> MakeModel(const ModelOptions& options) {
  LOFT_RETURN_IF_ERROR(options.Validate());
  if (options.device == Device::kCuda) {
    std::string why;
    if (!CudaAvailable(&why)) return Unavailable("cuda model requested: " + why);
#if LOFT_WITH_CUDA
    return cuda::MakeCudaModel(options, ArchName(options));
#endif
  }
  return std::unique_ptr<Model>(std::make_unique<CpuModel>(options));
}

StatusOr<std::unique_ptr<Model>> MakeModel(ModelKind kind, Device device) {
  ModelOptions o;
  o.kind = kind;
  o.device = device;
  return MakeModel(o);
}

}  // namespace loft::models
