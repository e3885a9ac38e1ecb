// AgentService and PartitionRunner with a real RocksDB cache in a temp
// dir and a fake PeerClient: no sockets.
#include "edge_agent/agent_service.h"

#include <rocksdb/db.h>

#include <catch2/catch.hpp>

#include "cache/sample_cache.h"
#include "core/codec.h"
#include "test_util.h"

using namespace loft;
using namespace loft::agent;
using namespace loft::agent::testing;

namespace {

std::string Frame(const v1::Envelope& env) {
  auto b = Encode(env);
  REQUIRE(b.ok());
  return *b;
}

v1::Envelope Fetch(uint64_t partition, int32_t requester, std::vector<uint64_t> ids, uint64_t rid = 1) {
  v1::Envelope env;
  auto* f = env.mutable_fetch_request();
  f->set_request_id(rid);
  f->set_partition_id(partition);
  f->set_requester(requester);
  for (auto id : ids) f->add_sample_ids(id);
  return env;
}

v1::Envelope GrantEnv(uint64_t partition, int32_t requester, std::vector<uint64_t> ids) {
  v1::Envelope env;
  auto* g = env.mutable_serve_grant();
  g->set_partition_id(partition);
  g->set_requester(requester);
  for (auto id : ids) g->add_sample_ids(id);
  return env;
}

v1::Envelope Registered(int32_t node) {
  v1::Envelope env;
  env.mutable_register_reply()->set_node(node);
  env.mutable_register_reply()->set_view(1);
  return env;
}

v1::Envelope View(std::vector<std::pair<int32_t, std::string>> nodes) {
  v1::Envelope env;
  auto* v = env.mutable_view();
  v->set_view(2);
  for (auto& [n, name] : nodes) {
    v1::Member* m = v->add_members();
    m->set_node(n);
    m->set_peer_endpoint("tcp://127.0.0.1:" + std::to_string(9000 + n));
    m->set_name(name);
  }
  return env;
}

struct Fixture {
  TempDir dir;
  metrics::Registry registry;
  AgentMetrics metrics;
  std::unique_ptr<cache::SampleCache> cache;

  Fixture() {
    MakeCache(dir.Sub("db"), Range(0, 100));
    auto m = AgentMetrics::Create(&registry);
    REQUIRE(m.ok());
    metrics = *m;
    auto c = cache::SampleCache::Open(dir.Sub("db"));
    REQUIRE(c.ok());
    cache = std::move(*c);
  }
  AgentService Service(bool authenticated = false, int credits = 2) {
    AgentServiceOptions o;
    o.node_name = "a";
    o.peer_endpoint = "tcp://127.0.0.1:9000";
    o.credits = credits;
    o.authenticated = authenticated;
    return AgentService(o, cache.get(), &metrics);
  }
};

class FakePeers : public PeerClient {
 public:
  std::map<int32_t, PeerFetchResult> FetchAll(uint64_t partition_id, int32_t requester,
                                              const std::map<int32_t, std::vector<uint64_t>>& ids) override {
    calls.push_back({partition_id, requester, ids});
    std::map<int32_t, PeerFetchResult> out;
    for (const auto& [peer, list] : ids) {
      PeerFetchResult r;
      r.ms = 3;
      for (uint64_t id : list) {
        auto p = Payload(id);
        uint16_t label = static_cast<uint16_t>(id % 10);
        if (poison_peer == peer) label = static_cast<uint16_t>((label + 1) % 10);  // valid CRC and id
        r.records.push_back(cache::EncodeRecord(id, label, p));
        r.bytes += static_cast<int64_t>(r.records.back().size());
      }
      if (corrupt_first && !r.records.empty()) r.records[0][10] ^= 0x1;
      if (fail_peer == peer) r.status = Unavailable("peer gone");
      if (bad_on_peer == peer) {  // the peer's own record failed its check (Error.bad_samples)
        r.status = DataLoss("record failed its check");
        r.records.clear();
        r.bad_samples = bad_named;
      }
      out[peer] = std::move(r);
    }
    return out;
  }
  struct Call {
    uint64_t partition;
    int32_t requester;
    std::map<int32_t, std::vector<uint64_t>> ids;
  };
  std::vector<Call> calls;
  bool corrupt_first = false;
  int32_t fail_peer = -1;
  int32_t bad_on_peer = -1;
  std::vector<uint64_t> bad_named;
  int32_t poison_peer = -1;  // serves label-flipped records (valid CRC)
};

// The dataset manifest of the test samples (label id % 10, Payload(id)).
cache::Manifest TestManifest(uint64_t n = 400) {
  std::string d;
  for (uint64_t id = 0; id < n; ++id)
    d += cache::SampleDigest(id, static_cast<uint16_t>(id % 10), Payload(id));
  auto m = cache::Manifest::FromDigests(std::move(d));
  REQUIRE(m.ok());
  return std::move(m).value();
}

v1::Partition MakePartition(uint64_t id, int32_t worker, std::vector<std::pair<uint64_t, int32_t>> samples) {
  v1::Partition p;
  p.set_id(id);
  p.set_worker(worker);
  p.set_attempt(1);
  for (auto [s, src] : samples) {
    p.add_sample_ids(s);
    p.add_sources(src);
  }
  return p;
}

}  // namespace

