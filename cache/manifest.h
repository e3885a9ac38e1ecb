// Dataset manifest: one cryptographic digest per sample, produced at ingest
// from the dataset itself and distributed to agents by the scheduler, so an
// agent can tell a genuine peer-fetched sample from a forged one.
//
// Digest of sample i: BLAKE2b-128 (libsodium crypto_generichash, 16-byte
// output) of  id (u64 LE) || label (u16 LE) || payload. 128 bits: a serving
// peer would need a second preimage (~2^128 work) to pass off another
// image or label under a sample's digest. The CRC32C of a record catches
// accidents only; anyone can recompute it.
//
// File (written by `loftctl ingest` and `loftctl cluster run` next to the
// node caches, read by loft-scheduler, `manifest:` in its config):
//   offset 0   8 bytes  magic "LOFTMAN1"
//   offset 8   u64 LE   sample count N (ids 0..N-1)
//   offset 16  16*N     digests in id order
//   offset 16+16N 32    BLAKE2b-256 of bytes [0, 16+16N) (the root; detects
//                       a truncated or damaged file)
// On the wire (RegisterReply.sample_digests) only the 16*N digest bytes
// travel, and only to an agent that does not already hold a copy with the
// scheduler's root (RegisterRequest.manifest_root, the agent's `manifest:`
// file): N = 60,000 is 960 KB, two seconds on a 4 Mbit/s edge link at
// every registration. The scheduler is authenticated (CURVE).
//
// Not responsible for: deciding what to do with a mismatch (the agent's
// PartitionRunner refuses the sample and reports the peer).
// Thread-safety: a Manifest is immutable after construction; concurrent
// Check calls are safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "cache/idx_reader.h"
#include "cache/sample_encoding.h"
#include "core/status.h"

namespace loft::cache {

inline constexpr size_t kSampleDigestBytes = 16;
inline constexpr const char* kManifestFile = "MANIFEST.loft";  // under the caches' root

// The digest of one sample (16 bytes).
std::string SampleDigest(uint64_t id, uint16_t label, std::span<const uint8_t> payload);

enum class ManifestCheck { kMatch, kMismatch, kUnknownId };

class Manifest {
 public:
  Manifest() = default;
  // From the wire form (16*N digest bytes); InvalidArgument when the size is
  // not a multiple of 16.
  static StatusOr<Manifest> FromDigests(std::string digests);
  // Digests of samples 0..samples-1 of `ds` (samples <= ds.count), of the
  // payloads an ingest with the same `encoding` writes.
  static StatusOr<Manifest> Build(const IdxDataset& ds, int64_t samples,
                                  const PayloadEncoding& encoding = {});

  int64_t size() const { return static_cast<int64_t>(digests_.size() / kSampleDigestBytes); }
  bool empty() const { return digests_.empty(); }
  const std::string& digests() const { return digests_; }
  // BLAKE2b-256 over the digests, hex (for logs and the agent's check that
  // it got the manifest the scheduler loaded).
  std::string RootHex() const;
  // The same root, 32 raw bytes (RegisterRequest/RegisterReply.manifest_root).
  std::string Root() const;

  ManifestCheck Check(uint64_t id, uint16_t label, std::span<const uint8_t> payload) const;

 private:
  std::string digests_;
};

// Lower-case hex of raw bytes (a root in a log line).
std::string Hex(std::string_view bytes);

// Writes the file durably (temp file, fsync, rename).
Status WriteManifestFile(const std::string& path, const Manifest& m);
// Reads and verifies the file; errors name the path and what is wrong.
StatusOr<Manifest> ReadManifestFile(const std::string& path);

}  // namespace loft::cache
