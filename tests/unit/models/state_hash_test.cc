// TrainingStateDigest / TrainingStateHash (models/state_hash.h): BLAKE2b
// over the documented layout, covering parameters, step and velocity.
#include "models/state_hash.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "models/replica_vote.h"  // DigestOf: plain BLAKE2b-256 of bytes

using namespace loft::models;

namespace {
void PutLe(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void PutFloats(std::string* out, const std::vector<float>& v) {
  PutLe(out, v.size());
  out->append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}
}  // namespace

TEST_CASE("the training-state digest is BLAKE2b-256 over the documented layout") {
  const std::vector<float> params{1.5f, -2.0f, 3.25f}, velocity{0.5f, 0.0f, -1.0f};
  std::string bytes("loft.training-state.v1\0\0", 24);
  PutLe(&bytes, 7);
  PutFloats(&bytes, params);
  PutFloats(&bytes, velocity);
  const ChunkDigest want = DigestOf(std::as_bytes(std::span(bytes.data(), bytes.size())));
  const StateDigest got = TrainingStateDigest(params, 7, velocity);
  CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
  uint64_t word = 0;
  for (int i = 7; i >= 0; --i) word = (word << 8) | want[static_cast<size_t>(i)];
  CHECK(TrainingStateHash(params, 7, velocity) == word);
}

TEST_CASE("the training-state hash changes with any parameter, the step or any velocity coordinate") {
  std::vector<float> params(1000, 0.25f), velocity(1000, -0.5f);
  const uint64_t base = TrainingStateHash(params, 12, velocity);
  CHECK(TrainingStateHash(params, 12, velocity) == base);
  CHECK(TrainingStateHash(params, 13, velocity) != base);
  for (size_t i : {size_t{0}, size_t{499}, size_t{999}}) {
    auto p = params;
    p[i] = std::nextafter(p[i], 1.0f);
    CHECK(TrainingStateHash(p, 12, velocity) != base);
    auto v = velocity;
    v[i] = std::nextafter(v[i], 1.0f);
    CHECK(TrainingStateHash(params, 12, v) != base);
  }
  // Moving a float from the velocity to the parameters is another state.
  std::vector<float> p2(params), v2(velocity.begin() + 1, velocity.end());
  p2.push_back(velocity[0]);
  CHECK(TrainingStateHash(p2, 12, v2) != base);
  CHECK(ParameterHash(params) != base);
}

TEST_CASE("an opaque state blob's hash is BLAKE2b-256 of the domain and the blob, 0 only when empty") {
  const std::string blob = "a consumer's parameters and optimizer state";
  std::string bytes("loft.external-state.v1\0\0", 24);
  bytes += blob;
  const ChunkDigest want = DigestOf(std::as_bytes(std::span(bytes.data(), bytes.size())));
  uint64_t word = 0;
  for (int i = 7; i >= 0; --i) word = (word << 8) | want[static_cast<size_t>(i)];
  const auto b = std::as_bytes(std::span(blob.data(), blob.size()));
  CHECK(BlobStateHash(b) == word);
  CHECK(BlobStateHash({}) == 0);
  std::string other = blob;
  other.back() ^= 1;
  CHECK(BlobStateHash(std::as_bytes(std::span(other.data(), other.size()))) != word);
}