TEST_CASE("A granted fetch returns the stored records as raw frames") {
  Fixture fx;
  AgentService svc = fx.Service();
  (void)svc.HandleScheduler(Frame(Registered(0)), 0);
  (void)svc.HandleScheduler(Frame(GrantEnv(5, 1, {3, 4, 99})), 0);
  PeerReply r = svc.HandlePeer(Frame(Fetch(5, 1, {99, 3}, 42)), 0, "");
  REQUIRE(r.header.has_fetch_reply());
  CHECK(r.header.fetch_reply().request_id() == 42);
  CHECK(r.header.fetch_reply().count() == 2);
  REQUIRE(r.records.size() == 2);
  auto s = cache::DecodeRecord(99, r.records[0]);
  REQUIRE(s.ok());
  CHECK(s->payload == Payload(99));
  CHECK(s->label == 9);
  CHECK(fx.metrics.served_samples->Value() == 2);
}

TEST_CASE("Ungranted, repeated and misattributed fetches are refused") {
  Fixture fx;
  AgentService svc = fx.Service();
  (void)svc.HandleScheduler(Frame(GrantEnv(5, 1, {3})), 0);
  PeerReply none = svc.HandlePeer(Frame(Fetch(6, 1, {3})), 0, "");
  REQUIRE(none.header.has_error());
  CHECK(none.header.error().code() == static_cast<int>(StatusCode::kUnavailable));
  PeerReply other = svc.HandlePeer(Frame(Fetch(5, 1, {4})), 0, "");
  REQUIRE(other.header.has_error());
  CHECK(other.header.error().code() == static_cast<int>(StatusCode::kPermissionDenied));
  CHECK(other.records.empty());
  CHECK(svc.HandlePeer(Frame(Fetch(5, 1, {3})), 0, "").header.has_fetch_reply());
  CHECK(svc.HandlePeer(Frame(Fetch(5, 1, {3})), 0, "").header.error().code() ==
        static_cast<int>(StatusCode::kPermissionDenied));
}

TEST_CASE("With authentication the key's name must be the requester's node") {
  Fixture fx;
  AgentService svc = fx.Service(/*authenticated=*/true);
  (void)svc.HandleScheduler(Frame(View({{0, "a"}, {1, "b"}, {2, "c"}})), 0);
  (void)svc.HandleScheduler(Frame(GrantEnv(5, 1, {3, 4})), 0);
  PeerReply spoof = svc.HandlePeer(Frame(Fetch(5, 1, {3})), 0, "c");
  REQUIRE(spoof.header.has_error());
  CHECK(spoof.header.error().code() == static_cast<int>(StatusCode::kPermissionDenied));
  CHECK(spoof.header.error().message() == "key 'c' may not fetch as node 1");
  CHECK(svc.HandlePeer(Frame(Fetch(5, 1, {3})), 0, "b").header.has_fetch_reply());
}

