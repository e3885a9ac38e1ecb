#include "models/replica_vote.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

using namespace loft::models;

namespace {

ReplicaClaim Held(std::span<const float> copy) {
  return {DigestOf(copy), true, copy};
}
ReplicaClaim Digest(std::span<const float> copy) {
  return {DigestOf(copy), false, {}};
}

}  // namespace

TEST_CASE("DigestOf is BLAKE2b-256 of the bytes: one flipped bit changes it", "[replica_vote]") {
  std::vector<float> a{1.0f, 2.0f, 3.0f}, b = a;
  CHECK(DigestOf(a) == DigestOf(b));
  b[1] = std::nextafter(b[1], 10.0f);
  CHECK(DigestOf(a) != DigestOf(b));
  std::vector<float> z{0.0f}, nz{-0.0f};
  CHECK(DigestOf(z) != DigestOf(nz));  // bits, not values
  CHECK(DigestOf(std::span<const float>()) != DigestOf(z));
}

TEST_CASE("a digest carries with min(f+1, r) claims, which is more than half of r", "[replica_vote]") {
  std::vector<float> h{1, 2}, g{9, 9}, k{7, 7};
  {
    std::vector<ReplicaClaim> c{Held(g), Digest(h), Digest(h)};  // f = 1, r = 3
    CHECK(CarryingDigest(c, 1) == DigestOf(h));
    const ChunkPlan p = PlanChunk(c, 1);
    CHECK(p.take < 0);  // the carrying digest's copy is not held
    CHECK(p.fetch == std::vector<int>{1, 2});
  }
  {
    std::vector<ReplicaClaim> c{Held(h), Digest(g), Digest(h)};
    const ChunkPlan p = PlanChunk(c, 1);
    CHECK(p.take == 0);
    CHECK(p.fetch.empty());
  }
  {
    std::vector<ReplicaClaim> c{Held(h), Digest(g), Digest(k)};  // no majority
    CHECK_FALSE(CarryingDigest(c, 1));
    CHECK(PlanChunk(c, 1).fetch == std::vector<int>{1, 2});
  }
  {
    // A malformed claim (no digest) never counts, even twice.
    std::vector<ReplicaClaim> c{Held(h), ReplicaClaim{}, ReplicaClaim{}};
    CHECK_FALSE(CarryingDigest(c, 1));
  }
  {
    // r = 2 < 2f+1 (two members, f = 1): both must agree.
    std::vector<ReplicaClaim> c{Held(h), Digest(g)};
    CHECK_FALSE(CarryingDigest(c, 1));
    std::vector<ReplicaClaim> same{Held(h), Digest(h)};
    CHECK(PlanChunk(same, 1).take == 0);
  }
  {
    // f larger than r - 1 (two members, f = 3): all r agreeing carries.
    std::vector<ReplicaClaim> c{Digest(h), Held(h)};
    CHECK(PlanChunk(c, 3).take == 1);
  }
}

TEST_CASE("SettleChunk takes a fetched copy only if it hashes to the carrying digest", "[replica_vote]") {
  std::vector<float> h{1, -2, 3}, g{12345, 12345, 12345}, out(3);
  // Replica 1 claimed h's digest but its fetched copy is g; replica 2's is h.
  std::vector<ReplicaClaim> c{Held(g), {DigestOf(h), true, g}, {DigestOf(h), true, h}};
  SettleChunk(c, 1, out);
  CHECK(out == h);
  CHECK(Dissenters(c, DigestOf(out), out, 1).empty());  // one match < f+1: nobody named
  c.push_back(Held(h));
  std::fill(out.begin(), out.end(), 0.0f);
  SettleChunk(c, 1, out);
  CHECK(out == h);
  CHECK(Dissenters(c, DigestOf(out), out, 1) == std::vector<int>{0, 1});
  // Nobody carries: the coordinate-wise median of the copies.
  std::vector<float> s{25, -50, 75};
  std::vector<ReplicaClaim> m{Held(h), Held(g), Held(s)};
  SettleChunk(m, 1, out);
  CHECK(out == std::vector<float>{25, -2, 75});
  CHECK(Dissenters(m, DigestOf(out), out, 1).empty());  // fewer than f+1 match: nobody named
}

TEST_CASE("Dissenters: digest and held bits must both match the taken result", "[replica_vote]") {
  std::vector<float> h{4, 5}, g{4, 6};
  std::vector<ReplicaClaim> c{Held(h), Digest(h), Digest(g), {DigestOf(h), true, g}, ReplicaClaim{}};
  CHECK(Dissenters(c, DigestOf(h), h, 1) == std::vector<int>{2, 3, 4});
  CHECK(Dissenters(c, DigestOf(h), h, 2).empty());  // 2 matches < f+1 = 3
  std::vector<float> nan(2, std::numeric_limits<float>::quiet_NaN());
  std::vector<ReplicaClaim> n{Held(h), Held(h), {std::nullopt, true, nan}};
  CHECK(Dissenters(n, DigestOf(h), h, 1) == std::vector<int>{2});
}

TEST_CASE("compressed claims: digests cover the payload sent, the copy is its decoding", "[replica_vote]") {
  // Two payloads that decode to the same floats (as int8 scale/values pairs
  // can) are different claims: what is hashed and compared is the payload.
  const std::vector<float> decoded{1.0f, 2.0f};
  const std::vector<std::byte> p{std::byte{1}, std::byte{2}, std::byte{3}}, q{std::byte{1}, std::byte{2}};
  std::vector<float> a{1.0f, 2.0f};
  CHECK(DigestOf(std::as_bytes(std::span<const float>(a))) == DigestOf(a));  // one hash of the bytes
  CHECK(DigestOf(p) != DigestOf(q));
  ReplicaClaim honest{DigestOf(p), true, decoded, p};
  CHECK(HashedBytes(honest).size() == p.size());
  std::vector<float> out(2);
  {
    // A fetched copy whose payload does not hash to the digest its replica
    // claimed is not taken, even though it decodes to the same floats.
    std::vector<ReplicaClaim> c{{DigestOf(p), true, decoded, q}, honest, {DigestOf(p), false, {}, {}}};
    CHECK(SettleChunk(c, 1, out) == 1);
    CHECK(out == decoded);
    CHECK(Dissenters(c, DigestOf(p), HashedBytes(c[1]), 1) == std::vector<int>{0});
    CHECK(Dissenters(c, DigestOf(p), std::span<const std::byte>(p), 1) == std::vector<int>{0});
  }
  {
    // No digest carries: the median of the decoded copies, and -1.
    const std::vector<float> g{5.0f, 5.0f}, h{3.0f, 4.0f};
    std::vector<ReplicaClaim> c{{DigestOf(q), true, g, q}, honest, {std::nullopt, true, h, {}}};
    CHECK(SettleChunk(c, 1, out) == -1);
    CHECK(out == std::vector<float>{3.0f, 4.0f});
  }
}
