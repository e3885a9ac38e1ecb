#include "models/replica_vote.h"

#include <sodium.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace loft::models {
namespace {

// Orders floats with every non-finite value last (NaN has no order).
bool RankLess(float a, float b) {
  const bool fa = std::isfinite(a), fb = std::isfinite(b);
  if (fa != fb) return fa;
  return fa ? a < b : false;
}

}  // namespace

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && SameBytes(std::as_bytes(a), std::as_bytes(b));
}

bool SameBytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

ChunkDigest DigestOf(std::span<const float> chunk) {
  return DigestOf(std::as_bytes(chunk));
}

ChunkDigest DigestOf(std::span<const std::byte> bytes) {
  // Picks libsodium's fastest BLAKE2b implementation once (thread-safe).
  static const bool sodium_ready = sodium_init() >= 0;
  (void)sodium_ready;
  ChunkDigest d;
  crypto_generichash(d.data(), d.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                     nullptr, 0);
  return d;
}

std::span<const std::byte> HashedBytes(const ReplicaClaim& claim) {
  return claim.payload.empty() ? std::as_bytes(claim.copy) : claim.payload;
}

std::optional<ChunkDigest> CarryingDigest(std::span<const ReplicaClaim> claims, int tolerance) {
  const int r = static_cast<int>(claims.size());
  const int q = std::min(tolerance + 1, r);
  for (int j = 0; j < r; ++j) {
    if (!claims[j].digest) continue;
    int same = 0;
    for (int i = 0; i < r; ++i) same += claims[i].digest == claims[j].digest ? 1 : 0;
    if (same >= q) return claims[j].digest;
  }
  return std::nullopt;
}

ChunkPlan PlanChunk(std::span<const ReplicaClaim> claims, int tolerance) {
  ChunkPlan plan;
  const std::optional<ChunkDigest> carry = CarryingDigest(claims, tolerance);
  for (int j = 0; carry && j < static_cast<int>(claims.size()); ++j) {
    // A held copy's claim is the digest this member computed over it.
    if (claims[j].held && claims[j].digest == carry) {
      plan.take = j;
      return plan;
    }
  }
  for (int j = 0; j < static_cast<int>(claims.size()); ++j) {
    if (!claims[j].held) plan.fetch.push_back(j);
  }
  return plan;
}

bool MedianOfReplicas(std::span<const std::span<const float>> copies, std::span<float> out) {
  const size_t r = copies.size();
  // Fast path: every replica sent the same bits, so every coordinate's r
  // values are identical and their median is that value. One differing bit
  // anywhere, or a malformed (all-NaN) copy, takes the coordinate-wise path.
  bool identical = true;
  for (size_t j = 0; j < r && identical; ++j) identical = copies[j].size() == out.size();
  for (size_t j = 1; j < r && identical; ++j) identical = SameBits(copies[j], copies[0]);
  if (identical) {
    if (!out.empty()) std::memcpy(out.data(), copies[0].data(), out.size_bytes());
    return true;
  }
  std::vector<float> column(r);
  for (size_t k = 0; k < out.size(); ++k) {
    for (size_t j = 0; j < r; ++j) column[j] = copies[j][k];
    std::nth_element(column.begin(), column.begin() + static_cast<std::ptrdiff_t>(r / 2), column.end(),
                     RankLess);
    out[k] = column[r / 2];
  }
  return false;
}

int SettleChunk(std::span<const ReplicaClaim> claims, int tolerance, std::span<float> out) {
  if (const std::optional<ChunkDigest> carry = CarryingDigest(claims, tolerance)) {
    // A fetched copy's claim is what its replica sent as digest: check it.
    for (size_t j = 0; j < claims.size(); ++j) {
      const ReplicaClaim& c = claims[j];
      if (c.digest == carry && c.copy.size() == out.size() && DigestOf(HashedBytes(c)) == *carry) {
        if (!out.empty()) std::memcpy(out.data(), c.copy.data(), out.size_bytes());
        return static_cast<int>(j);
      }
    }
  }
  std::vector<std::span<const float>> copies;
  copies.reserve(claims.size());
  for (const ReplicaClaim& c : claims) copies.push_back(c.copy);
  MedianOfReplicas(copies, out);
  return -1;
}

std::vector<int> Dissenters(std::span<const ReplicaClaim> claims, const ChunkDigest& taken_digest,
                            std::span<const float> taken, int tolerance) {
  return Dissenters(claims, taken_digest, std::as_bytes(taken), tolerance);
}

std::vector<int> Dissenters(std::span<const ReplicaClaim> claims, const ChunkDigest& taken_digest,
                            std::span<const std::byte> taken_bytes, int tolerance) {
  std::vector<int> differ;
  const int r = static_cast<int>(claims.size());
  for (int j = 0; j < r; ++j) {
    const bool match = claims[j].digest == taken_digest &&
                       (!claims[j].held || SameBytes(HashedBytes(claims[j]), taken_bytes));
    if (!match) differ.push_back(j);
  }
  if (r - static_cast<int>(differ.size()) < tolerance + 1) differ.clear();
  return differ;
}

}  // namespace loft::models