TEST_CASE("A grant for an id the cache lacks answers NotFound") {
  Fixture fx;
  AgentService svc = fx.Service();
  (void)svc.HandleScheduler(Frame(GrantEnv(5, 1, {500})), 0);
  PeerReply r = svc.HandlePeer(Frame(Fetch(5, 1, {500})), 0, "");
  REQUIRE(r.header.has_error());
  CHECK(r.header.error().code() == static_cast<int>(StatusCode::kNotFound));
}

TEST_CASE("Garbage on the peer path gets an Error and is counted by reason") {
  Fixture fx;
  AgentService svc = fx.Service();
  CHECK(svc.HandlePeer("\xff\xff\xff", 0, "").header.has_error());
  v1::Envelope old = Fetch(1, 1, {1});
  old.set_protocol_version(7);
  PeerReply v = svc.HandlePeer(Frame(old), 0, "");
  CHECK(v.header.error().message() == "protocol version 7 is not supported (this build speaks version " +
                                          std::to_string(kProtocolVersion) + ")");
  CHECK(svc.HandlePeer(Frame(Registered(3)), 0, "").header.has_error());
  CHECK(svc.HandlePeer(Frame(Fetch(1, 1, {})), 0, "").header.has_error());
  CHECK(svc.HandlePeer(Frame(Fetch(1, 1, {1})), 2, "").header.has_error());
  CHECK(fx.metrics.rejected_frames->WithLabels({"peer", "undecodable"}).Value() == 1);
  CHECK(fx.metrics.rejected_frames->WithLabels({"peer", "version"}).Value() == 1);
  CHECK(fx.metrics.rejected_frames->WithLabels({"peer", "unexpected_type"}).Value() == 1);
  CHECK(fx.metrics.rejected_frames->WithLabels({"peer", "unexpected_frames"}).Value() == 1);
}

TEST_CASE("Assignments are accepted within the credit window and validated") {
  Fixture fx;
  AgentService svc = fx.Service(false, /*credits=*/1);
  v1::Envelope a;
  *a.mutable_assignment()->mutable_partition() = MakePartition(1, 0, {{1, 0}});
  auto before = svc.HandleScheduler(Frame(a), 0);
  CHECK(before.run.empty());  // not registered yet
  REQUIRE(before.to_scheduler.size() == 1);
  CHECK(before.to_scheduler[0].has_partition_failed());
  CHECK(before.credits_to_return == 1);

  (void)svc.HandleScheduler(Frame(Registered(0)), 0);
  auto ok = svc.HandleScheduler(Frame(a), 0);
  REQUIRE(ok.run.size() == 1);
  CHECK(svc.in_flight() == 1);
  auto over = svc.HandleScheduler(Frame(a), 0);
  CHECK(over.run.empty());
  CHECK(over.credits_to_return == 0);  // an over-window assignment had no credit
  svc.PartitionFinished();
  CHECK(svc.in_flight() == 0);

  v1::Envelope wrong;
  *wrong.mutable_assignment()->mutable_partition() = MakePartition(2, 5, {{1, 0}});
  auto w = svc.HandleScheduler(Frame(wrong), 0);
  CHECK(w.run.empty());
  REQUIRE(w.to_scheduler.size() == 1);
  CHECK(w.to_scheduler[0].partition_failed().reason() ==
        "InvalidArgument: partition 2 is for worker 5, this node is 0");
  v1::Envelope unknown_src;
  *unknown_src.mutable_assignment()->mutable_partition() = MakePartition(3, 0, {{1, 4}});
  CHECK(svc.HandleScheduler(Frame(unknown_src), 0).run.empty());
}

TEST_CASE("Scheduler-side garbage is answered with an Error") {
  Fixture fx;
  AgentService svc = fx.Service();
  auto g = svc.HandleScheduler("garbage!", 0);
  REQUIRE(g.to_scheduler.size() == 1);
  CHECK(g.to_scheduler[0].has_error());
  auto t = svc.HandleScheduler(Frame(Fetch(1, 1, {1})), 0);
  REQUIRE(t.to_scheduler.size() == 1);
  CHECK(t.to_scheduler[0].error().message() == "an agent does not accept fetch_request from the scheduler");
  v1::Envelope sd;
  sd.mutable_shutdown()->set_reason("done");
  CHECK(svc.HandleScheduler(Frame(sd), 0).shutdown);
}

