// SchedulerService over a fake transport and a RocksDB journal in a temp
// dir (no sockets): credits, heartbeat expiry + retries, journal recovery,
// authentication and rejection of unexpected messages.
#include "server/service.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "cache/manifest.h"
#include "scheduler/cost_profile.h"
#include "server/status_reply.h"

namespace {
namespace fs = std::filesystem;
using loft::server::SchedulerOptions;
using loft::server::SchedulerService;
using loft::server::Sender;

// Records every send; nodes in `unreachable` get Unavailable.
struct FakeTransport : loft::server::SchedulerTransport {
  std::vector<std::pair<int32_t, loft::v1::Envelope>> sent;
  std::set<int32_t> unreachable;
  // Assignments of these (node, iteration) pairs are refused (a send that
  // did not happen, e.g. cut short by a crash).
  std::set<std::pair<int32_t, int64_t>> refuse;
  loft::Status Send(int32_t node, const loft::v1::Envelope& env) override {
    if (unreachable.count(node)) return loft::Unavailable("unreachable");
    if (env.has_assignment() && refuse.count({node, env.assignment().partition().iteration()}))
      return loft::Unavailable("refused");
    sent.emplace_back(node, env);
    return loft::OkStatus();
  }
  std::vector<loft::v1::Partition> Assignments(int32_t node = -1) const {
    std::vector<loft::v1::Partition> out;
    for (auto& [n, e] : sent) {
      if (e.has_assignment() && (node < 0 || n == node)) out.push_back(e.assignment().partition());
    }
    return out;
  }
};

struct Fixture {
  fs::path dir;
  SchedulerOptions opts;
  loft::ClusterSpec spec;
  FakeTransport transport;
  loft::metrics::Registry registry;

