// PartitionPipeline's reader and compute threads with a real PartitionRunner
// over a RocksDB cache in a temp dir, a fake PeerClient (every sample is a
// peer's, so a partition's read is its FetchAll) and a fake Trainer whose
// Compute holds its partition until the test releases it. The only socket
// is the pipeline's inproc wake pair.
#include "edge_agent/partition_pipeline.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "cache/sample_cache.h"
#include "core/clock.h"
#include "core/codec.h"
#include "core/metrics.h"
#include "core/read_ahead.h"
#include "test_util.h"

using namespace loft;
using namespace loft::agent;
using namespace loft::agent::testing;

namespace {

// Long enough for anything that should happen: a test waits it out only
// when it fails.
constexpr std::chrono::milliseconds kSurely{10000};

// What the fakes saw, shared by them and the test.
struct Probe {
  std::mutex mu;
  std::condition_variable cv;
  int reading = 0;          // reads (FetchAll) in progress
  int computing = 0;        // Computes in progress
  bool overlapped = false;  // a read and a Compute were in progress at once
  bool free_reads = false;  // reads do not wait for the previous Compute (ProbePeers)
  std::set<uint64_t> read_started, compute_started, released, compute_done;

  // Waits until `pred` holds (under mu); false after `timeout`.
  template <class Pred>
  bool WaitFor(Pred pred, std::chrono::milliseconds timeout = kSurely) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, pred);
  }
  void Release(uint64_t partition) {
    {
      std::lock_guard lock(mu);
      released.insert(partition);
    }
    cv.notify_all();
  }
};

// The read of partition p (p > 1) lasts until the Compute of p - 1 has
// begun (at most kSurely), so a reader that reads ahead is caught reading
// while that Compute runs; then it serves valid records.
class ProbePeers final : public PeerClient {
 public:
  explicit ProbePeers(Probe* probe) : probe_(probe) {}
  std::map<int32_t, PeerFetchResult> FetchAll(uint64_t partition_id, int32_t,
                                              const std::map<int32_t, std::vector<uint64_t>>& ids) override {
    {
      std::unique_lock lock(probe_->mu);
      ++probe_->reading;
      probe_->overlapped |= probe_->computing > 0;
      probe_->read_started.insert(partition_id);
      probe_->cv.notify_all();
      probe_->cv.wait_for(lock, kSurely, [&] {
        return probe_->free_reads || partition_id <= 1 || probe_->compute_started.count(partition_id - 1) > 0;
      });
      --probe_->reading;
    }
    probe_->cv.notify_all();
    std::map<int32_t, PeerFetchResult> out;
    for (const auto& [peer, list] : ids) {
      PeerFetchResult& r = out[peer];
      for (uint64_t id : list)
        r.records.push_back(cache::EncodeRecord(id, static_cast<uint16_t>(id % 10), Payload(id)));
    }
    return out;
  }

 private:
  Probe* probe_;
};

// Compute holds its partition until the test releases it.
class ProbeTrainer final : public Trainer {
 public:
  explicit ProbeTrainer(Probe* probe) : probe_(probe) {}
  StatusOr<double> Compute(const Batch& batch) override {
    std::unique_lock lock(probe_->mu);
    ++probe_->computing;
    probe_->overlapped |= probe_->reading > 0;
    probe_->compute_started.insert(batch.partition_id);
    probe_->cv.notify_all();
    probe_->cv.wait(lock, [&] { return probe_->released.count(batch.partition_id) > 0; });
    --probe_->computing;
    probe_->compute_done.insert(batch.partition_id);
    probe_->cv.notify_all();
    return 0.5;
  }

 private:
  Probe* probe_;
};

v1::Partition PeerPartition(uint64_t id, int64_t iteration) {
  v1::Partition p;
  p.set_id(id);
  p.set_worker(0);
  p.set_attempt(1);
  p.set_iteration(iteration);
  for (uint64_t s = 0; s < 4; ++s) {
    p.add_sample_ids(id * 10 + s);
    p.add_sources(1);  // a peer's: the agent (node -1, not registered) fetches them
  }
  return p;
}

