#include "cache/crc32c.h"

#include <boost/crc.hpp>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LOFT_CRC32C_X86 1
#else
#define LOFT_CRC32C_X86 0
#endif

namespace loft::cache {
namespace {

using BoostCrc32c = boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;

uint32_t Reflect32(uint32_t x) {
  uint32_t r = 0;
  for (int i = 0; i < 32; ++i) {
    r = (r << 1) | (x & 1u);
    x >>= 1;
  }
  return r;
}

// The running register of a reflected CRC is ~crc (in reflected bit order);
// Boost takes the initial remainder unreflected and reflects it itself.
uint32_t PortableExtend(uint32_t crc, const void* data, size_t n) {
  BoostCrc32c c(Reflect32(~crc));
  c.process_bytes(data, n);
  return c.checksum();
}

#if LOFT_CRC32C_X86
// Three independent crc32 streams over 256-byte lanes hide the
// instruction's 3-cycle latency; the lane results are combined with a
// table-driven "append 256 zero bytes" operator (the CRC register update
// is linear, so crc(a||b) = shift_|b|(crc(a)) ^ crc_from_zero(b)).
constexpr size_t kLane = 256;

struct ShiftTable {
  uint32_t t[4][256];
};

__attribute__((target("sse4.2"))) uint32_t RawShiftSlow(uint32_t reg) {
  uint64_t r = reg;
  for (size_t i = 0; i < kLane / 8; ++i) r = _mm_crc32_u64(r, 0);
  return static_cast<uint32_t>(r);
}

const ShiftTable& LaneShiftTable() {
  static const ShiftTable table = [] {
    ShiftTable st{};
    for (int k = 0; k < 4; ++k) {
      for (uint32_t b = 0; b < 256; ++b) st.t[k][b] = RawShiftSlow(b << (8 * k));
    }
    return st;
  }();
  return table;
}

inline uint32_t RawShift(const ShiftTable& st, uint32_t r) {
  return st.t[0][r & 0xff] ^ st.t[1][(r >> 8) & 0xff] ^ st.t[2][(r >> 16) & 0xff] ^ st.t[3][r >> 24];
}

inline uint64_t Load64(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

__attribute__((target("sse4.2"))) uint32_t Sse42Extend(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t state = ~crc;
  if (n >= 3 * kLane) {
    const ShiftTable& st = LaneShiftTable();
    while (n >= 3 * kLane) {
      uint64_t s0 = state, s1 = 0, s2 = 0;
      for (size_t i = 0; i < kLane; i += 8) {
        s0 = _mm_crc32_u64(s0, Load64(p + i));
        s1 = _mm_crc32_u64(s1, Load64(p + kLane + i));
        s2 = _mm_crc32_u64(s2, Load64(p + 2 * kLane + i));
      }
      const uint32_t r01 = RawShift(st, static_cast<uint32_t>(s0)) ^ static_cast<uint32_t>(s1);
      state = RawShift(st, r01) ^ static_cast<uint32_t>(s2);
      p += 3 * kLane;
      n -= 3 * kLane;
    }
  }
  while (n >= 8) {
    state = _mm_crc32_u64(state, Load64(p));
    p += 8;
    n -= 8;
  }
  auto s32 = static_cast<uint32_t>(state);
  while (n > 0) {
    s32 = _mm_crc32_u8(s32, *p);
    ++p;
    --n;
  }
  return ~s32;
}
#endif

using ExtendFn = uint32_t (*)(uint32_t, const void*, size_t);

ExtendFn ChooseExtend() {
#if LOFT_CRC32C_X86
  if (__builtin_cpu_supports("sse4.2")) return &Sse42Extend;
#endif
  return &PortableExtend;
}

const ExtendFn kExtend = ChooseExtend();

}  // namespace

uint32_t Crc32c(const void* data, size_t n) {
  return kExtend(0, data, n);
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
  return kExtend(crc, data, n);
}

uint32_t Crc32cPortable(const void* data, size_t n, uint32_t crc) {
  return PortableExtend(crc, data, n);
}

uint32_t Crc32cSse42(const void* data, size_t n, uint32_t crc) {
#if LOFT_CRC32C_X86
  return Sse42Extend(crc, data, n);
#else
  return PortableExtend(crc, data, n);
#endif
}

bool Crc32cHardwareAvailable() {
#if LOFT_CRC32C_X86
  return __builtin_cpu_supports("sse4.2");
#else
  return false;
#endif
}

}  // namespace loft::cache
