#include "cache/sample_cache.h"

#include <rocksdb/db.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>
#include <random>

#include "cache/crc32c.h"
#include "tests/unit/cache/test_util.h"

using namespace loft;
using namespace loft::cache;
using loft::cache::testing::TempDir;

namespace {

std::vector<uint8_t> Payload(uint64_t id, size_t n = 784) {
  std::vector<uint8_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>((id * 31 + i * 7) & 0xff);
  return p;
}

std::unique_ptr<SampleCache> OpenOrDie(const std::string& dir, CacheOptions opts = {}) {
  auto c = SampleCache::Open(dir, opts);
  REQUIRE(c.ok());
  return std::move(c).value();
}

// Writes `value` for `id` directly into RocksDB, bypassing the record layer.
void RawPut(const std::string& dir, uint64_t id, const std::string& value) {
  auto db = OpenRawDb(dir);
  REQUIRE(db.ok());
  REQUIRE((*db)->Put(rocksdb::WriteOptions(), EncodeKey(id), value).ok());
  REQUIRE((*db)->Close().ok());
}

}  // namespace

TEST_CASE("CacheOptions defaults validate, bad values are named", "[cache]") {
  CacheOptions o;
  REQUIRE(o.Validate().ok());
  o.bloom_bits_per_key = -1;
  REQUIRE(o.Validate().code() == StatusCode::kInvalidArgument);
  REQUIRE_THAT(o.Validate().message(), Catch::Contains("bloom_bits_per_key"));
  o = {};
  o.block_cache_bytes = 10;
  REQUIRE_THAT(o.Validate().message(), Catch::Contains("block_cache_bytes"));
  o = {};
  o.block_size_bytes = 1;
  REQUIRE_THAT(o.Validate().message(), Catch::Contains("block_size_bytes"));
  REQUIRE(ParseCacheCompression("zstd").ok());
  REQUIRE(*ParseCacheCompression("none") == CacheCompression::kNone);
  REQUIRE_FALSE(ParseCacheCompression("gzip").ok());
}

