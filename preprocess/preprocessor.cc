#include "preprocess/preprocessor.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/placement.h"

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
        " pixels a side: preprocessing cannot size the model input");
  o.input_width = o.input_height = static_cast<int>(side);
  LOFT_RETURN_IF_ERROR(o.Validate());
  return o;
}

CropFlip DrawCropFlip(uint64_t seed, int64_t epoch, uint64_t id, int padding) {
  uint64_t s = Mix64(Mix64(Mix64(seed) ^ static_cast<uint64_t>(epoch)) ^ id);
  const auto span = static_cast<uint64_t>(2 * padding + 1);
  CropFlip cf;
  s = Mix64(s);
  cf.dx = static_cast<int>(s % span) - padding;
  s = Mix64(s);
  cf.dy = static_cast<int>(s % span) - padding;
  s = Mix64(s);
  cf.flip = (s >> 63) != 0;
  return cf;
}

Preprocessor::Preprocessor(const PreprocessOptions& options) : options_(options) {}

void Preprocessor::BuildAxis(int src, int dst, int shift, bool flip, float scale, Axis* axis) {
  const double s = static_cast<double>(src) / dst;
  axis->stride = static_cast<int>(std::ceil(s)) + 1;
  axis->start.assign(dst, 0);
  axis->weights.assign(static_cast<size_t>(dst) * axis->stride, 0.0f);
  axis->empty = true;
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
    if (n > 0) axis->empty = false;
  }
}

const Preprocessor::Axis& Preprocessor::AxisFor(std::vector<Axis>& cache, int src, int dst, int shift,
                                                bool flip, float scale) {
  // One slot per (shift, flip): a crop_flip epoch reuses 9 x 2 of them.
  const int pad = options_.crop_padding;
  const size_t slot = static_cast<size_t>((std::clamp(shift, -pad, pad) + pad) * 2 + (flip ? 1 : 0));
  if (cache.size() <= slot) cache.resize(static_cast<size_t>(2 * pad + 1) * 2);
  Axis& axis = cache[slot];
  if (axis.src != src || axis.shift != shift || axis.flip != flip) {
    BuildAxis(src, dst, shift, flip, scale, &axis);
    axis.src = src;
    axis.shift = shift;
    axis.flip = flip;
  }
  return axis;
}

namespace {

// Loops of fixed-size blocks over restrict pointers (a uint8_t may alias
// anything): GCC vectorises them at -O2, whose cost model refuses loops
// of unknown length.
// acc[0, n) = w * row[0, n) (add = false) or += (add = true).
void WeightedRow(float* __restrict acc, const uint8_t* __restrict row, float w, int n, bool add) {
  int x = 0;
  if (add) {
    for (; x + 16 <= n; x += 16) {
      for (int k = 0; k < 16; ++k) acc[x + k] += w * static_cast<float>(row[x + k]);
    }
    for (; x < n; ++x) acc[x] += w * static_cast<float>(row[x]);
  } else {
    for (; x + 16 <= n; x += 16) {
      for (int k = 0; k < 16; ++k) acc[x + k] = w * static_cast<float>(row[x + k]);
    }
    for (; x < n; ++x) acc[x] = w * static_cast<float>(row[x]);
  }
}

// out[x] = sum over t < stride of weights[x * stride + t] * row[start[x] + t],
// x < n. kStride > 0: the tap count fixed at compile time (the loop
// unrolled; 96 -> 28 has 5 taps); 0: `stride` at run time.
template <int kStride>
void TapRow(const float* __restrict row, const int* __restrict start, const float* __restrict weights,
            int stride, int n, float* __restrict out) {
  const int taps = kStride > 0 ? kStride : stride;
  for (int x = 0; x < n; ++x) {
    const float* w = weights + static_cast<size_t>(x) * taps;
    const float* p = row + start[x];
    float acc = 0;
    if constexpr (kStride > 0) {
      // Unrolled (GCC's -O2 does not peel it): the same sum, in tap order.
      [&]<size_t... kT>(std::index_sequence<kT...>) {
        ((acc += w[kT] * p[kT]), ...);
      }
      (std::make_index_sequence<kStride>{});
    } else {
      for (int t = 0; t < taps; ++t) acc += w[t] * p[t];
    }
    out[x] = acc;
  }
}

using TapRowFn = void (*)(const float*, const int*, const float*, int, int, float*);

TapRowFn TapRowFor(int stride) {
  switch (stride) {
    case 2: return TapRow<2>;
    case 3: return TapRow<3>;
    case 4: return TapRow<4>;
    case 5: return TapRow<5>;
    case 6: return TapRow<6>;
    case 7: return TapRow<7>;
    case 8: return TapRow<8>;
    default: return TapRow<0>;
  }
}

}  // namespace

