#include "cache/crc32c.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace loft::cache;

TEST_CASE("CRC32C matches the published check value", "[crc32c]") {
  const char* check = "123456789";
  REQUIRE(Crc32cPortable(check, 9) == 0xE3069283u);
  REQUIRE(Crc32c(check, 9) == 0xE3069283u);
  // RFC 3720 (iSCSI) B.4 test vector: 32 bytes of zeros.
  std::vector<uint8_t> zeros(32, 0);
  REQUIRE(Crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);
  std::vector<uint8_t> ones(32, 0xff);
  REQUIRE(Crc32c(ones.data(), ones.size()) == 0x62A8AB43u);
  REQUIRE(Crc32c(nullptr, 0) == 0u);
}

TEST_CASE("CRC32C SSE4.2 path agrees with the Boost reference on random buffers", "[crc32c]") {
  if (!Crc32cHardwareAvailable()) {
    WARN("CPU lacks SSE4.2; only the portable path is exercised");
  }
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 500; ++trial) {
    const size_t n = rng() % 3000;
    std::vector<uint8_t> buf(n + 8);
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    const size_t offset = rng() % 8;  // exercise unaligned starts
    const uint8_t* p = buf.data() + offset;
    const uint32_t ref = Crc32cPortable(p, n);
    REQUIRE(Crc32c(p, n) == ref);
    if (Crc32cHardwareAvailable()) REQUIRE(Crc32cSse42(p, n) == ref);
    // Extending over a split gives the same answer on every path.
    const size_t cut = n == 0 ? 0 : rng() % (n + 1);
    REQUIRE(Crc32cExtend(Crc32c(p, cut), p + cut, n - cut) == ref);
    REQUIRE(Crc32cPortable(p + cut, n - cut, Crc32cPortable(p, cut)) == ref);
    if (Crc32cHardwareAvailable()) REQUIRE(Crc32cSse42(p + cut, n - cut, Crc32cSse42(p, cut)) == ref);
  }
}

TEST_CASE("CRC32C agrees with the reference around the 3-lane block sizes", "[crc32c]") {
  std::mt19937_64 rng(99);
  std::vector<uint8_t> buf(4 * 768 + 16);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t n : {767u, 768u, 769u, 775u, 776u, 792u, 1535u, 1536u, 1543u, 2304u, 3072u, 3088u}) {
    CAPTURE(n);
    REQUIRE(Crc32c(buf.data(), n) == Crc32cPortable(buf.data(), n));
    REQUIRE(Crc32cExtend(0xdeadbeef, buf.data(), n) == Crc32cPortable(buf.data(), n, 0xdeadbeef));
  }
}

TEST_CASE("CRC32C detects a single flipped bit", "[crc32c]") {
  std::vector<uint8_t> buf(784, 0x5a);
  const uint32_t base = Crc32c(buf.data(), buf.size());
  for (size_t i = 0; i < buf.size(); i += 97) {
    buf[i] ^= 0x10;
    REQUIRE(Crc32c(buf.data(), buf.size()) != base);
    buf[i] ^= 0x10;
  }
}