// A cache in a temp dir (every sample is a peer's here), the agent's
// metrics and its service, the probe and peers its trainer and fetches
// report to: what each pipeline below runs over.
struct AgentParts {
  TempDir dir;
  std::unique_ptr<cache::SampleCache> db;
  metrics::Registry registry;
  std::optional<AgentMetrics> metrics;
  std::optional<AgentService> service;
  AgentParts() {
    MakeCache(dir.Sub("db"), {});
    auto opened = cache::SampleCache::Open(dir.Sub("db"));
    REQUIRE(opened.ok());
    db = std::move(*opened);
    auto m = AgentMetrics::Create(&registry);
    REQUIRE(m.ok());
    metrics.emplace(*m);
    AgentServiceOptions so;
    so.node_name = "a";
    so.peer_endpoint = "tcp://127.0.0.1:9000";
    so.credits = 2;  // a window the tests below fill
    service.emplace(so, db.get(), &*metrics);
  }
  // What a test's trainer and the pipeline's peer fetches report to.
  Probe probe;
  ProbePeers peers{&probe};
  std::optional<PartitionRunner> runner;
  zmq::context_t ctx{1};
  // A started pipeline over these parts, reading with `clock`.
  std::unique_ptr<PartitionPipeline> Start(Clock* clock, Trainer* trainer, bool overlap,
                                           int ready_depth = 1) {
    runner.emplace(clock, db.get(), &peers, &*metrics);
    auto created =
        PartitionPipeline::Create(&ctx, &*runner, trainer, &*service, &*metrics, overlap, ready_depth);
    REQUIRE(created.ok());
    (*created)->Start();
    return std::move(*created);
  }
};

}  // namespace

TEST_CASE("overlap false: no read while the compute thread works, overlap true: the reader reads ahead") {
  for (const bool overlap : {false, true}) {
    INFO("overlap " << overlap);
    AgentParts a;
    SystemClock clock;
    ProbeTrainer trainer(&a.probe);
    auto started = a.Start(&clock, &trainer, overlap);
    PartitionPipeline& pipeline = *started;
    // Two partitions at once, as when the scheduler plans ahead.
    pipeline.Enqueue({PeerPartition(1, 0), PeerPartition(2, 1)});

    // Partition 1 is read, then held in Compute.
    REQUIRE(a.probe.WaitFor([&] { return a.probe.compute_started.count(1) > 0; }));
    if (overlap) {
      // The control: partition 2's read runs while partition 1 computes.
      REQUIRE(a.probe.WaitFor([&] { return a.probe.overlapped; }));
    } else {
      // The reader is given time to start partition 2's read and must not:
      // only the wait keeps it from doing so within microseconds (so this
      // pass is not luck; a stalled machine could hide a regression here,
      // never fail a correct pipeline).
      CHECK_FALSE(
          a.probe.WaitFor([&] { return a.probe.read_started.count(2) > 0; }, std::chrono::milliseconds(300)));
    }
    a.probe.Release(1);
    // Partition 1's report is queued: partition 2 is read (at once, if it
    // was not already) and computed.
    REQUIRE(a.probe.WaitFor([&] { return a.probe.read_started.count(2) > 0; }));
    a.probe.Release(2);
    REQUIRE(a.probe.WaitFor([&] { return a.probe.compute_done.count(2) > 0; }));
    pipeline.Stop();
    {
      std::lock_guard lock(a.probe.mu);
      CHECK(a.probe.overlapped == overlap);
    }
    int done = 0;
    for (const v1::Envelope& e : pipeline.TakeReports()) done += e.has_partition_done() ? 1 : 0;
    CHECK(done == 2);
  }
}

// training.exchange.overlap (core/read_ahead.h): while the compute thread
// holds a partition (an exchange, here a held Compute) the reader reads
// ReadyDepth partitions ahead, and one more it holds until there is room.
TEST_CASE("ready depth: the reader reads as many partitions ahead as the spec's exchange overlap allows") {
  for (const int depth : {1, kExchangeReadAhead}) {
    INFO("ready depth " << depth);
    AgentParts a;
    a.probe.free_reads = true;
    SystemClock clock;
    ProbeTrainer trainer(&a.probe);
    auto started = a.Start(&clock, &trainer, /*overlap=*/true, depth);
    PartitionPipeline& pipeline = *started;
    std::vector<v1::Partition> parts;
    for (int id = 1; id <= 7; ++id) parts.push_back(PeerPartition(static_cast<uint64_t>(id), 0));
    pipeline.Enqueue(std::move(parts));
    REQUIRE(a.probe.WaitFor([&] { return a.probe.compute_started.count(1) > 0; }));
    // 1 computing, `depth` ready, one more read and held.
    const auto last = static_cast<uint64_t>(depth + 2);
    REQUIRE(a.probe.WaitFor([&] { return a.probe.read_started.count(last) > 0; }));
    CHECK_FALSE(a.probe.WaitFor([&] { return a.probe.read_started.count(last + 1) > 0; },
                                std::chrono::milliseconds(300)));
    for (uint64_t id = 1; id <= 7; ++id) a.probe.Release(id);
    REQUIRE(a.probe.WaitFor([&] { return a.probe.compute_done.count(7) > 0; }));
    pipeline.Stop();
    int done = 0;
    for (const v1::Envelope& e : pipeline.TakeReports()) done += e.has_partition_done() ? 1 : 0;
    CHECK(done == 7);
  }
}

