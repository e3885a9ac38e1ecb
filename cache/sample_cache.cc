#include "cache/sample_cache.h"

#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "cache/crc32c.h"
#include "core/le_bytes.h"

namespace loft::cache {
namespace {

std::string SampleName(uint64_t id) {
  return "sample " + std::to_string(id);
}

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return OkStatus();
  std::string msg = std::string(what) + ": " + s.ToString();
  if (s.IsNotFound()) return NotFound(std::move(msg));
  if (s.IsCorruption()) return DataLoss(std::move(msg));
  if (s.IsInvalidArgument()) return InvalidArgument(std::move(msg));
  if (s.IsIOError()) return IOError(std::move(msg));
  if (s.IsBusy() || s.IsTryAgain() || s.IsTimedOut()) return Unavailable(std::move(msg));
  return Internal(std::move(msg));
}

rocksdb::CompressionType ToRocks(CacheCompression c) {
  switch (c) {
    case CacheCompression::kNone: return rocksdb::kNoCompression;
    case CacheCompression::kSnappy: return rocksdb::kSnappyCompression;
    case CacheCompression::kLZ4: return rocksdb::kLZ4Compression;
    case CacheCompression::kZSTD: return rocksdb::kZSTD;
  }
  return rocksdb::kNoCompression;
}

// Checks the record and returns its payload view (into `bytes`).
StatusOr<std::string_view> CheckRecord(uint64_t id, std::string_view bytes, uint16_t* label) {
  // A version-1 record (8-byte header without the sample id) is named as
  // such before any size check, so the user learns how to fix the cache.
  // FailedPrecondition, not DataLoss: the cache is intact but outdated (the
  // agent's start-up check refuses such a cache instead of skipping it).
  if (!bytes.empty() && static_cast<uint8_t>(bytes[0]) == 1) {
    return FailedPrecondition(
        SampleName(id) +
        ": record format version 1 (no sample id) is no longer read; this build reads version " +
        std::to_string(kRecordVersion) +
        ", which carries the sample id. Rewrite the cache with `loftctl ingest --cluster SPEC "
        "--node NAME --db DIR --overwrite` (or `loftctl ingest --cluster SPEC --all --root DIR "
        "--overwrite`)");
  }
  if (bytes.size() < kRecordHeaderBytes + kRecordTrailerBytes) {
    return DataLoss(SampleName(id) + ": record of " + std::to_string(bytes.size()) +
                    " bytes is shorter than the " + std::to_string(kRecordHeaderBytes + kRecordTrailerBytes) +
                    "-byte header+CRC");
  }
  const auto version = static_cast<uint8_t>(bytes[0]);
  if (version != kRecordVersion) {
    return DataLoss(SampleName(id) + ": unknown record format version " + std::to_string(version) +
                    " (expected " + std::to_string(kRecordVersion) + ")");
  }
  if (bytes[1] != 0) {
    return DataLoss(SampleName(id) + ": bad record header (reserved byte is " +
                    std::to_string(static_cast<uint8_t>(bytes[1])) + ", expected 0)");
  }
  const uint32_t len = LoadLe<uint32_t>(bytes.data() + 4);
  const size_t expected = kRecordHeaderBytes + static_cast<size_t>(len) + kRecordTrailerBytes;
  if (expected != bytes.size()) {
    return DataLoss(SampleName(id) + ": record length mismatch (header says " + std::to_string(len) +
                    "-byte payload, so " + std::to_string(expected) + " bytes, but record has " +
                    std::to_string(bytes.size()) + ")");
  }
  const size_t body = kRecordHeaderBytes + len;
  const uint32_t stored = LoadLe<uint32_t>(bytes.data() + body);
  const uint32_t actual = Crc32c(bytes.data(), body);
  if (stored != actual) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ": CRC32C mismatch (stored %08x, computed %08x)", stored, actual);
    return DataLoss(SampleName(id) + buf);
  }
  const uint64_t held = LoadLe<uint64_t>(bytes.data() + 8);
  if (held != id) {
    return DataLoss(SampleName(id) + ": record holds sample " + std::to_string(held) +
                    " (a record served or stored under the wrong id)");
  }
  if (label != nullptr) *label = LoadLe<uint16_t>(bytes.data() + 2);
  return bytes.substr(kRecordHeaderBytes, len);
}

}  // namespace

// ---------------------------------------------------------------------------
// Options