  explicit Fixture(int nodes = 2) {
    dir =
        fs::temp_directory_path() / ("loft-server-test-" + std::to_string(reinterpret_cast<uintptr_t>(this)) +
                                     "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "spec.yaml")
        << "dataset: {name: fashion-mnist, samples: 256, sample_bytes: 784}\n"
           "placement: {kind: shards, replication: 2}\n"
           "training: {global_batch: 64, min_batch: 8, iterations: 12, seed: 7}\n"
           "nodes:\n  - name: edge\n    count: "
        << nodes
        << "\n"
           // No control path: plan_ahead auto is 1 with overlap (the
           // default), as the tests of the gate's depth-1 rules expect.
           "scheduler: {handoff_ms: 0}\n";
    opts.cluster_spec = (dir / "spec.yaml").string();
    opts.journal_dir = (dir / "journal").string();
    opts.insecure = true;
    opts.journal_sync = false;
    opts.heartbeat_timeout_ms = 1000;
    opts.partition_timeout_ms = 100000;
    auto s = loft::LoadClusterSpecFile(opts.cluster_spec);
    REQUIRE(s.ok());
    spec = *s;
  }
  ~Fixture() { fs::remove_all(dir); }

  std::unique_ptr<SchedulerService> Make(double now = 0) {
    std::ifstream in(opts.cluster_spec);
    std::stringstream text;
    text << in.rdbuf();
    auto s = SchedulerService::Create(opts, spec, text.str(), &transport, &registry, now);
    REQUIRE(s.ok());
    return std::move(*s);
  }
};

loft::Status Send(SchedulerService& s, const loft::v1::Envelope& e, double now,
                  loft::v1::Envelope* reply = nullptr, Sender peer = {}) {
  loft::v1::Envelope r;
  int32_t sender = -1;
  return s.Handle(e, peer, now, reply ? reply : &r, &sender);
}

loft::v1::Envelope Register(const std::string& name, int credits) {
  loft::v1::Envelope e;
  auto* r = e.mutable_register_request();
  r->set_node_name(name);
  r->set_peer_endpoint("tcp://127.0.0.1:1");
  r->set_credits(credits);
  return e;
}

loft::v1::Envelope Done(const loft::v1::Partition& p) {
  loft::v1::Envelope e;
  auto* d = e.mutable_partition_done();
  d->set_partition_id(p.id());
  d->set_attempt(p.attempt());
  d->set_node(p.worker());
  d->mutable_timings()->set_local_bytes(100);
  return e;
}

loft::v1::Envelope Credit(int32_t node, int c = 1) {
  loft::v1::Envelope e;
  e.mutable_credit_grant()->set_node(node);
  e.mutable_credit_grant()->set_credits(c);
  return e;
}

loft::v1::Envelope Beat(int32_t node, int32_t peers_ready = 0) {
  loft::v1::Envelope e;
  e.mutable_heartbeat()->set_node(node);
  e.mutable_heartbeat()->set_peers_ready(peers_ready);
  return e;
}

nlohmann::json Status(const SchedulerService& s, double now) {
  return nlohmann::json::parse(s.StatusJson(now));
}

// Acks every assignment not yet acked, granting a credit back for each.
void AckAll(SchedulerService& s, FakeTransport& t, std::set<uint64_t>& acked, double now,
            int32_t only_node = -1) {
  for (const auto& p : t.Assignments(only_node)) {
    if (!acked.insert(p.id()).second) continue;
    REQUIRE(Send(s, Done(p), now).ok());
    REQUIRE(Send(s, Credit(p.worker()), now).ok());
  }
}

// Both nodes registered with two credits, then one tick at t = 1.
std::unique_ptr<SchedulerService> StartBoth(Fixture& f) {
  auto s = f.Make();
  REQUIRE(Send(*s, Register("edge-0", 2), 0).ok());
  REQUIRE(Send(*s, Register("edge-1", 2), 0).ok());
  REQUIRE(s->Tick(1).ok());
  return s;
}

}  // namespace

TEST_CASE("the service sends partitions only while the agent has credit") {
  Fixture f;
  auto s = f.Make();
  REQUIRE(Send(*s, Register("edge-0", 1), 0).ok());
  REQUIRE(s->Tick(1).ok());
  CHECK(f.transport.Assignments().empty());  // waits for every node (min_workers = 0)
  REQUIRE(Send(*s, Register("edge-1", 1), 2).ok());
  REQUIRE(s->Tick(3).ok());
  auto first = f.transport.Assignments();
  REQUIRE(first.size() == 2);
  // Acks without credit: the next iteration is planned but not sent.
  for (const auto& p : first) REQUIRE(Send(*s, Done(p), 4).ok());
  REQUIRE(s->Tick(5).ok());
  CHECK(f.transport.Assignments().size() == 2);
  auto st = Status(*s, 5);
  CHECK(st["iteration"] == 1);
  CHECK(st["workers"][0]["queued"] == 1);
  CHECK(st["workers"][0]["credits"] == 0);
  // One credit from edge-0: exactly one more partition, to edge-0.
  REQUIRE(Send(*s, Credit(0), 6).ok());
  REQUIRE(s->Tick(7).ok());
  CHECK(f.transport.Assignments(0).size() == 2);
  CHECK(f.transport.Assignments(1).size() == 1);
  CHECK(s->max_in_flight(0) == 1);
  CHECK(s->max_in_flight(1) == 1);
}

TEST_CASE("start_when_ready: the job starts once every worker was heard from after its registration") {
  Fixture f;
  f.opts.start_when_ready = true;
  auto s = f.Make();
  REQUIRE(Send(*s, Register("edge-0", 1), 0).ok());
  REQUIRE(Send(*s, Register("edge-1", 1), 0).ok());
  REQUIRE(s->Tick(1).ok());
  CHECK(f.transport.Assignments().empty());  // both live, neither confirmed its registration
  REQUIRE(Send(*s, Beat(0), 2).ok());
  REQUIRE(s->Tick(3).ok());
  CHECK(f.transport.Assignments().empty());  // edge-1 still reading its reply
  REQUIRE(Send(*s, Beat(1), 4).ok());
  REQUIRE(s->Tick(5).ok());
  CHECK(f.transport.Assignments().size() == 2);
}

TEST_CASE("start_peers_wait_ms: the job also waits for every worker's peer connections, at most that long") {
  // Both workers registered and heard from at t = 2, with these peers_ready counts.
  auto registered = [](Fixture& fx, int32_t ready0, int32_t ready1) {
    fx.opts.start_when_ready = true;
    fx.opts.start_peers_wait_ms = 500;
    auto svc = fx.Make();
    REQUIRE(Send(*svc, Register("edge-0", 1), 0).ok());
    REQUIRE(Send(*svc, Register("edge-1", 1), 0).ok());
    REQUIRE(Send(*svc, Beat(0, ready0), 2).ok());
    REQUIRE(Send(*svc, Beat(1, ready1), 2).ok());
    REQUIRE(svc->Tick(3).ok());
    return svc;
  };
  Fixture f;
  auto s = registered(f, /*ready0=*/1, /*ready1=*/0);
  CHECK(f.transport.Assignments().empty());  // edge-1's connection to edge-0 not handshaken
  REQUIRE(s->Tick(200).ok());
  CHECK(f.transport.Assignments().empty());
  REQUIRE(Send(*s, Beat(1, /*peers_ready=*/1), 250).ok());
  REQUIRE(s->Tick(251).ok());
  CHECK(f.transport.Assignments().size() == 2);
  // Agents that never report (peers_ready 0): the job starts once the wait is over.
  Fixture g;
  auto t = registered(g, 0, 0);
  REQUIRE(t->Tick(400).ok());
  CHECK(g.transport.Assignments().empty());
  REQUIRE(t->Tick(504).ok());
  CHECK(g.transport.Assignments().size() == 2);
}

TEST_CASE("a node that misses heartbeats is dropped, its partition retried as a child") {
  Fixture f;
  f.opts.plan_ahead = 0;  // BSP: one iteration open at a time
  auto s = StartBoth(f);
  REQUIRE(f.transport.Assignments().size() == 2);
  auto p0 = f.transport.Assignments(0).at(0);
  REQUIRE(Send(*s, Done(p0), 10).ok());
  REQUIRE(Send(*s, Credit(0), 10).ok());
  REQUIRE(Send(*s, Beat(0), 900).ok());
  REQUIRE(s->Tick(1500).ok());  // edge-1 silent since t=0 > 1000 ms
  auto st = Status(*s, 1500);
  CHECK(st["live_nodes"] == nlohmann::json::array({0}));
  CHECK(st["ledger"]["failed"] == 1);
  // A view without edge-1 went to edge-0.
  bool saw_view = false;
  for (auto& [n, e] : f.transport.sent) {
    if (n == 0 && e.has_view() && e.view().members_size() == 1) saw_view = true;
  }
  CHECK(saw_view);
  // edge-0 gets the next iteration, containing the failed samples as a child partition.
  std::set<uint64_t> acked = {p0.id()};
  bool saw_child = false;
  for (int round = 0; round < 30 && !s->finished(); ++round) {
    double now = 1600 + round * 10;
    REQUIRE(Send(*s, Beat(0), now).ok());
    REQUIRE(s->Tick(now).ok());
    for (const auto& p : f.transport.Assignments(0)) saw_child = saw_child || p.attempt() > 0;
    AckAll(*s, f.transport, acked, now, /*only_node=*/0);  // edge-1 is dead
  }
  CHECK(saw_child);
  st = Status(*s, 2000);
  CHECK(st["ledger"]["retries"].get<int64_t>() >= 1);
  CHECK(st["ledger"]["duplicates"] == 0);
  CHECK(st["ledger"]["lost"] == 0);
}

// Three nodes, iteration 0. edge-0 and edge-1 ack with training reports
// whose applied_partitions are the iteration's partitions of the nodes in
// applied0 / applied1 (named by their own worker; 10 + n: node n's,
// named by edge-0); edge-2 goes silent and is dropped; edge-0 and
// edge-1 run the job to its end.
nlohmann::json DeadAfterRing(const std::vector<int>& applied0, const std::vector<int>& applied1,
                             std::vector<loft::v1::Partition>* sent) {
  Fixture f(3);
  f.opts.plan_ahead = 0;
  auto s = f.Make();
  for (const char* n : {"edge-0", "edge-1", "edge-2"}) REQUIRE(Send(*s, Register(n, 2), 0).ok());
  REQUIRE(s->Tick(1).ok());
  REQUIRE(f.transport.Assignments().size() == 3);
  std::set<uint64_t> acked;
  for (int node : {0, 1}) {
    auto p = f.transport.Assignments(node).at(0);
    auto done = Done(p);
    auto* tr = done.mutable_partition_done()->mutable_timings()->mutable_training();
    for (int a : node == 0 ? applied0 : applied1) {
      // a >= 10: node a - 10's partition, named by edge-0 as its own.
      tr->add_applied_partitions(f.transport.Assignments(a % 10).at(0).id());
      tr->add_applied_nodes(a >= 10 ? 0 : a);
    }
    REQUIRE(Send(*s, done, 10).ok());
    REQUIRE(Send(*s, Credit(node), 10).ok());
    REQUIRE(Send(*s, Beat(node), 900).ok());
    acked.insert(p.id());
  }
  REQUIRE(s->Tick(1500).ok());  // edge-2 silent since t=0 > 1000 ms: dropped
  auto st = Status(*s, 1500);
  CHECK(st["live_nodes"] == nlohmann::json::array({0, 1}));
  for (int round = 0; round < 60 && !s->finished(); ++round) {
    const double now = 1600 + round * 10;
    for (int node : {0, 1}) REQUIRE(Send(*s, Beat(node), now).ok());
    REQUIRE(s->Tick(now).ok());
    for (int node : {0, 1}) AckAll(*s, f.transport, acked, now, node);
  }
  REQUIRE(s->finished());
  *sent = f.transport.Assignments();
  return Status(*s, 3000);
}

TEST_CASE("a dead worker's partition that the ring applied is committed, not retried") {
  std::vector<loft::v1::Partition> sent;
  auto st = DeadAfterRing({0, 1, 2}, {0, 1, 2}, &sent);
  CHECK(st["committed_by_ring"] == 1);
  CHECK(st["ledger"]["failed"] == 0);
  CHECK(st["ledger"]["retries"] == 0);
  for (const auto& p : sent) CHECK(p.attempt() == 0);  // no child partition: nothing trained twice
  CHECK(st["ledger"]["duplicates"] == 0);
  CHECK(st["ledger"]["lost"] == 0);
  CHECK(st["ledger"]["epochs_completed"] == 3);
}

TEST_CASE("a dead worker's partition the ring did not apply is retried") {
  std::vector<loft::v1::Partition> sent;
  auto st = DeadAfterRing({0, 1}, {0, 1}, &sent);  // edge-2's partition not in the applied update
  CHECK(st["committed_by_ring"] == 0);
  CHECK(st["ledger"]["failed"] == 1);
  CHECK(st["ledger"]["retries"].get<int64_t>() >= 1);
  CHECK(st["ledger"]["duplicates"] == 0);
  CHECK(st["ledger"]["lost"] == 0);
}

TEST_CASE("one report saying a partition was applied is not enough to commit it") {
  std::vector<loft::v1::Partition> sent;
  // edge-0 (say, Byzantine) claims edge-2's partition was applied, listed
  // three times; edge-1 does not: 1 of 3 workers.
  auto st = DeadAfterRing({0, 1, 2, 2, 2}, {0, 1}, &sent);
  CHECK(st["committed_by_ring"] == 0);
  CHECK(st["ledger"]["failed"] == 1);
  CHECK(st["ledger"]["retries"].get<int64_t>() >= 1);
}

TEST_CASE("votes for a partition named by another member than its worker do not count") {
  std::vector<loft::v1::Partition> sent;
  // Both reports list edge-2's partition, but as edge-0's (a member
  // claiming another's partition id in the ring exchange).
  auto st = DeadAfterRing({0, 1, 12}, {0, 1, 12}, &sent);
  CHECK(st["committed_by_ring"] == 0);
  CHECK(st["ledger"]["failed"] == 1);
  CHECK(st["ledger"]["retries"].get<int64_t>() >= 1);
}

// Three nodes registered, iteration 0 planned (BSP); each node's partition.
std::vector<loft::v1::Partition> StartThree(Fixture& f, std::unique_ptr<SchedulerService>* s) {
  f.opts.plan_ahead = 0;
  *s = f.Make();
  for (const char* n : {"edge-0", "edge-1", "edge-2"}) REQUIRE(Send(**s, Register(n, 2), 0).ok());
  REQUIRE((*s)->Tick(1).ok());
  std::vector<loft::v1::Partition> p;
  for (int node : {0, 1, 2}) p.push_back(f.transport.Assignments(node).at(0));
  return p;
}

// `mine`'s ack whose training report lists `applied` as the ring applied
// them, each named by its own worker.
loft::v1::Envelope DoneApplying(const loft::v1::Partition& mine,
                                const std::vector<loft::v1::Partition>& applied) {
  auto done = Done(mine);
  auto* tr = done.mutable_partition_done()->mutable_timings()->mutable_training();
  for (const auto& q : applied) {
    tr->add_applied_partitions(q.id());
    tr->add_applied_nodes(q.worker());
  }
  return done;
}

loft::v1::Envelope RingFailed(const loft::v1::Partition& p) {
  loft::v1::Envelope failed;
  failed.mutable_partition_failed()->set_partition_id(p.id());
  failed.mutable_partition_failed()->set_attempt(p.attempt());
  failed.mutable_partition_failed()->set_node(p.worker());
  failed.mutable_partition_failed()->set_reason("all-reduce of round 0, no newer view");
  return failed;
}

TEST_CASE("a reported failure of a partition the ring applied commits it") {
  Fixture f(3);
  std::unique_ptr<SchedulerService> s;
  auto p = StartThree(f, &s);
  for (int node : {0, 1}) REQUIRE(Send(*s, DoneApplying(p[node], p), 10).ok());
  REQUIRE(Send(*s, RingFailed(p[2]), 11).ok());
  auto st = Status(*s, 12);
  CHECK(st["committed_by_ring"] == 1);
  CHECK(f.registry.Render().find("loft_scheduler_committed_by_ring_total 1\n") != std::string::npos);
  CHECK(st["ledger"]["failed"] == 0);
  CHECK(st["ledger"]["samples_committed"] == 64);
  CHECK(st["workers"][2]["in_flight"] == 0);
  // Iteration 0 closed. Its status entry counts the partitions more than
  // half of the 3 workers, other than the partition's own, listed: only
  // edge-2's (edge-0's and edge-1's were listed by one other worker each).
  REQUIRE(s->Tick(13).ok());
  CHECK(Status(*s, 14)["training"]["iterations"][0]["applied"] == 1);
}

TEST_CASE("applied pairs that are not an open iteration's partitions as named by their worker are dropped") {
  Fixture f(3);
  std::unique_ptr<SchedulerService> s;
  auto p = StartThree(f, &s);
  for (int node : {0, 1}) {
    auto done = DoneApplying(p[node], p);
    auto* tr = done.mutable_partition_done()->mutable_timings()->mutable_training();
    // Junk: an id no partition has, and edge-2's partition named by edge-1.
    tr->add_applied_partitions(987654321);
    tr->add_applied_nodes(2);
    tr->add_applied_partitions(p[2].id());
    tr->add_applied_nodes(1);
    REQUIRE(Send(*s, done, 10).ok());
  }
  REQUIRE(Send(*s, RingFailed(p[2]), 11).ok());
  REQUIRE(s->Tick(13).ok());
  auto st = Status(*s, 14);
  CHECK(st["committed_by_ring"] == 1);
  // Only edge-2's partition as named by edge-2 counts: the junk pairs,
  // listed by two of three workers, would otherwise count too.
  CHECK(st["training"]["iterations"][0]["applied"] == 1);
}

TEST_CASE("an ack the ledger ignores still carries its worker's votes") {
  Fixture f(3);
  std::unique_ptr<SchedulerService> s;
  auto p = StartThree(f, &s);
  REQUIRE(Send(*s, DoneApplying(p[0], p), 10).ok());
  // edge-1 re-registers: its partition fails (one other report: not
  // enough to commit it) and is retried; its own ack for it, arriving
  // late, is ignored by the ledger but still says what the ring applied.
  REQUIRE(Send(*s, Register("edge-1", 2), 11).ok());
  CHECK(Status(*s, 11)["committed_by_ring"] == 0);
  REQUIRE(Send(*s, DoneApplying(p[1], p), 12).ok());
  CHECK(Status(*s, 12)["ledger"]["failed"] == 1);
  REQUIRE(Send(*s, RingFailed(p[2]), 13).ok());
  auto st = Status(*s, 14);
  CHECK(st["committed_by_ring"] == 1);  // edge-2's, on edge-0's and edge-1's word
  CHECK(st["ledger"]["failed"] == 1);   // only edge-1's
  CHECK(st["ledger"]["duplicates"] == 0);
}

namespace {
void StreamPlannedAhead(bool epoch_overlap) {
  INFO("epoch_overlap " << epoch_overlap);
  Fixture f;  // the spec's training.overlap defaults to true: plan_ahead auto = 1
  f.opts.epoch_overlap = epoch_overlap;
  auto s = StartBoth(f);
  // Iterations 0 and 1 went out in one tick (two credits per agent).
  auto sent = f.transport.Assignments();
  REQUIRE(sent.size() == 4);
  std::map<int64_t, int> per_iteration;
  for (const auto& p : sent) ++per_iteration[p.iteration()];
  CHECK(per_iteration == std::map<int64_t, int>{{0, 2}, {1, 2}});
  // Each agent got iteration 0 before iteration 1 (a trainer's round order).
  for (int32_t node : {0, 1}) {
    auto mine = f.transport.Assignments(node);
    REQUIRE(mine.size() == 2);
    CHECK(mine[0].iteration() == 0);
    CHECK(mine[1].iteration() == 1);
  }
  auto st = Status(*s, 1);
  CHECK(st["plan_ahead"] == 1);
  CHECK(st["planned_ahead"] == 1);
  // Nothing acked: no third iteration, even with credit.
  REQUIRE(Send(*s, Credit(0), 2).ok());
  REQUIRE(Send(*s, Credit(1), 2).ok());
  REQUIRE(s->Tick(3).ok());
  CHECK(f.transport.Assignments().size() == 4);
  // Iteration 0 done (with credits back): iteration 2 is planned while 1 runs.
  std::set<uint64_t> acked;
  for (const auto& p : sent) {
    if (p.iteration() != 0) continue;
    acked.insert(p.id());
    REQUIRE(Send(*s, Done(p), 4).ok());
  }
  REQUIRE(s->Tick(5).ok());
  REQUIRE(f.transport.Assignments().size() == 6);
  CHECK(f.transport.Assignments().back().iteration() == 2);
  CHECK(s->max_in_flight(0) == 2);
  CHECK(s->max_in_flight(1) == 2);
  // Run to the end, acking one iteration at a time (the oldest running),
  // as BSP workers do: every sample once per epoch.
  for (int round = 0; round < 100 && !s->finished(); ++round) {
    const double now = 10 + round;
    int64_t oldest = INT64_MAX;
    for (const auto& p : f.transport.Assignments()) {
      if (!acked.count(p.id())) oldest = std::min(oldest, p.iteration());
    }
    for (const auto& p : f.transport.Assignments()) {
      if (p.iteration() != oldest || !acked.insert(p.id()).second) continue;
      REQUIRE(Send(*s, Done(p), now).ok());
      REQUIRE(Send(*s, Credit(p.worker()), now).ok());
    }
    REQUIRE(s->Tick(now).ok());
  }
  REQUIRE(s->finished());
  st = Status(*s, 200);
  CHECK(st["iteration"] == 11);
  // All but iteration 0: each epoch's first iteration (4 and 8) is
  // planned from the next epoch while the last one's partitions run (two
  // epochs open). With epoch_overlap: false those two wait for the pool,
  // empty until the epoch's last iteration is done.
  const int ahead = epoch_overlap ? 11 : 9;
  CHECK(st["planned_ahead"] == ahead);
  CHECK(f.registry.Render().find("loft_scheduler_planned_ahead_total " + std::to_string(ahead) + "\n") !=
        std::string::npos);
  CHECK(st["ledger"]["duplicates"] == 0);
  CHECK(st["ledger"]["lost"] == 0);
  CHECK(st["ledger"]["epochs_completed"] == 3);  // 12 iterations x 64 of 256 samples
  for (int node : {0, 1}) {
    INFO("node " << node);
    CHECK(s->max_in_flight(node) == 2);
    CHECK(st["workers"][node]["in_flight"] == 0);
    CHECK(st["workers"][node]["partitions_done"] == 12);
  }
  CHECK(s->RunSummary(false).iterations_completed() == 12);
}
}  // namespace

TEST_CASE("planning ahead streams iteration t+1 while t runs, with at most two iterations open") {
  StreamPlannedAhead(true);
  StreamPlannedAhead(false);
}

TEST_CASE("no iteration is planned, and the job does not finish, while an older one is open") {
  Fixture f;
  auto s = StartBoth(f);  // iterations 0 and 1 out
  auto sent = f.transport.Assignments();
  REQUIRE(sent.size() == 4);
  // edge-0's ack of iteration 0 is lost; everything of iteration 1 arrives.
  for (const auto& p : sent) {
    if (p.iteration() == 0 && p.worker() == 0) continue;
    REQUIRE(Send(*s, Done(p), 5).ok());
    REQUIRE(Send(*s, Credit(p.worker()), 5).ok());
  }
  for (int t = 6; t < 20; ++t) REQUIRE(s->Tick(t).ok());
  CHECK(f.transport.Assignments().size() == 4);  // iteration 2 waits for iteration 0
  CHECK(Status(*s, 20)["ledger"]["in_flight"] == 1);
}

TEST_CASE("after a restart a node gets no later iteration before its unacknowledged earlier one") {
  Fixture f;
  std::vector<loft::v1::Partition> before;
  {
    auto s = f.Make();
    f.transport.refuse = {{1, 1}};  // edge-1's iteration-1 assignment never went out
    REQUIRE(Send(*s, Register("edge-0", 2), 0).ok());
    REQUIRE(Send(*s, Register("edge-1", 2), 0).ok());
    REQUIRE(s->Tick(1).ok());
    before = f.transport.Assignments();
    REQUIRE(before.size() == 3);
  }  // crash
  f.transport.refuse.clear();
  f.transport.sent.clear();
  auto s = f.Make(100);
  for (int t = 101; t < 110; ++t) {
    REQUIRE(Send(*s, Beat(1), t).ok());
    REQUIRE(s->Tick(t).ok());
  }
  // edge-1's iteration 0 was sent before the crash and is not acked: its
  // assignment may have been lost, so iteration 1 waits.
  CHECK(f.transport.Assignments(1).empty());
  for (const auto& p : before) {
    if (p.worker() == 1) REQUIRE(Send(*s, Done(p), 110).ok());
  }
  REQUIRE(s->Tick(111).ok());
  auto now_sent = f.transport.Assignments(1);
  REQUIRE(now_sent.size() == 1);
  CHECK(now_sent[0].iteration() == 1);
}

TEST_CASE("planning ahead waits for a complete iteration when a live node has no partition in it") {
  Fixture f;
  f.opts.min_workers = 1;
  auto s = f.Make();
  REQUIRE(Send(*s, Register("edge-0", 2), 0).ok());
  REQUIRE(s->Tick(1).ok());
  // edge-0 alone: iteration 0, and iteration 1 ahead.
  REQUIRE(f.transport.Assignments().size() == 2);
  // edge-1 joins (new view): it has no partition of the running iterations,
  // so iteration 2 waits until 1 is complete (BSP), then goes to both.
  REQUIRE(Send(*s, Register("edge-1", 2), 2).ok());
  auto first = f.transport.Assignments();
  REQUIRE(Send(*s, Done(first[0]), 3).ok());
  REQUIRE(Send(*s, Credit(0), 3).ok());
  REQUIRE(s->Tick(4).ok());
  CHECK(f.transport.Assignments().size() == 2);
  REQUIRE(Send(*s, Done(first[1]), 5).ok());
  REQUIRE(Send(*s, Credit(0), 5).ok());
  REQUIRE(s->Tick(6).ok());
  auto now_sent = f.transport.Assignments();
  REQUIRE(now_sent.size() >= 4);
  CHECK(now_sent[2].iteration() == 2);
  CHECK(now_sent[3].iteration() == 2);
  // Both got a partition of iteration 2, so iteration 3 went ahead in the same tick.
  CHECK(now_sent.size() == 6);
}

TEST_CASE("plan_ahead 0 keeps strict BSP") {
  Fixture f;
  f.opts.plan_ahead = 0;
  auto s = StartBoth(f);
  REQUIRE(s->Tick(2).ok());
  CHECK(f.transport.Assignments().size() == 2);
  CHECK(Status(*s, 2)["planned_ahead"] == 0);
  // To the end (3 epochs): one partition in flight per node at a time, and
  // the acks that complete an epoch close their partition too.
  std::set<uint64_t> acked;
  for (int round = 0; round < 100 && !s->finished(); ++round) {
    AckAll(*s, f.transport, acked, 10 + round);
    REQUIRE(s->Tick(10 + round).ok());
  }
  REQUIRE(s->finished());
  auto st = Status(*s, 200);
  CHECK(st["planned_ahead"] == 0);
  CHECK(st["ledger"]["epochs_completed"] == 3);
  for (int node : {0, 1}) {
    INFO("node " << node);
    CHECK(s->max_in_flight(node) == 1);
    CHECK(st["workers"][node]["in_flight"] == 0);
    CHECK(st["workers"][node]["partitions_done"] == 12);
  }
}

TEST_CASE("a restarted service recovers from its journal and finishes with 0 duplicates, 0 lost") {
  Fixture f;
  std::set<uint64_t> acked;
  int64_t committed_before = 0;
  {
    auto s = f.Make();
    REQUIRE(Send(*s, Register("edge-0", 2), 0).ok());
    REQUIRE(Send(*s, Register("edge-1", 2), 0).ok());
    for (int round = 0; round < 5; ++round) {
      REQUIRE(s->Tick(round).ok());
      AckAll(*s, f.transport, acked, round);
    }
    REQUIRE(s->Tick(6).ok());  // flushes the last acks, plans and sends the next iteration
    committed_before = Status(*s, 6)["ledger"]["samples_committed"];
    REQUIRE(committed_before > 0);
  }  // "crash": the in-flight iteration's partitions were sent, not acked
  auto s = f.Make(100);
  auto st = Status(*s, 100);
  CHECK(st["recovered"] == true);
  CHECK(st["ledger"]["samples_committed"] == committed_before);
  // Agents keep beating and acking what they had; the job finishes.
  for (int round = 0; round < 60 && !s->finished(); ++round) {
    double now = 100 + round;
    REQUIRE(Send(*s, Beat(0), now).ok());
    REQUIRE(Send(*s, Beat(1), now).ok());
    AckAll(*s, f.transport, acked, now);
    REQUIRE(s->Tick(now).ok());
  }
  REQUIRE(s->finished());
  st = Status(*s, 200);
  CHECK(st["ledger"]["duplicates"] == 0);
  CHECK(st["ledger"]["lost"] == 0);
  CHECK(st["ledger"]["epochs_completed"].get<int64_t>() >= 2);  // 12 iterations x 64 of 256 samples
}

TEST_CASE("an agent holding the scheduler's manifest gets its root only, any other agent the digests") {
  Fixture f(3);
  std::string d;
  for (uint64_t id = 0; id < 256; ++id)
    d += std::string(loft::cache::kSampleDigestBytes, static_cast<char>(id));
  auto m = loft::cache::Manifest::FromDigests(d);
  REQUIRE(m.ok());
  f.opts.manifest = (f.dir / "MANIFEST.loft").string();
  REQUIRE(loft::cache::WriteManifestFile(f.opts.manifest, *m).ok());
  auto s = f.Make();
  // An older agent (no root): the digests, and the root.
  loft::v1::Envelope reply;
  REQUIRE(Send(*s, Register("edge-0", 1), 0, &reply).ok());
  CHECK(reply.register_reply().sample_digests() == m->digests());
  CHECK(reply.register_reply().manifest_root() == m->Root());
  // The same root: no digests.
  loft::v1::Envelope same = Register("edge-1", 1);
  same.mutable_register_request()->set_manifest_root(m->Root());
  loft::v1::Envelope reply_same;
  REQUIRE(Send(*s, same, 1, &reply_same).ok());
  CHECK(reply_same.register_reply().sample_digests().empty());
  CHECK(reply_same.register_reply().manifest_root() == m->Root());
  // Another root (a stale copy): the digests.
  loft::v1::Envelope other = Register("edge-2", 1);
  other.mutable_register_request()->set_manifest_root(std::string(32, 'x'));
  loft::v1::Envelope reply_other;
  REQUIRE(Send(*s, other, 2, &reply_other).ok());
  CHECK(reply_other.register_reply().sample_digests() == m->digests());
}

TEST_CASE("authenticated peers speak only for their own node, unexpected messages are rejected") {
  Fixture f;
  auto s = f.Make();
  Sender rogue{"edge-1", true};
  CHECK(Send(*s, Register("edge-0", 1), 0, nullptr, rogue).code() == loft::StatusCode::kPermissionDenied);
  CHECK(Send(*s, Register("nobody", 1), 0).code() == loft::StatusCode::kNotFound);
  CHECK(Send(*s, Register("edge-0", 0), 0).code() == loft::StatusCode::kInvalidArgument);
  CHECK(Send(*s, Beat(0), 0).code() == loft::StatusCode::kFailedPrecondition);  // not registered
  CHECK(Send(*s, Beat(7), 0).code() == loft::StatusCode::kInvalidArgument);
  loft::v1::Envelope fetch;
  fetch.mutable_fetch_request()->set_request_id(1);
  CHECK(Send(*s, fetch, 0).code() == loft::StatusCode::kUnimplemented);
  Sender ok{"edge-0", true};
  loft::v1::Envelope reply;
  REQUIRE(Send(*s, Register("edge-0", 1), 0, &reply, ok).ok());
  CHECK(reply.has_register_reply());
  CHECK(reply.register_reply().node() == 0);
  CHECK(Send(*s, Credit(0, 0), 1).code() == loft::StatusCode::kInvalidArgument);
  CHECK(Send(*s, Credit(0, 1), 1, nullptr, rogue).code() == loft::StatusCode::kPermissionDenied);
  // Garbage acks for unknown partitions are ignored and counted, not errors
  // (before the driver: the ledger never sees them, nothing is journaled).
  loft::v1::Envelope bogus;
  bogus.mutable_partition_done()->set_partition_id(999);
  bogus.mutable_partition_done()->set_node(0);
  CHECK(Send(*s, bogus, 2, nullptr, ok).ok());
  CHECK(Status(*s, 2)["reports_ignored"] == 1);
  CHECK(Status(*s, 2)["ledger"]["acks_ignored"] == 0);
  // A field over its bound is refused, naming it.
  loft::v1::Envelope big;
  big.mutable_partition_failed()->set_partition_id(999);
  big.mutable_partition_failed()->set_node(0);
  big.mutable_partition_failed()->set_reason(std::string(5000, 'x'));
  auto st = Send(*s, big, 3, nullptr, ok);
  CHECK(st.code() == loft::StatusCode::kInvalidArgument);
  CHECK(st.message().find("PartitionFailed.reason has 5000 bytes") != std::string::npos);
}

TEST_CASE(
    "acks are journaled without an fsync of their own: one synced write per plan, none later than 20 ms") {
  Fixture f;
  f.opts.journal_sync = true;
  auto s = StartBoth(f);  // registrations, iterations 0 and 1 planned and sent
  // Declaring a family again returns the service's (metrics::Registry).
  auto syncs_family = f.registry.AddCounter("loft_scheduler_journal_syncs_total", "");
  auto entries_family = f.registry.AddGauge("loft_scheduler_journal_entries", "");
  REQUIRE(syncs_family.ok());
  REQUIRE(entries_family.ok());
  auto syncs = [&] { return (*syncs_family)->Get().Value(); };
  auto entries = [&] { return (*entries_family)->Get().Value(); };
  const double at_start = syncs();
  REQUIRE(at_start >= 2);  // at least the two plans
  const auto sent = f.transport.Assignments();
  REQUIRE(sent.size() == 4);
  // edge-0's ack of iteration 0 alone: journaled in the tick, not synced
  // (nothing leaves the scheduler because of it).
  const double before = entries();
  for (const auto& p : sent) {
    if (p.iteration() != 0 || p.worker() != 0) continue;
    REQUIRE(Send(*s, Done(p), 2).ok());
    REQUIRE(Send(*s, Credit(0), 2).ok());
  }
  REQUIRE(s->Tick(2).ok());
  CHECK(entries() > before);
  CHECK(syncs() == at_start);
  // Nothing else happens: what is unsynced (the sends of tick 1, this ack)
  // is synced once the oldest of it is kMaxUnsyncedMs old, not later.
  REQUIRE(s->Tick(1 + SchedulerService::kMaxUnsyncedMs - 1).ok());
  CHECK(syncs() == at_start);
  REQUIRE(s->Tick(1 + SchedulerService::kMaxUnsyncedMs).ok());
  CHECK(syncs() == at_start + 1);
  REQUIRE(s->Tick(3 + 2 * SchedulerService::kMaxUnsyncedMs).ok());  // nothing unsynced: no sync
  CHECK(syncs() == at_start + 1);
  // edge-1's ack completes iteration 0: iteration 2 is planned and its
  // synced write (which makes the acks durable too) precedes its sends.
  const double t1 = 4 + 2 * SchedulerService::kMaxUnsyncedMs;
  for (const auto& p : sent) {
    if (p.iteration() != 0 || p.worker() != 1) continue;
    REQUIRE(Send(*s, Done(p), t1).ok());
    REQUIRE(Send(*s, Credit(1), t1).ok());
  }
  REQUIRE(s->Tick(t1).ok());
  CHECK(f.transport.Assignments().size() == 6);
  CHECK(syncs() == at_start + 2);
  // To the end: one synced write per plan, and one when the job finishes.
  std::set<uint64_t> acked;
  for (const auto& p : f.transport.Assignments())
    if (p.iteration() == 0) acked.insert(p.id());
  for (double t = t1 + 1; t < t1 + 200 && !s->finished(); ++t) {
    AckAll(*s, f.transport, acked, t);
    REQUIRE(s->Tick(t).ok());
  }
  REQUIRE(s->finished());
  // 2 partitions per plan (2 workers); the window's sync; the job's end.
  const double plans_after_start = static_cast<double>(f.transport.Assignments().size() - 4) / 2;
  CHECK(syncs() == at_start + 1 + plans_after_start + 1);
  CHECK(Status(*s, 300)["ledger"]["lost"] == 0);
}

TEST_CASE("reports that change no state are not journaled") {
  Fixture f;
  uint64_t seq = 0;
  {
    auto s = f.Make();
    REQUIRE(Send(*s, Register("edge-0", 1), 0).ok());
    REQUIRE(s->Tick(1).ok());
    auto j = loft::sched::Journal::Open(f.opts.journal_dir);
    CHECK_FALSE(j.ok());  // held open by the service (RocksDB lock)
  }
  {
    auto j = loft::sched::Journal::Open(f.opts.journal_dir);
    REQUIRE(j.ok());
    seq = (*j)->next_seq();
  }
  {
    auto s = f.Make();
    for (uint64_t id = 1000; id < 1100; ++id) {
      loft::v1::Envelope e;
      e.mutable_partition_failed()->set_partition_id(id);
      e.mutable_partition_failed()->set_node(0);
      e.mutable_partition_failed()->set_reason(std::string(4000, 'r'));
      CHECK(Send(*s, e, 2).ok());
    }
    CHECK(Status(*s, 3)["reports_ignored"] == 100);
  }
  auto j = loft::sched::Journal::Open(f.opts.journal_dir);
  REQUIRE(j.ok());
  CHECK((*j)->next_seq() == seq);
}

TEST_CASE("the job id is random per fresh journal, kept across restarts, and sent to agents") {
  Fixture f;
  uint64_t first = 0;
  {
    auto s = f.Make();
    first = s->job_id();
    CHECK(first != 0);
    loft::v1::Envelope reply;
    REQUIRE(Send(*s, Register("edge-0", 2), 0, &reply).ok());
    CHECK(reply.register_reply().job() == first);
    REQUIRE(Send(*s, Register("edge-1", 2), 0).ok());
    REQUIRE(s->Tick(1).ok());  // plans and journals an iteration
    const auto sent = f.transport.Assignments(-1);
    REQUIRE_FALSE(sent.empty());
    for (const auto& p : sent) CHECK(p.job() == first);
  }
  {
    auto s = f.Make(10);  // recovered from the journal: the same job
    CHECK(s->job_id() == first);
  }
  // A corrupt job_id file is an error naming it, not a silent new job.
  std::ofstream(f.dir / "journal" / "job_id", std::ios::trunc) << "not-hex\n";
  auto bad = SchedulerService::Create(f.opts, f.spec, "", &f.transport, &f.registry, 20);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("job_id") != std::string::npos);
  // A fresh journal directory: a new job.
  fs::remove_all(f.dir / "journal");
  auto fresh = f.Make(30);
  CHECK(fresh->job_id() != first);
}

