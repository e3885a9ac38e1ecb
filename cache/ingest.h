// Ingest: writes the samples that a Placement gives one node from a loaded
// dataset into that node's SampleCache. Sample id = index in the split
// (dataset order). Used by `loftctl ingest` and bench/cache_bench.
//
// Not responsible for: computing the placement (core/placement.h) or
// reading the dataset (idx_reader.h).
// Thread-safety: free functions; concurrent ingests must target different
// directories.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "cache/idx_reader.h"
#include "cache/sample_cache.h"
#include "core/cluster_spec.h"
#include "core/status.h"

namespace loft::cache {

// Rejects a spec that does not describe this dataset: dataset.name must be
// fashion-mnist, sample_bytes == rows*cols, samples <= the split's count.
Status CheckSpecAgainstDataset(const ClusterSpec& spec, const IdxDataset& ds, std::string_view split);

struct IngestOptions {
  size_t batch_samples = 4096;  // samples per WriteBatch
  // Bypass the WAL (the final Flush makes the data durable before
  // IngestSamples returns OK; on error the cache may hold part of the ids).
  bool skip_wal = true;
  // Called after each batch with (done, total); may be empty.
  std::function<void(int64_t done, int64_t total)> progress;
};

struct IngestResult {
  int64_t samples = 0;
  int64_t payload_bytes = 0;
  double seconds = 0;  // wall time of the writes + flush (excludes open)
};

// Writes ds samples `ids` into `cache` in WriteBatches, then Flush()es so
// the data is durable before returning OK. Every id must be < ds.count.
// Ids already in the cache are overwritten; other records are kept.
StatusOr<IngestResult> IngestSamples(SampleCache& cache, const IdxDataset& ds, std::span<const uint64_t> ids,
                                     const IngestOptions& options = {});

}  // namespace loft::cache