TEST_CASE("Keys are 8-byte big-endian and sort by id", "[cache]") {
  REQUIRE(EncodeKey(0x0102030405060708ull) == std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  REQUIRE(EncodeKey(1) < EncodeKey(256));
  REQUIRE(*DecodeKey(EncodeKey(987654321)) == 987654321u);
  REQUIRE(DecodeKey("short").status().code() == StatusCode::kDataLoss);
}

TEST_CASE("Record codec round trips and rejects damage", "[cache]") {
  auto payload = Payload(5);
  std::string rec = EncodeRecord(5, 7, payload);
  REQUIRE(rec.size() == kRecordHeaderBytes + payload.size() + kRecordTrailerBytes);
  REQUIRE(static_cast<uint8_t>(rec[0]) == kRecordVersion);
  auto s = DecodeRecord(5, rec);
  REQUIRE(s.ok());
  REQUIRE(s->id == 5);
  REQUIRE(s->label == 7);
  REQUIRE(s->payload == payload);

  std::string flipped = rec;
  flipped[100] ^= 1;
  auto bad = DecodeRecord(5, flipped);
  REQUIRE(bad.status().code() == StatusCode::kDataLoss);
  REQUIRE_THAT(bad.status().message(), Catch::Contains("sample 5") && Catch::Contains("CRC32C mismatch"));

  std::string label_flip = rec;
  label_flip[2] ^= 1;  // header bytes are covered by the CRC too
  REQUIRE(DecodeRecord(5, label_flip).status().code() == StatusCode::kDataLoss);

  REQUIRE_THAT(DecodeRecord(9, rec.substr(0, rec.size() - 1)).status().message(),
               Catch::Contains("sample 9") && Catch::Contains("length mismatch"));
  REQUIRE_THAT(DecodeRecord(9, rec.substr(0, 5)).status().message(), Catch::Contains("shorter"));
  std::string v3 = rec;
  v3[0] = 3;
  REQUIRE_THAT(DecodeRecord(5, v3).status().message(), Catch::Contains("unknown record format version 3"));

  // Empty payloads are legal.
  auto empty = DecodeRecord(1, EncodeRecord(1, 3, {}));
  REQUIRE(empty.ok());
  REQUIRE(empty->payload.empty());
}

TEST_CASE("Stats(warm) loads the scanned blocks into the block cache, a plain scan does not", "[cache]") {
  TempDir tmp;
  {
    auto cache = OpenOrDie(tmp.Sub("db"));
    for (uint64_t id = 0; id < 500; ++id) REQUIRE(cache->Put(id, 1, Payload(id)).ok());
    REQUIRE(cache->Flush().ok());  // into table files, read through the block cache
  }
  auto cache = OpenOrDie(tmp.Sub("db"));
  const size_t empty = cache->block_cache_usage();
  auto cold = cache->Stats();
  REQUIRE(cold.ok());
  CHECK(cold->samples == 500);
  CHECK(cache->block_cache_usage() == empty);
  auto warm = cache->Stats(/*warm=*/true);
  REQUIRE(warm.ok());
  CHECK(warm->samples == 500);
  CHECK(cache->block_cache_usage() >= empty + static_cast<size_t>(cold->stored_bytes));
}

TEST_CASE("Both block cache kinds serve every record and cache the blocks they read", "[cache]") {
  const BlockCacheKind kind = GENERATE(BlockCacheKind::kHyperClock, BlockCacheKind::kLru);
  TempDir tmp;
  {
    auto cache = OpenOrDie(tmp.Sub("db"));
    for (uint64_t id = 0; id < 500; ++id)
      REQUIRE(cache->Put(id, static_cast<uint16_t>(id % 10), Payload(id)).ok());
    REQUIRE(cache->Flush().ok());
  }
  CacheOptions opts;
  opts.block_cache_kind = kind;
  auto cache = OpenOrDie(tmp.Sub("db"), opts);
  CHECK(cache->block_cache_name() == (kind == BlockCacheKind::kHyperClock ? "HyperClockCache" : "LRUCache"));
  const size_t empty = cache->block_cache_usage();
  std::vector<uint64_t> ids(500);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
  for (int round = 0; round < 2; ++round) {  // the second round hits the cache
    auto got = cache->MultiGet(ids);
    REQUIRE(got.size() == ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      REQUIRE(got[i].ok());
      CHECK(got[i]->label == ids[i] % 10);
      CHECK(got[i]->payload == Payload(ids[i]));
    }
  }
  CHECK(cache->block_cache_usage() > empty);
}

TEST_CASE("SampleCache Put/Get/MultiGet/Delete/ForEach/Stats round trip", "[cache]") {
  TempDir tmp;
  auto cache = OpenOrDie(tmp.Sub("db"));
  for (uint64_t id = 0; id < 100; ++id) {
    REQUIRE(cache->Put(id * 3, static_cast<uint16_t>(id % 10), Payload(id * 3)).ok());
  }
  auto g = cache->Get(42);
  REQUIRE(g.ok());
  REQUIRE(g->id == 42);
  REQUIRE(g->label == 4);
  REQUIRE(g->payload == Payload(42));

  auto missing = cache->Get(43);
  REQUIRE(missing.status().code() == StatusCode::kNotFound);
  REQUIRE_THAT(missing.status().message(), Catch::Contains("sample 43"));

  std::vector<uint64_t> ids = {297, 1, 0, 150, 150, 299};
  auto got = cache->MultiGet(ids);
  REQUIRE(got.size() == ids.size());
  REQUIRE(got[0].ok());
  REQUIRE(got[0]->payload == Payload(297));
  REQUIRE(got[0]->label == 9);
  REQUIRE(got[1].status().code() == StatusCode::kNotFound);
  REQUIRE(got[2].ok());
  REQUIRE(got[3].ok());
  REQUIRE(got[4].ok());
  REQUIRE(got[4]->payload == Payload(150));
  REQUIRE(got[5].status().code() == StatusCode::kNotFound);
  REQUIRE(cache->MultiGet({}).empty());

  // Raw records decode on the receiving side.
  auto raw = cache->MultiGetRecords(ids);
  REQUIRE(raw.size() == ids.size());
  REQUIRE(raw[0].status.ok());
  auto dec = DecodeRecord(297, raw[0].bytes);
  REQUIRE(dec.ok());
  REQUIRE(dec->payload == Payload(297));
  REQUIRE(raw[1].status.code() == StatusCode::kNotFound);
  REQUIRE(raw[1].bytes.empty());

  // The same records back to back in one buffer, for a peer reply.
  RecordBatch batch;
  std::vector<uint64_t> present = {297, 150, 0};
  REQUIRE(cache->MultiGetRecordsInto(present, &batch).ok());
  REQUIRE(batch.size() == 3);
  for (size_t k = 0; k < present.size(); ++k) {
    auto one = cache->MultiGetRecords(std::span<const uint64_t>(&present[k], 1));
    REQUIRE(batch[k] == one[0].bytes);
  }
  REQUIRE(batch.bytes() == static_cast<int64_t>(batch[0].size() + batch[1].size() + batch[2].size()));
  REQUIRE(DecodeRecord(150, batch[1])->payload == Payload(150));
  // A missing id fails the whole batch, naming the sample; nothing is kept.
  auto absent = cache->MultiGetRecordsInto(ids, &batch);
  REQUIRE(absent.code() == StatusCode::kNotFound);
  REQUIRE_THAT(absent.message(), Catch::Contains("sample " + std::to_string(ids[1])));
  REQUIRE(batch.empty());
  REQUIRE(batch.bytes() == 0);

  REQUIRE(cache->Delete(42).ok());
  REQUIRE(cache->Get(42).status().code() == StatusCode::kNotFound);
  REQUIRE(cache->Delete(42).ok());  // deleting an absent id is fine

  std::vector<uint64_t> seen;
  REQUIRE(cache
              ->ForEach([&](uint64_t id, const StatusOr<Sample>& s) {
                REQUIRE(s.ok());
                REQUIRE(s->id == id);
                seen.push_back(id);
                return true;
              })
              .ok());
  REQUIRE(seen.size() == 99);
  REQUIRE(std::is_sorted(seen.begin(), seen.end()));
  REQUIRE(seen.front() == 0);
  REQUIRE(seen.back() == 297);

  int visited = 0;
  REQUIRE(cache->ForEach([&](uint64_t, const StatusOr<Sample>&) { return ++visited < 5; }).ok());
  REQUIRE(visited == 5);

  auto stats = cache->Stats();
  REQUIRE(stats.ok());
  REQUIRE(stats->samples == 99);
  REQUIRE(stats->bytes == 99 * 784);
  REQUIRE(stats->corrupt == 0);
  REQUIRE(stats->stored_bytes == 99 * static_cast<int64_t>(784 + kRecordHeaderBytes + kRecordTrailerBytes));
  int64_t total = 0;
  for (auto [label, n] : stats->label_counts) total += n;
  REQUIRE(total == 99);
  REQUIRE(stats->label_counts.at(4) == 9);  // id 42 (label 4) was deleted
  REQUIRE(stats->label_counts.at(0) == 10);
}

TEST_CASE("PutBatch writes all samples and data survives reopen", "[cache]") {
  TempDir tmp;
  const std::string dir = tmp.Sub("db");
  std::vector<std::vector<uint8_t>> payloads;
  std::vector<SampleRef> refs;
  for (uint64_t id = 0; id < 1000; ++id) payloads.push_back(Payload(id, 100 + id % 50));
  for (uint64_t id = 0; id < 1000; ++id) refs.push_back({id, static_cast<uint16_t>(id % 10), payloads[id]});
  {
    auto cache = OpenOrDie(dir);
    REQUIRE(cache->PutBatch(refs).ok());
    REQUIRE(cache->Flush().ok());
  }
  CacheOptions no_create;
  no_create.create_if_missing = false;
  auto cache = OpenOrDie(dir, no_create);
  std::vector<uint64_t> ids(1000);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(3));
  auto got = cache->MultiGet(ids);
  for (size_t i = 0; i < ids.size(); ++i) {
    REQUIRE(got[i].ok());
    REQUIRE(got[i]->id == ids[i]);
    REQUIRE(got[i]->payload == payloads[ids[i]]);
  }
  auto verify = cache->Verify();
  REQUIRE(verify.ok());
  REQUIRE(verify->checked == 1000);
  REQUIRE(verify->ok());
}

