// CheckCacheMatchesPlacement and the agent's refusal to start on a cache
// that does not hold its placement's samples (a truncated ingest must never
// let an agent train silently on fewer samples than the ledger expects).
#include "edge_agent/cache_check.h"

#include <rocksdb/db.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "cache/ingest.h"
#include "cache/sample_cache.h"
#include "core/clock.h"
#include "core/metrics.h"
#include "core/placement.h"
#include "edge_agent/agent_config.h"
#include "edge_agent/zmq_agent_server.h"
#include "test_util.h"

using namespace loft;
using namespace loft::agent;
using namespace loft::agent::testing;

namespace {

struct Fixture {
  TempDir dir;
  std::string spec_path = WriteSpec(dir);
  ClusterSpec spec = *LoadClusterSpecFile(spec_path);
  Placement placement = *Placement::FromSpec(spec);
  int b = spec.FindNode("b");
  const std::vector<uint64_t>& ids = placement.SamplesOf(b);

  Status Check(const std::string& db) {
    auto cache = cache::SampleCache::Open(db);
    REQUIRE(cache.ok());
    auto stats = (*cache)->Stats();
    REQUIRE(stats.ok());
    return CheckCacheMatchesPlacement(spec, b, spec_path, db, **cache, stats->samples + stats->corrupt);
  }
  AgentConfig Config(const std::string& db) const {
    AgentConfig c;
    c.node_name = "b";
    c.cluster_spec = spec_path;
    c.cache_dir = db;
    c.peer_bind = "tcp://127.0.0.1:*";
    c.insecure = true;
    c.log_level = "warn";
    return c;
  }
};

}  // namespace

TEST_CASE("A cache holding exactly the placement's samples passes the start check") {
  Fixture f;
  REQUIRE(f.ids.size() == 500);
  MakeCache(f.dir.Sub("db"), f.ids);
  CHECK(f.Check(f.dir.Sub("db")).ok());
  metrics::Registry r;
  auto server = ZmqAgentServer::Create(f.Config(f.dir.Sub("db")), SystemClock::Default(), &r);
  CHECK(server.ok());
}

TEST_CASE("A truncated cache is refused naming node, expected and found counts and the fixing command") {
  Fixture f;
  const std::string db = f.dir.Sub("db");
  MakeCache(db, std::vector<uint64_t>(f.ids.begin(), f.ids.begin() + 250));
  Status st = f.Check(db);
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == StatusCode::kFailedPrecondition);
  const std::string& msg = st.message();
  CHECK(msg.find("node b") != std::string::npos);
  CHECK(msg.find("expected 500, found 250") != std::string::npos);
  CHECK(msg.find("loftctl ingest --cluster " + f.spec_path + " --node b --db " + db + " --overwrite") !=
        std::string::npos);

  // The daemon refuses to start (so it never registers) with that message.
  metrics::Registry r;
  auto server = ZmqAgentServer::Create(f.Config(db), SystemClock::Default(), &r);
  REQUIRE_FALSE(server.ok());
  CHECK(server.status().code() == StatusCode::kFailedPrecondition);
  CHECK(server.status().message().find("expected 500, found 250") != std::string::npos);
}

TEST_CASE("An empty cache (ingest failed before its flush) is refused") {
  Fixture f;
  const std::string db = f.dir.Sub("db");
  MakeCache(db, {});
  Status st = f.Check(db);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("expected 500, found 0") != std::string::npos);
}

TEST_CASE("A cache with the right count but another spec's ids is refused by the sampled id check") {
  Fixture f;
  const std::string db = f.dir.Sub("db");
  // Node a's share: as many samples as b's, none of them b's.
  MakeCache(db, f.placement.SamplesOf(f.spec.FindNode("a")));
  Status st = f.Check(db);
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == StatusCode::kFailedPrecondition);
  CHECK(st.message().find("but not sample ") != std::string::npos);
  CHECK(st.message().find("--node b") != std::string::npos);
}

TEST_CASE("One sample of the placement missing among the probed ids is caught") {
  Fixture f;
  const std::string db = f.dir.Sub("db");
  // Replace the last expected id (always probed) by a foreign one: same count.
  std::vector<uint64_t> held(f.ids.begin(), f.ids.end() - 1);
  held.push_back(f.placement.SamplesOf(f.spec.FindNode("a")).front());
  MakeCache(db, held);
  Status st = f.Check(db);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("but not sample " + std::to_string(f.ids.back())) != std::string::npos);
}

