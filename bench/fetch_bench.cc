// fetch_bench: is loft's peer fetch close to the raw speed of its parts?
// All three figures use the same cache (N samples of 784 bytes, stored as
// 804-byte records), batches of 64 random ids, tcp://127.0.0.1, one
// client and one server, `depth` requests in flight (one partition's
// worth of remote ids, fetched the way PartitionRunner does):
//   peer_fetch: PeerFetcher → ZmqAgentServer (grant check, one
//     MultiGetRecords with CRC verification, multipart reply) → client
//     verifies every record's CRC (DecodeRecord).
//   raw_rocksdb_multiget: rocksdb::DB::MultiGet on the same DB, 64 keys.
//   raw_zmq: DEALER → ROUTER (client and server in separate ZeroMQ
//     contexts, as separate processes have); the server answers each 64-id
//     request with 64 pre-built 804-byte frames from memory.
// The peer server gets one ServeGrant per partition (512 ids), sent a
// few partitions ahead of the fetches, as the scheduler does in a run.
// Target: peer_fetch >= 50% of min(raw_rocksdb, raw_zmq).
#include <rocksdb/db.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cache/sample_cache.h"
#include "core/codec.h"
#include "core/logging.h"
#include "core/zmq_util.h"
#include "edge_agent/peer_fetcher.h"
#include "edge_agent/zmq_agent_server.h"

using namespace loft;
using Clk = std::chrono::steady_clock;

