// Little-endian fixed-width fields in byte buffers: the one encoder for
// every hand-packed binary format of loft (the cache's record header,
// cache/sample_cache.h; the dataset manifest, cache/manifest.h; the ring's
// exchange and state-transfer fields, edge_agent/ring_bytes.h). The bytes
// are little-endian on every host; a floating-point value is stored as its
// IEEE-754 bit pattern.
//
// Not responsible for: bounds (callers check that sizeof(T) bytes are
// there), framing, versioning.
// Thread-safety: pure functions.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

namespace loft {

template <typename T>
concept LeField = (std::is_integral_v<T> || std::is_floating_point_v<T>)&&!std::is_same_v<T, bool> &&
                  (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);

namespace le_detail {
// The unsigned integer of N bytes (N in 1, 2, 4, 8).
template <size_t N>
using UintOf =
    std::conditional_t<N == 1, uint8_t,
                       std::conditional_t<N == 2, uint16_t, std::conditional_t<N == 4, uint32_t, uint64_t>>>;
}  // namespace le_detail

// Writes v's sizeof(T) bytes at p, least significant first.
template <LeField T>
void StoreLe(void* p, T v) {
  using U = le_detail::UintOf<sizeof(T)>;
  const U u = std::bit_cast<U>(v);
  auto* out = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<unsigned char>((u >> (8 * i)) & 0xff);
}

// Reads the sizeof(T) bytes at p written by StoreLe.
template <LeField T>
T LoadLe(const void* p) {
  using U = le_detail::UintOf<sizeof(T)>;
  const auto* in = static_cast<const unsigned char*>(p);
  U u = 0;
  for (size_t i = sizeof(T); i-- > 0;) u = static_cast<U>((u << 8) | in[i]);
  return std::bit_cast<T>(u);
}

// Appends v to `out` (StoreLe at its end).
template <LeField T>
void AppendLe(std::vector<std::byte>* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  StoreLe(out->data() + at, v);
}

// LoadLe at byte offset `at` of `in` (the caller checked at + sizeof(T) <= in.size()).
template <LeField T>
T LoadLe(std::span<const std::byte> in, size_t at) {
  return LoadLe<T>(in.data() + at);
}

}  // namespace loft