TEST_CASE(
    "a ring member reported by f+1 other nodes is evicted and its heartbeats and registrations refused") {
  Fixture f(3);
  f.spec.training.byzantine_tolerance = 1;
  auto s = f.Make();
  for (int i = 0; i < 3; ++i) REQUIRE(Send(*s, Register("edge-" + std::to_string(i), 2), 1).ok());
  auto report = [](int32_t node, int32_t accused) {
    loft::v1::Envelope e;
    auto* r = e.mutable_peer_report();
    r->set_node(node);
    r->set_accused(accused);
    r->set_reason("chunk_mismatch");
    r->set_count(8);
    return e;
  };
  CHECK(Send(*s, report(0, 0), 5).code() == loft::StatusCode::kInvalidArgument);  // itself
  CHECK(Send(*s, report(0, 7), 5).code() == loft::StatusCode::kInvalidArgument);  // no such node
  REQUIRE(Send(*s, report(0, 2), 10).ok());
  REQUIRE(Send(*s, report(0, 2), 11).ok());  // the same reporter again: still one
  REQUIRE(Send(*s, Beat(2), 12).ok());
  REQUIRE(s->Tick(20).ok());
  CHECK(Status(*s, 20)["live_nodes"] == nlohmann::json::array({0, 1, 2}));
  REQUIRE(Send(*s, report(1, 2), 30).ok());  // f+1 = 2 distinct reporters
  REQUIRE(s->Tick(40).ok());
  CHECK(Status(*s, 40)["live_nodes"] == nlohmann::json::array({0, 1}));
  CHECK(Send(*s, Beat(2), 50).code() == loft::StatusCode::kPermissionDenied);
  CHECK(Send(*s, Register("edge-2", 2), 60).code() == loft::StatusCode::kPermissionDenied);
  REQUIRE(s->Tick(70).ok());
  CHECK(Status(*s, 70)["live_nodes"] == nlohmann::json::array({0, 1}));
}