namespace {

// ProbeTrainer's hold, plus: records every StartedLate, and once partition
// 1's Compute is done the first TakeOffences (which the compute thread
// calls after queuing a report, before it takes the next batch) moves the
// clock 250 µs on: the compute thread "waited for a core" that long.
class LateTrainer final : public Trainer {
 public:
  LateTrainer(Probe* probe, ManualClock* clock) : hold_(probe), probe_(probe), clock_(clock) {}
  StatusOr<double> Compute(const Batch& batch) override { return hold_.Compute(batch); }
  std::vector<RingOffence> TakeOffences() override {
    std::lock_guard lock(probe_->mu);
    if (probe_->compute_done.count(1) > 0 && !advanced_) {
      advanced_ = true;
      clock_->Advance(250);
    }
    return {};
  }
  void StartedLate(int64_t micros) override {
    std::lock_guard lock(probe_->mu);
    late.push_back(micros);
  }
  std::vector<int64_t> late;  // under probe_->mu

 private:
  ProbeTrainer hold_;
  Probe* probe_;
  ManualClock* clock_;
  bool advanced_ = false;
};

}  // namespace

TEST_CASE("the compute thread tells the trainer how long a ready batch waited for it") {
  AgentParts a;
  ManualClock clock(1'000'000);
  LateTrainer trainer(&a.probe, &clock);
  auto started = a.Start(&clock, &trainer, /*overlap=*/true);
  PartitionPipeline& pipeline = *started;
  pipeline.Enqueue({PeerPartition(1, 0), PeerPartition(2, 1), PeerPartition(3, 2)});
  // Partition 1 computes; partition 3's read has begun, so partition 2
  // was read and is ready (prefetch depth 1) before partition 1 ends.
  REQUIRE(a.probe.WaitFor(
      [&] { return a.probe.compute_started.count(1) > 0 && a.probe.read_started.count(3) > 0; }));
  a.probe.Release(1);
  // Partition 2 was ready when partition 1 ended; the thread took it 250 µs
  // later. Partition 3 becomes ready only while 2 computes (ProbePeers):
  // on time.
  REQUIRE(a.probe.WaitFor([&] { return a.probe.compute_started.count(2) > 0; }));
  a.probe.Release(2);
  REQUIRE(a.probe.WaitFor([&] { return a.probe.compute_started.count(3) > 0; }));
  a.probe.Release(3);
  REQUIRE(a.probe.WaitFor([&] { return a.probe.compute_done.count(3) > 0; }));
  pipeline.Stop();
  std::lock_guard lock(a.probe.mu);
  CHECK(trainer.late == std::vector<int64_t>{0, 250, 0});
}

namespace {

// ProbeTrainer's hold, plus: counts Idle calls and says whether it wants them.
class IdleCountingTrainer final : public Trainer {
 public:
  IdleCountingTrainer(Probe* probe, bool wants) : hold_(probe), wants_(wants) {}
  StatusOr<double> Compute(const Batch& batch) override { return hold_.Compute(batch); }
  void Idle() override { ++idle_calls; }
  bool WantsIdle() const override { return wants_; }
  // The compute thread's idle loop also takes the offences after each
  // 10 ms wait: counted, a loop that still woke but skipped Idle shows.
  std::vector<RingOffence> TakeOffences() override {
    ++offence_takes;
    return {};
  }
  std::atomic<int> idle_calls{0};
  std::atomic<int> offence_takes{0};

 private:
  ProbeTrainer hold_;
  bool wants_;
};

}  // namespace

TEST_CASE(
    "an idle compute thread calls Idle every 10 ms only for a trainer that wants it, and sleeps otherwise") {
  for (const bool wants : {true, false}) {
    INFO("WantsIdle " << wants);
    AgentParts a;
    SystemClock clock;
    IdleCountingTrainer trainer(&a.probe, wants);
    auto started = a.Start(&clock, &trainer, /*overlap=*/true);
    PartitionPipeline& pipeline = *started;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (wants) {
      CHECK(trainer.idle_calls.load() >= 2);  // about 10 in 100 ms
    } else {
      CHECK(trainer.idle_calls.load() == 0);
      CHECK(trainer.offence_takes.load() == 0);  // it never woke
    }
    // A thread asleep without a timeout still takes the next batch.
    pipeline.Enqueue({PeerPartition(1, 0)});
    REQUIRE(a.probe.WaitFor([&] { return a.probe.compute_started.count(1) > 0; }));
    a.probe.Release(1);
    REQUIRE(a.probe.WaitFor([&] { return a.probe.compute_done.count(1) > 0; }));
    pipeline.Stop();
  }
}

