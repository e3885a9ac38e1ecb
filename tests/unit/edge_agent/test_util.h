// Helpers shared by the edge_agent tests: temp dirs, small caches and
// cluster specs.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cache/sample_cache.h"

namespace loft::agent::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> n{0};
    path_ = std::filesystem::temp_directory_path() /
            ("loft_agent_test_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string Sub(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Deterministic 784-byte payload of sample `id`.
inline std::vector<uint8_t> Payload(uint64_t id, size_t bytes = 784) {
  std::vector<uint8_t> p(bytes);
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>((id * 131 + i * 7) & 0xff);
  return p;
}

// Creates a cache at `dir` holding the given ids (label = id % 10).
inline void MakeCache(const std::string& dir, const std::vector<uint64_t>& ids) {
  auto cache = cache::SampleCache::Open(dir);
  if (!cache.ok()) throw std::runtime_error(cache.status().ToString());
  for (uint64_t id : ids) {
    auto p = Payload(id);
    auto st = (*cache)->Put(id, static_cast<uint16_t>(id % 10), p);
    if (!st.ok()) throw std::runtime_error(st.ToString());
  }
  auto st = (*cache)->Flush();
  if (!st.ok()) throw std::runtime_error(st.ToString());
}

inline std::vector<uint64_t> Range(uint64_t from, uint64_t to) {
  std::vector<uint64_t> v;
  for (uint64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

// A two-node spec ("a", "b") with small compute times.
// Two nodes, a and b; `dataset` is the spec's dataset mapping.
inline std::string WriteSpec(const TempDir& dir,
                             const std::string& dataset = "{name: test, samples: 1000, sample_bytes: 784}",
                             const std::string& file = "cluster.yaml") {
  std::string path = dir.Sub(file);
  std::ofstream out(path);
  out << "dataset: " << dataset
      << "\n"
         "placement: {kind: shards, replication: 1}\n"
         "training: {global_batch: 64, min_batch: 1, iterations: 10, seed: 7}\n"
         "nodes:\n"
         "  - name: a\n"
         "    compute: {fixed_ms: 1.0, per_sample_ms: 0.01, jitter: 0.0}\n"
         "    link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 1}\n"
         "  - name: b\n"
         "    compute: {fixed_ms: 1.0, per_sample_ms: 0.01, jitter: 0.0}\n"
         "    link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 1}\n";
  return path;
}

}  // namespace loft::agent::testing