TEST_CASE("A partition reads local and remote samples, computes and reports timings") {
  Fixture fx;
  ManualClock clock;
  FakePeers peers;
  PartitionRunner runner(&clock, fx.cache.get(), &peers, &fx.metrics);
  SyntheticTrainer trainer(&clock, ComputeSpec{2.0, 0.1, 0.0}, 1);
  v1::Partition p = MakePartition(9, 0, {{1, 0}, {200, 1}, {2, 0}, {201, 1}, {300, 2}});
  ReadPartition r = runner.Read(p, 0);
  REQUIRE(r.status.ok());
  REQUIRE(peers.calls.size() == 1);
  CHECK(peers.calls[0].ids.at(1) == std::vector<uint64_t>{200, 201});
  CHECK(peers.calls[0].ids.at(2) == std::vector<uint64_t>{300});
  REQUIRE(r.batch.samples.size() == 5);
  CHECK(r.batch.samples[1].id == 200);
  CHECK(r.batch.samples[1].payload == Payload(200));
  CHECK(r.batch.samples[2].payload == Payload(2));
  v1::Envelope done = runner.Finish(std::move(r), &trainer, 0);
  REQUIRE(done.has_partition_done());
  const auto& t = done.partition_done().timings();
  CHECK(done.partition_done().partition_id() == 9);
  CHECK(done.partition_done().attempt() == 1);
  CHECK(t.local_samples() == 2);
  CHECK(t.remote_samples() == 3);
  CHECK(t.local_bytes() == 2 * 804);
  CHECK(t.remote_bytes() == 3 * 804);
  CHECK(t.remote_read_ms_by_peer().at(1) == 3);
  CHECK(t.compute_ms() == Approx(2.5));
}

TEST_CASE("Disk emulation: a local read of l samples lasts l times the spec's per-sample time") {
  Fixture fx;
  ManualClock clock;
  FakePeers peers;
  PartitionRunner runner(&clock, fx.cache.get(), &peers, &fx.metrics);
  const v1::Partition p = MakePartition(9, 0, {{1, 0}, {2, 0}, {3, 0}, {4, 0}});
  ReadPartition off = runner.Read(p, 0);
  REQUIRE(off.status.ok());
  CHECK(off.timings.local_read_ms() == 0);  // a real disk: the read's own time (none on this clock)
  runner.EmulateDisk(0.5);                  // e.g. 784-byte samples at 12.544 Mbit/s
  ReadPartition on = runner.Read(p, 0);
  REQUIRE(on.status.ok());
  CHECK(on.timings.local_read_ms() == Approx(2.0));
  CHECK(on.batch.samples.size() == 4);
  // Remote-only: nothing to pace.
  const int64_t before = clock.NowMicros();
  ReadPartition remote = runner.Read(MakePartition(10, 0, {{200, 1}}), 0);
  REQUIRE(remote.status.ok());
  CHECK(remote.timings.local_read_ms() == 0);
  CHECK(clock.NowMicros() == before);
}

TEST_CASE("A corrupt peer record fails the partition and is never used") {
  Fixture fx;
  ManualClock clock;
  FakePeers peers;
  peers.corrupt_first = true;
  PartitionRunner runner(&clock, fx.cache.get(), &peers, &fx.metrics);
  SyntheticTrainer trainer(&clock, ComputeSpec{2.0, 0.1, 0.0}, 1);
  ReadPartition r = runner.Read(MakePartition(9, 0, {{1, 0}, {200, 1}}), 0);
  CHECK(r.status.code() == StatusCode::kDataLoss);
  CHECK(r.batch.samples.empty());
  v1::Envelope failed = runner.Finish(std::move(r), &trainer, 0);
  REQUIRE(failed.has_partition_failed());
  CHECK(failed.partition_failed().reason().find("DataLoss") == 0);
  CHECK(clock.NowMicros() == 0);  // no compute was spent on it
}