namespace {

// ProbeTrainer's hold, plus: once partition 1's Compute is done, the next
// TakeOffences (the compute thread's, before it queues partition 1's
// report) returns one offence to report, so the outbox holds a PeerReport
// next to the PartitionDone.
class OffenceTrainer final : public Trainer {
 public:
  explicit OffenceTrainer(Probe* probe) : hold_(probe), probe_(probe) {}
  StatusOr<double> Compute(const Batch& batch) override { return hold_.Compute(batch); }
  std::vector<RingOffence> TakeOffences() override {
    std::lock_guard lock(probe_->mu);
    if (probe_->compute_done.count(1) == 0 || reported_) return {};
    reported_ = true;
    return {RingOffence{.node = 1, .reason = "chunk_mismatch", .count = 8, .report = true}};
  }

 private:
  ProbeTrainer hold_;
  Probe* probe_;
  bool reported_ = false;
};

std::string Frame(const v1::Envelope& env) {
  auto b = Encode(env);
  REQUIRE(b.ok());
  return *b;
}

// What the scheduler sends: the registration (node 0, view with peer 1)
// and an assignment.
void Register(AgentService& service) {
  v1::Envelope reg;
  reg.mutable_register_reply()->set_node(0);
  reg.mutable_register_reply()->set_view(1);
  (void)service.HandleScheduler(Frame(reg), 0);
  v1::Envelope view;
  view.mutable_view()->set_view(2);
  for (int32_t n : {0, 1}) {
    v1::Member* m = view.mutable_view()->add_members();
    m->set_node(n);
    m->set_name(n == 0 ? "a" : "b");
    m->set_peer_endpoint("tcp://127.0.0.1:" + std::to_string(9000 + n));
  }
  (void)service.HandleScheduler(Frame(view), 0);
}
std::vector<v1::Partition> Assign(AgentService& service, v1::Partition p) {
  v1::Envelope a;
  *a.mutable_assignment()->mutable_partition() = std::move(p);
  return service.HandleScheduler(Frame(a), 0).run;
}

}  // namespace

// The poll loop sends each queued report, then what ReportSent returns
// (ZmqAgentServer::FlushReports). A PeerReport finishes no partition: it
// must neither free a slot of the window nor grant the scheduler a credit,
// or the agent accepts more partitions than it granted.
TEST_CASE("a PeerReport frees no slot and returns no credit: only a partition report does") {
  AgentParts a;
  SystemClock clock;
  OffenceTrainer trainer(&a.probe);
  AgentService& service = *a.service;  // credits 2
  Register(service);
  auto started = a.Start(&clock, &trainer, /*overlap=*/true);
  PartitionPipeline& pipeline = *started;
  std::vector<v1::Partition> run = Assign(service, PeerPartition(1, 0));
  REQUIRE(run.size() == 1);
  auto second = Assign(service, PeerPartition(2, 1));
  REQUIRE(second.size() == 1);
  run.push_back(second[0]);
  REQUIRE(service.in_flight() == 2);
  pipeline.Enqueue(std::move(run));

  // Partition 1 ends with an offence to report; partition 2 stays held.
  REQUIRE(a.probe.WaitFor([&] { return a.probe.compute_started.count(1) > 0; }));
  a.probe.Release(1);
  std::vector<v1::Envelope> sent;
  int grants = 0;
  bool done = false;
  for (int tries = 0; tries < 1000 && !done; ++tries) {
    for (const v1::Envelope& r : pipeline.TakeReports()) {
      sent.push_back(r);
      done = done || r.has_partition_done();
      if (std::optional<v1::Envelope> grant = service.ReportSent(r)) {
        REQUIRE(grant->has_credit_grant());
        grants += static_cast<int>(grant->credit_grant().credits());
      }
    }
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(done);
  int peer_reports = 0;
  for (const v1::Envelope& r : sent) peer_reports += r.has_peer_report() ? 1 : 0;
  CHECK(peer_reports == 1);  // the control: the outbox did mix the two kinds
  CHECK(grants == 1);
  CHECK(service.in_flight() == 1);  // partition 2 still runs
  // One slot is free, not two: the window of 2 holds.
  CHECK(Assign(service, PeerPartition(3, 2)).size() == 1);
  CHECK(Assign(service, PeerPartition(4, 3)).empty());

  // A failed partition's report frees its slot too.
  v1::Envelope failed;
  failed.mutable_partition_failed()->set_partition_id(3);
  std::optional<v1::Envelope> grant = service.ReportSent(failed);
  REQUIRE(grant.has_value());
  CHECK(grant->credit_grant().credits() == 1);
  CHECK(service.in_flight() == 1);

  a.probe.Release(2);
  pipeline.Stop();
}
