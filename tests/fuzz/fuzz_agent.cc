// Fuzz target: the agent's handlers after decode. The input is a program
// (fuzz_input.h) of scheduler frames (RegisterReply, MembershipView,
// ServeGrant, PartitionAssignment, Shutdown, raw bytes) and peer frames
// (FetchRequest, raw bytes) driven into the real AgentService over a real
// RocksDB sample cache (ids 0 .. kCached-1, built once per process), plus
// reports of finished partitions (ReportSent). No sockets, no threads.
//
// Properties beyond "no crash, no sanitizer report":
//  - the agent never runs more partitions than its credit window, nor a
//    (partition, attempt) twice, nor one for another worker or with a
//    source outside its view;
//  - a FetchReply has one record per requested id, each a valid record of
//    that id, and never serves an id more often than the ServeGrants for
//    (partition, requester) granted it;
//  - with authentication on, it serves only the requester's key as named
//    in the last view;
//  - every refusal is an Error with a message.
#include <google/protobuf/stubs/logging.h>
#include <rocksdb/db.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cache/manifest.h"
#include "cache/sample_cache.h"
#include "core/codec.h"
#include "core/metrics.h"
#include "edge_agent/agent_service.h"
#include "edge_agent/sample_guard.h"
#include "fuzz_input.h"