TEST_CASE("A partition that fails before compute lets the trainer skip its round") {
  // Training joins the failed partition's round with weight 0 (with
  // planning ahead the agent may hold the next partition and not be idle).
  struct Recording : Trainer {
    int computed = 0;
    std::vector<std::pair<int64_t, int64_t>> skipped;
    StatusOr<double> Compute(const Batch&) override {
      ++computed;
      return 0.0;
    }
    void Skip(int64_t view, int64_t iteration, bool /*local_step*/) override {
      skipped.emplace_back(view, iteration);
    }
  };
  Fixture fx;
  ManualClock clock;
  FakePeers peers;
  peers.fail_peer = 1;
  PartitionRunner runner(&clock, fx.cache.get(), &peers, &fx.metrics);
  Recording trainer;
  v1::Partition p = MakePartition(9, 0, {{1, 0}, {200, 1}});
  p.set_view(4);
  p.set_iteration(17);
  v1::Envelope failed = runner.Finish(runner.Read(p, 0), &trainer, 0);
  REQUIRE(failed.has_partition_failed());
  CHECK(trainer.computed == 0);
  CHECK(trainer.skipped == std::vector<std::pair<int64_t, int64_t>>{{4, 17}});
  // A partition that reads fine is computed, not skipped.
  v1::Envelope done = runner.Finish(runner.Read(MakePartition(10, 0, {{1, 0}}), 0), &trainer, 0);
  REQUIRE(done.has_partition_done());
  CHECK(trainer.computed == 1);
  CHECK(trainer.skipped.size() == 1);
}

TEST_CASE("A missing local sample or a failed peer fails the partition") {
  Fixture fx;
  ManualClock clock;
  FakePeers peers;
  peers.fail_peer = 1;
  PartitionRunner runner(&clock, fx.cache.get(), &peers, &fx.metrics);
  ReadPartition missing = runner.Read(MakePartition(9, 0, {{1000, 0}}), 0);
  CHECK(missing.status.code() == StatusCode::kNotFound);
  ReadPartition gone = runner.Read(MakePartition(10, 0, {{1, 0}, {200, 1}}), 0);
  CHECK(gone.status.code() == StatusCode::kUnavailable);
}

TEST_CASE("A local record corrupted underneath the cache fails the partition") {
  Fixture fx;
  fx.cache.reset();
  {
    auto raw = cache::OpenRawDb(fx.dir.Sub("db"));
    REQUIRE(raw.ok());
    std::string v;
    REQUIRE((*raw)->Get(rocksdb::ReadOptions(), cache::EncodeKey(5), &v).ok());
    v[20] ^= 0x40;
    REQUIRE((*raw)->Put(rocksdb::WriteOptions(), cache::EncodeKey(5), v).ok());
  }
  auto c = cache::SampleCache::Open(fx.dir.Sub("db"));
  REQUIRE(c.ok());
  fx.cache = std::move(*c);
  ManualClock clock;
  PartitionRunner runner(&clock, fx.cache.get(), nullptr, &fx.metrics);
  ReadPartition r = runner.Read(MakePartition(9, 0, {{4, 0}, {5, 0}}), 0);
  CHECK(r.status.code() == StatusCode::kDataLoss);
  // And the serving side never sends it.
  AgentService svc = fx.Service();
  (void)svc.HandleScheduler(Frame(GrantEnv(5, 1, {5})), 0);
  PeerReply pr = svc.HandlePeer(Frame(Fetch(5, 1, {5})), 0, "");
  REQUIRE(pr.header.has_error());
  CHECK(pr.header.error().code() == static_cast<int>(StatusCode::kDataLoss));
  // The refusal names the corrupt sample (not its good neighbour), so the
  // requester can report it and the scheduler quarantine it.
  (void)svc.HandleScheduler(Frame(GrantEnv(6, 1, {4, 5})), 0);
  PeerReply pr2 = svc.HandlePeer(Frame(Fetch(6, 1, {4, 5})), 0, "");
  REQUIRE(pr2.header.has_error());
  CHECK(std::vector<uint64_t>(pr2.header.error().bad_samples().begin(),
                              pr2.header.error().bad_samples().end()) == std::vector<uint64_t>{5});
}

