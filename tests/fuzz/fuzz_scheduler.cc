// Fuzz target: the scheduler's message handling after decode. The input is
// a program (fuzz_input.h) driven into the real SchedulerService, with its
// RocksDB journal in a temp dir, a fake transport and a manual clock: no
// sockets. Several fake agents register, beat, grant credit, ack, fail and
// report on the partitions the service actually sent them (with fields
// perturbed), raw envelopes go through loft::Decode first, time advances
// with Tick, and the service is restarted from its journal (snapshot +
// replay + sessions.json).
//
// Program: a setup byte pair, then operations until the input ends (at
// most kMaxOps), each an opcode byte (kOp* below) and its arguments.
//
// Properties beyond "no crash, no sanitizer report":
//  - Tick returns OK (non-OK means a journal or driver failure, which no
//    message may cause: Handle refuses what it cannot apply);
//  - the ledger never counts a duplicate or a lost sample;
//  - every assignment goes to its partition's worker, with one in-range
//    source per in-range sample id, within the node's credit bound;
//  - the status document parses as JSON;
//  - a restart right after a Tick recovers exactly the state the service
//    had (SchedulerState::Digest), as the journal contract promises.
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/codec.h"
#include "core/metrics.h"
#include "fuzz_input.h"
#include "scheduler/flow_control.h"
#include "server/service.h"

// Speed, not semantics: RocksDB preallocates each write-ahead log (about
// 70 MB, 1.1 x its write buffer) and the service fsyncs its job id and
// sessions files; on tmpfs the preallocation zeroes pages, on a disk the
// fsyncs wait. Restarts here are of the process's state, not of the
// machine (what was written is in the page cache either way), so in this
// process preallocation and fsync do nothing (30 inputs of a fuzzing run:
// 21 s -> 15 s).
extern "C" int fallocate(int, int, off_t, off_t) {
  return 0;
}
extern "C" int fallocate64(int, int, off_t, off_t) {
  return 0;
}
extern "C" int fsync(int) {
  return 0;
}
extern "C" int fdatasync(int) {
  return 0;
}

