#include "models/state_hash.h"

#include <sodium.h>

#include <string_view>

namespace loft::models {
namespace {

void UpdateLe(crypto_generichash_state* st, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  crypto_generichash_update(st, b, sizeof b);
}

void UpdateFloats(crypto_generichash_state* st, std::span<const float> v) {
  UpdateLe(st, v.size());
  const auto bytes = std::as_bytes(v);
  crypto_generichash_update(st, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

}  // namespace

StateDigest TrainingStateDigest(std::span<const float> params, int64_t step,
                                std::span<const float> velocity) {
  // Picks libsodium's fastest BLAKE2b implementation once (thread-safe).
  static const bool sodium_ready = sodium_init() >= 0;
  (void)sodium_ready;
  static constexpr std::string_view kDomain("loft.training-state.v1\0\0", 24);
  crypto_generichash_state st;
  StateDigest d;
  crypto_generichash_init(&st, nullptr, 0, d.size());
  crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(kDomain.data()), kDomain.size());
  UpdateLe(&st, static_cast<uint64_t>(step));
  UpdateFloats(&st, params);
  UpdateFloats(&st, velocity);
  crypto_generichash_final(&st, d.data(), d.size());
  return d;
}

uint64_t DigestWord(const StateDigest& digest) {
  uint64_t w = 0;
  for (int i = 7; i >= 0; --i) w = (w << 8) | digest[static_cast<size_t>(i)];
  return w;
}

uint64_t TrainingStateHash(std::span<const float> params, int64_t step, std::span<const float> velocity) {
  return DigestWord(TrainingStateDigest(params, step, velocity));
}

uint64_t TrainingStateHash(const Model& model, const Sgd& sgd) {
  return TrainingStateHash(model.params(), sgd.step(), sgd.velocity());
}

uint64_t ParameterHash(std::span<const float> params) {
  static const bool sodium_ready = sodium_init() >= 0;
  (void)sodium_ready;
  StateDigest d;
  const auto bytes = std::as_bytes(params);
  crypto_generichash(d.data(), d.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                     nullptr, 0);
  return DigestWord(d);
}

uint64_t BlobStateHash(std::span<const std::byte> blob) {
  if (blob.empty()) return 0;
  static const bool sodium_ready = sodium_init() >= 0;
  (void)sodium_ready;
  static constexpr std::string_view kDomain("loft.external-state.v1\0\0", 24);
  crypto_generichash_state st;
  StateDigest d;
  crypto_generichash_init(&st, nullptr, 0, d.size());
  crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(kDomain.data()), kDomain.size());
  crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(blob.data()), blob.size());
  crypto_generichash_final(&st, d.data(), d.size());
  const uint64_t w = DigestWord(d);
  return w == 0 ? 1 : w;
}

}  // namespace loft::models
