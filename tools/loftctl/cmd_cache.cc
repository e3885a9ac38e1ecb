// loftctl ingest | cache stat | cache verify | cache get.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cache/idx_reader.h"
#include "cache/ingest.h"
#include "cache/manifest.h"
#include "cache/sample_cache.h"
#include "core/cluster_spec.h"
#include "core/placement.h"
#include "tools/loftctl/commands.h"

namespace loft::ctl {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitVerifyFailed = 3;

int Fail(const Status& s) {
  std::fprintf(stderr, "loftctl: %s\n", s.ToString().c_str());
  return kExitError;
}

struct IngestArgs {
  std::string cluster;
  std::string node;
  std::string db;
  bool all = false;
  std::string root;
  std::string source = cache::kDefaultFashionMnistDir;
  std::string split = "train";
  bool overwrite = false;
  std::string manifest;  // default: ROOT/MANIFEST.loft (--all) or next to DIR (--node)
};

// Ingests one node; prints one summary line on stdout.
// The completion marker (cache::kIngestMarkerFile) is removed before the
// first write and written last, after the samples are flushed.
Status IngestOne(const ClusterSpec& spec, const Placement& placement, const cache::IdxDataset& ds, int node,
                 const std::string& dir, bool overwrite, const std::string& split) {
  namespace fs = std::filesystem;
  const std::string& name = spec.nodes[node].name;
  std::error_code ec;
  if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec))) {
    if (!overwrite) {
      return AlreadyExists("node " + name + ": '" + dir +
                           "' already exists and is not empty; pass --overwrite to replace its cache");
    }
    LOFT_RETURN_IF_ERROR(cache::RemoveIngestMarker(dir));
    LOFT_RETURN_IF_ERROR(cache::SampleCache::Destroy(dir));
  }
  if (!fs::path(dir).parent_path().empty()) fs::create_directories(fs::path(dir).parent_path(), ec);
  LOFT_ASSIGN_OR_RETURN(auto db, cache::SampleCache::Open(dir, cache::CacheOptions{}));
  const auto& ids = placement.SamplesOf(node);
  cache::IngestOptions opts;
  opts.encoding = cache::PayloadEncoding::FromSpec(spec.dataset);
  const bool tty = isatty(fileno(stderr)) != 0;
  if (tty) {
    opts.progress = [&](int64_t done, int64_t total) {
      std::fprintf(stderr, "\r  %s: %lld/%lld samples (%3.0f%%)", name.c_str(), static_cast<long long>(done),
                   static_cast<long long>(total),
                   total > 0 ? 100.0 * static_cast<double>(done) / total : 100.0);
      std::fflush(stderr);
    };
  }
  auto result = cache::IngestSamples(*db, ds, ids, opts);
  if (tty) std::fprintf(stderr, "\n");
  if (!result.ok()) {
    return result.status().WithContext("node " + name + ": ingest into " + dir +
                                       " failed; the cache is incomplete (no " + cache::kIngestMarkerFile +
                                       " marker)");
  }
  db.reset();  // closed before the marker says it is complete
  cache::IngestMarker marker{name,        result->samples, cache::IdsDigest(ids),
                             spec.source, split,           spec.dataset.samples};
  LOFT_RETURN_IF_ERROR(cache::WriteIngestMarker(dir, marker).WithContext("node " + name));
  std::printf("%s: ingested %lld samples (%.1f MB) into %s in %.2f s\n", name.c_str(),
              static_cast<long long>(result->samples), static_cast<double>(result->payload_bytes) / 1e6,
              dir.c_str(), result->seconds);
  return OkStatus();
}

int RunIngest(const IngestArgs& a) {
  const bool node_mode = !a.all && !a.node.empty() && !a.db.empty() && a.root.empty();
  const bool all_mode = a.all && a.node.empty() && a.db.empty() && !a.root.empty();
  if (!node_mode && !all_mode) {
    std::fprintf(stderr, "loftctl ingest: use either --node NAME --db DIR or --all --root DIR\n");
    return 2;
  }
  auto spec = LoadClusterSpecFile(a.cluster);
  if (!spec.ok()) return Fail(spec.status());
  int only = -1;
  if (!a.all) {
    only = spec->FindNode(a.node);
    if (only < 0) {
      std::string names;
      for (const auto& n : spec->nodes) names += (names.empty() ? "" : ", ") + n.name;
      return Fail(NotFound(a.cluster + ": no node named '" + a.node + "' (nodes: " + names + ")"));
    }
  }
  auto ds = cache::LoadFashionMnist(a.source, a.split);
  if (!ds.ok()) return Fail(ds.status());
  if (Status s = cache::CheckSpecAgainstDataset(*spec, *ds, a.split); !s.ok()) return Fail(s);
  auto placement = Placement::FromSpec(*spec);
  if (!placement.ok()) return Fail(placement.status());
  for (int i = 0; i < spec->num_nodes(); ++i) {
    if (only >= 0 && i != only) continue;
    const std::string dir = a.all ? a.root + "/" + spec->nodes[i].name : a.db;
    if (Status s = IngestOne(*spec, *placement, *ds, i, dir, a.overwrite, a.split); !s.ok()) return Fail(s);
  }
  // The dataset manifest (every sample's digest, not only this node's): the
  // scheduler's `manifest:` sends it to agents, who refuse forged peer samples.
  std::string mpath = a.manifest;
  if (mpath.empty()) {
    mpath = a.all ? a.root + "/" + cache::kManifestFile
                  : (std::filesystem::path(a.db).parent_path() / cache::kManifestFile).string();
  }
  auto manifest =
      cache::Manifest::Build(*ds, spec->dataset.samples, cache::PayloadEncoding::FromSpec(spec->dataset));
  if (!manifest.ok()) return Fail(manifest.status());
  if (Status s = cache::WriteManifestFile(mpath, *manifest); !s.ok()) return Fail(s);
  std::printf("dataset manifest: %lld samples, root %s, in %s\n", static_cast<long long>(manifest->size()),
              manifest->RootHex().c_str(), mpath.c_str());
  return kExitOk;
}