Status CacheOptions::Validate() const {
  if (block_cache_bytes < (1u << 20)) {
    return InvalidArgument("cache options: block_cache_bytes must be >= 1 MiB, got " +
                           std::to_string(block_cache_bytes));
  }
  if (block_size_bytes < 256 || block_size_bytes > (4u << 20)) {
    return InvalidArgument("cache options: block_size_bytes must be in [256, 4 MiB], got " +
                           std::to_string(block_size_bytes));
  }
  if (bloom_bits_per_key < 0 || bloom_bits_per_key > 64) {
    return InvalidArgument("cache options: bloom_bits_per_key must be in [0, 64], got " +
                           std::to_string(bloom_bits_per_key));
  }
  if (write_buffer_bytes < (1u << 20)) {
    return InvalidArgument("cache options: write_buffer_bytes must be >= 1 MiB, got " +
                           std::to_string(write_buffer_bytes));
  }
  if (compression != CacheCompression::kNone) {
    const auto supported = rocksdb::GetSupportedCompressions();
    if (std::find(supported.begin(), supported.end(), ToRocks(compression)) == supported.end()) {
      return InvalidArgument("cache options: compression " + std::string(CacheCompressionName(compression)) +
                             " is not supported by this RocksDB build");
    }
  }
  return OkStatus();
}

std::string_view CacheCompressionName(CacheCompression c) {
  switch (c) {
    case CacheCompression::kNone: return "none";
    case CacheCompression::kSnappy: return "snappy";
    case CacheCompression::kLZ4: return "lz4";
    case CacheCompression::kZSTD: return "zstd";
  }
  return "?";
}

StatusOr<CacheCompression> ParseCacheCompression(std::string_view name) {
  for (auto c : {CacheCompression::kNone, CacheCompression::kSnappy, CacheCompression::kLZ4,
                 CacheCompression::kZSTD}) {
    if (name == CacheCompressionName(c)) return c;
  }
  return InvalidArgument("unknown compression '" + std::string(name) + "' (none|snappy|lz4|zstd)");
}

std::string_view BlockCacheKindName(BlockCacheKind k) {
  return k == BlockCacheKind::kHyperClock ? "hyper_clock" : "lru";
}

StatusOr<BlockCacheKind> ParseBlockCacheKind(std::string_view name) {
  for (auto k : {BlockCacheKind::kHyperClock, BlockCacheKind::kLru}) {
    if (name == BlockCacheKindName(k)) return k;
  }
  return InvalidArgument("unknown block cache '" + std::string(name) + "' (hyper_clock|lru)");
}

// ---------------------------------------------------------------------------
// Codecs

std::string EncodeRecord(uint64_t id, uint16_t label, std::span<const uint8_t> payload) {
  std::string out;
  EncodeRecordTo(id, label, payload, &out);
  return out;
}

void EncodeRecordTo(uint64_t id, uint16_t label, std::span<const uint8_t> payload, std::string* out_ptr) {
  std::string& out = *out_ptr;
  out.resize(kRecordHeaderBytes + payload.size() + kRecordTrailerBytes);
  out[0] = static_cast<char>(kRecordVersion);
  out[1] = 0;
  StoreLe<uint16_t>(out.data() + 2, label);
  StoreLe<uint32_t>(out.data() + 4, static_cast<uint32_t>(payload.size()));
  StoreLe<uint64_t>(out.data() + 8, id);
  if (!payload.empty()) std::memcpy(out.data() + kRecordHeaderBytes, payload.data(), payload.size());
  const size_t body = kRecordHeaderBytes + payload.size();
  StoreLe<uint32_t>(out.data() + body, Crc32c(out.data(), body));
}

StatusOr<Sample> DecodeRecord(uint64_t id, std::string_view bytes) {
  uint16_t label = 0;
  auto payload = CheckRecord(id, bytes, &label);
  if (!payload.ok()) return payload.status();
  Sample s;
  s.id = id;
  s.label = label;
  // Sized construction + memcpy: assigning char iterators to a uint8_t
  // vector would copy element by element.
  s.payload.resize(payload->size());
  if (!payload->empty()) std::memcpy(s.payload.data(), payload->data(), payload->size());
  return s;
}

Status VerifyRecord(uint64_t id, std::string_view bytes) {
  auto payload = CheckRecord(id, bytes, nullptr);
  return payload.ok() ? OkStatus() : payload.status();
}

void EncodeKeyTo(uint64_t id, char out[8]) {
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(id & 0xff);
    id >>= 8;
  }
}