namespace {

namespace fs = std::filesystem;
using loft::fuzz::Fail;
using loft::fuzz::FuzzInput;
namespace v1 = loft::v1;

enum Op : uint8_t {
  kOpRegisterReply = 0,
  kOpView,
  kOpGrant,
  kOpAssignment,
  kOpFetch,
  kOpReport,
  kOpRawScheduler,
  kOpRawPeer,
  kOpShutdown,
  kNumOps
};
constexpr int kMaxOps = 400;
constexpr uint64_t kCached = 32;

const bool kQuiet = [] {
  google::protobuf::SetLogHandler(nullptr);
  spdlog::set_level(spdlog::level::off);
  return true;
}();

std::vector<uint8_t> Payload(uint64_t id) {
  std::vector<uint8_t> p(16);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(id * 31 + i);
  return p;
}

// The process's cache (read only after it is built) and its manifest.
struct World {
  fs::path dir;
  std::unique_ptr<loft::cache::SampleCache> cache;
  std::string digests;
  World() {
    const fs::path base = loft::fuzz::ScratchBase();
    dir = base / ("loft-fuzz-agent-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    auto c = loft::cache::SampleCache::Open(dir.string());
    if (!c.ok()) Fail("cache: " + c.status().ToString());
    cache = std::move(*c);
    for (uint64_t id = 0; id < kCached; ++id) {
      auto p = Payload(id);
      if (!cache->Put(id, static_cast<uint16_t>(id % 10), p).ok()) Fail("cache put");
      digests += loft::cache::SampleDigest(id, static_cast<uint16_t>(id % 10), p);
    }
    // One stored record that fails its check (DataLoss, Error.bad_samples).
    const std::string key = loft::cache::EncodeKey(kCached);
    if (!cache->raw_db()->Put(rocksdb::WriteOptions(), key, "not a record").ok()) Fail("cache put");
    if (!cache->Flush().ok()) Fail("cache flush");
  }
  ~World() {
    cache.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

World& TheWorld() {
  static World w;
  return w;
}

std::string Frame(const v1::Envelope& env) {
  auto b = loft::Encode(env);
  if (!b.ok()) Fail("encode: " + b.status().ToString());
  return *b;
}

const char* kNames[] = {"a", "b", "c", "d"};

// What the harness told the agent, to check what it does against.
struct Model {
  int credits = 2;
  bool authenticated = false;
  std::map<int32_t, std::string> view;  // node -> key name, of the last MembershipView
  // (partition, requester) -> id -> times granted / served.
  std::map<std::pair<uint64_t, int32_t>, std::map<uint64_t, int64_t>> granted, served;
  std::set<std::pair<uint64_t, int32_t>> ran;  // (partition, attempt)
  std::vector<v1::Partition> running;
  int32_t registered_node = -1;

  // A scheduler frame the agent will see (whatever built it).
  void Saw(const std::string& frame) {
    auto env = loft::Decode(frame);
    if (!env.ok()) return;
    if (env->has_view()) {
      view.clear();
      for (const auto& m : env->view().members()) view.emplace(m.node(), m.name());  // the first match counts
    } else if (env->has_serve_grant()) {
      const auto& g = env->serve_grant();
      auto& ids = granted[{g.partition_id(), g.requester()}];
      for (uint64_t id : g.sample_ids()) ++ids[id];
    }
  }
};

int32_t SomeNode(FuzzInput& in) {
  return in.Below(8) == 0 ? in.Pick<int32_t>({-1, 4, 1000}) : in.Below(4);
}

std::vector<uint64_t> SomeIds(FuzzInput& in, int max) {
  std::vector<uint64_t> ids;
  const int n = in.Below(max + 1);
  for (int k = 0; k < n; ++k) ids.push_back(in.Below(16) == 0 ? in.U64() : in.U8() % (kCached + 4));
  return ids;
}

std::string SchedulerFrame(uint8_t op, FuzzInput& in, const Model& m) {
  v1::Envelope env;
  switch (op) {
    case kOpRegisterReply: {
      auto* r = env.mutable_register_reply();
      r->set_node(SomeNode(in));
      r->set_view(in.U8());
      r->set_job(in.Pick<uint64_t>({0, 7, 7, 8}));
      r->set_heartbeat_interval_ms(in.Pick<int32_t>({0, 100, -5}));
      switch (in.Below(4)) {
        case 0: r->set_sample_digests(TheWorld().digests); break;
        case 1: r->set_sample_digests(TheWorld().digests.substr(0, in.U8())); break;
        case 2:
          r->set_manifest_root(in.Bool() ? in.Bytes()
                                         : loft::cache::Manifest::FromDigests(TheWorld().digests)->Root());
          break;
        default: break;
      }
      break;
    }
    case kOpView: {
      auto* v = env.mutable_view();
      v->set_view(in.U8());
      const int n = in.Below(5);
      for (int k = 0; k < n; ++k) {
        v1::Member* mem = v->add_members();
        mem->set_node(SomeNode(in));
        mem->set_name(kNames[in.Below(4)]);
        mem->set_peer_endpoint("tcp://127.0.0.1:" + std::to_string(9000 + k));
      }
      break;
    }
    case kOpGrant: {
      auto* g = env.mutable_serve_grant();
      g->set_partition_id(in.Below(4));
      g->set_requester(SomeNode(in));
      for (uint64_t id : SomeIds(in, 6)) g->add_sample_ids(id);
      g->set_view(in.U8());
      break;
    }
    case kOpAssignment: {
      auto* p = env.mutable_assignment()->mutable_partition();
      p->set_id(in.Below(8));
      p->set_attempt(in.Below(3));
      p->set_worker(in.Below(4) == 0 ? SomeNode(in) : m.registered_node);
      const auto ids = SomeIds(in, 6);
      for (uint64_t id : ids) p->add_sample_ids(id);
      const int sources = in.Below(6) == 0 ? in.Below(7) : static_cast<int>(ids.size());
      for (int k = 0; k < sources; ++k) p->add_sources(in.Bool() ? p->worker() : SomeNode(in));
      break;
    }
    default: env.mutable_shutdown()->set_reason("fuzz"); break;
  }
  return Frame(env);
}

void CheckEffects(const loft::agent::SchedulerEffects& fx, const loft::agent::AgentService& svc, Model& m) {
  for (const auto& p : fx.run) {
    if (!m.ran.insert({p.id(), p.attempt()}).second)
      Fail("partition " + std::to_string(p.id()) + " attempt " + std::to_string(p.attempt()) + " ran twice");
    if (p.worker() != svc.node()) Fail("ran a partition of worker " + std::to_string(p.worker()));
    if (p.sources_size() != p.sample_ids_size() || p.sample_ids_size() == 0)
      Fail("ran a malformed partition");
    for (int32_t src : p.sources())
      if (src != svc.node() && !svc.PeerFor(src)) Fail("ran a partition reading from outside the view");
    m.running.push_back(p);
  }
  for (const auto& e : fx.to_scheduler)
    if (e.has_error() && e.error().message().empty()) Fail("an error without a message");
  if (svc.in_flight() < 0 || svc.in_flight() > m.credits)
    Fail("in flight " + std::to_string(svc.in_flight()) + " with a window of " + std::to_string(m.credits));
}

void Fetch(FuzzInput& in, loft::agent::AgentService& svc, Model& m, bool raw) {
  std::string frame;
  if (raw) {
    frame = in.Bytes();
  } else {
    v1::Envelope env;
    auto* f = env.mutable_fetch_request();
    f->set_request_id(in.U8());
    f->set_partition_id(in.Below(4));
    f->set_requester(SomeNode(in));
    for (uint64_t id : SomeIds(in, 6)) f->add_sample_ids(id);
    frame = Frame(env);
  }
  const std::string user = kNames[in.Below(4)];
  const size_t extra = in.Below(8) == 0 ? 1 : 0;
  loft::agent::PeerReply r = svc.HandlePeer(frame, extra, user);
  if (loft::fuzz::Tracing())
    std::fprintf(stderr, "fetch as %s: %s\n", user.c_str(),
                 r.header.has_error() ? r.header.error().message().c_str() : "served");
  if (r.header.has_error()) {
    if (r.header.error().message().empty()) Fail("a peer refusal without a message");
    return;
  }
  if (!r.header.has_fetch_reply()) Fail("peer reply is neither FetchReply nor Error");
  auto req = loft::Decode(frame);
  if (!req.ok() || !req->has_fetch_request()) Fail("served an undecodable or non-fetch frame");
  const auto& f = req->fetch_request();
  if (r.header.fetch_reply().count() != f.sample_ids_size() ||
      r.records.size() != static_cast<size_t>(f.sample_ids_size()))
    Fail("FetchReply count differs from the request");
  if (m.authenticated) {
    auto it = m.view.find(f.requester());
    if (it == m.view.end() || it->second != user) Fail("served key '" + user + "' as another node");
  }
  auto& served = m.served[{f.partition_id(), f.requester()}];
  auto& granted = m.granted[{f.partition_id(), f.requester()}];
  for (int k = 0; k < f.sample_ids_size(); ++k) {
    const uint64_t id = f.sample_ids(k);
    if (++served[id] > granted[id]) Fail("served sample " + std::to_string(id) + " beyond its grant");
    auto s = loft::cache::DecodeRecord(id, r.records[static_cast<size_t>(k)]);
    if (!s.ok()) Fail("served a record that does not decode: " + s.status().ToString());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kQuiet;
  World& world = TheWorld();
  FuzzInput in(data, size);
  Model m;
  const uint8_t setup = in.U8();
  m.credits = 1 + (setup & 3);
  m.authenticated = (setup & 4) != 0;
  loft::metrics::Registry registry;
  auto metrics = loft::agent::AgentMetrics::Create(&registry);
  if (!metrics.ok()) Fail("metrics: " + metrics.status().ToString());
  loft::agent::SampleGuard guard;
  loft::agent::AgentServiceOptions o;
  o.node_name = "a";
  o.peer_endpoint = "tcp://127.0.0.1:9000";
  o.credits = m.credits;
  o.authenticated = m.authenticated;
  o.max_grants = (setup & 8) ? 4 : 4096;
  o.guard = &guard;
  if (setup & 16) {
    auto local = loft::cache::Manifest::FromDigests(world.digests);
    o.local_manifest = std::make_shared<const loft::cache::Manifest>(std::move(*local));
  }
  o.on_view = [](const v1::MembershipView&) {};
  loft::agent::AgentService svc(o, world.cache.get(), &*metrics);

  for (int ops = 0; ops < kMaxOps && !in.empty(); ++ops) {
    const uint8_t op = in.U8() % kNumOps;
    switch (op) {
      case kOpFetch:
      case kOpRawPeer: Fetch(in, svc, m, op == kOpRawPeer); break;
      case kOpReport: {
        if (m.running.empty()) break;
        const size_t k = in.U8() % m.running.size();
        const v1::Partition p = m.running[k];
        m.running.erase(m.running.begin() + static_cast<std::ptrdiff_t>(k));
        v1::Envelope report;
        switch (in.Below(3)) {
          case 0: report.mutable_partition_done()->set_partition_id(p.id()); break;
          case 1: report.mutable_partition_failed()->set_partition_id(p.id()); break;
          default:
            report.mutable_peer_report()->set_accused(1);
            m.running.push_back(p);
            break;
        }
        const auto credit = svc.ReportSent(report);
        if (credit.has_value() != !report.has_peer_report()) Fail("a credit for the wrong report");
        if (svc.in_flight() < 0) Fail("in flight below zero");
        break;
      }
      default: {
        const std::string frame = op == kOpRawScheduler ? in.Bytes() : SchedulerFrame(op, in, m);
        const size_t extra = in.Below(16) == 0 ? 1 : 0;
        m.Saw(frame);
        const auto fx = svc.HandleScheduler(frame, extra);
        if (loft::fuzz::Tracing())
          std::fprintf(stderr, "scheduler op %d: run %zu, replies %zu, registered %d, node %d\n", op,
                       fx.run.size(), fx.to_scheduler.size(), fx.registered, svc.node());
        if (fx.registered) m.registered_node = svc.node();
        CheckEffects(fx, svc, m);
        break;
      }
    }
  }
  return 0;
}