void Preprocessor::Resample(const uint8_t* src, int w, int h, const CropFlip& cf, float* out) {
  constexpr float kInv = 1.0f / 255.0f;
  const int ow = options_.input_width;
  const int oh = options_.input_height;
  if (w == ow && h == oh && cf == CropFlip{}) {
    for (int64_t i = 0; i < int64_t{ow} * oh; ++i) out[i] = static_cast<float>(src[i]) * kInv;
    return;
  }
  const Axis& xs = AxisFor(x_axes_, w, ow, cf.dx, cf.flip, 1.0f);
  const Axis& ys = AxisFor(y_axes_, h, oh, cf.dy, false, kInv);
  std::fill(out, out + int64_t{ow} * oh, 0.0f);
  if (xs.empty || ys.empty) return;  // the window lies wholly in the padding
  // One output row's vertical sums over the source width, then zeros, so
  // that each output's xs.stride taps can be read (unused ones weigh 0).
  rows_.assign(static_cast<size_t>(w) + static_cast<size_t>(xs.stride), 0.0f);
  float* __restrict tmp = rows_.data();
  const auto ys_stride = static_cast<size_t>(ys.stride);
  const TapRowFn tap_row = TapRowFor(xs.stride);
  for (int y = 0; y < oh; ++y) {
    const float* wy = ys.weights.data() + static_cast<size_t>(y) * ys_stride;
    if (wy[0] == 0.0f) continue;  // wholly in the padding (taps start at the first overlap)
    // Vertical: the output row's source rows, weighted (1/255 included).
    const uint8_t* r = src + static_cast<size_t>(ys.start[y]) * w;
    WeightedRow(tmp, r, wy[0], w, false);
    for (size_t t = 1; t < ys_stride && ys.start[y] + static_cast<int>(t) < h; ++t) {
      if (wy[t] != 0.0f) WeightedRow(tmp, r + t * w, wy[t], w, true);
    }
    // Horizontal: each output's taps.
    tap_row(tmp, xs.start.data(), xs.weights.data(), xs.stride, ow, out + static_cast<size_t>(y) * ow);
  }
}

uint8_t QuantiseInput(float f) {
  // f · 255 in float, then round half away from zero: the same level on
  // every CPU (the library is built with -ffp-contract=off).
  const float x = f * 255.0f;
  if (!(x > 0.0f)) return 0;  // negative, zero or NaN
  if (x >= 255.0f) return 255;
  return static_cast<uint8_t>(std::lround(x));
}

Status DequantiseInputs(std::span<const uint8_t> in, std::span<float> out) {
  if (in.size() != out.size())
    return InvalidArgument("preprocess: " + std::to_string(in.size()) + " input levels for " +
                           std::to_string(out.size()) + " floats");
  for (size_t i = 0; i < in.size(); ++i) out[i] = DequantiseInput(in[i]);
  return OkStatus();
}

Status Preprocessor::Run(uint64_t id, int64_t epoch, std::span<const uint8_t> payload, std::span<float> out) {
  LOFT_RETURN_IF_ERROR(RunFloats(id, epoch, payload, out));
  for (float& f : out) f = DequantiseInput(QuantiseInput(f));
  return OkStatus();
}

Status Preprocessor::RunBytes(uint64_t id, int64_t epoch, std::span<const uint8_t> payload,
                              std::span<uint8_t> out) {
  if (static_cast<int64_t>(out.size()) != options_.input_size())
    return InvalidArgument("preprocess: output buffer has " + std::to_string(out.size()) +
                           " bytes, expected " + std::to_string(options_.input_size()));
  floats_.resize(out.size());
  LOFT_RETURN_IF_ERROR(RunFloats(id, epoch, payload, floats_));
  for (size_t i = 0; i < out.size(); ++i) out[i] = QuantiseInput(floats_[i]);
  return OkStatus();
}

Status Preprocessor::RunFloats(uint64_t id, int64_t epoch, std::span<const uint8_t> payload,
                               std::span<float> out) {
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