std::string EncodeKey(uint64_t id) {
  std::string k(8, '\0');
  EncodeKeyTo(id, k.data());
  return k;
}

StatusOr<uint64_t> DecodeKey(std::string_view key) {
  if (key.size() != 8) {
    return DataLoss("malformed cache key of " + std::to_string(key.size()) + " bytes (expected 8)");
  }
  uint64_t id = 0;
  for (char c : key) id = (id << 8) | static_cast<uint8_t>(c);
  return id;
}

// ---------------------------------------------------------------------------
// SampleCache

SampleCache::SampleCache(std::string dir, std::unique_ptr<rocksdb::DB> db,
                         std::shared_ptr<rocksdb::Cache> block_cache, bool sync_writes)
    : dir_(std::move(dir)),
      block_cache_(std::move(block_cache)),
      db_(std::move(db)),
      sync_writes_(sync_writes) {}

SampleCache::~SampleCache() {
  if (db_) db_->Close().PermitUncheckedError();
}

StatusOr<std::unique_ptr<SampleCache>> SampleCache::Open(const std::string& dir,
                                                         const CacheOptions& options) {
  LOFT_RETURN_IF_ERROR(options.Validate());
  if (dir.empty()) return InvalidArgument("cache dir is empty");
  if (!options.create_if_missing) {
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::path(dir) / "CURRENT", ec)) {
      return NotFound("no sample cache at '" + dir + "' (missing " + dir + "/CURRENT)");
    }
  }
  // HyperClock sizes its table from the entry charge: one data block
  // (index and filter blocks stay out of the cache, below).
  std::shared_ptr<rocksdb::Cache> block_cache =
      options.block_cache_kind == BlockCacheKind::kHyperClock
          ? rocksdb::HyperClockCacheOptions(options.block_cache_bytes, options.block_size_bytes)
                .MakeSharedCache()
          : rocksdb::NewLRUCache(options.block_cache_bytes);
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = block_cache;
  table.block_size = options.block_size_bytes;
  if (options.bloom_bits_per_key > 0) {
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(options.bloom_bits_per_key));
  }
  table.cache_index_and_filter_blocks = false;  // keep index/filter resident
  rocksdb::Options opts;
  opts.create_if_missing = options.create_if_missing;
  opts.compression = ToRocks(options.compression);
  opts.write_buffer_size = options.write_buffer_bytes;
  opts.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  opts.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  opts.keep_log_file_num = 2;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(opts, dir, &raw);
  if (!s.ok()) return FromRocks(s, "open sample cache '" + dir + "'");
  return std::unique_ptr<SampleCache>(
      new SampleCache(dir, std::unique_ptr<rocksdb::DB>(raw), std::move(block_cache), options.sync_writes));
}

std::string SampleCache::block_cache_name() const {
  return block_cache_->Name();
}

size_t SampleCache::block_cache_usage() const {
  return block_cache_->GetUsage();
}

Status SampleCache::Destroy(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return OkStatus();
  if (!fs::exists(fs::path(dir) / "CURRENT", ec)) {
    if (fs::is_directory(dir, ec) && fs::is_empty(dir, ec)) return OkStatus();
    return FailedPrecondition("'" + dir +
                              "' exists but is not a sample cache (no CURRENT file); not deleting it");
  }
  rocksdb::Options opts;
  return FromRocks(rocksdb::DestroyDB(dir, opts), "destroy sample cache '" + dir + "'");
}

Status SampleCache::Put(uint64_t id, uint16_t label, std::span<const uint8_t> payload) {
  SampleRef ref{id, label, payload};
  return PutBatch(std::span<const SampleRef>(&ref, 1));
}

Status SampleCache::PutBatch(std::span<const SampleRef> samples, bool skip_wal) {
  rocksdb::WriteBatch batch;
  std::string value;
  char key[8];
  for (const auto& s : samples) {
    if (s.payload.size() > kMaxPayloadBytes) {
      return InvalidArgument(SampleName(s.id) + ": payload of " + std::to_string(s.payload.size()) +
                             " bytes exceeds the " + std::to_string(kMaxPayloadBytes) + "-byte limit");
    }
    EncodeRecordTo(s.id, s.label, s.payload, &value);  // reuses value's buffer
    EncodeKeyTo(s.id, key);
    rocksdb::Status st = batch.Put(rocksdb::Slice(key, 8), value);
    if (!st.ok()) return FromRocks(st, "batch put " + SampleName(s.id));
  }
  rocksdb::WriteOptions wo;
  wo.sync = sync_writes_ && !skip_wal;
  wo.disableWAL = skip_wal;
  return FromRocks(db_->Write(wo, &batch), "write to sample cache '" + dir_ + "'");
}