TEST_CASE("A record corrupt on the serving peer is reported in bad_samples with its id") {
  Fixture fx;
  ManualClock clock;
  FakePeers peers;
  peers.bad_on_peer = 1;
  peers.bad_named = {201, 999};  // 999 was not asked of that peer: never reported
  PartitionRunner runner(&clock, fx.cache.get(), &peers, &fx.metrics);
  SyntheticTrainer trainer(&clock, ComputeSpec{2.0, 0.1, 0.0}, 1);
  ReadPartition r = runner.Read(MakePartition(9, 0, {{1, 0}, {200, 1}, {201, 1}, {300, 2}}), 0);
  CHECK(r.status.code() == StatusCode::kDataLoss);
  CHECK(r.bad_samples == std::vector<uint64_t>{201});
  v1::Envelope failed = runner.Finish(std::move(r), &trainer, 0);
  REQUIRE(failed.has_partition_failed());
  const auto& f = failed.partition_failed();
  CHECK(std::vector<uint64_t>(f.bad_samples().begin(), f.bad_samples().end()) == std::vector<uint64_t>{201});
}

TEST_CASE("A registration reply for a different job asks the agent to restart") {
  Fixture fx;
  AgentService svc = fx.Service();
  auto reply = [](int32_t node, uint64_t job) {
    v1::Envelope env = Registered(node);
    env.mutable_register_reply()->set_job(job);
    return env;
  };
  SchedulerEffects first = svc.HandleScheduler(Frame(reply(0, 0xabc)), 0);
  CHECK(first.registered);
  CHECK(first.new_job.empty());
  // The same job again (the scheduler restarted from its journal, or the
  // agent re-registered after a timeout): nothing to do.
  SchedulerEffects again = svc.HandleScheduler(Frame(reply(1, 0xabc)), 0);
  CHECK(again.new_job.empty());
  CHECK(svc.node() == 1);
  // An old scheduler that sends no job id is not a new job either.
  CHECK(svc.HandleScheduler(Frame(reply(1, 0)), 0).new_job.empty());
  // A fresh journal: a different job. The reply is not adopted.
  SchedulerEffects other = svc.HandleScheduler(Frame(reply(2, 0xdef)), 0);
  CHECK_FALSE(other.registered);
  CHECK(other.new_job.find("new job") != std::string::npos);
  CHECK(other.new_job.find("0000000000000def") != std::string::npos);
  CHECK(svc.node() == 1);
}

TEST_CASE(
    "Without a manifest a peer's label-flipped record with a valid CRC is accepted (the CRC is no defence)") {
  // Documents the gap the manifest closes: the requester's CRC and id
  // checks pass, the forged label reaches the trainer.
  Fixture fx;
  ManualClock clock;
  FakePeers peers;
  peers.poison_peer = 1;
  PartitionRunner runner(&clock, fx.cache.get(), &peers, &fx.metrics);
  ReadPartition r = runner.Read(MakePartition(9, 0, {{1, 0}, {200, 1}}), 0);
  REQUIRE(r.status.ok());
  REQUIRE(r.batch.samples.size() == 2);
  CHECK(r.batch.samples[1].label == (200 % 10 + 1) % 10);
}

