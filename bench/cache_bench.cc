// cache_bench: SampleCache throughput on the Fashion-MNIST training split.
// Prints one JSON object on stdout:
//   ingest of all 60,000 training images (WriteBatch + flush), Get/s and
//   MultiGet(64) samples/s for random and sequential ids through the
//   record layer (header + CRC32C verified, payload copied out), and raw
//   RocksDB MultiGet(64) on the same database, same options, same ids,
//   without decoding (values stay pinned). Each figure is the median of
//   --rounds interleaved rounds.
//
// usage: cache_bench [--source DIR] [--dir TMPDIR] [--samples-per-round N]
//                    [--rounds R] [--seed S]
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cache/crc32c.h"
#include "cache/idx_reader.h"
#include "cache/ingest.h"
#include "cache/sample_cache.h"

using namespace loft;
using namespace loft::cache;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kBatch = 64;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "cache_bench: %s\n", msg.c_str());
  std::exit(1);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Sink that keeps reads from being optimised away.
uint64_t g_sink = 0;

double TimeGets(const SampleCache& cache, const std::vector<uint64_t>& ids) {
  const auto t0 = Clock::now();
  for (uint64_t id : ids) {
    auto s = cache.Get(id);
    if (!s.ok()) Die(s.status().ToString());
    g_sink += s->payload[0];
  }
  return static_cast<double>(ids.size()) / Seconds(t0, Clock::now());
}

double TimeMultiGets(const SampleCache& cache, const std::vector<uint64_t>& ids) {
  const auto t0 = Clock::now();
  for (size_t i = 0; i + kBatch <= ids.size(); i += kBatch) {
    auto got = cache.MultiGet(std::span<const uint64_t>(ids.data() + i, kBatch));
    for (const auto& s : got) {
      if (!s.ok()) Die(s.status().ToString());
      g_sink += s->payload[0];
    }
  }
  return static_cast<double>(ids.size() / kBatch * kBatch) / Seconds(t0, Clock::now());
}

// Raw RocksDB batched MultiGet over the same keys: no header/CRC check, no
// payload copy (values stay pinned in the block cache).
double TimeRawMultiGets(rocksdb::DB* db, const std::vector<uint64_t>& ids) {
  std::vector<char> keybuf(kBatch * 8);
  std::vector<rocksdb::Slice> keys(kBatch);
  std::vector<rocksdb::PinnableSlice> values(kBatch);
  std::vector<rocksdb::Status> statuses(kBatch);
  const rocksdb::ReadOptions ro;
  const auto t0 = Clock::now();
  for (size_t i = 0; i + kBatch <= ids.size(); i += kBatch) {
    for (size_t k = 0; k < kBatch; ++k) {
      EncodeKeyTo(ids[i + k], keybuf.data() + k * 8);
      keys[k] = rocksdb::Slice(keybuf.data() + k * 8, 8);
      values[k].Reset();
    }
    db->MultiGet(ro, db->DefaultColumnFamily(), kBatch, keys.data(), values.data(), statuses.data(), false);
    for (size_t k = 0; k < kBatch; ++k) {
      if (!statuses[k].ok()) Die(statuses[k].ToString());
      g_sink += static_cast<uint8_t>(values[k].data()[kRecordHeaderBytes]);
    }
  }
  return static_cast<double>(ids.size() / kBatch * kBatch) / Seconds(t0, Clock::now());
}

std::string FlagValue(int& i, int argc, char** argv) {
  if (i + 1 >= argc) Die(std::string("missing value for ") + argv[i]);
  return argv[++i];
}

}  // namespace