TEST_CASE("A corrupt record counts as held (its partitions fail through the CRC path)") {
  Fixture f;
  const std::string db = f.dir.Sub("db");
  MakeCache(db, f.ids);
  {
    auto raw = cache::OpenRawDb(db);
    REQUIRE(raw.ok());
    REQUIRE((*raw)->Put(rocksdb::WriteOptions(), cache::EncodeKey(f.ids.back()), "garbage").ok());
  }
  CHECK(f.Check(db).ok());
}

TEST_CASE("check_cache: false skips the check (hand-made test caches)") {
  Fixture f;
  const std::string db = f.dir.Sub("db");
  MakeCache(db, Range(0, 10));
  AgentConfig c = f.Config(db);
  c.check_cache = false;
  metrics::Registry r;
  CHECK(ZmqAgentServer::Create(c, SystemClock::Default(), &r).ok());
  auto parsed = ParseAgentConfig("check_cache: false\n");
  REQUIRE(parsed.ok());
  CHECK_FALSE(parsed->check_cache);
  CHECK(ParseAgentConfig("node_name: x\n")->check_cache);
}

TEST_CASE("Ingest completion marker round trip, an older loftctl's marker reads as a count") {
  TempDir dir;
  const std::string db = dir.Sub("m");
  std::filesystem::create_directories(db);
  auto none = cache::ReadIngestMarker(db);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  const std::vector<uint64_t> ids{5, 1, 9};
  REQUIRE(cache::WriteIngestMarker(db, {"edge-3", 3, cache::IdsDigest(ids), "s.yaml", "train", 60000}).ok());
  auto m = cache::ReadIngestMarker(db);
  REQUIRE(m.ok());
  REQUIRE(m->has_value());
  CHECK((*m)->node == "edge-3");
  CHECK((*m)->samples == 3);
  CHECK((*m)->ids_digest == cache::IdsDigest(ids));
  CHECK(cache::IdsDigest(ids) != cache::IdsDigest(std::vector<uint64_t>{1, 5, 9}));
  CHECK((*m)->dataset_samples == 60000);
  REQUIRE(cache::RemoveIngestMarker(db).ok());
  CHECK_FALSE(cache::ReadIngestMarker(db)->has_value());
  CHECK(cache::RemoveIngestMarker(db).ok());  // absent: fine
  { std::ofstream(std::filesystem::path(db) / cache::kIngestMarkerFile) << "15000\n"; }
  auto legacy = cache::ReadIngestMarker(db);
  REQUIRE(legacy.ok());
  REQUIRE(legacy->has_value());
  CHECK((*legacy)->samples == 15000);
  { std::ofstream(std::filesystem::path(db) / cache::kIngestMarkerFile) << "{\"format\": 1, \"node\": 3}"; }
  auto bad = cache::ReadIngestMarker(db);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find(cache::kIngestMarkerFile) != std::string::npos);
}

TEST_CASE("A cache of version-1 records (no sample id) stops the agent at start naming the fix") {
  Fixture f;
  const std::string db = f.dir.Sub("db");
  MakeCache(db, {});  // creates the database
  {
    auto raw = cache::OpenRawDb(db);
    REQUIRE(raw.ok());
    for (uint64_t id : f.ids) {
      // [1][0][label u16][len u32][payload][crc32c], as an older loftctl wrote.
      const auto p = Payload(id);
      std::string v(8 + p.size() + 4, '\0');
      v[0] = 1;
      v[2] = static_cast<char>(id % 10);
      v[4] = static_cast<char>(p.size() & 0xff);
      v[5] = static_cast<char>(p.size() >> 8);
      std::copy(p.begin(), p.end(), v.begin() + 8);
      REQUIRE((*raw)->Put(rocksdb::WriteOptions(), cache::EncodeKey(id), v).ok());
    }
    REQUIRE((*raw)->Close().ok());
  }
  Status st = f.Check(db);
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == StatusCode::kFailedPrecondition);
  CHECK(st.message().find("format version 1") != std::string::npos);
  CHECK(st.message().find("loftctl ingest") != std::string::npos);
  metrics::Registry r;
  auto server = ZmqAgentServer::Create(f.Config(db), SystemClock::Default(), &r);
  REQUIRE_FALSE(server.ok());
  CHECK(server.status().message().find("format version 1") != std::string::npos);
}