TEST_CASE("With the manifest a forged peer sample is refused, counted and its peer reported") {
  Fixture fx;
  ManualClock clock;
  FakePeers peers;
  peers.poison_peer = 1;
  SampleGuard guard;
  guard.SetManifest(TestManifest());
  PartitionRunner runner(&clock, fx.cache.get(), &peers, &fx.metrics, &guard);
  SyntheticTrainer trainer(&clock, ComputeSpec{2.0, 0.1, 0.0}, 1);
  ReadPartition r = runner.Read(MakePartition(9, 0, {{1, 0}, {200, 1}, {300, 2}, {201, 1}, {202, 1}}), 0);
  CHECK(r.status.code() == StatusCode::kDataLoss);
  CHECK_THAT(r.status.message(), Catch::Contains("sample 200") && Catch::Contains("peer 1") &&
                                     Catch::Contains("dataset manifest"));
  CHECK(r.batch.samples.empty());  // nothing of the partition is used
  CHECK(r.poisoned == std::map<int32_t, int64_t>{{1, 3}});
  CHECK(fx.metrics.poisoned_samples->WithLabels({"1"}).Value() == 3);
  CHECK(fx.metrics.poisoned_samples->WithLabels({"2"}).Value() == 0);
  v1::Envelope failed = runner.Finish(std::move(r), &trainer, 0);
  REQUIRE(failed.has_partition_failed());
  const auto& f = failed.partition_failed();
  REQUIRE(f.poisoned_by_size() == 1);
  CHECK(f.poisoned_by(0) == 1);
  CHECK(f.poisoned_samples(0) == 3);
  CHECK(clock.NowMicros() == 0);  // no compute was spent on it

  // Honest peers pass the same check.
  FakePeers honest;
  PartitionRunner ok_runner(&clock, fx.cache.get(), &honest, &fx.metrics, &guard);
  ReadPartition ok = ok_runner.Read(MakePartition(10, 0, {{1, 0}, {200, 1}, {300, 2}}), 0);
  REQUIRE(ok.status.ok());
  CHECK(ok.poisoned.empty());
  CHECK(ok.batch.samples[1].label == 200 % 10);
}

TEST_CASE("A peer sample outside the manifest is refused") {
  Fixture fx;
  ManualClock clock;
  FakePeers peers;
  SampleGuard guard;
  guard.SetManifest(TestManifest(250));
  PartitionRunner runner(&clock, fx.cache.get(), &peers, &fx.metrics, &guard);
  ReadPartition r = runner.Read(MakePartition(9, 0, {{200, 1}, {300, 2}}), 0);
  CHECK(r.status.code() == StatusCode::kDataLoss);
  CHECK_THAT(r.status.message(),
             Catch::Contains("sample 300") && Catch::Contains("outside the dataset manifest"));
}

TEST_CASE("The registration reply's manifest reaches the guard") {
  Fixture fx;
  SampleGuard guard;
  AgentServiceOptions o;
  o.node_name = "a";
  o.guard = &guard;
  AgentService svc(o, fx.cache.get(), &fx.metrics);
  v1::Envelope reg = Registered(0);
  svc.HandleScheduler(Frame(reg), 0);
  CHECK(guard.manifest() == nullptr);  // no digests: CRC only (logged)
  const cache::Manifest m = TestManifest(100);
  reg.mutable_register_reply()->set_sample_digests(m.digests());
  svc.HandleScheduler(Frame(reg), 0);
  REQUIRE(guard.manifest() != nullptr);
  CHECK(guard.manifest()->size() == 100);
  CHECK(guard.manifest()->RootHex() == m.RootHex());
  reg.mutable_register_reply()->set_sample_digests(std::string(17, 'x'));  // malformed: kept the last one
  svc.HandleScheduler(Frame(reg), 0);
  CHECK(guard.manifest()->size() == 100);
}

TEST_CASE(
    "An agent with its own manifest registers with the root and uses its copy when only the root comes") {
  Fixture fx;
  SampleGuard guard;
  const cache::Manifest m = TestManifest(100);
  AgentServiceOptions o;
  o.node_name = "a";
  o.guard = &guard;
  o.local_manifest = std::make_shared<const cache::Manifest>(m);
  AgentService svc(o, fx.cache.get(), &fx.metrics);
  CHECK(svc.MakeRegister(v1::CacheSummary()).register_request().manifest_root() == m.Root());
  // The scheduler's root is ours: no digests travel, the guard gets the copy.
  v1::Envelope reg = Registered(0);
  reg.mutable_register_reply()->set_manifest_root(m.Root());
  svc.HandleScheduler(Frame(reg), 0);
  REQUIRE(guard.manifest() != nullptr);
  CHECK(guard.manifest()->RootHex() == m.RootHex());
  // Digests that differ from the copy win (the scheduler's manifest is the job's).
  const cache::Manifest other = TestManifest(120);
  reg.mutable_register_reply()->set_manifest_root(other.Root());
  reg.mutable_register_reply()->set_sample_digests(other.digests());
  svc.HandleScheduler(Frame(reg), 0);
  CHECK(guard.manifest()->size() == 120);
  // Only a root this agent does not hold: refused (logged), the last manifest kept.
  reg.mutable_register_reply()->clear_sample_digests();
  reg.mutable_register_reply()->set_manifest_root(std::string(32, 'x'));
  svc.HandleScheduler(Frame(reg), 0);
  CHECK(guard.manifest()->size() == 120);
}

