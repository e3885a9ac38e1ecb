// CRC32C (Castagnoli, reflected polynomial 0x82F63B78, init and final XOR
// 0xFFFFFFFF) as used by the sample cache's record format.
//
// Crc32c() picks, once per process, the SSE4.2 `crc32` instruction when
// the CPU has it and otherwise the portable Boost.CRC implementation
// (Crc32cPortable, the reference). Both give identical results; a unit test
// checks this on random buffers.
// Not responsible for: streaming/incremental use beyond `Extend`.
// Thread-safety: pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loft::cache {

// CRC32C of data[0, n).
uint32_t Crc32c(const void* data, size_t n);

// Continues a CRC computed over a prefix: Extend(Crc32c(a), b) == Crc32c(a+b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

// Reference implementation (Boost.CRC, table-driven). With `crc` != 0 it
// extends a previous CRC like Crc32cExtend.
uint32_t Crc32cPortable(const void* data, size_t n, uint32_t crc = 0);

// SSE4.2 implementation (same contract). Only call when
// Crc32cHardwareAvailable().
uint32_t Crc32cSse42(const void* data, size_t n, uint32_t crc = 0);

// True when the SSE4.2 path is usable on this CPU (and compiled in).
bool Crc32cHardwareAvailable();

}  // namespace loft::cache