namespace {

double Seconds(Clk::time_point a, Clk::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void Check(const Status& st, const char* what) {
  if (!st.ok()) {
    std::fprintf(stderr, "fetch_bench: %s: %s\n", what, st.ToString().c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t n = argc > 1 ? std::stoull(argv[1]) : 60000;
  const double run_s = argc > 2 ? std::stod(argv[2]) : 3.0;
  const int batch = 64;
  const int depth = 8;  // 512 ids per FetchAll = 8 requests in flight
  Check(InitLogging("warn", "fetch_bench"), "logging");
  auto root = std::filesystem::temp_directory_path() / ("loft_fetch_bench_" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  std::mt19937_64 rng(7);

  // The data: n samples of 784 bytes.
  {
    auto cache = cache::SampleCache::Open((root / "b").string());
    Check(cache.status(), "open cache");
    std::vector<uint8_t> payload(784);
    std::vector<cache::SampleRef> refs;
    std::vector<std::vector<uint8_t>> payloads;
    for (uint64_t id = 0; id < n; ++id) {
      for (auto& b : payload) b = static_cast<uint8_t>(rng());
      payloads.push_back(payload);
    }
    for (uint64_t id = 0; id < n; ++id) refs.push_back({id, static_cast<uint16_t>(id % 10), payloads[id]});
    Check((*cache)->PutBatch(refs), "ingest");
    Check((*cache)->Flush(), "flush");
  }
  std::vector<uint64_t> perm(n);
  for (uint64_t i = 0; i < n; ++i) perm[i] = i;

  nlohmann::json out;
  out["samples"] = n;
  out["sample_bytes"] = 784;
  out["record_bytes"] = 804;
  out["batch"] = batch;
  out["in_flight_requests"] = depth;
  out["transport"] = "tcp://127.0.0.1";

  // ---- raw RocksDB MultiGet (the cache opened directly, same options as the agent's reads)
  {
    auto cache = cache::SampleCache::Open((root / "b").string());
    Check(cache.status(), "open cache");
    rocksdb::DB* db = (*cache)->raw_db();
    std::vector<std::string> keys(batch);
    std::vector<rocksdb::Slice> slices(batch);
    std::vector<std::string> values;
    int64_t got = 0;
    auto t0 = Clk::now();
    size_t pos = 0;
    std::shuffle(perm.begin(), perm.end(), rng);
    while (Seconds(t0, Clk::now()) < run_s) {
      for (int k = 0; k < batch; ++k) {
        keys[k] = cache::EncodeKey(perm[pos++ % n]);
        slices[k] = keys[k];
      }
      auto st = db->MultiGet(rocksdb::ReadOptions(), slices, &values);
      for (const auto& s : st) {
        if (!s.ok()) Check(IOError(s.ToString()), "raw multiget");
      }
      got += batch;
    }
    out["raw_rocksdb_multiget_samples_per_s"] = static_cast<double>(got) / Seconds(t0, Clk::now());
  }

  // ---- raw ZeroMQ: same bytes, same request shape, no DB, no checks
  {
    zmq::context_t ctx;
    auto server = MakeSocket(ctx, zmq::socket_type::router, {});
    Check(server.status(), "raw server");
    Check(Bind(*server, "tcp://127.0.0.1:*"), "bind");
    std::string ep = *LastEndpoint(*server);
    std::atomic<bool> stop{false};
    std::string record(804, 'r');
    std::thread srv([&] {
      while (!stop) {
        zmq::pollitem_t it{server->handle(), 0, ZMQ_POLLIN, 0};
        zmq::poll(&it, 1, std::chrono::milliseconds(20));
        if (!(it.revents & ZMQ_POLLIN)) continue;
        auto frames = RecvMultipart(*server, true);
        if (!frames.ok() || frames->size() < 2) continue;
        std::vector<zmq::message_t> reply;
        reply.push_back(std::move((*frames)[0]));
        reply.push_back(std::move((*frames)[1]));  // echo the request as the header
        for (int k = 0; k < batch; ++k) reply.emplace_back(record.data(), record.size());
        Check(SendMultipart(*server, reply), "raw reply");
      }
    });
    zmq::context_t client_ctx;
    auto client = MakeSocket(client_ctx, zmq::socket_type::dealer, {});
    Check(client.status(), "raw client");
    Check(Connect(*client, ep), "connect");
    std::string req(8 + 8 * batch, 'q');
    int64_t got = 0;
    auto t0 = Clk::now();
    while (Seconds(t0, Clk::now()) < run_s) {
      for (int d = 0; d < depth; ++d) {
        std::vector<zmq::message_t> f;
        f.emplace_back(req.data(), req.size());
        Check(SendMultipart(*client, f), "raw send");
      }
      for (int d = 0; d < depth; ++d) {
        auto frames = RecvMultipart(*client);
        Check(frames.status(), "raw recv");
        got += static_cast<int64_t>(frames->size()) - 1;
      }
    }
    out["raw_zmq_samples_per_s"] = static_cast<double>(got) / Seconds(t0, Clk::now());
    stop = true;
    srv.join();
  }

  // ---- peer fetch through a real agent server
  {
    zmq::context_t sctx;
    auto sched = MakeSocket(sctx, zmq::socket_type::router, {});
    Check(sched.status(), "scheduler socket");
    Check(Bind(*sched, "tcp://127.0.0.1:*"), "bind scheduler");
    std::string spec_path = (root / "cluster.yaml").string();
    // Node b serves every sample: replication 2 on two nodes gives it all
    // n, as ingested above (the agent refuses a cache that does not match
    // its placement).
    std::ofstream(spec_path)
        << "dataset: {name: bench, samples: " << n
        << ", sample_bytes: 784}\nplacement: {replication: 2}\nnodes:\n  - name: a\n  - name: b\n";
    agent::AgentConfig cfg;
    cfg.node_name = "b";
    cfg.cluster_spec = spec_path;
    cfg.cache_dir = (root / "b").string();
    cfg.scheduler_endpoint = *LastEndpoint(*sched);
    cfg.peer_bind = "tcp://127.0.0.1:*";
    cfg.insecure = true;
    cfg.log_level = "warn";
    cfg.max_grants = 64;
    metrics::Registry registry;
    auto server = agent::ZmqAgentServer::Create(cfg, SystemClock::Default(), &registry);
    Check(server.status(), "agent server");
    std::atomic<bool> stop{false};
    std::thread run([&] { (void)(*server)->Run(&stop); });
    auto reg = RecvMultipart(*sched);  // RegisterRequest
    Check(reg.status(), "register");
    zmq::message_t id((*reg)[0].data(), (*reg)[0].size());
    v1::Envelope rr;
    rr.mutable_register_reply()->set_node(1);
    Check(SendEnvelopeTo(*sched, id, rr), "register reply");

    // As in a real iteration, every partition has its own grant listing
    // exactly the ids its worker fetches from this peer; the "scheduler"
    // keeps grants kAhead partitions ahead of the fetches (the agent keeps
    // max_grants = 64), so they are served as they would be in a run.
    const size_t per_partition = static_cast<size_t>(batch) * depth;
    std::vector<std::vector<uint64_t>> partitions;
    for (int pass = 0; pass < 40; ++pass) {
      std::shuffle(perm.begin(), perm.end(), rng);
      for (size_t off = 0; off < n; off += per_partition) {
        partitions.emplace_back(
            perm.begin() + static_cast<std::ptrdiff_t>(off),
            perm.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(n, off + per_partition)));
      }
    }
    constexpr size_t kAhead = 32;
    size_t granted = 0;
    auto grant_up_to = [&](size_t end) {
      for (; granted < std::min(end, partitions.size()); ++granted) {
        v1::Envelope g;
        g.mutable_serve_grant()->set_partition_id(granted + 1);
        g.mutable_serve_grant()->set_requester(0);
        for (uint64_t i : partitions[granted]) g.mutable_serve_grant()->add_sample_ids(i);
        Check(SendEnvelopeTo(*sched, id, g), "grant");
      }
    };
    grant_up_to(kAhead);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));

    zmq::context_t cctx;
    agent::PeerFetcherOptions fo;
    fo.fetch_batch = batch;
    std::string ep = (*server)->peer_endpoint();
    agent::PeerFetcher fetcher(&cctx, SystemClock::Default(), fo, [&](int32_t node) {
      return std::optional<agent::PeerInfo>(agent::PeerInfo{node, "b", ep});
    });
    int64_t got = 0;
    auto t0 = Clk::now();
    for (size_t k = 0; k < partitions.size() && Seconds(t0, Clk::now()) < run_s; ++k) {
      grant_up_to(k + kAhead);
      std::map<int32_t, std::vector<uint64_t>> ids;
      ids[1] = partitions[k];
      const auto& v = ids[1];
      auto res = fetcher.FetchAll(k + 1, 0, ids);
      auto& r = res.at(1);
      Check(r.status, "peer fetch");
      for (size_t i = 0; i < v.size(); ++i) Check(cache::VerifyRecord(v[i], r.records[i]), "verify");
      got += static_cast<int64_t>(v.size());
    }
    double secs = Seconds(t0, Clk::now());
    out["peer_fetch_samples_per_s"] = static_cast<double>(got) / secs;
    stop = true;
    run.join();
  }
  double raw_min = std::min(out["raw_rocksdb_multiget_samples_per_s"].get<double>(),
                            out["raw_zmq_samples_per_s"].get<double>());
  double ratio = out["peer_fetch_samples_per_s"].get<double>() / raw_min;
  out["peer_fetch_over_min_raw"] = ratio;
  out["target_ratio"] = 0.5;
  out["target_met"] = ratio >= 0.5;
  out["peer_fetch_mb_per_s"] = out["peer_fetch_samples_per_s"].get<double>() * 804 / 1e6;
  std::filesystem::remove_all(root);
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
