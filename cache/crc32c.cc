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
__attribute__((target("sse4.2"))) uint32_t Sse42Extend(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t state = ~crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, sizeof word);
    state = _mm_crc32_u64(state, word);
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
