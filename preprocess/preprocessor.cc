#include "preprocess/preprocessor.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace loft::preprocess {

Status PreprocessOptions::Validate() const {
  if (input_width < 1 || input_height < 1 || input_width > kMaxDecodedSide || input_height > kMaxDecodedSide)
    return InvalidArgument("preprocess: the model input must be 1.." + std::to_string(kMaxDecodedSide) +
                           " pixels a side (got " + std::to_string(input_width) + "x" +
                           std::to_string(input_height) + ")");
  if (crop_padding < 0 || crop_padding >= std::min(input_width, input_height))
    return InvalidArgument("preprocess: crop_padding must be in [0, the input's smaller side) (got " +
                           std::to_string(crop_padding) + ")");
  return OkStatus();
}

StatusOr<PreprocessOptions> PreprocessOptions::FromSpec(const ClusterSpec& spec) {
  PreprocessOptions o;
  o.encoding = spec.dataset.encoding;
  o.augment = spec.dataset.augment;
  o.seed = spec.training.seed;
  const auto side =
      static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(spec.dataset.sample_bytes))));
  if (side * side != spec.dataset.sample_bytes || side > kMaxDecodedSide)
    return InvalidArgument(
        spec.source + ": dataset.sample_bytes (" + std::to_string(spec.dataset.sample_bytes) +
        ") is not the pixel count of a square image of at most " + std::to_string(kMaxDecodedSide) +
        " pixels a side: preprocessing cannot size the model "
        "input");
  o.input_width = o.input_height = static_cast<int>(side);
  LOFT_RETURN_IF_ERROR(o.Validate());
  return o;
}

namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

CropFlip DrawCropFlip(uint64_t seed, int64_t epoch, uint64_t id, int padding) {
  uint64_t s = SplitMix64(SplitMix64(SplitMix64(seed) ^ static_cast<uint64_t>(epoch)) ^ id);
  const auto span = static_cast<uint64_t>(2 * padding + 1);
  CropFlip cf;
  s = SplitMix64(s);
  cf.dx = static_cast<int>(s % span) - padding;
  s = SplitMix64(s);
  cf.dy = static_cast<int>(s % span) - padding;
  s = SplitMix64(s);
  cf.flip = (s >> 63) != 0;
  return cf;
}

Preprocessor::Preprocessor(const PreprocessOptions& options) : options_(options) {}

void Preprocessor::BuildAxis(int src, int dst, int shift, bool flip, float scale, Axis* axis) const {
  const double s = static_cast<double>(src) / dst;
  axis->stride = static_cast<int>(std::ceil(s)) + 1;
  axis->start.assign(dst, 0);
  axis->count.assign(dst, 0);
  axis->weights.assign(static_cast<size_t>(dst) * axis->stride, 0.0f);
  for (int i = 0; i < dst; ++i) {
    const int u = flip ? dst - 1 - i : i;
    const double a = (u + shift) * s;
    const double b = a + s;
    const int k0 = std::max(0, static_cast<int>(std::floor(a)));
    const int k1 = std::min(src, static_cast<int>(std::ceil(b)));
    axis->start[i] = std::min(k0, src);
    int n = 0;
    for (int k = k0; k < k1 && n < axis->stride; ++k, ++n) {
      const double overlap = std::min(b, k + 1.0) - std::max(a, static_cast<double>(k));
      axis->weights[static_cast<size_t>(i) * axis->stride + n] = static_cast<float>(overlap / s) * scale;
    }
    axis->count[i] = n;
  }
}

void Preprocessor::Resample(const uint8_t* src, int w, int h, const CropFlip& cf, float* out) {
  constexpr float kInv = 1.0f / 255.0f;
  const int ow = options_.input_width;
  const int oh = options_.input_height;
  if (w == ow && h == oh && cf == CropFlip{}) {
    for (int64_t i = 0; i < int64_t{ow} * oh; ++i) out[i] = static_cast<float>(src[i]) * kInv;
    return;
  }
  BuildAxis(w, ow, cf.dx, cf.flip, 1.0f, &xs_);
  BuildAxis(h, oh, cf.dy, false, kInv, &ys_);
  int r0 = h, r1 = 0;
  for (int y = 0; y < oh; ++y) {
    if (ys_.count[y] == 0) continue;
    r0 = std::min(r0, ys_.start[y]);
    r1 = std::max(r1, ys_.start[y] + ys_.count[y]);
  }
  std::fill(out, out + int64_t{ow} * oh, 0.0f);
  if (r0 >= r1) return;  // the window lies wholly in the padding
  // Horizontal pass over the source rows the window uses.
  rows_.resize(static_cast<size_t>(r1 - r0) * ow);
  for (int r = r0; r < r1; ++r) {
    const uint8_t* row = src + static_cast<size_t>(r) * w;
    float* dst = rows_.data() + static_cast<size_t>(r - r0) * ow;
    for (int x = 0; x < ow; ++x) {
      const float* wt = xs_.weights.data() + static_cast<size_t>(x) * xs_.stride;
      const uint8_t* p = row + xs_.start[x];
      float acc = 0;
      for (int t = 0; t < xs_.count[x]; ++t) acc += wt[t] * static_cast<float>(p[t]);
      dst[x] = acc;
    }
  }
  // Vertical pass (its weights carry the 1/255).
  for (int y = 0; y < oh; ++y) {
    float* o = out + static_cast<size_t>(y) * ow;
    const float* wt = ys_.weights.data() + static_cast<size_t>(y) * ys_.stride;
    for (int t = 0; t < ys_.count[y]; ++t) {
      const float* row = rows_.data() + static_cast<size_t>(ys_.start[y] + t - r0) * ow;
      const float wy = wt[t];
      for (int x = 0; x < ow; ++x) o[x] += wy * row[x];
    }
  }
}

Status Preprocessor::Run(uint64_t id, int64_t epoch, std::span<const uint8_t> payload, std::span<float> out) {
  if (static_cast<int64_t>(out.size()) != options_.input_size())
    return InvalidArgument("preprocess: output buffer has " + std::to_string(out.size()) +
                           " floats, expected " + std::to_string(options_.input_size()));
  const CropFlip cf = options_.augment == AugmentKind::kCropFlip
                          ? DrawCropFlip(options_.seed, epoch, id, options_.crop_padding)
                          : CropFlip{};
  if (options_.encoding == DatasetEncoding::kRaw) {
    if (static_cast<int64_t>(payload.size()) != options_.input_size())
      return DataLoss("sample " + std::to_string(id) + ": raw payload is " + std::to_string(payload.size()) +
                      " bytes, expected " + std::to_string(options_.input_size()) + " (" +
                      std::to_string(options_.input_width) + "x" + std::to_string(options_.input_height) +
                      ")");
    Resample(payload.data(), options_.input_width, options_.input_height, cf, out.data());
    return OkStatus();
  }
  LOFT_RETURN_IF_ERROR(decoder_.DecodeGrey(id, payload, &image_));
  Resample(image_.pixels.data(), image_.width, image_.height, cf, out.data());
  return OkStatus();
}

}  // namespace loft::preprocess
