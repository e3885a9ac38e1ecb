#include "models/chunk_codec.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace loft;
using namespace loft::models;

namespace {
std::vector<float> RoundTrip(const std::vector<float>& x, std::vector<std::byte>* wire = nullptr) {
  std::vector<std::byte> w(ChunkWireBytes(Compression::kInt8, x.size()));
  EncodeInt8(x, w);
  std::vector<float> out(x.size(), -1.0f);
  REQUIRE(DecodeInt8(w, out));
  if (wire) *wire = w;
  return out;
}
}  // namespace

TEST_CASE("chunk wire bytes: 4 per float without compression, 4 + 1 per float with int8", "[codec]") {
  for (size_t e : {size_t{0}, size_t{1}, size_t{7}, size_t{39191}}) {
    CHECK(ChunkWireBytes(Compression::kNone, e) == 4 * e);
    CHECK(ChunkWireBytes(Compression::kInt8, e) == 4 + e);
  }
  // The MLP's 235,146 gradients in 6 chunks (39,191 each): 156,764 vs 39,195 bytes.
  CHECK(ChunkWireBytes(Compression::kNone, 235146 / 6) == 156764);
  CHECK(ChunkWireBytes(Compression::kInt8, 235146 / 6) == 39195);
}

TEST_CASE("compression names parse and print, an unknown name is an error naming it", "[codec]") {
  for (Compression c : {Compression::kNone, Compression::kInt8}) {
    auto p = ParseCompression(CompressionName(c));
    REQUIRE(p.ok());
    CHECK(*p == c);
  }
  auto bad = ParseCompression("fp16");
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad.status().message().find("fp16") != std::string::npos);
}

TEST_CASE("int8 encoding: little-endian scale, then round-half-away values clamped to 127", "[codec]") {
  // max |x| = 127: scale 1 exactly, so every q is round(x).
  const std::vector<float> x{127.0f, -63.4f, 0.0f, 0.6f, 2.5f, -2.5f};
  std::vector<std::byte> wire;
  const std::vector<float> dec = RoundTrip(x, &wire);
  REQUIRE(wire.size() == 10);
  const unsigned char want[10] = {0x00, 0x00, 0x80, 0x3f, 0x7f, 0xc1, 0x00, 0x01, 0x03, 0xfd};
  CHECK(std::memcmp(wire.data(), want, sizeof want) == 0);
  CHECK(dec == std::vector<float>{127, -63, 0, 1, 3, -3});
}

TEST_CASE("int8 round trip: error at most scale/2, zeros stay zero, the largest value kept", "[codec]") {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> g(0, 1);
  for (size_t len : {size_t{1}, size_t{2}, size_t{100}, size_t{5000}}) {
    std::vector<float> x(len);
    for (float& v : x) v = g(rng) * 1e-3f;
    if (len > 2) x[1] = 0.0f;
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::abs(v));
    const float scale = amax / 127.0f;
    const std::vector<float> dec = RoundTrip(x);
    for (size_t k = 0; k < len; ++k) {
      INFO("len " << len << " k " << k << " x " << x[k] << " dec " << dec[k]);
      CHECK(std::abs(dec[k] - x[k]) <= 0.5f * scale * (1 + 1e-5f));
      CHECK(std::abs(dec[k]) <= amax * (1 + 1e-6f));
    }
    if (len > 2) CHECK(dec[1] == 0.0f);
  }
  CHECK(RoundTrip({0.0f, 0.0f, -0.0f}) == std::vector<float>{0, 0, 0});  // scale 0
  CHECK(RoundTrip({}).empty());
  std::vector<std::byte> w;
  RoundTrip({}, &w);
  CHECK(w.size() == 4);
}

TEST_CASE("int8: a chunk with a NaN or an Inf decodes to all-NaN", "[codec]") {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    const std::vector<float> dec = RoundTrip({1.0f, bad, -2.0f, 0.0f});
    for (float v : dec) CHECK(std::isnan(v));
  }
}

TEST_CASE("int8: a payload of the wrong size is refused and leaves the output untouched", "[codec]") {
  std::vector<float> out(3, 7.0f);
  const std::vector<std::byte> short_payload(6), float_payload(12);
  CHECK_FALSE(DecodeInt8(short_payload, out));
  CHECK_FALSE(DecodeInt8(float_payload, out));  // the uncompressed size
  CHECK(out == std::vector<float>(3, 7.0f));
  const std::vector<std::byte> right(7);
  CHECK(DecodeInt8(right, out));
  CHECK(out == std::vector<float>(3, 0.0f));
}