TEST_CASE("the status reply carries every worker's cost profile typed, equal to the document's") {
  Fixture f;
  auto s = StartBoth(f);
  std::set<uint64_t> acked;
  AckAll(*s, f.transport, acked, 2);
  REQUIRE(s->Tick(3).ok());
  loft::v1::Envelope req, reply;
  req.mutable_status_request();
  REQUIRE(Send(*s, req, 4, &reply).ok());
  REQUIRE(reply.has_status_reply());
  const auto& r = reply.status_reply();
  const auto doc = nlohmann::json::parse(r.json());
  REQUIRE(r.workers_size() == 2);
  for (int node = 0; node < 2; ++node) {
    const auto& w = r.workers(node);
    CHECK(w.node() == node);
    CHECK(w.name() == f.spec.nodes[node].name);
    CHECK(w.observations() == s->driver().state().observations(node));
    CHECK(w.observations() == doc["workers"][node]["observations"]);
    const loft::sched::CostParams want = s->driver().state().cost(node);
    const loft::sched::CostParams got = loft::sched::CostFromProto(w.profile());
    for (const auto& field : loft::sched::kCostFields) {
      CHECK(got.*field.member == want.*field.member);
      CHECK(doc["workers"][node]["profile"][std::string(field.name)] == want.*field.member);
    }
  }
  CHECK(r.workers(0).profile().compute_per_sample_ms() > 0);  // a profile, not an empty message
}

