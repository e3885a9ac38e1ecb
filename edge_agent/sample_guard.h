// SampleGuard: the agent's defence against a peer that serves forged
// samples (data poisoning), and the matching attack for tests.
//
// - Requester side: holds the dataset manifest (cache/manifest.h) that the
//   scheduler sent in RegisterReply.sample_digests. The PartitionRunner
//   checks every peer-fetched sample against it (Check); a sample whose
//   digest differs, or whose id the manifest does not cover, is refused:
//   the partition fails as for a corrupt record (the scheduler retries its
//   samples elsewhere, nothing is lost or counted twice), the sample is
//   counted in loft_agent_poisoned_samples_total{peer} and the serving
//   peer is named in PartitionFailed.poisoned_by.
//   Without a manifest (a scheduler with no `manifest:`) samples are
//   checked by their CRC only, which a lying peer can recompute; the agent
//   logs that once at registration.
// - Serving side (`byzantine: poison_serve` in the cluster spec):
//   PoisonRecords rewrites records with a flipped label and a correct CRC
//   and sample id, i.e. the strongest forgery that does not need the
//   manifest's hash to be broken.
//
// Not responsible for: deciding where a refused sample is retried (the
// scheduler), local reads (a node trusts its own cache).
// Thread-safety: SetManifest (poll thread) and manifest() (reader thread)
// may run concurrently; the Manifest they share is immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "cache/manifest.h"
#include "cache/sample_cache.h"
#include "core/status.h"

namespace loft::agent {

class SampleGuard {
 public:
  // Replaces the manifest (each registration sends it again).
  void SetManifest(cache::Manifest m);
  // nullptr until a non-empty manifest has arrived.
  std::shared_ptr<const cache::Manifest> manifest() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const cache::Manifest> manifest_;
};

// Checks a decoded peer sample; DataLoss naming the sample and the peer when
// its digest does not match (or its id is outside the manifest).
Status CheckAgainstManifest(const cache::Manifest& m, const cache::Sample& s, int32_t peer);

// The poison_serve attack: every record of `batch` (ids in order) is
// re-encoded with label (label + 1) % 10, its own id and a valid CRC.
Status PoisonRecords(std::span<const uint64_t> ids, cache::RecordBatch* batch);

}  // namespace loft::agent
