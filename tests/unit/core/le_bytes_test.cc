#include "core/le_bytes.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <limits>

namespace loft {
namespace {

TEST_CASE("le_bytes: integers are stored least significant byte first") {
  unsigned char b[8] = {};
  StoreLe<uint64_t>(b, 0x0102030405060708ull);
  const unsigned char want[8] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
  CHECK(std::memcmp(b, want, 8) == 0);
  CHECK(LoadLe<uint64_t>(b) == 0x0102030405060708ull);

  unsigned char h[2] = {};
  StoreLe<uint16_t>(h, 0xBEEF);
  CHECK(h[0] == 0xEF);
  CHECK(h[1] == 0xBE);
  CHECK(LoadLe<uint16_t>(h) == 0xBEEF);

  unsigned char w[4] = {};
  StoreLe<uint32_t>(w, 0xDEADBEEFu);
  CHECK(w[0] == 0xEF);
  CHECK(w[3] == 0xDE);
  CHECK(LoadLe<uint32_t>(w) == 0xDEADBEEFu);
}

TEST_CASE("le_bytes: signed and floating-point values round-trip bit for bit") {
  unsigned char b[8] = {};
  StoreLe<int64_t>(b, -2);
  CHECK(b[0] == 0xFE);
  CHECK(b[7] == 0xFF);
  CHECK(LoadLe<int64_t>(b) == -2);
  StoreLe<int64_t>(b, std::numeric_limits<int64_t>::min());
  CHECK(LoadLe<int64_t>(b) == std::numeric_limits<int64_t>::min());

  StoreLe<double>(b, 1.0);  // IEEE-754: 0x3FF0000000000000
  CHECK(b[7] == 0x3F);
  CHECK(b[6] == 0xF0);
  CHECK(b[0] == 0x00);
  CHECK(LoadLe<double>(b) == 1.0);
  StoreLe<double>(b, -0.1);
  CHECK(LoadLe<double>(b) == -0.1);
}

TEST_CASE("le_bytes: AppendLe appends and LoadLe reads at an offset") {
  std::vector<std::byte> buf;
  AppendLe(&buf, int64_t{-7});
  AppendLe(&buf, uint64_t{42});
  AppendLe(&buf, 2.5);
  REQUIRE(buf.size() == 24);
  const std::span<const std::byte> in(buf);
  CHECK(LoadLe<int64_t>(in, 0) == -7);
  CHECK(LoadLe<uint64_t>(in, 8) == 42);
  CHECK(LoadLe<double>(in, 16) == 2.5);
  CHECK(std::to_integer<int>(buf[8]) == 42);  // least significant byte first
  CHECK(std::to_integer<int>(buf[15]) == 0);
}

}  // namespace
}  // namespace loft