TEST_CASE("a recovered service resumes at the journal's latest time when the wall clock was stepped back") {
  // Service time is wall-clock anchored: restarted after NTP stepped the
  // clock back by an hour, the partitions in flight would wait an hour
  // more than their timeout. The service reports the journal's latest
  // recorded time (the server's clock resumes there, ServiceClock::
  // NotBefore) and starts its own timers from it.
  Fixture f;
  f.opts.partition_timeout_ms = 5000;
  const double t0 = 1.0e7;
  double latest = 0;
  {
    auto s = f.Make(t0);
    REQUIRE(Send(*s, Register("edge-0", 2), t0).ok());
    REQUIRE(Send(*s, Register("edge-1", 2), t0).ok());
    REQUIRE(s->Tick(t0 + 10).ok());  // plans and sends an iteration at t0 + 10
    REQUIRE(Status(*s, t0 + 10)["ledger"]["in_flight"].get<int64_t>() > 0);
    latest = t0 + 10;
  }                                                  // crash with the iteration in flight
  const double stepped = t0 + 1000 - 3600.0 * 1000;  // 1 s later, an hour back
  auto s = f.Make(stepped);
  CHECK(s->resume_floor_ms() == Approx(latest));
  // The server's clock now reads from the floor on: half a heartbeat
  // timeout later the nodes are live (their timers started at the floor,
  // not an hour before it) ...
  const double now = latest + 500;
  REQUIRE(s->Tick(now).ok());
  auto st = Status(*s, now);
  CHECK(st["workers"][0]["live"] == true);
  CHECK(st["workers"][1]["live"] == true);
  CHECK(st["ledger"]["timed_out"] == 0);
  // ... and the partitions in flight time out within their timeout of it.
  for (double t = now; t <= latest + 5000 + 20000; t += 250) {
    REQUIRE(Send(*s, Beat(0), t).ok());
    REQUIRE(Send(*s, Beat(1), t).ok());
    REQUIRE(s->Tick(t).ok());
    if (Status(*s, t)["ledger"]["timed_out"].get<int64_t>() > 0) break;
  }
  CHECK(Status(*s, latest + 25000)["ledger"]["timed_out"].get<int64_t>() > 0);
}