Status SampleCache::Delete(uint64_t id) {
  char key[8];
  EncodeKeyTo(id, key);
  rocksdb::WriteOptions wo;
  wo.sync = sync_writes_;
  return FromRocks(db_->Delete(wo, rocksdb::Slice(key, 8)), "delete " + SampleName(id));
}

StatusOr<Sample> SampleCache::Get(uint64_t id) const {
  char key[8];
  EncodeKeyTo(id, key);
  rocksdb::PinnableSlice value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), db_->DefaultColumnFamily(), rocksdb::Slice(key, 8), &value);
  if (s.IsNotFound()) return NotFound(SampleName(id) + " is not in cache '" + dir_ + "'");
  if (!s.ok()) return FromRocks(s, "get " + SampleName(id));
  return DecodeRecord(id, std::string_view(value.data(), value.size()));
}

namespace {

// What one batched read of `id` in cache `dir` yields: NotFound, a
// RocksDB error, DataLoss for a corrupt record (with `verify`), or OK.
Status CheckRead(const std::string& dir, uint64_t id, const rocksdb::Status& s, std::string_view bytes,
                 bool verify) {
  if (s.IsNotFound()) return NotFound(SampleName(id) + " is not in cache '" + dir + "'");
  if (!s.ok()) return FromRocks(s, "multiget " + SampleName(id));
  return verify ? VerifyRecord(id, bytes) : OkStatus();
}

// Runs RocksDB's batched MultiGet over `ids` and calls
// on_value(i, status, value) for each.
template <typename Fn>
void BatchedMultiGet(rocksdb::DB* db, std::span<const uint64_t> ids, Fn&& on_value) {
  const size_t n = ids.size();
  if (n == 0) return;
  std::vector<char> keybuf(n * 8);
  std::vector<rocksdb::Slice> keys(n);
  for (size_t i = 0; i < n; ++i) {
    EncodeKeyTo(ids[i], keybuf.data() + i * 8);
    keys[i] = rocksdb::Slice(keybuf.data() + i * 8, 8);
  }
  std::vector<rocksdb::PinnableSlice> values(n);
  std::vector<rocksdb::Status> statuses(n);
  db->MultiGet(rocksdb::ReadOptions(), db->DefaultColumnFamily(), n, keys.data(), values.data(),
               statuses.data(),
               /*sorted_input=*/false);
  for (size_t i = 0; i < n; ++i) {
    // The values sit in block-cache blocks that are usually not in the CPU
    // cache: start loading the next record while this one is verified.
    if (i + 1 < n && statuses[i + 1].ok()) {
      const char* next = values[i + 1].data();
      for (size_t off = 0; off < values[i + 1].size(); off += 64) __builtin_prefetch(next + off);
    }
    on_value(i, statuses[i], values[i]);
  }
}

}  // namespace

std::vector<StatusOr<Sample>> SampleCache::MultiGet(std::span<const uint64_t> ids) const {
  std::vector<StatusOr<Sample>> out;
  out.reserve(ids.size());
  BatchedMultiGet(db_.get(), ids, [&](size_t i, const rocksdb::Status& s, const rocksdb::PinnableSlice& v) {
    const std::string_view bytes(v.data(), v.size());
    if (Status st = CheckRead(dir_, ids[i], s, bytes, /*verify=*/false); !st.ok()) {
      out.emplace_back(std::move(st));
    } else {
      out.emplace_back(DecodeRecord(ids[i], bytes));
    }
  });
  return out;
}

std::vector<RawRecord> SampleCache::MultiGetRecords(std::span<const uint64_t> ids, bool verify) const {
  std::vector<RawRecord> out(ids.size());
  BatchedMultiGet(db_.get(), ids, [&](size_t i, const rocksdb::Status& s, const rocksdb::PinnableSlice& v) {
    const std::string_view bytes(v.data(), v.size());
    out[i].status = CheckRead(dir_, ids[i], s, bytes, verify);
    if (out[i].status.ok()) out[i].bytes.assign(bytes);
  });
  return out;
}

