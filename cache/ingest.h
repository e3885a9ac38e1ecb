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
#include <optional>
#include <span>
#include <string>

#include "cache/idx_reader.h"
#include "cache/sample_cache.h"
#include "cache/sample_encoding.h"
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
  // What each record's payload holds (dataset.encoding; PayloadEncoding::
  // FromSpec). Default raw: the dataset's pixel bytes.
  PayloadEncoding encoding;
  // Called after each batch with (done, total); may be empty.
  std::function<void(int64_t done, int64_t total)> progress;
};

struct IngestResult {
  int64_t samples = 0;
  int64_t payload_bytes = 0;  // sum of the payloads written (jpeg: the encoded sizes)
  double seconds = 0;         // wall time of the writes + flush (excludes open)
};

// Writes ds samples `ids` (encoded per options.encoding) into `cache` in WriteBatches, then Flush()es so
// the data is durable before returning OK. Every id must be < ds.count.
// Ids already in the cache are overwritten; other records are kept.
StatusOr<IngestResult> IngestSamples(SampleCache& cache, const IdxDataset& ds, std::span<const uint64_t> ids,
                                     const IngestOptions& options = {});

// Completion marker: the file DIR/LOFT_INGESTED of a cache directory,
// written last by an ingest (after the samples are flushed), as a JSON
// object. Its absence means the ingest never finished (interrupted, disk
// full) or the cache was filled by something else; `loftctl cache stat`
// reports it and `loftctl cache verify` fails without it.
inline constexpr const char* kIngestMarkerFile = "LOFT_INGESTED";

struct IngestMarker {
  std::string node;             // expanded node name ("" in a marker of an older loftctl)
  int64_t samples = 0;          // ids written
  uint64_t ids_digest = 0;      // IdsDigest(ids written)
  std::string spec;             // the cluster spec's path, as given to the ingest
  std::string split;            // "train" | "test"
  int64_t dataset_samples = 0;  // the spec's dataset.samples
};

// FNV-1a 64 over the ids' little-endian bytes, in the given order.
uint64_t IdsDigest(std::span<const uint64_t> ids);
// Removes the marker (if any) and syncs the directory; called before an
// ingest writes its first sample.
Status RemoveIngestMarker(const std::string& dir);
// Writes the marker durably: temp file, fsync, rename, fsync of the directory.
Status WriteIngestMarker(const std::string& dir, const IngestMarker& marker);
// nullopt when there is no marker; an error naming the file when it cannot be
// read or parsed. A marker of an older loftctl (just "N\n") reads as
// {samples = N}.
StatusOr<std::optional<IngestMarker>> ReadIngestMarker(const std::string& dir);

}  // namespace loft::cache