namespace {
// Runs the fixture's whole job (2 nodes x 12 iterations): 24 rows.
std::unique_ptr<SchedulerService> FinishedJob(Fixture& f) {
  auto s = StartBoth(f);
  std::set<uint64_t> acked;
  for (int round = 2; round < 80 && !s->finished(); ++round) {
    AckAll(*s, f.transport, acked, round);
    REQUIRE(s->Tick(round).ok());
  }
  REQUIRE(s->finished());
  return s;
}

loft::v1::Envelope StatusRows(int64_t from, int32_t max_rows) {
  loft::v1::Envelope e;
  e.mutable_status_request()->set_include_rows(true);
  e.mutable_status_request()->set_rows_from(from);
  e.mutable_status_request()->set_max_rows(max_rows);
  return e;
}
}  // namespace

TEST_CASE("status rows: only the operator key gets them a page at a time and the pages hold every row") {
  Fixture f;
  auto s = FinishedJob(f);
  const loft::v1::RunSummary all = s->RunSummary(/*include_rows=*/true);
  REQUIRE(all.rows_size() == 24);
  // An agent's key: the figures, never rows.
  const Sender agent{"edge-0", true};
  loft::v1::Envelope reply;
  const loft::Status denied = Send(*s, StatusRows(0, 0), 100, &reply, agent);
  CHECK(denied.code() == loft::StatusCode::kPermissionDenied);
  CHECK(denied.message().find("loftctl") != std::string::npos);
  loft::v1::Envelope plain;
  plain.mutable_status_request();
  reply.Clear();
  REQUIRE(Send(*s, plain, 100, &reply, agent).ok());
  CHECK(reply.status_reply().run().rows_size() == 0);
  CHECK(reply.status_reply().run().iterations_completed() == 12);
  CHECK(reply.status_reply().run().rows_kept() == 24);
  // The operator's key pages through: 5 rows a page, in order, nothing
  // lost or repeated (an iteration's two rows may span two pages).
  const Sender op{"loftctl", true};
  loft::v1::RunSummary paged;
  int64_t from = 0;
  int pages = 0;
  while (from < 24 && pages < 10) {
    reply.Clear();
    REQUIRE(Send(*s, StatusRows(from, 5), 100, &reply, op).ok());
    const auto& run = reply.status_reply().run();
    CHECK(run.rows_from() == from);
    CHECK(run.rows_kept() == 24);
    CHECK(run.rows_size() == std::min<int64_t>(5, 24 - from));
    for (const auto& r : run.rows()) *paged.add_rows() = r;
    from += run.rows_size();
    ++pages;
  }
  CHECK(pages == 5);
  REQUIRE(paged.rows_size() == all.rows_size());
  for (int i = 0; i < all.rows_size(); ++i) {
    INFO("row " << i);
    CHECK(paged.rows(i).SerializeAsString() == all.rows(i).SerializeAsString());
  }
  // Past the end: no rows; a huge page is capped; negative values refused.
  reply.Clear();
  REQUIRE(Send(*s, StatusRows(24, 5), 100, &reply, op).ok());
  CHECK(reply.status_reply().run().rows_size() == 0);
  reply.Clear();
  REQUIRE(Send(*s, StatusRows(0, 1 << 30), 100, &reply, op).ok());
  CHECK(reply.status_reply().run().rows_size() == 24);
  CHECK(Send(*s, StatusRows(-1, 5), 100, &reply, op).code() == loft::StatusCode::kInvalidArgument);
  CHECK(Send(*s, StatusRows(0, -5), 100, &reply, op).code() == loft::StatusCode::kInvalidArgument);
  // Without CURVE (loopback development) every sender is the operator.
  reply.Clear();
  REQUIRE(Send(*s, StatusRows(0, 0), 100, &reply).ok());
  CHECK(reply.status_reply().run().rows_size() == 24);
}

