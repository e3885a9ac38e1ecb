// SampleCache: one edge node's store of training samples, on RocksDB.
//
// Key:   the sample id as 8 bytes, big-endian (so iteration is in id order).
// Value: a record (format version 2, all integers little-endian):
//          offset 0   u8   format version (kRecordVersion = 2)
//          offset 1   u8   reserved, must be 0
//          offset 2   u16  label
//          offset 4   u32  payload length L
//          offset 8   u64  sample id (must equal the key / the id asked for)
//          offset 16  L    payload bytes
//          offset 16+L u32 CRC32C over bytes [0, 16+L)
// Every read verifies the record; a bad CRC, unknown version, bad header,
// a length that does not match the value size or a sample id other than
// the one asked for gives a DataLoss status naming the sample id, and the
// bytes are never returned as data. A version-1 record (no sample id, an
// older loftctl) is refused with FailedPrecondition naming the version and
// the `loftctl ingest ... --overwrite` command that rewrites the cache.
//
// The CRC only catches accidents: anyone can recompute it. Authenticity
// against a lying peer is the dataset manifest's job (cache/manifest.h).
//
// Not responsible for: deciding which samples a node holds (Placement),
// reading datasets (idx_reader.h), moving records between nodes (the agent's
// PeerFetcher; it uses MultiGetRecords and DecodeRecord).
// Thread-safety: all methods may be called concurrently from several
// threads (RocksDB's DB is thread-safe); the object itself must outlive the
// calls and is not copyable.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rocksdb {
class DB;
class Cache;
}  // namespace rocksdb

namespace loft::cache {

inline constexpr uint8_t kRecordVersion = 2;
inline constexpr size_t kRecordHeaderBytes = 16;
inline constexpr size_t kRecordTrailerBytes = 4;  // CRC32C
// Largest payload a record may carry (a sanity bound, not a tuning knob).
inline constexpr size_t kMaxPayloadBytes = 64u << 20;

enum class CacheCompression { kNone, kSnappy, kLZ4, kZSTD };

// The block cache's kind. With LRU, whose every hit locks a shard and
// moves the block in its list, the block-cache lookups were a third of an
// agent's MultiGet CPU (perf, a 0.15-core field node of edge-tiers8 on the
// testbed). With HyperClock (RocksDB's lock-free cache), in two A/B pairs
// of loft-epoch on that spec (1000 iterations), the field agents' CPU per
// partition went from 1.04-1.15 to 0.94-1.01 ms and the mean iteration
// from 7.70 and 7.93 ms to 7.24 and 6.99 ms. LRU stays available
// (RocksDB 7.8 still calls HyperClock experimental).
enum class BlockCacheKind { kHyperClock, kLru };

// Options for SampleCache::Open. Defaults are tuned for Fashion-MNIST-sized
// samples (784-byte payload, ~796-byte records, 60,000 per dataset): the
// whole dataset (~48 MB) fits in the block cache, point lookups use a
// bloom filter, 4 KiB blocks hold ~5 records each.
struct CacheOptions {
  size_t block_cache_bytes = 128u << 20;
  BlockCacheKind block_cache_kind = BlockCacheKind::kHyperClock;
  size_t block_size_bytes = 4096;
  int bloom_bits_per_key = 10;  // 0 disables the bloom filter
  // LZ4 roughly halves Fashion-MNIST on disk and is cheap to decode; blocks
  // are cached uncompressed so hot reads do not pay for it.
  CacheCompression compression = CacheCompression::kLZ4;
  size_t write_buffer_bytes = 64u << 20;
  bool create_if_missing = true;  // false: opening a missing dir fails
  bool sync_writes = false;       // fsync the WAL on every Put/PutBatch