Status SampleCache::MultiGetRecordsInto(std::span<const uint64_t> ids, RecordBatch* out, bool verify) const {
  out->data.clear();
  out->ends.clear();
  out->ends.reserve(ids.size());
  Status first_error;
  BatchedMultiGet(db_.get(), ids, [&](size_t i, const rocksdb::Status& s, const rocksdb::PinnableSlice& v) {
    if (!first_error.ok()) return;
    const std::string_view bytes(v.data(), v.size());
    first_error = CheckRead(dir_, ids[i], s, bytes, verify);
    if (!first_error.ok()) return;
    // Records of one cache have one size: reserve for the rest at once.
    if (i == 0) out->data.reserve(bytes.size() * ids.size());
    out->data.append(bytes);
    out->ends.push_back(out->data.size());
  });
  if (!first_error.ok()) {
    out->data.clear();
    out->ends.clear();
  }
  return first_error;
}

Status SampleCache::ForEachRecord(const std::function<bool(uint64_t id, std::string_view record)>& fn,
                                  bool fill_cache) const {
  rocksdb::ReadOptions ro;
  ro.fill_cache = fill_cache;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    auto key = it->key();
    auto id = DecodeKey(std::string_view(key.data(), key.size()));
    if (!id.ok()) return id.status().WithContext("scan of cache '" + dir_ + "'");
    auto value = it->value();
    if (!fn(*id, std::string_view(value.data(), value.size()))) return OkStatus();
  }
  return FromRocks(it->status(), "scan of cache '" + dir_ + "'");
}

Status SampleCache::ForEach(
    const std::function<bool(uint64_t id, const StatusOr<Sample>& sample)>& fn) const {
  return ForEachRecord(
      [&](uint64_t id, std::string_view record) { return fn(id, DecodeRecord(id, record)); });
}

SizeDistribution SummarizeSizes(std::vector<int64_t> sizes) {
  SizeDistribution d;
  if (sizes.empty()) return d;
  std::sort(sizes.begin(), sizes.end());
  const auto n = static_cast<int64_t>(sizes.size());
  const auto rank = [&](int64_t pct) {  // nearest rank: ceil(pct/100 * n), 1-based
    return sizes[static_cast<size_t>(std::max<int64_t>(1, (pct * n + 99) / 100) - 1)];
  };
  d.count = n;
  d.min = sizes.front();
  d.max = sizes.back();
  for (int64_t s : sizes) d.total += s;
  d.mean = static_cast<double>(d.total) / static_cast<double>(n);
  d.p50 = rank(50);
  d.p95 = rank(95);
  return d;
}

StatusOr<CacheStats> SampleCache::Stats(bool warm) const {
  CacheStats stats;
  std::vector<int64_t> sizes;
  LOFT_RETURN_IF_ERROR(ForEachRecord(
      [&](uint64_t id, std::string_view record) {
        stats.stored_bytes += static_cast<int64_t>(record.size());
        uint16_t label = 0;
        auto payload = CheckRecord(id, record, &label);
        if (!payload.ok()) {
          ++stats.corrupt;
        } else {
          ++stats.samples;
          stats.bytes += static_cast<int64_t>(payload->size());
          ++stats.label_counts[label];
          sizes.push_back(static_cast<int64_t>(record.size()));
        }
        return true;
      },
      warm));
  stats.record_bytes = SummarizeSizes(std::move(sizes));
  return stats;
}

StatusOr<VerifyReport> SampleCache::Verify() const {
  VerifyReport report;
  LOFT_RETURN_IF_ERROR(ForEachRecord([&](uint64_t id, std::string_view record) {
    ++report.checked;
    Status st = VerifyRecord(id, record);
    if (!st.ok()) {
      report.bad_ids.push_back(id);
      report.bad_statuses.push_back(std::move(st));
    }
    return true;
  }));
  return report;
}

Status SampleCache::Flush() {
  rocksdb::FlushOptions fo;
  fo.wait = true;
  LOFT_RETURN_IF_ERROR(FromRocks(db_->Flush(fo), "flush sample cache '" + dir_ + "'"));
  return FromRocks(db_->SyncWAL(), "sync WAL of sample cache '" + dir_ + "'");
}

StatusOr<std::unique_ptr<rocksdb::DB>> OpenRawDb(const std::string& dir) {
  rocksdb::Options opts;
  opts.create_if_missing = false;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(opts, dir, &raw);
  if (!s.ok()) return FromRocks(s, "open raw RocksDB '" + dir + "'");
  return std::unique_ptr<rocksdb::DB>(raw);
}

}  // namespace loft::cache
