// ReplicaVote: which result of a verified chunk a ring member takes (the
// decision of RingAllReduce's verified path, ring_allreduce.h), from the
// replicas' digests. Pure: no transport, no clock.
//
// A member holds, per replica j of a chunk, a claim: the BLAKE2b-256 digest
// j sent, or the digest of the full copy it received from j or reduced
// itself (empty when the payload had the wrong size). Honest replicas
// reduce the same inputs to the same bits, so with at most f Byzantine
// replicas among r the honest digest has at least r - f claims. A digest
// "carries" when at least q = min(f+1, r) claims share it; q > r/2, so at
// most one digest carries.
//  - PlanChunk: when a copy this member holds has the carrying digest, take
//    it (BLAKE2b is collision-resistant: a Byzantine replica cannot make a
//    different chunk with the honest digest). Otherwise the copies it lacks
//    are needed. With the f+1 primaries alone, q = f+1: all must agree.
//  - SettleChunk (every copy held): take a copy that hashes to the carrying
//    digest; when no digest carries (more than f Byzantine replicas, or a
//    sender that gave replicas different inputs) take the coordinate-wise
//    median of the copies (MedianOfReplicas), as the ring did before
//    digests.
//  - Dissenters: the replicas whose claim (digest, and full copy when held)
//    differs from the taken result, listed only when at least f+1 replicas
//    match it.
// With a compressed exchange (int8, models/chunk_codec.h) a digest covers
// the bytes a replica sent (ReplicaClaim::payload), and a claim's copy is
// those bytes decoded: the median is taken over decoded copies.
//
// Not responsible for: sending, fetching, or what a member does with a
// dissenter (the agent reports it).
// Thread-safety: functions only; DigestOf may be called from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace loft::models {

using ChunkDigest = std::array<unsigned char, 32>;

// True when a and b have the same length and bits (+0 and -0 differ).
bool SameBits(std::span<const float> a, std::span<const float> b);
bool SameBytes(std::span<const std::byte> a, std::span<const std::byte> b);

// BLAKE2b-256 (libsodium crypto_generichash, unkeyed) of the chunk's bytes.
ChunkDigest DigestOf(std::span<const float> chunk);
// The same over a chunk message's bytes (a compressed chunk, chunk_codec.h).
ChunkDigest DigestOf(std::span<const std::byte> payload);

struct ReplicaClaim {
  std::optional<ChunkDigest> digest;  // empty: the payload (digest or copy) had the wrong size
  bool held = false;                  // this member holds this replica's full copy:
  std::span<const float> copy;        // it, decoded (a malformed copy: all NaN)
  // The bytes the replica sent for `copy` when the exchange is compressed
  // (digests cover them, not the decoded floats); empty: the bytes of `copy`.
  std::span<const std::byte> payload = {};
};

// What a claim's digest is checked against: payload, or the bytes of copy.
std::span<const std::byte> HashedBytes(const ReplicaClaim& claim);

// The digest that at least min(f+1, r) claims share, if any.
std::optional<ChunkDigest> CarryingDigest(std::span<const ReplicaClaim> claims, int tolerance);

struct ChunkPlan {
  int take = -1;           // >= 0: the held copy to take (its digest carries)
  std::vector<int> fetch;  // take < 0: the replicas whose full copy to fetch (those not held)
};
ChunkPlan PlanChunk(std::span<const ReplicaClaim> claims, int tolerance);

// out[k] = the median of copies[j][k] over the r replicas (non-finite
// values rank last). Each copy must have out.size() values. Returns true
// when all r copies are bitwise identical (then copied, no median per
// coordinate).
bool MedianOfReplicas(std::span<const std::span<const float>> copies, std::span<float> out);

// Every copy held, each of out.size() values: writes the taken result to
// `out`. Hashes copies (HashedBytes) only when a digest carries (to find
// one with it). Returns the index of the claim whose copy was taken (its
// digest carries), or -1 when the median was taken.
int SettleChunk(std::span<const ReplicaClaim> claims, int tolerance, std::span<float> out);

// The replicas whose claim differs from `taken` (whose digest is
// `taken_digest`): a claim matches when its digest is taken_digest and, if
// its copy is held, the copy has the bits of `taken`. Empty unless at least
// f+1 claims match.
std::vector<int> Dissenters(std::span<const ReplicaClaim> claims, const ChunkDigest& taken_digest,
                            std::span<const float> taken, int tolerance);
// The same with the taken claim's bytes (HashedBytes): a held claim matches
// when its HashedBytes are these bytes.
std::vector<int> Dissenters(std::span<const ReplicaClaim> claims, const ChunkDigest& taken_digest,
                            std::span<const std::byte> taken_bytes, int tolerance);

}  // namespace loft::models