TEST_CASE(
    "status replies are charged to a per-key byte budget: a key that spends it waits and others do not") {
  Fixture f;
  auto s = FinishedJob(f);
  loft::v1::Envelope req;
  req.mutable_status_request();
  const Sender agent{"edge-0", true};
  // Many connections of one key share one budget (it is the key's name).
  int served = 0;
  int64_t bytes = 0;
  loft::Status refused;
  for (int i = 0; i < 100000; ++i) {
    loft::v1::Envelope reply;
    loft::Status st = Send(*s, req, 100, &reply, agent);
    if (!st.ok()) {
      refused = st;
      break;
    }
    ++served;
    bytes += static_cast<int64_t>(reply.ByteSizeLong());
  }
  INFO("served " << served << " replies, " << bytes << " bytes");
  REQUIRE(refused.code() == loft::StatusCode::kResourceExhausted);
  CHECK(refused.message().find("edge-0") != std::string::npos);
  CHECK(bytes >= loft::server::kStatusBurstBytes);
  CHECK(bytes <= loft::server::kStatusBurstBytes + 64 * 1024);
  // Another key is still served at the same instant; the operator's too.
  loft::v1::Envelope reply;
  CHECK(Send(*s, req, 100, &reply, Sender{"edge-1", true}).ok());
  CHECK(Send(*s, req, 100, &reply, Sender{"loftctl", true}).ok());
  // The budget refills with time.
  CHECK(Send(*s, req, 100, &reply, agent).code() == loft::StatusCode::kResourceExhausted);
  CHECK(Send(*s, req, 100 + 1000, &reply, agent).ok());
}
