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
    finite = finite && std::isfinite(v);
    amax = std::max(amax, std::abs(v));
  }
  const float scale = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
  StoreLe(out.data(), scale);
  std::byte* q = out.data() + sizeof(float);
  if (!(scale > 0)) {  // all zero, underflow, or non-finite: every q is 0
    std::fill(q, q + x.size(), std::byte{0});
    return;
  }
  for (size_t k = 0; k < x.size(); ++k) {
    const float r = std::clamp(std::round(x[k] / scale), -127.0f, 127.0f);
    q[k] = static_cast<std::byte>(static_cast<int8_t>(r));
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
