// Model: a classifier over a flat float parameter vector.
//
// Inputs are uint8 images (row-major, `input_dim` bytes per sample) that the
// model scales to [0, 1] floats, and uint8 labels in [0, num_classes). The
// loss is the softmax cross-entropy averaged over the batch; gradients are
// written into a caller-owned buffer of num_params() floats, also averaged
// over the batch, so a worker's gradient on b samples is comparable to any
// other worker's regardless of b.
//
// Two kinds share one implementation (models/dense_net.h): softmax
// regression (input -> classes) and an MLP with ReLU hidden layers
// (default 784-256-128-10). Parameter layout, layer by layer: W (out x in,
// row-major) then b (out).
//
// Not responsible for: the optimiser (models/sgd.h), data loading, or
// combining gradients across workers (models/ring_allreduce.h).
// Thread-safety: a Model owns scratch buffers; use one Model per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace loft::models {

// A view of n samples: images n * input_dim bytes (scaled by 1/255 by the
// model), labels n bytes. Or, when `inputs` is set, n * input_dim floats
// that are the model's input as they are (preprocess/: decoded, augmented,
// already in [0, 1]); `images` is then ignored.
struct BatchView {
  std::span<const uint8_t> images;
  std::span<const uint8_t> labels;
  std::span<const float> inputs = {};
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

enum class ModelKind { kSoftmax, kMlp };
enum class Device { kCpu, kCuda };

// "softmax" | "mlp".
StatusOr<ModelKind> ParseModelKind(std::string_view name);
std::string_view ModelKindName(ModelKind kind);
// "cpu" | "cuda".
StatusOr<Device> ParseDevice(std::string_view name);

struct ModelOptions {
  ModelKind kind = ModelKind::kMlp;
  Device device = Device::kCpu;
  int input_dim = 784;
  int num_classes = 10;
  std::vector<int> hidden = {256, 128};  // ignored for kSoftmax
  Status Validate() const;
  // input_dim, hidden... (MLP only), num_classes.
  std::vector<int> LayerSizes() const;
};

class Model {
 public:
  virtual ~Model() = default;

  // "softmax-784-10", "mlp-784-256-128-10": identifies the architecture
  // (checkpoints refuse to load into a different one).
  virtual const std::string& name() const = 0;
  virtual Device device() const = 0;
  virtual int input_dim() const = 0;
  virtual int num_classes() const = 0;
  int64_t num_params() const { return static_cast<int64_t>(params().size()); }

  virtual std::span<float> params() = 0;
  virtual std::span<const float> params() const = 0;

  // He initialisation for ReLU layers, Xavier for the output layer, zero
  // biases; a pure function of the seed (SplitMix64 + Box-Muller, identical
  // on every platform).
  virtual void Init(uint64_t seed) = 0;

  // logits: resized to n * num_classes.
  virtual Status Forward(const BatchView& batch, std::vector<float>* logits) = 0;
  // Mean cross-entropy over the batch.
  virtual StatusOr<double> Loss(const BatchView& batch) = 0;
  // Mean cross-entropy; grad (num_params floats) receives the mean gradient.
  virtual StatusOr<double> LossAndGradient(const BatchView& batch, std::span<float> grad) = 0;
  // Fraction of samples whose argmax logit equals the label (in chunks, so
  // a whole test set can be passed).
  StatusOr<double> Evaluate(const BatchView& data);

 protected:
  // Checks sizes and label range; errors name what is wrong.
  Status CheckBatch(const BatchView& batch) const;
};

// The factory. kCuda gives Unavailable (with the reason) when the build has
// no CUDA or the machine has no usable GPU; callers fall back to kCpu.
StatusOr<std::unique_ptr<Model>> MakeModel(const ModelOptions& options);
StatusOr<std::unique_ptr<Model>> MakeModel(ModelKind kind, Device device);

// True when this build has the CUDA target and a GPU is usable; otherwise
// false with the reason in *why (if non-null).
bool CudaAvailable(std::string* why);

}  // namespace loft::models
