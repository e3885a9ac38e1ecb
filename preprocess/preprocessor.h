// Preprocessor: one stored sample payload -> the model's float input.
//
//   payload --decode--> grey image --augment + resize + normalise--> floats
//
// decode      dataset.encoding jpeg: JpegDecoder (jpeg_codec.h); raw: the
//             payload is the image (input_width x input_height bytes).
// augment     dataset.augment crop_flip: a crop window shifted by (dx, dy)
//             whole pixels of the model input, each in [-crop_padding,
//             crop_padding], outside the image black (torchvision's
//             RandomCrop(size, padding) with fill 0), then a horizontal
//             flip with probability 1/2. Drawn from (job seed, epoch,
//             sample id) alone (DrawCropFlip): the same triple gives the
//             same floats on any node, thread or run.
// resize      area averaging (each output pixel is the mean of the source
//             area it covers; exact for equal sizes), one separable pass
//             fused with the crop and the flip.
// normalise   pixel / 255 into [0, 1], what models/ does to raw bytes
//             (models/model.cc): with encoding raw, augment none the
//             floats equal the model's own scaling bit for bit.
// quantise    each float rounded to the nearest of the 256 levels q / 255
//             (QuantiseInput), the floats then exactly q · (1/255)
//             (DequantiseInput). The model input is thus input_size()
//             uint8 bytes, what a holder that decodes for a peer sends
//             (dataset.decode_placement auto; RunBytes): both placements
//             give the trainer the same floats bit for bit. With encoding
//             raw, augment none (and crop_flip on a raw 28x28 image:
//             whole-pixel shifts) the floats are already on those levels
//             and quantising changes nothing.
//
// Not responsible for: reading records (cache/), threads (preprocess_pool.h).
// Thread-safety: a Preprocessor owns a decoder and scratch buffers: one per
// thread. Options are plain values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/cluster_spec.h"
#include "core/status.h"
#include "preprocess/jpeg_codec.h"

namespace loft::preprocess {

struct PreprocessOptions {
  DatasetEncoding encoding = DatasetEncoding::kRaw;
  AugmentKind augment = AugmentKind::kNone;
  uint64_t seed = 0;     // the job's seed (training.seed)
  int input_width = 28;  // the model's input image; input_size() floats per sample
  int input_height = 28;
  int crop_padding = 4;  // crop_flip: the largest shift, in input pixels

  int64_t input_size() const { return int64_t{input_width} * input_height; }
  Status Validate() const;
  // From a cluster spec: encoding, augment, seed = training.seed, and the
  // model input a square of dataset.sample_bytes pixels (28x28 for
  // Fashion-MNIST); InvalidArgument when sample_bytes is not a square.
  static StatusOr<PreprocessOptions> FromSpec(const ClusterSpec& spec);
};

// One sample's augmentation (AugmentKind::kCropFlip).
struct CropFlip {
  int dx = 0;  // output pixel (x, y) shows input-scale pixel (x + dx, y + dy), before the flip
  int dy = 0;
  bool flip = false;
  bool operator==(const CropFlip&) const = default;
};
// Deterministic in (seed, epoch, id): a SplitMix64 chain, no std::
// distribution (those differ between standard libraries).
CropFlip DrawCropFlip(uint64_t seed, int64_t epoch, uint64_t id, int padding);

// Float input in [0, 1] -> its level: round(f · 255) clamped to [0, 255].
uint8_t QuantiseInput(float f);
// A level's float: q · (1/255), the models' own scaling of a raw byte.
inline float DequantiseInput(uint8_t q) {
  return static_cast<float>(q) * (1.0f / 255.0f);
}
// out[i] = DequantiseInput(in[i]); InvalidArgument when the sizes differ.
Status DequantiseInputs(std::span<const uint8_t> in, std::span<float> out);

class Preprocessor {
 public:
  explicit Preprocessor(const PreprocessOptions& options);

  // Sample `id`'s payload in `epoch` -> options.input_size() floats in
  // [0, 1] at `out` (its size must be input_size()). Errors: DataLoss
  // naming the sample when the payload does not decode (JpegDecoder) or
  // a raw payload has the wrong size; InvalidArgument for a wrong `out`.
  // The floats are quantised (header: quantise).
  Status Run(uint64_t id, int64_t epoch, std::span<const uint8_t> payload, std::span<float> out);
  // The same input as its input_size() levels (QuantiseInput), what a
  // holder serves decoded: DequantiseInputs of them equals Run's floats bit
  // for bit. Same errors as Run (`out` must hold input_size() bytes).
  Status RunBytes(uint64_t id, int64_t epoch, std::span<const uint8_t> payload, std::span<uint8_t> out);

  const PreprocessOptions& options() const { return options_; }

 private:
  // One axis of the fused crop + flip + area resize: output index i reads
  // the source indices [start[i], start[i] + stride) with the weights
  // weights[i * stride + t] (0 past the area it covers).
  struct Axis {
    std::vector<int> start;
    std::vector<float> weights;
    int stride = 0;
    bool empty = true;  // every output lies in the padding
    int src = -1, shift = 0;
    bool flip = false;  // what it was built for
  };
  static void BuildAxis(int src, int dst, int shift, bool flip, float scale, Axis* axis);
  // The axis for (src, shift, flip), built once and kept.
  const Axis& AxisFor(std::vector<Axis>& cache, int src, int dst, int shift, bool flip, float scale);
  void Resample(const uint8_t* src, int w, int h, const CropFlip& cf, float* out);

  // Run before quantising.
  Status RunFloats(uint64_t id, int64_t epoch, std::span<const uint8_t> payload, std::span<float> out);

  PreprocessOptions options_;
  JpegDecoder decoder_;
  std::vector<float> floats_;  // RunBytes's scratch
  GreyImage image_;
  std::vector<Axis> x_axes_, y_axes_;
  std::vector<float> rows_;  // one output row's vertical sums, source width
};

}  // namespace loft::preprocess
