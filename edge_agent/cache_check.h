// CheckCacheMatchesPlacement: at start, before registering, an agent makes
// sure its cache holds the samples the cluster spec's placement gives its
// node, so a truncated or foreign cache (an interrupted `loftctl ingest`, a
// full disk, a cache ingested for another spec) can never make it train
// silently on fewer samples than the scheduler's ledger expects.
//
// Checks (cheap on 60,000 samples: the record count comes from the Stats
// scan the agent does anyway, plus one MultiGet of at most 65 ids):
//   1. records in the cache (good + corrupt) == |Placement::SamplesOf(node)|;
//   2. a deterministic sample of the expected ids (evenly spaced, first and
//      last included) is present (a corrupt record counts as present: the
//      CRC path fails its partition and it is retried elsewhere).
// On a mismatch: FailedPrecondition naming the node, the expected and found
// counts (or the missing id) and the command that rebuilds the cache. The
// completion marker (cache/ingest.h) is not required (caches filled by other
// tools have none), but a missing or disagreeing marker is logged.
//
// Thread-safety: free function; reads the cache only.
#pragma once

#include <cstdint>
#include <string>

#include "cache/sample_cache.h"
#include "core/cluster_spec.h"
#include "core/status.h"

namespace loft::agent {

// At most this many ids are looked up by the sampled id check.
inline constexpr size_t kCacheCheckSampledIds = 64;

// `records` = good + corrupt records of `cache` (CacheStats). `spec_path`
// and `cache_dir` only appear in messages (the fixing command).
Status CheckCacheMatchesPlacement(const ClusterSpec& spec, int node, const std::string& spec_path,
                                  const std::string& cache_dir, const cache::SampleCache& cache,
                                  int64_t records);

}  // namespace loft::agent