  Status Validate() const;
};

std::string_view CacheCompressionName(CacheCompression c);
StatusOr<CacheCompression> ParseCacheCompression(std::string_view name);  // none|snappy|lz4|zstd
std::string_view BlockCacheKindName(BlockCacheKind k);
StatusOr<BlockCacheKind> ParseBlockCacheKind(std::string_view name);  // hyper_clock|lru

struct Sample {
  uint64_t id = 0;
  uint16_t label = 0;
  std::vector<uint8_t> payload;
};

// One sample for PutBatch (payload is borrowed, not copied).
struct SampleRef {
  uint64_t id = 0;
  uint16_t label = 0;
  std::span<const uint8_t> payload;
};

// A stored record as raw bytes, for peer transfer. `status` is OK (bytes
// hold a verified record), NotFound, or DataLoss (bytes empty).
struct RawRecord {
  Status status;
  std::string bytes;
};

// Records read for one peer reply, stored back to back in one buffer
// (one allocation per batch instead of one per record).
struct RecordBatch {
  std::string data;
  std::vector<size_t> ends;  // record k is data[ends[k-1], ends[k])
  size_t size() const { return ends.size(); }
  bool empty() const { return ends.empty(); }
  std::string_view operator[](size_t k) const {
    const size_t begin = k == 0 ? 0 : ends[k - 1];
    return std::string_view(data).substr(begin, ends[k] - begin);
  }
  int64_t bytes() const { return static_cast<int64_t>(data.size()); }
};

// The distribution of a set of sizes in bytes. Percentiles are nearest-rank
// (p50 of 1, 2, 3, 4 is 2); all 0 when count is 0.
struct SizeDistribution {
  int64_t count = 0;
  int64_t min = 0;
  double mean = 0;
  int64_t p50 = 0;
  int64_t p95 = 0;
  int64_t max = 0;
  int64_t total = 0;
};
SizeDistribution SummarizeSizes(std::vector<int64_t> sizes);

struct CacheStats {
  int64_t samples = 0;                  // records that verify
  int64_t bytes = 0;                    // sum of their payload bytes
  int64_t stored_bytes = 0;             // sum of all value sizes (records as stored)
  int64_t corrupt = 0;                  // records that fail verification
  std::map<int, int64_t> label_counts;  // label -> number of good samples
  // Sizes of the records that verify, as stored and as a peer receives
  // them (header + payload + CRC). Raw Fashion-MNIST: all 804 bytes;
  // dataset.encoding jpeg: they vary per image.
  SizeDistribution record_bytes;
};

struct VerifyReport {
  int64_t checked = 0;
  std::vector<uint64_t> bad_ids;     // ascending
  std::vector<Status> bad_statuses;  // parallel to bad_ids
  bool ok() const { return bad_ids.empty(); }
};

// Record codec (shared with receivers of peer-fetched records).
std::string EncodeRecord(uint64_t id, uint16_t label, std::span<const uint8_t> payload);
// Same, into *out (replacing its contents; reuses its capacity).
void EncodeRecordTo(uint64_t id, uint16_t label, std::span<const uint8_t> payload, std::string* out);
// Verifies header, CRC and that the record holds sample `id`.
StatusOr<Sample> DecodeRecord(uint64_t id, std::string_view bytes);
// Verify without copying the payload.
Status VerifyRecord(uint64_t id, std::string_view bytes);

// Key codec.
std::string EncodeKey(uint64_t id);
void EncodeKeyTo(uint64_t id, char out[8]);
StatusOr<uint64_t> DecodeKey(std::string_view key);

class SampleCache {
 public:
  static StatusOr<std::unique_ptr<SampleCache>> Open(const std::string& dir,
                                                     const CacheOptions& options = {});
  ~SampleCache();
  SampleCache(const SampleCache&) = delete;
  SampleCache& operator=(const SampleCache&) = delete;

  // Deletes the cache at `dir` (RocksDB's files, then the dir if empty).
  // OK when nothing is there; fails when `dir` holds files but no database,
  // so it never deletes unrelated data.
  static Status Destroy(const std::string& dir);

  const std::string& dir() const { return dir_; }

  Status Put(uint64_t id, uint16_t label, std::span<const uint8_t> payload);
  // Atomic batch write (one RocksDB WriteBatch). skip_wal = true is for
  // bulk ingest: the batch bypasses the write-ahead log, so it is durable
  // only after Flush() returns OK (a crash before that loses it).
  Status PutBatch(std::span<const SampleRef> samples, bool skip_wal = false);
  Status Delete(uint64_t id);

  // NotFound when absent, DataLoss when the record is corrupt.
  StatusOr<Sample> Get(uint64_t id) const;
  // One result per id, in order; uses RocksDB's batched MultiGet.
  std::vector<StatusOr<Sample>> MultiGet(std::span<const uint64_t> ids) const;
  // Raw stored records for peer transfer (verified unless verify = false).
  std::vector<RawRecord> MultiGetRecords(std::span<const uint64_t> ids, bool verify = true) const;
  // The same records, appended in order to `out` (cleared first). On the
  // first missing or corrupt record returns its status (NotFound or
  // DataLoss, naming the sample) and `out` holds none of the batch.
  Status MultiGetRecordsInto(std::span<const uint64_t> ids, RecordBatch* out, bool verify = true) const;

  // Visits every record in id order. `fn` gets the id and the decoded sample
  // or its DataLoss status; returning false stops. Returns an error only if
  // the scan itself fails (I/O, malformed key).
  Status ForEach(const std::function<bool(uint64_t id, const StatusOr<Sample>& sample)>& fn) const;
  // Visits every record's raw bytes (no decode); same contract as ForEach.
  // `fill_cache`: the scan's blocks enter the block cache (a warm-up);
  // false keeps a scan from evicting the hot set.
  Status ForEachRecord(const std::function<bool(uint64_t id, std::string_view record)>& fn,
                       bool fill_cache = false) const;

  // `warm`: also loads the scanned blocks into the block cache (an agent
  // at start: its first epoch's reads then cost what later ones do
  // instead of a block decompression each, up to the block cache's size).
  StatusOr<CacheStats> Stats(bool warm = false) const;
  StatusOr<VerifyReport> Verify() const;

  // Makes every write so far durable: flushes the memtable to an SST file
  // and syncs the WAL. Call before reporting an ingest as done.
  Status Flush();

  // The underlying database (benchmarks, tests). Writing through it bypasses
  // the record format.
  rocksdb::DB* raw_db() const { return db_.get(); }
  // Bytes the block cache holds now.
  size_t block_cache_usage() const;
  // RocksDB's name of the block cache in use (e.g. "HyperClockCache", "LRUCache").
  std::string block_cache_name() const;

 private:
  SampleCache(std::string dir, std::unique_ptr<rocksdb::DB> db, std::shared_ptr<rocksdb::Cache> block_cache,
              bool sync_writes);

  std::string dir_;
  std::shared_ptr<rocksdb::Cache> block_cache_;
  std::unique_ptr<rocksdb::DB> db_;
  bool sync_writes_ = false;
};

// Opens a RocksDB directory directly, without the record layer (tests use it
// to corrupt a value underneath the cache). Fails when the dir does not hold
// a database. Only one opener at a time: close any SampleCache first.
StatusOr<std::unique_ptr<rocksdb::DB>> OpenRawDb(const std::string& dir);

}  // namespace loft::cache
