#include "models/chunk_codec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "core/le_bytes.h"

namespace loft::models {

StatusOr<Compression> ParseCompression(std::string_view name) {
  if (name == "none") return Compression::kNone;
  if (name == "int8") return Compression::kInt8;
  return InvalidArgument("unknown compression '" + std::string(name) + "' (expected none | int8)");
}

std::string_view CompressionName(Compression compression) {
  switch (compression) {
    case Compression::kNone: return "none";
    case Compression::kInt8: return "int8";
  }
  return "?";
}

size_t ChunkWireBytes(Compression compression, size_t elements) {
  return compression == Compression::kInt8 ? sizeof(float) + elements : elements * sizeof(float);
}

void EncodeInt8(std::span<const float> x, std::span<std::byte> out) {
  float amax = 0;
  bool finite = true;
  for (float v : x) {
    const float a = std::abs(v);
    finite &= a <= std::numeric_limits<float>::max();  // false for Inf and NaN
    amax = a > amax ? a : amax;
  }
  const float scale = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
  StoreLe(out.data(), scale);
  auto* q = reinterpret_cast<int8_t*>(out.data() + sizeof(float));
  if (!(scale > 0)) {  // all zero, underflow, or non-finite: every q is 0
    std::fill(q, q + x.size(), int8_t{0});
    return;
  }
  for (size_t k = 0; k < x.size(); ++k) {
    // round(r), half away from zero, without a libm call: r is a float of
    // magnitude <= 254 (scale >= amax / 254 even when it is subnormal), so
    // r +- 0.5 is exact in double and truncating it rounds as std::round.
    const double r = static_cast<double>(x[k] / scale);
    int v = static_cast<int>(r + std::copysign(0.5, r));  // no branch on the sign
    v = v < -127 ? -127 : v;
    v = v > 127 ? 127 : v;
    q[k] = static_cast<int8_t>(v);
  }
}

bool DecodeInt8(std::span<const std::byte> payload, std::span<float> out) {
  if (payload.size() != ChunkWireBytes(Compression::kInt8, out.size())) return false;
  const float scale = LoadLe<float>(payload.data());
  const std::byte* q = payload.data() + sizeof(float);
  for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<float>(static_cast<int8_t>(q[k])) * scale;
  return true;
}

}  // namespace loft::models