TEST_CASE("Opening a missing dir without create_if_missing fails and creates nothing", "[cache]") {
  TempDir tmp;
  CacheOptions o;
  o.create_if_missing = false;
  auto c = SampleCache::Open(tmp.Sub("nope"), o);
  REQUIRE(c.status().code() == StatusCode::kNotFound);
  REQUIRE_THAT(c.status().message(), Catch::Contains(tmp.Sub("nope")));
  REQUIRE_FALSE(std::filesystem::exists(tmp.Sub("nope")));
  REQUIRE_FALSE(OpenRawDb(tmp.Sub("nope")).ok());
}

TEST_CASE("A record corrupted underneath the cache is detected, never served", "[cache]") {
  TempDir tmp;
  const std::string dir = tmp.Sub("db");
  {
    auto cache = OpenOrDie(dir);
    for (uint64_t id = 0; id < 20; ++id) REQUIRE(cache->Put(id, 1, Payload(id)).ok());
  }
  const std::string good = EncodeRecord(5, 1, Payload(5));
  std::string flipped = good;
  flipped[kRecordHeaderBytes + 10] ^= 0x40;

  struct Case {
    const char* name;
    std::string value;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"bit flip in payload", flipped, "CRC32C mismatch"},
      {"truncated value", good.substr(0, good.size() - 7), "length mismatch"},
      {"very short value", good.substr(0, 3), "shorter"},
      {"another sample's record", EncodeRecord(6, 1, Payload(5)), "record holds sample 6"},
      {"wrong version byte",
       [&] {
         std::string v = good;
         v[0] = 9;
         return v;
       }(),
       "unknown record format version 9"},
      {"wrong length field",
       [&] {
         std::string v = good;
         v[4] = static_cast<char>(v[4] + 1);
         return v;
       }(),
       "length mismatch"},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      RawPut(dir, 5, c.value);
      auto cache = OpenOrDie(dir);
      auto g = cache->Get(5);
      REQUIRE(g.status().code() == StatusCode::kDataLoss);
      REQUIRE_THAT(g.status().message(), Catch::Contains("sample 5") && Catch::Contains(c.expect));

      std::vector<uint64_t> ids = {4, 5, 6};
      auto m = cache->MultiGet(ids);
      REQUIRE(m[0].ok());
      REQUIRE(m[1].status().code() == StatusCode::kDataLoss);
      REQUIRE_THAT(m[1].status().message(), Catch::Contains("sample 5"));
      REQUIRE(m[2].ok());

      auto raw = cache->MultiGetRecords(ids);
      REQUIRE(raw[1].status.code() == StatusCode::kDataLoss);
      REQUIRE(raw[1].bytes.empty());
      RecordBatch batch;
      auto corrupt = cache->MultiGetRecordsInto(ids, &batch);
      REQUIRE(corrupt.code() == StatusCode::kDataLoss);
      REQUIRE_THAT(corrupt.message(), Catch::Contains("sample 5"));
      REQUIRE(batch.empty());
      REQUIRE(cache->MultiGetRecordsInto(ids, &batch, /*verify=*/false).ok());
      REQUIRE(batch[1] == c.value);
      auto unverified = cache->MultiGetRecords(ids, /*verify=*/false);
      REQUIRE(unverified[1].status.ok());
      REQUIRE(unverified[1].bytes == c.value);
      REQUIRE(DecodeRecord(5, unverified[1].bytes).status().code() == StatusCode::kDataLoss);

      auto v = cache->Verify();
      REQUIRE(v.ok());
      REQUIRE(v->checked == 20);
      REQUIRE(v->bad_ids == std::vector<uint64_t>{5});
      REQUIRE_THAT(v->bad_statuses[0].message(), Catch::Contains(c.expect));

      auto st = cache->Stats();
      REQUIRE(st.ok());
      REQUIRE(st->samples == 19);
      REQUIRE(st->corrupt == 1);

      int bad_seen = 0;
      REQUIRE(cache
                  ->ForEach([&](uint64_t id, const StatusOr<Sample>& s) {
                    if (!s.ok()) {
                      REQUIRE(id == 5);
                      ++bad_seen;
                    }
                    return true;
                  })
                  .ok());
      REQUIRE(bad_seen == 1);
    }
  }
}