StatusOr<std::unique_ptr<cache::SampleCache>> OpenExisting(const std::string& dir) {
  cache::CacheOptions opts;
  opts.create_if_missing = false;
  return cache::SampleCache::Open(dir, opts);
}

// Whether an ingest finished on `dir`: its marker exists and names as many
// samples as the cache holds (`records` = good + corrupt records).
struct IngestState {
  bool complete = false;
  std::string why;  // when not complete
  std::optional<cache::IngestMarker> marker;
};
StatusOr<IngestState> CheckIngest(const std::string& dir, int64_t records) {
  IngestState st;
  LOFT_ASSIGN_OR_RETURN(st.marker, cache::ReadIngestMarker(dir));
  if (!st.marker) {
    st.why = std::string("no ") + cache::kIngestMarkerFile +
             " marker: the ingest was interrupted or failed (re-run `loftctl ingest ... --overwrite`)";
  } else if (st.marker->samples != records) {
    st.why = std::string(cache::kIngestMarkerFile) + " says " + std::to_string(st.marker->samples) +
             " samples were ingested but the cache holds " + std::to_string(records) + " records";
  } else {
    st.complete = true;
  }
  return st;
}

int RunStat(const std::string& dir, bool json) {
  auto db = OpenExisting(dir);
  if (!db.ok()) return Fail(db.status());
  auto stats = (*db)->Stats();
  if (!stats.ok()) return Fail(stats.status());
  auto ingest = CheckIngest(dir, stats->samples + stats->corrupt);
  if (!ingest.ok()) return Fail(ingest.status());
  if (json) {
    nlohmann::json labels = nlohmann::json::object();
    for (const auto& [label, n] : stats->label_counts) labels[std::to_string(label)] = n;
    nlohmann::json j = {{"db", dir},
                        {"samples", stats->samples},
                        {"bytes", stats->bytes},
                        {"stored_bytes", stats->stored_bytes},
                        {"corrupt", stats->corrupt},
                        {"label_counts", labels},
                        {"ingest_complete", ingest->complete}};
    const cache::SizeDistribution& rb = stats->record_bytes;
    j["record_bytes"] = {{"count", rb.count}, {"min", rb.min}, {"mean", rb.mean},  {"p50", rb.p50},
                         {"p95", rb.p95},     {"max", rb.max}, {"total", rb.total}};
    if (!ingest->complete) j["ingest_incomplete_reason"] = ingest->why;
    if (ingest->marker) {
      j["ingest"] = {{"node", ingest->marker->node},
                     {"samples", ingest->marker->samples},
                     {"spec", ingest->marker->spec},
                     {"split", ingest->marker->split}};
    } else {
      j["ingest"] = nullptr;
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("cache %s\n  samples:      %lld\n  bytes:        %lld (payload)\n  stored bytes: %lld\n",
                dir.c_str(), static_cast<long long>(stats->samples), static_cast<long long>(stats->bytes),
                static_cast<long long>(stats->stored_bytes));
    const cache::SizeDistribution& rb = stats->record_bytes;
    std::printf("  record bytes: count %lld, min %lld, mean %.1f, p50 %lld, p95 %lld, max %lld, total %lld\n",
                static_cast<long long>(rb.count), static_cast<long long>(rb.min), rb.mean,
                static_cast<long long>(rb.p50), static_cast<long long>(rb.p95),
                static_cast<long long>(rb.max), static_cast<long long>(rb.total));
    if (stats->corrupt > 0) {
      std::printf("  corrupt:      %lld (run `loftctl cache verify`)\n",
                  static_cast<long long>(stats->corrupt));
    }
    if (ingest->complete) {
      std::printf("  ingest:       complete (node %s, %lld samples)\n",
                  ingest->marker->node.empty() ? "?" : ingest->marker->node.c_str(),
                  static_cast<long long>(ingest->marker->samples));
    } else {
      std::printf("  ingest:       INCOMPLETE: %s\n", ingest->why.c_str());
    }
    std::printf("  labels:");
    for (const auto& [label, n] : stats->label_counts)
      std::printf(" %d:%lld", label, static_cast<long long>(n));
    std::printf("\n");
  }
  return kExitOk;
}

int RunVerify(const std::string& dir) {
  auto db = OpenExisting(dir);
  if (!db.ok()) return Fail(db.status());
  auto report = (*db)->Verify();
  if (!report.ok()) return Fail(report.status());
  for (size_t i = 0; i < report->bad_ids.size(); ++i) {
    std::printf("bad sample %llu: %s\n", static_cast<unsigned long long>(report->bad_ids[i]),
                report->bad_statuses[i].message().c_str());
  }
  std::printf("%s: %lld records checked, %zu bad\n", dir.c_str(), static_cast<long long>(report->checked),
              report->bad_ids.size());
  auto ingest = CheckIngest(dir, report->checked);
  if (!ingest.ok()) return Fail(ingest.status());
  if (!ingest->complete) std::printf("%s: ingest incomplete: %s\n", dir.c_str(), ingest->why.c_str());
  return report->ok() && ingest->complete ? kExitOk : kExitVerifyFailed;
}

int RunGet(const std::string& dir, uint64_t id, const std::string& out) {
  auto db = OpenExisting(dir);
  if (!db.ok()) return Fail(db.status());
  auto sample = (*db)->Get(id);
  if (!sample.ok()) {
    const int code = sample.status().code() == StatusCode::kDataLoss ? kExitVerifyFailed : kExitError;
    (void)Fail(sample.status());
    return code;
  }
  if (!out.empty()) {
    std::ofstream f(out, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(sample->payload.data()),
            static_cast<std::streamsize>(sample->payload.size()));
    f.close();
    if (!f) return Fail(IOError("cannot write payload to '" + out + "'"));
  }
  std::printf("id %llu label %u payload_bytes %zu%s%s\n", static_cast<unsigned long long>(id), sample->label,
              sample->payload.size(), out.empty() ? "" : " written to ", out.c_str());
  return kExitOk;
}

}  // namespace