int main(int argc, char** argv) {
  std::string source = kDefaultFashionMnistDir;
  std::string dir;
  size_t per_round = 60000;
  int rounds = 5;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--source") {
      source = FlagValue(i, argc, argv);
    } else if (a == "--dir") {
      dir = FlagValue(i, argc, argv);
    } else if (a == "--samples-per-round") {
      per_round = std::stoull(FlagValue(i, argc, argv));
    } else if (a == "--rounds") {
      rounds = std::stoi(FlagValue(i, argc, argv));
    } else if (a == "--seed") {
      seed = std::stoull(FlagValue(i, argc, argv));
    } else {
      Die("unknown argument " + a + " (see the comment at the top of bench/cache_bench.cc)");
    }
  }
  if (rounds < 1 || per_round < kBatch) Die("--rounds must be >= 1 and --samples-per-round >= 64");

  bool remove_dir = false;
  if (dir.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "loft-cache-bench-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) Die("mkdtemp failed");
    dir = tmpl;
    remove_dir = true;
  }
  const std::string db_dir = dir + "/cache";

  const auto t_load = Clock::now();
  auto ds = LoadFashionMnist(source, "train");
  if (!ds.ok()) Die(ds.status().ToString());
  const double load_s = Seconds(t_load, Clock::now());

  const CacheOptions options;
  if (Status s = SampleCache::Destroy(db_dir); !s.ok()) Die(s.ToString());
  auto opened = SampleCache::Open(db_dir, options);
  if (!opened.ok()) Die(opened.status().ToString());
  auto cache = std::move(opened).value();
  std::vector<uint64_t> all(static_cast<size_t>(ds->count));
  std::iota(all.begin(), all.end(), 0);
  auto ingest = IngestSamples(*cache, *ds, all);
  if (!ingest.ok()) Die(ingest.status().ToString());

  // Id streams: random (uniform, seeded) and sequential (wrapping).
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> random_ids(per_round), seq_ids(per_round);
  for (size_t i = 0; i < per_round; ++i) {
    random_ids[i] = rng() % static_cast<uint64_t>(ds->count);
    seq_ids[i] = i % static_cast<uint64_t>(ds->count);
  }

  // Warm the block cache (the whole split fits with the default options).
  TimeRawMultiGets(cache->raw_db(), seq_ids);

  std::map<std::string, std::vector<double>> m;
  for (int r = 0; r < rounds; ++r) {
    m["get_random_per_s"].push_back(TimeGets(*cache, random_ids));
    m["get_sequential_per_s"].push_back(TimeGets(*cache, seq_ids));
    m["multiget64_random_samples_per_s"].push_back(TimeMultiGets(*cache, random_ids));
    m["raw_multiget64_random_samples_per_s"].push_back(TimeRawMultiGets(cache->raw_db(), random_ids));
    m["multiget64_sequential_samples_per_s"].push_back(TimeMultiGets(*cache, seq_ids));
    m["raw_multiget64_sequential_samples_per_s"].push_back(TimeRawMultiGets(cache->raw_db(), seq_ids));
  }
  nlohmann::json out;
  out["benchmark"] = "cache_bench";
  out["dataset"] = "fashion-mnist train";
  out["samples"] = ds->count;
  out["sample_bytes"] = ds->rows * ds->cols;
  out["crc32c"] = Crc32cHardwareAvailable() ? "sse4.2" : "portable";
  out["options"] = {{"block_cache_bytes", options.block_cache_bytes},
                    {"block_cache_kind", std::string(BlockCacheKindName(options.block_cache_kind))},
                    {"block_size_bytes", options.block_size_bytes},
                    {"bloom_bits_per_key", options.bloom_bits_per_key},
                    {"compression", std::string(CacheCompressionName(options.compression))}};
  out["rounds"] = rounds;
  out["samples_per_round"] = per_round;
  out["load_idx_seconds"] = load_s;
  out["ingest_seconds"] = ingest->seconds;
  out["ingest_samples_per_s"] = static_cast<double>(ingest->samples) / ingest->seconds;
  for (const auto& [name, values] : m) out[name] = Median(values);
  out["multiget_ratio_vs_raw"] =
      Median(m["multiget64_random_samples_per_s"]) / Median(m["raw_multiget64_random_samples_per_s"]);
  out["multiget_ratio_vs_raw_sequential"] =
      Median(m["multiget64_sequential_samples_per_s"]) / Median(m["raw_multiget64_sequential_samples_per_s"]);
  out["targets"] = {{"multiget_ratio_vs_raw_min", 0.8}, {"ingest_seconds_max", 2.0}};
  out["checksum"] = g_sink;  // keeps the reads observable
  std::printf("%s\n", out.dump(2).c_str());

  cache.reset();
  if (remove_dir) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return 0;
}