namespace {

namespace fs = std::filesystem;
using loft::fuzz::Fail;
using loft::fuzz::FuzzInput;

enum Op : uint8_t {
  kOpRegister = 0,
  kOpHeartbeat,
  kOpCredit,
  kOpDone,
  kOpFailed,
  kOpPeerReport,
  kOpStatus,
  kOpRaw,
  kOpTick,
  kOpRestart,
  kNumOps
};
constexpr int kMaxOps = 400;
constexpr int kSamples = 48;

const bool kQuiet = [] {
  google::protobuf::SetLogHandler(nullptr);
  spdlog::set_level(spdlog::level::off);
  return true;
}();

// A directory for this process's journals: tmpfs when there is one.
fs::path ScratchDir() {
  const fs::path base = loft::fuzz::ScratchBase();
  return base / ("loft-fuzz-scheduler-" + std::to_string(::getpid()));
}

struct Transport : loft::server::SchedulerTransport {
  std::vector<loft::v1::Partition> assignments;  // every one sent, in order (kept across restarts)
  std::map<int32_t, int64_t> assigned;           // per node since its last registration
  int nodes = 0;
  loft::Status Send(int32_t node, const loft::v1::Envelope& env) override {
    if (node < 0 || node >= nodes) Fail("send to node " + std::to_string(node));
    if (env.has_assignment()) {
      const auto& p = env.assignment().partition();
      if (p.worker() != node) Fail("assignment of worker " + std::to_string(p.worker()) + " sent elsewhere");
      if (p.sources_size() != p.sample_ids_size()) Fail("assignment sources do not match its samples");
      for (uint64_t id : p.sample_ids())
        if (id >= static_cast<uint64_t>(kSamples)) Fail("assignment of sample " + std::to_string(id));
      for (int32_t s : p.sources())
        if (s < 0 || s >= nodes) Fail("assignment source " + std::to_string(s));
      assignments.push_back(p);
    }
    if (env.has_serve_grant() && env.serve_grant().requester() == node) Fail("serve grant to its requester");
    return loft::OkStatus();
  }
};

struct Setup {
  int nodes = 2;
  std::string spec_yaml;
  loft::ClusterSpec spec;
  loft::server::SchedulerOptions opts;
};

Setup MakeSetup(FuzzInput& in, const fs::path& dir) {
  Setup s;
  const uint8_t a = in.U8();
  const uint8_t b = in.U8();
  s.nodes = 2 + (a & 1);
  const bool training = (a & 2) != 0;
  s.spec_yaml = "dataset: {name: fashion-mnist, samples: " + std::to_string(kSamples) +
                ", sample_bytes: 784}\n"
                "placement: {kind: shards, replication: " +
                std::string((b & 1) ? "2" : "1") +
                "}\n"
                "training: {global_batch: 12, min_batch: 2, iterations: 6, seed: 7" +
                (training ? ", model: softmax, aggregation: trimmed_mean" : "") +
                ((b & 2) && s.nodes >= 3 ? ", byzantine_tolerance: 1" : "") +
                ((b & 4) ? ", overlap: false" : "") +
                "}\n"
                "nodes:\n  - name: edge\n    count: " +
                std::to_string(s.nodes) + "\nscheduler: {handoff_ms: 0}\n";
  auto spec = loft::ParseClusterSpec(s.spec_yaml, "fuzz");
  if (!spec.ok()) Fail("the target's own spec: " + spec.status().ToString());
  s.spec = *spec;
  static const char* kPolicies[] = {"loft", "uniform", "loft-epoch", "pid"};
  s.opts.policy = kPolicies[(a >> 2) % 4];
  s.opts.plan_ahead = static_cast<int>((a >> 4) % 4) - 1;
  s.opts.journal_snapshot_every = (a >> 6) == 0 ? 0 : (a >> 6) == 1 ? 3 : 20;
  s.opts.min_workers = (b >> 3) % (s.nodes + 1);
  s.opts.start_when_ready = (b & 0x20) != 0;
  s.opts.start_peers_wait_ms = (b & 0x40) ? 50 : 0;
  s.opts.epoch_overlap = (b & 0x80) == 0;
  s.opts.journal_dir = (dir / "journal").string();
  s.opts.insecure = true;
  s.opts.journal_sync = false;
  s.opts.heartbeat_timeout_ms = 1000;
  s.opts.partition_timeout_ms = 5000;
  return s;
}

// A running service and what it needs to live.
struct Instance {
  std::unique_ptr<loft::metrics::Registry> registry;
  std::unique_ptr<loft::server::SchedulerService> service;
  // The service before the registry it counts in.
  void Stop() {
    service.reset();
    registry.reset();
  }
};

Instance Start(const Setup& s, Transport* t, double now) {
  Instance i;
  i.registry = std::make_unique<loft::metrics::Registry>();
  auto svc = loft::server::SchedulerService::Create(s.opts, s.spec, s.spec_yaml, t, i.registry.get(), now);
  if (!svc.ok()) Fail("service did not start: " + svc.status().ToString());
  i.service = std::move(*svc);
  return i;
}

// A node index: usually a spec node, sometimes out of range.
int32_t Node(FuzzInput& in, int nodes) {
  const int v = in.Below(nodes + 2);
  return v < nodes ? v : (v == nodes ? -1 : nodes);
}

loft::server::Sender PickSender(FuzzInput& in, const Setup& s, int32_t node) {
  loft::server::Sender p;
  switch (in.Below(8)) {
    case 0:
      p.authenticated = true;
      p.name = node >= 0 && node < s.nodes ? s.spec.nodes[node].name : "edge-9";
      break;
    case 1:
      p.authenticated = true;
      p.name = in.Bool() ? "loftctl" : s.spec.nodes[0].name;
      break;
    default: break;  // insecure: node fields are trusted
  }
  return p;
}

const loft::v1::Partition* PickAssignment(FuzzInput& in, const Transport& t) {
  if (t.assignments.empty()) return nullptr;
  // Mostly recent ones: they are the ones still open.
  const size_t back = in.U8() % std::min<size_t>(t.assignments.size(), 16);
  return &t.assignments[t.assignments.size() - 1 - back];
}

void FillTimings(FuzzInput& in, int nodes, const std::vector<const loft::v1::Partition*>& recent,
                 loft::v1::PartitionTimings* t) {
  t->set_local_read_ms(in.Double());
  t->set_remote_read_ms(in.Double());
  t->set_compute_ms(in.Double());
  t->set_local_samples(in.Below(16));
  t->set_remote_samples(in.Below(16));
  t->set_local_bytes(static_cast<int64_t>(in.U16()) * 100);
  if (in.Bool()) (*t->mutable_remote_read_ms_by_peer())[Node(in, nodes)] = in.Double();
  if (!in.Bool()) return;
  auto* tr = t->mutable_training();
  tr->set_loss(in.Double());
  tr->set_param_hash(in.U8());
  tr->set_ring_members(in.Below(4));
  const int applied = in.Below(4);
  for (int k = 0; k < applied && !recent.empty(); ++k) {
    const auto* p = recent[in.U8() % recent.size()];
    tr->add_applied_partitions(in.Below(8) == 0 ? p->id() + 1 : p->id());
    tr->add_applied_nodes(in.Below(8) == 0 ? Node(in, nodes) : p->worker());
  }
  if (in.Below(4) == 0) {
    auto* o = tr->add_ring_offences();
    o->set_node(Node(in, nodes));
    o->set_reason(in.Pick<const char*>({"malformed_hello", "out_of_window", "malformed_chunk", "x"}));
    o->set_count(in.Below(20));
  }
}

std::vector<const loft::v1::Partition*> Recent(const Transport& t) {
  std::vector<const loft::v1::Partition*> out;
  for (size_t k = t.assignments.size() > 8 ? t.assignments.size() - 8 : 0; k < t.assignments.size(); ++k)
    out.push_back(&t.assignments[k]);
  return out;
}

// One message built from the program; false when the op is not a message.
bool BuildMessage(uint8_t op, FuzzInput& in, const Setup& s, const Transport& t, loft::v1::Envelope* env,
                  int32_t* node) {
  const int n = s.nodes;
  switch (op) {
    case kOpRegister: {
      *node = Node(in, n);
      auto* r = env->mutable_register_request();
      r->set_node_name(*node >= 0 && *node < n ? s.spec.nodes[*node].name : "ghost");
      r->set_credits(in.Pick<int32_t>({1, 2, 3, 4, 0, -1, 1025}));
      r->set_incarnation(in.Below(3));
      const int ep = in.Below(6);
      r->set_peer_endpoint(ep == 4   ? ""
                           : ep == 5 ? "tcp://*:1"
                                     : "tcp://127.0.0.1:" + std::to_string(7000 + *node));
      if (s.spec.training.model != "none" || in.Bool())
        r->set_ring_endpoint(in.Below(6) == 0 ? "ipc://x"
                                              : "tcp://127.0.0.1:" + std::to_string(8000 + *node));
      r->mutable_cache()->set_samples(in.U8());
      if (in.Below(8) == 0) r->set_manifest_root(in.Bytes());
      return true;
    }
    case kOpHeartbeat: {
      *node = Node(in, n);
      auto* h = env->mutable_heartbeat();
      h->set_node(*node);
      h->set_view(in.U8());
      h->set_credits(in.Pick<int32_t>({0, 0, 0, 1, -1, 2000}));
      h->set_peers_ready(in.Below(n + 1));
      return true;
    }
    case kOpCredit: {
      *node = Node(in, n);
      env->mutable_credit_grant()->set_node(*node);
      env->mutable_credit_grant()->set_credits(in.Pick<int32_t>({1, 1, 2, 0, -3, 1024, 1025}));
      return true;
    }
    case kOpDone: {
      const auto* p = PickAssignment(in, t);
      auto* d = env->mutable_partition_done();
      d->set_partition_id(p ? p->id() : in.U8());
      d->set_attempt((p ? p->attempt() : 0) + in.Pick<int32_t>({0, 0, 0, 1, -1}));
      *node = in.Below(6) == 0 || !p ? Node(in, n) : p->worker();
      d->set_node(*node);
      FillTimings(in, n, Recent(t), d->mutable_timings());
      return true;
    }
    case kOpFailed: {
      const auto* p = PickAssignment(in, t);
      auto* f = env->mutable_partition_failed();
      f->set_partition_id(p ? p->id() : in.U8());
      f->set_attempt((p ? p->attempt() : 0) + in.Pick<int32_t>({0, 0, 0, 1, -1}));
      *node = in.Below(6) == 0 || !p ? Node(in, n) : p->worker();
      f->set_node(*node);
      f->set_reason(in.Bytes());
      const int bad = in.Below(4);
      for (int k = 0; k < bad; ++k) {
        const bool own = p && p->sample_ids_size() > 0 && in.Below(4) != 0;
        f->add_bad_samples(own ? p->sample_ids(in.U8() % p->sample_ids_size()) : in.U8());
      }
      if (in.Below(4) == 0) {
        f->add_poisoned_by(Node(in, n));
        f->add_poisoned_samples(in.Pick<int64_t>({1, 3, 0, -1}));
        if (in.Below(4) == 0) f->add_poisoned_by(Node(in, n));  // parallel lists of different lengths
      }
      return true;
    }
    case kOpPeerReport: {
      *node = Node(in, n);
      auto* r = env->mutable_peer_report();
      r->set_node(*node);
      r->set_accused(Node(in, n));
      r->set_reason(in.Pick<const char*>({"silent", "malformed_hello", "chunk_mismatch", ""}));
      r->set_count(in.Below(20));
      return true;
    }
    case kOpStatus:
      *node = -1;
      env->mutable_status_request()->set_include_rows(in.Bool());
      return true;
    case kOpRaw: {
      *node = -1;
      auto decoded = loft::Decode(in.Bytes());
      if (!decoded.ok()) return false;
      *env = std::move(*decoded);
      return true;
    }
    default: return false;
  }
}

void CheckState(const loft::server::SchedulerService& svc, const Transport& t, int nodes) {
  const auto& c = svc.driver().state().ledger().counters();
  if (c.duplicates != 0) Fail("ledger counted " + std::to_string(c.duplicates) + " duplicate samples");
  if (c.lost != 0) Fail("ledger counted " + std::to_string(c.lost) + " lost samples");
  for (int32_t node = 0; node < nodes; ++node)
    if (svc.max_in_flight(node) > loft::sched::kMaxCredits) Fail("in flight beyond any credit window");
  (void)t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kQuiet;
  FuzzInput in(data, size);
  const fs::path dir = ScratchDir();
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Setup s = MakeSetup(in, dir);
  Transport transport;
  transport.nodes = s.nodes;
  double now = 0;
  Instance inst = Start(s, &transport, now);
  for (int ops = 0; ops < kMaxOps && !in.empty(); ++ops) {
    const uint8_t op = in.U8() % kNumOps;
    if (op == kOpTick || op == kOpRestart) {
      now += in.Pick<double>({0, 1, 5, 50, 400, 1500, 6000});
      loft::Status st = inst.service->Tick(now);
      if (!st.ok()) Fail("Tick: " + st.ToString());
      CheckState(*inst.service, transport, s.nodes);
      if (loft::fuzz::Tracing())
        std::fprintf(stderr, "tick %.0f (assignments %zu)%s\n", now, transport.assignments.size(),
                     op == kOpRestart ? ", restart" : "");
      if (op == kOpTick) continue;
      // A crash right after a tick: everything applied is journaled.
      // Nothing journaled yet (no registration: view 0) is a fresh job to
      // the restarted service, which picks a new random job id by design
      // (SchedulerService::LoadOrCreateJobId); found by this target.
      const bool journaled = inst.service->driver().state().view() > 0;
      const uint64_t digest = inst.service->driver().state().Digest();
      const std::string before =
          loft::fuzz::Tracing() ? inst.service->driver().state().ToJson() : "(LOFT_FUZZ_TRACE=1 prints it)";
      inst.Stop();
      now += 1;
      inst = Start(s, &transport, now);
      if (journaled && inst.service->driver().state().Digest() != digest)
        Fail("restart recovered another state:\nbefore " + before + "\nafter  " +
             inst.service->driver().state().ToJson());
      continue;
    }
    loft::v1::Envelope env;
    int32_t claimed = -1;
    if (!BuildMessage(op, in, s, transport, &env, &claimed)) continue;
    const loft::server::Sender peer = PickSender(in, s, claimed);
    now += in.Below(4);
    loft::v1::Envelope reply;
    int32_t sender = -1;
    loft::Status st = inst.service->Handle(env, peer, now, &reply, &sender);
    if (!st.ok() && st.message().empty()) Fail("a refusal without a message");
    if (loft::fuzz::Tracing())
      std::fprintf(
          stderr, "op %d %s from %d: %s (assignments %zu, view %lld, committed %lld)\n", op,
          std::string(loft::BodyName(env)).c_str(), claimed, st.ToString().c_str(),
          transport.assignments.size(), static_cast<long long>(inst.service->driver().state().view()),
          static_cast<long long>(inst.service->driver().state().ledger().counters().samples_committed));
    if (sender < -1 || sender >= s.nodes) Fail("sender node " + std::to_string(sender));
    if (reply.has_status_reply()) {
      if (!nlohmann::json::accept(reply.status_reply().json())) Fail("status json does not parse");
    }
    CheckState(*inst.service, transport, s.nodes);
  }
  inst.Stop();
  fs::remove_all(dir);
  return 0;
}