void RegisterCacheCommands(CLI::App& app, int* exit_code) {
  auto ingest_args = std::make_shared<IngestArgs>();
  CLI::App* ingest =
      app.add_subcommand("ingest", "Ingest Fashion-MNIST samples into node caches per the placement");
  ingest->add_option("--cluster", ingest_args->cluster, "cluster spec YAML")
      ->required()
      ->check(CLI::ExistingFile);
  ingest->add_option("--node", ingest_args->node, "node name (expanded, e.g. edge-0)");
  ingest->add_option("--db", ingest_args->db, "cache directory for --node");
  ingest->add_flag("--all", ingest_args->all, "ingest every node of the spec");
  ingest->add_option("--root", ingest_args->root, "with --all: caches go to ROOT/<node name>");
  ingest->add_option("--source", ingest_args->source, "directory with the Fashion-MNIST .gz files")
      ->capture_default_str();
  ingest->add_option("--split", ingest_args->split, "train|test")
      ->check(CLI::IsMember({"train", "test"}))
      ->capture_default_str();
  ingest->add_flag("--overwrite", ingest_args->overwrite, "replace an existing non-empty cache directory");
  ingest->add_option(
      "--manifest", ingest_args->manifest,
      "dataset manifest file to write (default ROOT/MANIFEST.loft, or MANIFEST.loft next to --db)");
  ingest->callback([ingest_args, exit_code] { *exit_code = RunIngest(*ingest_args); });

  CLI::App* cache_cmd = app.add_subcommand("cache", "Inspect and check a node's sample cache");
  cache_cmd->require_subcommand(1);

  auto db = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* stat =
      cache_cmd->add_subcommand("stat", "Sample count, bytes, record size distribution and label counts");
  stat->add_option("--db", *db, "cache directory")->required();
  stat->add_flag("--json", *json, "print JSON");
  stat->callback([db, json, exit_code] { *exit_code = RunStat(*db, *json); });

  auto vdb = std::make_shared<std::string>();
  CLI::App* verify = cache_cmd->add_subcommand("verify", "Check every record's CRC; exit 3 if any is bad");
  verify->add_option("--db", *vdb, "cache directory")->required();
  verify->callback([vdb, exit_code] { *exit_code = RunVerify(*vdb); });

  auto gdb = std::make_shared<std::string>();
  auto id = std::make_shared<uint64_t>(0);
  auto out = std::make_shared<std::string>();
  CLI::App* get = cache_cmd->add_subcommand("get", "Print one sample's label and size, or write its payload");
  get->add_option("--db", *gdb, "cache directory")->required();
  get->add_option("--id", *id, "sample id")->required();
  get->add_option("--out", *out, "write the payload bytes to FILE");
  get->callback([gdb, id, out, exit_code] { *exit_code = RunGet(*gdb, *id, *out); });
}

}  // namespace loft::ctl