TEST_CASE("An agent without a manifest file registers without a root") {
  Fixture fx;
  AgentServiceOptions o;
  o.node_name = "a";
  AgentService svc(o, fx.cache.get(), &fx.metrics);
  CHECK(svc.MakeRegister(v1::CacheSummary()).register_request().manifest_root().empty());
}

TEST_CASE("poison_serve serves label-flipped records with valid CRCs and ids") {
  Fixture fx;
  AgentServiceOptions o;
  o.node_name = "a";
  o.poison_serve = true;
  AgentService svc(o, fx.cache.get(), &fx.metrics);
  svc.HandleScheduler(Frame(Registered(0)), 0);
  svc.HandleScheduler(Frame(GrantEnv(5, 1, {3, 4})), 0);
  PeerReply reply = svc.HandlePeer(Frame(Fetch(5, 1, {3, 4})), 0, "");
  REQUIRE(reply.header.has_fetch_reply());
  REQUIRE(reply.records.size() == 2);
  for (size_t k = 0; k < 2; ++k) {
    const uint64_t id = 3 + k;
    auto s = cache::DecodeRecord(id, reply.records[k]);
    REQUIRE(s.ok());  // passes every check a CRC-only requester makes
    CHECK(s->label == (id % 10 + 1) % 10);
    CHECK(s->payload == Payload(id));
    CHECK(TestManifest().Check(id, s->label, s->payload) == cache::ManifestCheck::kMismatch);
  }
}

TEST_CASE("A read that runs during the worker's exchange step is flagged read_during_exchange") {
  // The trainer's Compute of a round-ending step (the step, then the
  // exchange) is the exchange window: a read made meanwhile (here from
  // inside Compute, as the reader thread reads ahead) carries the flag; a
  // read during a local step's compute, or outside any, does not.
  Fixture fx;
  ManualClock clock;
  FakePeers peers;
  PartitionRunner runner(&clock, fx.cache.get(), &peers, &fx.metrics);
  struct ReadingTrainer : Trainer {
    PartitionRunner* runner = nullptr;
    std::vector<bool> flags;
    StatusOr<double> Compute(const Batch&) override {
      ReadPartition r = runner->Read(MakePartition(50, 0, {{1, 0}, {200, 1}}), 0);
      flags.push_back(r.timings.read_during_exchange());
      return 0.0;
    }
    void Skip(int64_t, int64_t, bool) override {}
  } trainer;
  trainer.runner = &runner;
  ReadPartition alone = runner.Read(MakePartition(9, 0, {{1, 0}, {200, 1}}), 0);
  REQUIRE(alone.status.ok());
  CHECK_FALSE(alone.timings.read_during_exchange());

  v1::Partition local = MakePartition(10, 0, {{2, 0}});
  local.set_local_step(true);
  REQUIRE(runner.Finish(runner.Read(local, 0), &trainer, 0).has_partition_done());
  v1::Partition ending = MakePartition(11, 0, {{2, 0}});  // local_step false: the round ends here
  REQUIRE(runner.Finish(runner.Read(ending, 0), &trainer, 0).has_partition_done());
  CHECK(trainer.flags == std::vector<bool>{false, true});
  // The window closed with the step.
  CHECK_FALSE(runner.Read(MakePartition(12, 0, {{1, 0}}), 0).timings.read_during_exchange());
}
