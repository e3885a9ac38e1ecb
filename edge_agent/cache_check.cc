#include "edge_agent/cache_check.h"

#include <spdlog/spdlog.h>

#include <vector>

#include "cache/ingest.h"
#include "core/placement.h"

namespace loft::agent {

Status CheckCacheMatchesPlacement(const ClusterSpec& spec, int node, const std::string& spec_path,
                                  const std::string& cache_dir, const cache::SampleCache& cache,
                                  int64_t records) {
  const std::string& name = spec.nodes[static_cast<size_t>(node)].name;
  LOFT_ASSIGN_OR_RETURN(Placement placement, Placement::FromSpec(spec));
  const std::vector<uint64_t>& expected = placement.SamplesOf(node);
  const auto want = static_cast<int64_t>(expected.size());
  const std::string fix =
      "loftctl ingest --cluster " + spec_path + " --node " + name + " --db " + cache_dir + " --overwrite";
  if (records != want) {
    return FailedPrecondition("node " + name + ": cache " + cache_dir + " holds " + std::to_string(records) +
                              " samples but the placement of " + spec_path + " gives this node " +
                              std::to_string(want) + " (expected " + std::to_string(want) + ", found " +
                              std::to_string(records) +
                              "; an interrupted ingest or a cache built for another spec); refusing to "
                              "register. Rebuild it with: " +
                              fix);
  }
  std::vector<uint64_t> probe;
  if (!expected.empty()) {
    const size_t n = expected.size();
    const size_t k = std::min(n, kCacheCheckSampledIds);
    for (size_t i = 0; i < k; ++i) probe.push_back(expected[i * n / k]);
    if (probe.back() != expected.back()) probe.push_back(expected.back());
  }
  const auto got = cache.MultiGet(probe);
  for (size_t i = 0; i < probe.size(); ++i) {
    if (got[i].ok() || got[i].status().code() == StatusCode::kDataLoss) continue;
    if (got[i].status().code() != StatusCode::kNotFound) return got[i].status().WithContext("node " + name);
    return FailedPrecondition("node " + name + ": cache " + cache_dir + " holds " + std::to_string(records) +
                              " samples, as many as the placement of " + spec_path +
                              " gives this node, but not sample " + std::to_string(probe[i]) +
                              " which the placement gives it (a cache built for another spec or "
                              "placement); refusing to register. Rebuild it with: " +
                              fix);
  }
  auto marker = cache::ReadIngestMarker(cache_dir);
  if (!marker.ok()) {
    spdlog::warn("cache {}: {}", cache_dir, marker.status().ToString());
  } else if (!*marker) {
    spdlog::warn(
        "cache {} has no {} marker (not made by loftctl ingest, or by an older one); its {} samples "
        "match the placement",
        cache_dir, cache::kIngestMarkerFile, records);
  } else if (!(*marker)->node.empty() && (*marker)->node != name) {
    spdlog::warn("cache {} was ingested for node {}, not {}; its {} samples match this node's placement",
                 cache_dir, (*marker)->node, name, records);
  }
  return OkStatus();
}

}  // namespace loft::agent