TEST_CASE("A malformed key fails the scan with a clear error", "[cache]") {
  TempDir tmp;
  const std::string dir = tmp.Sub("db");
  { auto cache = OpenOrDie(dir); }
  {
    auto db = OpenRawDb(dir);
    REQUIRE(db.ok());
    REQUIRE((*db)->Put(rocksdb::WriteOptions(), "abc", "x").ok());
  }
  auto cache = OpenOrDie(dir);
  auto v = cache->Verify();
  REQUIRE(v.status().code() == StatusCode::kDataLoss);
  REQUIRE_THAT(v.status().message(), Catch::Contains("3 bytes"));
}

// A record of format version 1 ([version][0][label][len][payload][crc32c],
// no sample id), as an older loftctl wrote it.
static std::string V1Record(uint16_t label, const std::vector<uint8_t>& payload) {
  std::string out(8 + payload.size() + 4, '\0');
  out[0] = 1;
  out[2] = static_cast<char>(label & 0xff);
  out[3] = static_cast<char>(label >> 8);
  for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<char>((payload.size() >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, payload.data(), payload.size());
  const uint32_t crc = Crc32c(out.data(), 8 + payload.size());
  for (int i = 0; i < 4; ++i) out[8 + payload.size() + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  return out;
}

TEST_CASE("Records carry their sample id: another sample's valid record is refused", "[cache]") {
  // Version 1 had no id: any record with a valid CRC passed for any sample
  // (a serving peer could answer sample 5 with sample 6). Version 2 does not.
  const std::string six = EncodeRecord(6, 3, Payload(6));
  REQUIRE(DecodeRecord(6, six).ok());
  auto as_five = DecodeRecord(5, six);
  REQUIRE(as_five.status().code() == StatusCode::kDataLoss);
  REQUIRE_THAT(as_five.status().message(), Catch::Contains("sample 5") && Catch::Contains("holds sample 6"));
  REQUIRE(VerifyRecord(5, six).code() == StatusCode::kDataLoss);
  // The id is covered by the CRC too.
  std::string id_flip = six;
  id_flip[8] ^= 0x03;  // 6 -> 5
  REQUIRE_THAT(DecodeRecord(5, id_flip).status().message(), Catch::Contains("CRC32C mismatch"));
}

TEST_CASE("A version-1 record is refused naming the version and the ingest command", "[cache]") {
  const std::string v1 = V1Record(4, Payload(9));
  auto d = DecodeRecord(9, v1);
  REQUIRE(d.status().code() == StatusCode::kFailedPrecondition);
  REQUIRE_THAT(d.status().message(), Catch::Contains("sample 9") && Catch::Contains("format version 1") &&
                                         Catch::Contains("loftctl ingest") && Catch::Contains("--overwrite"));
  // Also through the cache (a cache ingested by an older loftctl).
  TempDir tmp;
  const std::string dir = tmp.Sub("db");
  { auto cache = OpenOrDie(dir); }
  RawPut(dir, 9, v1);
  auto cache = OpenOrDie(dir);
  auto g = cache->Get(9);
  REQUIRE(g.status().code() == StatusCode::kFailedPrecondition);
  REQUIRE_THAT(g.status().message(),
               Catch::Contains("format version 1") && Catch::Contains("loftctl ingest"));
  auto v = cache->Verify();
  REQUIRE(v.ok());
  REQUIRE(v->bad_ids == std::vector<uint64_t>{9});
}
