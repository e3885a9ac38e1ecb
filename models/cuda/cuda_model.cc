#include "models/cuda/cuda_model.h"

#include <vector>

#include "models/cuda/dense_net_cuda.h"
#include "models/dense_net.h"

namespace loft::models::cuda {
namespace {

class CudaModel final : public Model {
 public:
  CudaModel(std::string name, std::vector<int> sizes, std::unique_ptr<CudaDenseNet> net)
      : name_(std::move(name)),
        sizes_(std::move(sizes)),
        net_(std::move(net)),
        params_(DenseParamCount(sizes_)) {}

  const std::string& name() const override { return name_; }
  Device device() const override { return Device::kCuda; }
  int input_dim() const override { return sizes_.front(); }
  int num_classes() const override { return sizes_.back(); }
  std::span<float> params() override { return params_; }
  std::span<const float> params() const override { return params_; }
  void Init(uint64_t seed) override { InitDenseParams<float>(sizes_, seed, params_); }

  Status Forward(const BatchView& batch, std::vector<float>* logits) override {
    LOFT_RETURN_IF_ERROR(CheckBatch(batch));
    LOFT_RETURN_IF_ERROR(BytesOnly(batch));
    logits->resize(static_cast<size_t>(batch.size()) * num_classes());
    std::string err;
    if (!net_->Logits(params_.data(), batch.images.data(), batch.size(), logits->data(), &err)) {
      return Internal(name_ + " (cuda): " + err);
    }
    return OkStatus();
  }
  StatusOr<double> Loss(const BatchView& batch) override {
    LOFT_RETURN_IF_ERROR(CheckBatch(batch));
    return Run(batch, nullptr);
  }
  StatusOr<double> LossAndGradient(const BatchView& batch, std::span<float> grad) override {
    LOFT_RETURN_IF_ERROR(CheckBatch(batch));
    if (static_cast<int64_t>(grad.size()) != num_params()) {
      return InvalidArgument(name_ + ": gradient buffer has " + std::to_string(grad.size()) +
                             " floats, expected " + std::to_string(num_params()));
    }
    return Run(batch, grad.data());
  }

 private:
  // The device kernels scale bytes; preprocessed float inputs are not supported here yet.
  Status BytesOnly(const BatchView& batch) const {
    if (!batch.inputs.empty()) return Unimplemented(name_ + " (cuda): float inputs (preprocessed batches)");
    return OkStatus();
  }
  StatusOr<double> Run(const BatchView& batch, float* grad) {
    LOFT_RETURN_IF_ERROR(BytesOnly(batch));
    std::string err;
    double loss = 0;
    if (!net_->LossAndGradient(params_.data(), batch.images.data(), batch.labels.data(), batch.size(), grad,
                               &loss, &err)) {
      return Internal(name_ + " (cuda): " + err);
    }
    return loss;
  }

  std::string name_;
  std::vector<int> sizes_;
  std::unique_ptr<CudaDenseNet> net_;
  std::vector<float> params_;
};

}  // namespace

bool DeviceAvailable(std::string* why) {
  int count = 0;
  return QueryDevices(&count, why);
}

StatusOr<std::unique_ptr<Model>> MakeCudaModel(const ModelOptions& options, std::string name) {
  std::string err;
  std::vector<int> sizes = options.LayerSizes();
  std::unique_ptr<CudaDenseNet> net = CudaDenseNet::Create(sizes, &err);
  if (!net) return Unavailable("cuda model: " + err);
  return std::unique_ptr<Model>(
      std::make_unique<CudaModel>(std::move(name), std::move(sizes), std::move(net)));
}

}  // namespace loft::models::cuda
