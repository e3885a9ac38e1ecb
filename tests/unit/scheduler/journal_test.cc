#include "scheduler/journal.h"

#include <rocksdb/db.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/crc.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "scheduler/driver.h"
#include "state_fakes.h"

using loft::sched::JobDriver;
using loft::sched::Journal;
using loft::sched::testing::FailedReport;
using loft::sched::testing::FakePolicy;
using loft::sched::testing::SmallSpec;
using loft::sched::testing::TimedDone;

namespace {
struct TempDir {
  TempDir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() / ("loft-journal-test-" + std::to_string(rd()));
    std::filesystem::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::filesystem::path path;
};

loft::v1::StateUpdate Registered(int node, int64_t view) {
  loft::v1::StateUpdate u;
  u.mutable_worker_registered()->set_node(node);
  u.mutable_worker_registered()->set_view(view);
  return u;
}

// The journal's RocksDB opened directly (both column families), to damage
// or inspect what Journal wrote.
struct RawJournal {
  explicit RawJournal(const std::string& path) {
    rocksdb::Options o;
    o.create_if_missing = true;
    o.create_missing_column_families = true;
    const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
        {"snapshots", rocksdb::ColumnFamilyOptions()}};
    REQUIRE(rocksdb::DB::Open(rocksdb::DBOptions(o), path, families, &handles, &db).ok());
  }
  ~RawJournal() {
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    delete db;
  }
  rocksdb::ColumnFamilyHandle* entries() const { return handles[0]; }
  rocksdb::ColumnFamilyHandle* snapshots() const { return handles[1]; }
  void Put(rocksdb::ColumnFamilyHandle* cf, uint64_t seq, const std::string& value) {
    REQUIRE(db->Put(rocksdb::WriteOptions(), cf, Journal::EncodeKey(seq), value).ok());
  }
  void Delete(rocksdb::ColumnFamilyHandle* cf, uint64_t seq) {
    REQUIRE(db->Delete(rocksdb::WriteOptions(), cf, Journal::EncodeKey(seq)).ok());
  }
  std::string Get(rocksdb::ColumnFamilyHandle* cf, uint64_t seq) {
    std::string v;
    REQUIRE(db->Get(rocksdb::ReadOptions(), cf, Journal::EncodeKey(seq), &v).ok());
    return v;
  }
  // Sequence numbers of every key in `cf`.
  std::vector<uint64_t> Keys(rocksdb::ColumnFamilyHandle* cf) {
    std::vector<uint64_t> out;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cf));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      uint64_t seq = 0;
      for (unsigned char c : it->key().ToStringView()) seq = (seq << 8) | c;
      out.push_back(seq);
    }
    return out;
  }
  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
};

void PutRaw(const std::string& path, uint64_t seq, const std::string& value) {
  RawJournal raw(path);
  raw.Put(raw.entries(), seq, value);
}
}  // namespace

TEST_CASE("Journal: append, reopen, read back in order", "[journal]") {
  TempDir dir;
  {
    auto j = Journal::Open(dir.path.string());
    REQUIRE(j.ok());
    CHECK((*j)->next_seq() == 0);
    REQUIRE((*j)->Append(Registered(0, 1)).ok());
    std::vector<loft::v1::StateUpdate> two = {Registered(1, 2), Registered(2, 3)};
    REQUIRE((*j)->AppendAll(two).ok());
    CHECK((*j)->next_seq() == 3);
  }
  auto j = Journal::Open(dir.path.string());
  REQUIRE(j.ok());
  CHECK((*j)->next_seq() == 3);
  auto all = (*j)->ReadAll();
  REQUIRE(all.ok());
  REQUIRE(all->size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK((*all)[i].worker_registered().node() == i);
    CHECK((*all)[i].worker_registered().view() == i + 1);
  }
  loft::v1::StateUpdate empty;
  CHECK((*j)->Append(empty).code() == loft::StatusCode::kInvalidArgument);
  CHECK((*j)->next_seq() == 3);
}

TEST_CASE("Journal: unsynced appends share the sequence and read back", "[journal]") {
  TempDir dir;
  {
    auto j = Journal::Open(dir.path.string());
    REQUIRE(j.ok());
    REQUIRE((*j)->Append(Registered(0, 1)).ok());
    std::vector<loft::v1::StateUpdate> two = {Registered(1, 2), Registered(2, 3)};
    REQUIRE((*j)->AppendAllUnsynced(two).ok());
    CHECK((*j)->next_seq() == 3);
    REQUIRE((*j)->Append(Registered(3, 4)).ok());
    CHECK((*j)->next_seq() == 4);
    std::vector<loft::v1::StateUpdate> bad(1);
    CHECK((*j)->AppendAllUnsynced(bad).code() == loft::StatusCode::kInvalidArgument);
    CHECK((*j)->next_seq() == 4);
  }
  auto j = Journal::Open(dir.path.string());
  REQUIRE(j.ok());
  auto all = (*j)->ReadAll();
  REQUIRE(all.ok());
  REQUIRE(all->size() == 4);
  for (int i = 0; i < 4; ++i) CHECK((*all)[i].worker_registered().node() == i);
}

TEST_CASE("Journal: keys are big-endian sequence numbers", "[journal]") {
  CHECK(Journal::EncodeKey(0x0102030405060708ULL) == std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  CHECK(Journal::EncodeKey(1) < Journal::EncodeKey(256));
}

TEST_CASE("Journal: corrupt, truncated and missing entries are DataLoss naming the sequence", "[journal]") {
  const std::string good = Journal::EncodeValue(Registered(0, 1));
  SECTION("truncated") {
    auto d = Journal::DecodeValue(7, std::string_view(good).substr(0, good.size() - 2));
    CHECK(d.status().code() == loft::StatusCode::kDataLoss);
    CHECK(d.status().message().find("entry 7") != std::string::npos);
  }
  SECTION("too short") {
    auto d = Journal::DecodeValue(3, "ab");
    CHECK(d.status().code() == loft::StatusCode::kDataLoss);
    CHECK(d.status().message().find("entry 3") != std::string::npos);
  }
  SECTION("bit flip") {
    std::string bad = good;
    bad[bad.size() - 1] ^= 0x10;
    CHECK(Journal::DecodeValue(0, bad).status().code() == loft::StatusCode::kDataLoss);
  }
  SECTION("in the database") {
    TempDir dir;
    {
      auto j = Journal::Open(dir.path.string());
      REQUIRE(j.ok());
      std::vector<loft::v1::StateUpdate> us = {Registered(0, 1), Registered(1, 2), Registered(2, 3)};
      REQUIRE((*j)->AppendAll(us).ok());
    }
    PutRaw(dir.path.string(), 1, good.substr(0, good.size() - 1));
    auto j = Journal::Open(dir.path.string());
    REQUIRE(j.ok());
    auto all = (*j)->ReadAll();
    CHECK(all.status().code() == loft::StatusCode::kDataLoss);
    CHECK(all.status().message().find("entry 1") != std::string::npos);
  }
  SECTION("gap") {
    TempDir dir;
    {
      auto j = Journal::Open(dir.path.string());
      REQUIRE(j.ok());
      REQUIRE((*j)->Append(Registered(0, 1)).ok());
    }
    PutRaw(dir.path.string(), 2, good);
    auto j = Journal::Open(dir.path.string());
    REQUIRE(j.ok());
    CHECK((*j)->next_seq() == 3);
    auto all = (*j)->ReadAll();
    CHECK(all.status().code() == loft::StatusCode::kDataLoss);
    CHECK(all.status().message().find("entry 1 is missing") != std::string::npos);
  }
}

TEST_CASE("Journal: a journaled run recovers to identical state and continues identically", "[journal]") {
  TempDir dir;
  const auto spec = SmallSpec(300, 2, 48);
  loft::sched::StateOptions opt;
  opt.timeout_min_ms = 100;
  auto live = JobDriver::CreateWithPolicy(spec, std::make_unique<FakePolicy>(true), opt);
  REQUIRE(live.ok());
  JobDriver& drv = **live;
  auto j = Journal::Open(dir.path.string());
  REQUIRE(j.ok());
  auto journal = [&](const loft::StatusOr<loft::sched::Updates>& u) {
    REQUIRE(u.ok());
    REQUIRE((*j)->AppendAll(*u).ok());  // journal before acting
    return *u;
  };
  for (int i = 0; i < spec.num_nodes(); ++i) journal(drv.RegisterWorker(i, 0));
  double now = 0;
  for (int it = 0; it < 12; ++it) {
    now += 10;
    auto parts = JobDriver::PartitionsToSend(journal(drv.PlanNextIteration(now)));
    for (size_t k = 0; k < parts.size(); ++k) {
      const auto& p = parts[k];
      if (k == 1 && it % 3 == 0) {
        loft::v1::PartitionFailed f = FailedReport(p, "");
        journal(drv.OnPartitionFailed(f, now));
        continue;
      }
      if (k == 2 && it == 4) continue;  // left in flight across the restart
      loft::v1::PartitionDone d;
      d.set_partition_id(p.id());
      d.set_attempt(p.attempt());
      d.set_node(p.worker());
      d.mutable_timings()->set_compute_ms(3.0 + k);
      d.mutable_timings()->set_local_read_ms(1.0);
      journal(drv.OnPartitionDone(d, now + 1));
    }
  }
  j->reset();  // "crash"
  auto reopened = Journal::Open(dir.path.string());
  REQUIRE(reopened.ok());
  auto updates = (*reopened)->ReadAll();
  REQUIRE(updates.ok());
  auto rec = JobDriver::RecoverWithPolicy(spec, std::make_unique<FakePolicy>(true), opt, *updates);
  REQUIRE(rec.ok());
  CHECK((*rec)->state().ToJson() == drv.state().ToJson());
  // Both continue identically: the same next plan and timeouts.
  auto a = drv.PlanNextIteration(now + 10);
  auto b = (*rec)->PlanNextIteration(now + 10);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->size() == b->size());
  for (size_t k = 0; k < a->size(); ++k) CHECK((*a)[k].SerializeAsString() == (*b)[k].SerializeAsString());
  auto ta = drv.CheckTimeouts(now + 1e6);
  auto tb = (*rec)->CheckTimeouts(now + 1e6);
  REQUIRE(ta.ok());
  REQUIRE(tb.ok());
  CHECK(ta->size() == tb->size());
  CHECK_FALSE(ta->empty());
  CHECK((*rec)->state().Digest() == drv.state().Digest());
}

TEST_CASE("Journal entries written with the former mirror messages still parse", "[journal]") {
  // StateUpdates serialized by the schema that embedded JournaledPartition /
  // JournaledDone / JournaledFailed (field-for-field mirrors of the wire
  // messages), kept as bytes: an IterationPlanned with one child partition,
  // a PartitionDone with timings and a per-peer map, a PartitionFailed.
  const std::string planned(
      "\x22\x48\x08\x03\x10\x01\x18\x04\x21\x00\x00\x00\x00\x00\x00\x29\x40\x2a\x2f\x0a\x24\x08\x07\x10\x01"
      "\x18\x01\x20\x03\x28\x02\x30\x01\x38\x05\x42"
      "\x03\x0a\xac\x02\x4a\x02\x02\x00\x50\x04\x59\x00\x00\x00\x00\x00\x00\xf8\x3f\x60\x06\x11\x00\x00\x00"
      "\x00\x00\xc0\x58\x40\x30\x02\x42\x04\x6c\x6f\x66\x74",
      74);
  const std::string done(
      "\x32\x29\x0a\x1e\x08\x07\x10\x01\x18\x02\x22\x16\x19\x00\x00\x00\x00\x00\x00\x0a\x40\x42\x0b\x08\x00"
      "\x11\x00\x00\x00\x00\x00\x00\xe0\x3f\x11\x00\x00\x00\x00\x00\x00\x34\x40",
      43);
  const std::string failed(
      "\x3a\x15\x0a\x0a\x08\x08\x18\x01\x22\x04\x64\x69\x73\x6b\x11\x00\x00\x00\x00\x00\x00\x35\x40", 23);

  loft::v1::StateUpdate u;
  REQUIRE(u.ParseFromString(planned));
  REQUIRE(u.has_iteration_planned());
  const auto& ip = u.iteration_planned();
  CHECK(ip.iteration() == 3);
  CHECK(ip.epoch() == 1);
  CHECK(ip.plan_id() == 4);
  CHECK(ip.now_ms() == 12.5);
  CHECK(ip.global_batch() == 2);
  CHECK(ip.policy() == "loft");
  REQUIRE(ip.partitions_size() == 1);
  CHECK(ip.partitions(0).deadline_ms() == 99);
  const loft::v1::Partition& p = ip.partitions(0).partition();
  CHECK(p.id() == 7);
  CHECK(p.job() == 1);
  CHECK(p.epoch() == 1);
  CHECK(p.iteration() == 3);
  CHECK(p.worker() == 2);
  CHECK(p.attempt() == 1);
  CHECK(p.parent() == 5);
  REQUIRE(p.sample_ids_size() == 2);
  CHECK(p.sample_ids(0) == 10);
  CHECK(p.sample_ids(1) == 300);
  REQUIRE(p.sources_size() == 2);
  CHECK(p.sources(0) == 2);
  CHECK(p.sources(1) == 0);
  CHECK(p.plan_id() == 4);
  CHECK(p.predicted_ms() == 1.5);
  CHECK(p.view() == 6);
  CHECK(u.SerializeAsString() == planned);

  loft::v1::StateUpdate d;
  REQUIRE(d.ParseFromString(done));
  REQUIRE(d.has_partition_done());
  CHECK(d.partition_done().now_ms() == 20);
  const loft::v1::PartitionDone& pd = d.partition_done().done();
  CHECK(pd.partition_id() == 7);
  CHECK(pd.attempt() == 1);
  CHECK(pd.node() == 2);
  CHECK(pd.timings().compute_ms() == 3.25);
  CHECK(pd.timings().remote_read_ms_by_peer().at(0) == 0.5);
  CHECK(d.SerializeAsString() == done);

  loft::v1::StateUpdate f;
  REQUIRE(f.ParseFromString(failed));
  REQUIRE(f.has_partition_failed());
  CHECK(f.partition_failed().now_ms() == 21);
  CHECK(f.partition_failed().failed().partition_id() == 8);
  CHECK(f.partition_failed().failed().node() == 1);
  CHECK(f.partition_failed().failed().reason() == "disk");
  CHECK(f.SerializeAsString() == failed);

  // Through the journal's own framing too.
  auto decoded = Journal::DecodeValue(0, Journal::EncodeValue(u));
  REQUIRE(decoded.ok());
  CHECK(decoded->SerializeAsString() == planned);
}

TEST_CASE("Journal values carry the boost::crc_32_type CRC of the payload", "[journal]") {
  // The CRC is computed with zlib; the format defines it as the CRC-32 that
  // boost::crc_32_type computes. Payloads of several sizes, incl. empty-ish.
  for (int n : {0, 1, 7, 100, 5000}) {
    loft::v1::StateUpdate u;
    auto* ip = u.mutable_iteration_planned();
    ip->set_iteration(n);
    auto* p = ip->add_partitions()->mutable_partition();
    for (int k = 0; k < n; ++k) {
      p->add_sample_ids(static_cast<uint64_t>(k) * 2654435761ULL);
      p->add_sources(k % 13);
    }
    const std::string value = Journal::EncodeValue(u);
    const std::string payload = u.SerializeAsString();
    REQUIRE(value.size() == payload.size() + 4);
    CHECK(value.substr(4) == payload);
    boost::crc_32_type crc;
    crc.process_bytes(payload.data(), payload.size());
    uint32_t stored = 0;
    for (int i = 0; i < 4; ++i)
      stored |= static_cast<uint32_t>(static_cast<unsigned char>(value[i])) << (8 * i);
    CHECK(stored == crc.checksum());
    auto back = Journal::DecodeValue(1, value);
    REQUIRE(back.ok());
    CHECK(back->SerializeAsString() == payload);
  }
}

TEST_CASE("Journal: large and small writes and a rejected batch read back exactly", "[journal]") {
  // Write reuses its batch and value buffers: a small entry after a large
  // one must not carry stale bytes, and a rejected batch must leave nothing
  // behind for the next write.
  auto big = [](uint64_t first, int n) {
    loft::v1::StateUpdate u;
    auto* p = u.mutable_iteration_planned()->add_partitions()->mutable_partition();
    p->set_id(first);
    for (int k = 0; k < n; ++k) {
      p->add_sample_ids(first * 100000 + static_cast<uint64_t>(k));
      p->add_sources(k % 7);
    }
    return u;
  };
  std::vector<loft::v1::StateUpdate> written = {big(1, 5000), Registered(1, 2), big(2, 3000),
                                                Registered(3, 4)};
  TempDir dir;
  {
    auto j = Journal::Open(dir.path.string());
    REQUIRE(j.ok());
    REQUIRE((*j)->Append(written[0]).ok());
    REQUIRE((*j)->Append(written[1]).ok());
    std::vector<loft::v1::StateUpdate> rejected = {big(9, 4000), loft::v1::StateUpdate()};
    CHECK((*j)->AppendAll(rejected).code() == loft::StatusCode::kInvalidArgument);
    CHECK((*j)->next_seq() == 2);
    std::vector<loft::v1::StateUpdate> rest(written.begin() + 2, written.end());
    REQUIRE((*j)->AppendAllUnsynced(rest).ok());
  }
  auto j = Journal::Open(dir.path.string());
  REQUIRE(j.ok());
  auto all = (*j)->ReadAll();
  REQUIRE(all.ok());
  REQUIRE(all->size() == written.size());
  for (size_t i = 0; i < written.size(); ++i) {
    CHECK(Journal::EncodeValue((*all)[i]) == Journal::EncodeValue(written[i]));
  }
}

TEST_CASE("Journal: ReadInChunks hands every entry over in order, in bounded spans", "[journal]") {
  TempDir dir;
  auto j = Journal::Open(dir.path.string());
  REQUIRE(j.ok());
  for (int i = 0; i < 10; ++i) REQUIRE((*j)->Append(Registered(i, i + 1)).ok());
  std::vector<size_t> sizes;
  std::vector<int> nodes;
  auto n = (*j)->ReadInChunks(3, [&](std::span<const loft::v1::StateUpdate> c) {
    sizes.push_back(c.size());
    for (const auto& u : c) nodes.push_back(u.worker_registered().node());
    return loft::OkStatus();
  });
  REQUIRE(n.ok());
  CHECK(*n == 10);
  CHECK(sizes == std::vector<size_t>{3, 3, 3, 1});
  CHECK(nodes == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  // The callback's error stops the read.
  int calls = 0;
  auto stopped = (*j)->ReadInChunks(4, [&](std::span<const loft::v1::StateUpdate>) {
    ++calls;
    return loft::Internal("stop");
  });
  CHECK(stopped.status().code() == loft::StatusCode::kInternal);
  CHECK(calls == 1);
}

// ---------------------------------------------------------------------------
// Snapshots

namespace {

using loft::sched::StateOptions;
using loft::sched::Updates;

// Random driver events, a pure function of the seed and the driver's
// state: mostly the normal cycle (plan, send, timed done), with failures
// (a third naming a bad sample, so samples get quarantined), stale and
// duplicate acks, timeouts, re-registrations, deaths and returns, and one
// distrusted source. Two drivers in the same state fed by copies of one
// RandomSteps see the same events.
struct RandomSteps {
  explicit RandomSteps(uint64_t seed) : rng(seed) {}
  std::mt19937_64 rng;
  double now = 0;

  double U() { return std::uniform_real_distribution<double>(0, 1)(rng); }

  loft::StatusOr<Updates> Step(JobDriver& d) {
    const auto& st = d.state();
    const int nodes = st.spec().num_nodes();
    now += 1 + 4 * U();
    for (int i = 0; i < nodes; ++i) {
      if (!st.registered(i)) return d.RegisterWorker(i, now);
    }
    const double r = U();
    const std::vector<uint64_t> open = st.ledger().InFlight();
    if (open.empty() || r < 0.12) {
      for (int i = 0; i < nodes; ++i) {
        if (!st.alive(i) && U() < 0.5) return d.OnWorkerAlive(i, now);
      }
      return d.PlanNextIteration(now);
    }
    const loft::v1::Partition p = st.ledger().Find(open[rng() % open.size()])->partition;
    const bool planned = st.ledger().Find(p.id())->state == loft::sched::PartitionState::kPlanned;
    if (planned && r < 0.55) return d.OnPartitionSent(p.id(), p.attempt(), now);
    if (r < 0.78) {
      auto u = d.OnPartitionDone(TimedDone(p, st, 0.5 + U()), now);
      if (u.ok() && U() < 0.1) {  // a duplicate ack, ignored and counted
        auto dup = d.OnPartitionDone(TimedDone(p, st, 1), now);
        if (!dup.ok()) return dup;
        u->insert(u->end(), dup->begin(), dup->end());
      }
      return u;
    }
    if (r < 0.87) {
      loft::v1::PartitionFailed f = FailedReport(p, "random");
      if (U() < 0.35) {
        f.add_bad_samples(*std::min_element(p.sample_ids().begin(), p.sample_ids().end()));
      }
      return d.OnPartitionFailed(f, now);
    }
    if (r < 0.90) {  // a stale ack: an attempt that does not exist
      loft::v1::PartitionDone stale = TimedDone(p, st, 1);
      stale.set_attempt(p.attempt() + 1);
      return d.OnPartitionDone(stale, now);
    }
    if (r < 0.95) return d.CheckTimeouts(now);
    const int node = static_cast<int>(rng() % static_cast<uint64_t>(nodes));
    if (r < 0.97 && st.LiveNodes().size() > 2) return d.OnWorkerDead(node, "random", now);
    if (r < 0.98) return d.RegisterWorker(node, now);  // a restart: its partitions fail
    if (r < 0.99 && st.distrusted_mask().empty() && st.LiveNodes().size() > 2) {
      return d.DistrustSource(node, 2, now);
    }
    return d.PlanNextIteration(now);
  }
};

StateOptions SnapshotTestOptions() {
  StateOptions opt;
  opt.timeout_min_ms = 60;
  opt.timeout_factor = 2;
  opt.quarantine_after = 2;
  return opt;
}

// Create + Restore(the journal's snapshot) + Replay(the entries after it).
std::unique_ptr<JobDriver> RecoverFromJournal(const Journal& j, const loft::ClusterSpec& spec,
                                              const std::string& policy, const StateOptions& opt) {
  auto d = JobDriver::Create(spec, policy, opt);
  REQUIRE(d.ok());
  auto snapshot = j.ReadSnapshot();
  INFO(snapshot.status().ToString());
  REQUIRE(snapshot.ok());
  CHECK(snapshot->has_value() == (j.snapshot_seq() > 0));
  if (*snapshot) {
    const auto st = (*d)->Restore(**snapshot);
    INFO(st.ToString());
    REQUIRE(st.ok());
  }
  auto n = j.ReadInChunks(7, [&](std::span<const loft::v1::StateUpdate> c) { return (*d)->Replay(c); });
  INFO(n.status().ToString());
  REQUIRE(n.ok());
  CHECK(*n == j.entries());
  return std::move(d).value();
}

std::string Serialized(const Updates& u) {
  std::string out;
  for (const auto& x : u) out += x.SerializeAsString();
  return out;
}

// a and b hold the same state: digests, JSON, policy memory, the whole
// snapshot (cost models' internals included), and they make the same
// decisions for the next `more` random events (which advance both).
void CheckSameState(JobDriver& a, JobDriver& b, const RandomSteps& steps, int more) {
  CHECK(a.state().ToJson() == b.state().ToJson());
  CHECK(a.state().Digest() == b.state().Digest());
  CHECK(a.state().policy().SaveMemory() == b.state().policy().SaveMemory());
  CHECK(a.state().ToSnapshot().SerializeAsString() == b.state().ToSnapshot().SerializeAsString());
  RandomSteps sa = steps, sb = steps;
  for (int i = 0; i < more; ++i) {
    auto ua = sa.Step(a);
    auto ub = sb.Step(b);
    REQUIRE(ua.ok());
    REQUIRE(ub.ok());
    REQUIRE(Serialized(*ua) == Serialized(*ub));
  }
  CHECK(a.state().Digest() == b.state().Digest());
}

}  // namespace

TEST_CASE("Journal snapshots: snapshot + replay equals full replay across random driver steps", "[journal]") {
  struct Case {
    const char* policy;
    int replication;
    uint64_t seed;
  };
#if defined(__SANITIZE_ADDRESS__)
  // Under ASan this test ran 270 s, the whole sanitizer stage's length:
  // there it takes the two replicated cases (both code paths of the
  // ledger); the plain build runs all five.
  const std::vector<Case> cases = {Case{"pid", 2, 2}, Case{"loft", 2, 4}};
#else
  const std::vector<Case> cases = {Case{"lbbsp", 1, 1}, Case{"pid", 2, 2}, Case{"loft", 1, 3},
                                   Case{"loft", 2, 4}, Case{"uniform", 1, 5}};
#endif
  for (const Case& k : cases) {
    INFO("policy " << k.policy << " replication " << k.replication);
    const auto spec = SmallSpec(600, k.replication, 64);
    const StateOptions opt = SnapshotTestOptions();
    auto live = JobDriver::Create(spec, k.policy, opt);
    REQUIRE(live.ok());
    TempDir dir;
    auto j = Journal::Open(dir.path.string());
    REQUIRE(j.ok());
    Updates all;  // every update ever journaled (what a full replay reads)
    RandomSteps steps(k.seed);
    std::mt19937_64 when(k.seed * 7919);
    int snapshots = 0;
    uint64_t max_entries = 0, max_batch = 0;
    for (int i = 0; i < 1500; ++i) {
      auto u = steps.Step(**live);
      INFO("step " << i << ": " << u.status().ToString());
      REQUIRE(u.ok());
      REQUIRE((*j)->AppendAll(*u).ok());
      all.insert(all.end(), u->begin(), u->end());
      max_batch = std::max<uint64_t>(max_batch, u->size());
      REQUIRE((*j)->next_seq() == all.size());
      max_entries = std::max(max_entries, (*j)->entries());
      if ((*j)->entries() >= 50 + when() % 30) {  // as the daemon does, with a varying interval
        const auto ws = (*j)->WriteSnapshot((*live)->state().ToSnapshot());
        INFO(ws.ToString());
        REQUIRE(ws.ok());
        ++snapshots;
        CHECK((*j)->snapshot_seq() == all.size());
        CHECK((*j)->entries() == 0);
        auto rest = (*j)->ReadAll();
        REQUIRE(rest.ok());
        CHECK(rest->empty());
      }
      if (i % 250 == 125) {  // recover mid-run, from the open journal
        auto recovered = RecoverFromJournal(**j, spec, k.policy, opt);
        auto full = JobDriver::Recover(spec, k.policy, opt, all);
        REQUIRE(full.ok());
        CheckSameState(*recovered, **live, steps, 0);  // the live driver goes on below
        CheckSameState(*recovered, **full, steps, 40);
      }
    }
    const auto& c = (*live)->state().ledger().counters();
    CHECK(snapshots >= 10);
    // What a restart replays: below one interval plus one step's batch.
    CHECK(max_entries < 80 + max_batch);
    CHECK(all.size() > 5 * (80 + max_batch));
    // Crossed epoch boundaries; every epoch before the current one is
    // completed or still open as the previous one (its last stragglers in
    // flight: two epochs at once).
    const auto& fin = (*live)->state();
    CHECK(fin.epoch() >= 1);
    CHECK(c.epochs_completed + (fin.previous_sampler() != nullptr ? 1 : 0) == fin.epoch());
    CHECK(c.failed > 0);
    CHECK(c.timed_out > 0);
    CHECK(c.retries > 0);
    CHECK(c.acks_ignored > 0);
    CHECK(c.duplicates == 0);
    CHECK(c.lost == 0);
    // Reopened: the snapshot and the entries after it are what is stored.
    const uint64_t snapshot_seq = (*j)->snapshot_seq();
    j->reset();
    {
      RawJournal raw(dir.path.string());
      CHECK(raw.Keys(raw.snapshots()) == std::vector<uint64_t>{snapshot_seq});
      const auto keys = raw.Keys(raw.entries());
      REQUIRE(keys.size() == all.size() - snapshot_seq);
      for (size_t i = 0; i < keys.size(); ++i) CHECK(keys[i] == snapshot_seq + i);
    }
    auto reopened = Journal::Open(dir.path.string());
    REQUIRE(reopened.ok());
    CHECK((*reopened)->next_seq() == all.size());
    CHECK((*reopened)->snapshot_seq() == snapshot_seq);
    auto recovered = RecoverFromJournal(**reopened, spec, k.policy, opt);
    auto full = JobDriver::Recover(spec, k.policy, opt, all);
    REQUIRE(full.ok());
    CheckSameState(*recovered, **live, steps, 0);
    CheckSameState(*recovered, **full, steps, 200);
  }
}

TEST_CASE("Journal snapshots: the state's parts are covered (quarantine, distrust, policy memory)",
          "[journal]") {
  // The random runs above reach every part a snapshot stores; this checks
  // that they did, so the equality there is not vacuous for any part.
  const auto spec = SmallSpec(600, 1, 64);
  auto d = JobDriver::Create(spec, "lbbsp", SnapshotTestOptions());
  REQUIRE(d.ok());
  RandomSteps steps(1);
  bool pending_observations = false, origins = false, pending_reports = false;
  for (int i = 0; i < 1500; ++i) {
    REQUIRE(steps.Step(**d).ok());
    const auto snap = (*d)->state().ToSnapshot();
    pending_observations = pending_observations || snap.pending_observations_size() > 0;
    origins = origins || snap.sampler().origins_size() > 0;
    pending_reports = pending_reports || snap.quarantine().reports_size() > 0;
  }
  const auto snap = (*d)->state().ToSnapshot();
  CHECK(pending_observations);
  CHECK(origins);
  CHECK(pending_reports);
  CHECK(snap.quarantine().samples_size() > 0);
  CHECK(snap.quarantine().unavailable() > 0);
  CHECK_FALSE((*d)->state().distrusted_mask().empty());
  REQUIRE(snap.policy_memory().tables_size() == 1);
  CHECK(snap.policy_memory().tables(0).name() == "throughput");
  CHECK(snap.ledger().records_size() > 0);
  bool learnt = false;
  for (const auto& n : snap.nodes()) learnt = learnt || n.cost().compute().accepted() > 0;
  CHECK(learnt);
}

TEST_CASE("Journal snapshots: sequence numbers continue after the snapshot with no gaps", "[journal]") {
  TempDir dir;
  {
    auto j = Journal::Open(dir.path.string());
    REQUIRE(j.ok());
    CHECK((*j)->WriteSnapshot(loft::v1::StateSnapshot()).code() == loft::StatusCode::kFailedPrecondition);
    for (int i = 0; i < 5; ++i) REQUIRE((*j)->Append(Registered(i, i + 1)).ok());
    loft::v1::StateSnapshot snap;
    snap.set_view(5);
    REQUIRE((*j)->WriteSnapshot(snap).ok());
    CHECK((*j)->snapshot_seq() == 5);
    CHECK((*j)->next_seq() == 5);
    CHECK((*j)->snapshots_written() == 1);
  }
  {
    // Reopened with no entry after the snapshot: the next one is still 5.
    auto j = Journal::Open(dir.path.string());
    REQUIRE(j.ok());
    CHECK((*j)->next_seq() == 5);
    CHECK((*j)->snapshot_seq() == 5);
    CHECK((*j)->entries() == 0);
    auto snap = (*j)->ReadSnapshot();
    REQUIRE(snap.ok());
    REQUIRE(snap->has_value());
    CHECK((*snap)->view() == 5);
    for (int i = 5; i < 8; ++i) REQUIRE((*j)->Append(Registered(i, i + 1)).ok());
    CHECK((*j)->next_seq() == 8);
  }
  {
    RawJournal raw(dir.path.string());
    CHECK(raw.Keys(raw.entries()) == std::vector<uint64_t>{5, 6, 7});
    CHECK(raw.Keys(raw.snapshots()) == std::vector<uint64_t>{5});
  }
  {
    auto j = Journal::Open(dir.path.string());
    REQUIRE(j.ok());
    auto all = (*j)->ReadAll();
    REQUIRE(all.ok());
    REQUIRE(all->size() == 3);
    for (int i = 0; i < 3; ++i) CHECK((*all)[i].worker_registered().node() == 5 + i);
    // A second snapshot replaces the first.
    loft::v1::StateSnapshot snap;
    snap.set_view(8);
    REQUIRE((*j)->WriteSnapshot(snap).ok());
    REQUIRE((*j)->Append(Registered(8, 9)).ok());
  }
  {
    RawJournal raw(dir.path.string());
    CHECK(raw.Keys(raw.entries()) == std::vector<uint64_t>{8});
    CHECK(raw.Keys(raw.snapshots()) == std::vector<uint64_t>{8});
    raw.Put(raw.entries(), 10, Journal::EncodeValue(Registered(0, 11)));  // 9 is missing
  }
  auto j = Journal::Open(dir.path.string());
  REQUIRE(j.ok());
  CHECK((*j)->next_seq() == 11);
  auto all = (*j)->ReadAll();
  CHECK(all.status().code() == loft::StatusCode::kDataLoss);
  CHECK(all.status().message().find("entry 9 is missing") != std::string::npos);
}

TEST_CASE("Journal snapshots: a journal written before snapshots existed opens, reads and compacts",
          "[journal]") {
  TempDir dir;
  {
    // The former layout: the default column family only.
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    REQUIRE(rocksdb::DB::Open(o, dir.path.string(), &db).ok());
    for (int i = 0; i < 4; ++i) {
      REQUIRE(
          db->Put(rocksdb::WriteOptions(), Journal::EncodeKey(i), Journal::EncodeValue(Registered(i, i + 1)))
              .ok());
    }
    delete db;
  }
  auto j = Journal::Open(dir.path.string());
  REQUIRE(j.ok());
  CHECK((*j)->next_seq() == 4);
  CHECK((*j)->snapshot_seq() == 0);
  auto snap = (*j)->ReadSnapshot();
  REQUIRE(snap.ok());
  CHECK_FALSE(snap->has_value());
  auto all = (*j)->ReadAll();
  REQUIRE(all.ok());
  CHECK(all->size() == 4);
  REQUIRE((*j)->WriteSnapshot(loft::v1::StateSnapshot()).ok());
  CHECK((*j)->entries() == 0);
}

TEST_CASE("Journal snapshots: a corrupt snapshot is DataLoss naming it", "[journal]") {
  loft::v1::StateSnapshot snap;
  snap.set_job_id(3);
  snap.set_view(12);
  snap.mutable_sampler()->set_states(std::string(100, '\2'));
  const std::string good = Journal::EncodeSnapshotValue(snap);
  REQUIRE(Journal::DecodeSnapshotValue(7, good).ok());
  auto expect_loss = [](const loft::StatusOr<loft::v1::StateSnapshot>& d, const std::string& what) {
    INFO(d.status().ToString());
    CHECK(d.status().code() == loft::StatusCode::kDataLoss);
    CHECK(d.status().message().find("journal snapshot at entry 7") != std::string::npos);
    CHECK(d.status().message().find(what) != std::string::npos);
  };
  SECTION("truncated") {
    expect_loss(Journal::DecodeSnapshotValue(7, good.substr(0, good.size() - 3)), "CRC");
  }
  SECTION("shorter than its header") {
    expect_loss(Journal::DecodeSnapshotValue(7, good.substr(0, 6)), "header");
  }
  SECTION("bit flip in the payload") {
    std::string bad = good;
    bad[bad.size() / 2] ^= 0x04;
    expect_loss(Journal::DecodeSnapshotValue(7, bad), "CRC mismatch");
  }
  SECTION("bit flip in the version") {
    std::string bad = good;
    bad[4] ^= 0x01;
    expect_loss(Journal::DecodeSnapshotValue(7, bad), "CRC mismatch");
  }
  SECTION("in the database: the journal refuses it instead of replaying without it") {
    TempDir dir;
    {
      auto j = Journal::Open(dir.path.string());
      REQUIRE(j.ok());
      for (int i = 0; i < 3; ++i) REQUIRE((*j)->Append(Registered(i, i + 1)).ok());
      REQUIRE((*j)->WriteSnapshot(snap).ok());
      REQUIRE((*j)->Append(Registered(3, 4)).ok());
    }
    {
      RawJournal raw(dir.path.string());
      std::string value = raw.Get(raw.snapshots(), 3);
      value[value.size() - 1] ^= 0x40;
      raw.Put(raw.snapshots(), 3, value);
    }
    auto j = Journal::Open(dir.path.string());
    REQUIRE(j.ok());
    CHECK((*j)->snapshot_seq() == 3);
    auto read = (*j)->ReadSnapshot();
    INFO(read.status().ToString());
    CHECK(read.status().code() == loft::StatusCode::kDataLoss);
    CHECK(read.status().message().find("journal snapshot at entry 3: CRC mismatch") != std::string::npos);
  }
}

TEST_CASE("Journal snapshots: an unknown format version is a clear error", "[journal]") {
  loft::v1::StateSnapshot snap;
  snap.set_view(4);
  std::string value = Journal::EncodeSnapshotValue(snap);
  REQUIRE(value.size() >= 8);
  // Version 1 as written; make it 3 with a valid CRC (a later release's snapshot).
  CHECK(value.substr(4, 4) == std::string("\x01\x00\x00\x00", 4));
  value[4] = 3;
  boost::crc_32_type crc;
  crc.process_bytes(value.data() + 4, value.size() - 4);
  for (int i = 0; i < 4; ++i) value[i] = static_cast<char>((crc.checksum() >> (8 * i)) & 0xff);
  auto d = Journal::DecodeSnapshotValue(9, value);
  INFO(d.status().ToString());
  CHECK(d.status().code() == loft::StatusCode::kDataLoss);
  CHECK(d.status().message().find("journal snapshot at entry 9: unknown snapshot format version 3") !=
        std::string::npos);
  CHECK(d.status().message().find("reads versions 1 and 2") != std::string::npos);

  TempDir dir;
  {
    auto j = Journal::Open(dir.path.string());
    REQUIRE(j.ok());
    REQUIRE((*j)->Append(Registered(0, 1)).ok());
    REQUIRE((*j)->WriteSnapshot(snap).ok());
  }
  {
    RawJournal raw(dir.path.string());
    raw.Put(raw.snapshots(), 1, value);
  }
  auto j = Journal::Open(dir.path.string());
  REQUIRE(j.ok());
  auto read = (*j)->ReadSnapshot();
  CHECK(read.status().code() == loft::StatusCode::kDataLoss);
  CHECK(read.status().message().find("unknown snapshot format version 3") != std::string::npos);
}

TEST_CASE("Journal snapshots: a snapshot restores only into a fresh state created alike", "[journal]") {
  const auto spec = SmallSpec(600, 1, 64);
  StateOptions opt = SnapshotTestOptions();
  auto live = JobDriver::Create(spec, "pid", opt);
  REQUIRE(live.ok());
  RandomSteps steps(11);
  for (int i = 0; i < 200; ++i) REQUIRE(steps.Step(**live).ok());
  const auto snap = (*live)->state().ToSnapshot();
  auto refused = [&](const std::string& policy, StateOptions o, const loft::ClusterSpec& sp,
                     const char* what) {
    auto d = JobDriver::Create(sp, policy, o);
    REQUIRE(d.ok());
    const auto st = (*d)->Restore(snap);
    INFO(st.ToString());
    CHECK(st.code() == loft::StatusCode::kFailedPrecondition);
    CHECK(st.message().find(what) != std::string::npos);
  };
  StateOptions other_job = opt;
  other_job.job_id = 2;
  refused("pid", other_job, spec, "job id");
  refused("lbbsp", opt, spec, "policy pid");
  refused("pid", opt, SmallSpec(600, 1, 64, 4), "nodes 6");
  refused("pid", opt, SmallSpec(500, 1, 64), "samples 600");
  StateOptions other_seed = opt;
  other_seed.seed = 99;
  refused("pid", other_seed, spec, "seed");
  StateOptions other_batch = opt;
  other_batch.global_batch = 32;
  refused("pid", other_batch, spec, "global batch 64");
  // Not into a state that already applied something.
  auto busy = JobDriver::Create(spec, "pid", opt);
  REQUIRE(busy.ok());
  REQUIRE((*busy)->RegisterWorker(0, 0).ok());
  CHECK((*busy)->Restore(snap).code() == loft::StatusCode::kFailedPrecondition);
  // Inconsistent contents (bytes that passed their CRC) are DataLoss naming the part.
  auto damaged = [&](auto&& damage, const char* what) {
    loft::v1::StateSnapshot bad = snap;
    damage(bad);
    auto d = JobDriver::Create(spec, "pid", opt);
    REQUIRE(d.ok());
    const auto st = (*d)->Restore(bad);
    INFO(st.ToString());
    CHECK(st.code() == loft::StatusCode::kDataLoss);
    CHECK(st.message().find(what) != std::string::npos);
  };
  damaged([](loft::v1::StateSnapshot& b) { b.mutable_sampler()->mutable_states()->resize(10); },
          "snapshot sampler");
  damaged([](loft::v1::StateSnapshot& b) { (*b.mutable_sampler()->mutable_states())[3] = 7; },
          "snapshot sampler");
  damaged([](loft::v1::StateSnapshot& b) { b.mutable_ledger()->set_last_id(0); }, "snapshot ledger");
  damaged([](loft::v1::StateSnapshot& b) { b.mutable_nodes()->RemoveLast(); }, "snapshot nodes");
  damaged(
      [](loft::v1::StateSnapshot& b) {
        auto* t = b.mutable_policy_memory()->add_tables();
        t->set_name("gains");
      },
      "snapshot policy memory");
  damaged(
      [](loft::v1::StateSnapshot& b) {
        b.mutable_nodes(0)->mutable_cost()->mutable_compute()->set_theta0(std::nan(""));
      },
      "snapshot cost model of node 0");
}

// The writer half of the kill test below, run in a child process by it
// (hidden: only run when named). Journals random driver steps, unsynced
// (a killed process keeps what reached the WAL), snapshotting every 40
// entries; writes <dir>.ready after its third snapshot; never ends by
// itself within the test's time.
TEST_CASE("Journal snapshots: writer for the kill test", "[.][journal-writer]") {
  const char* dir = std::getenv("LOFT_JOURNAL_WRITER_DIR");
  REQUIRE(dir != nullptr);
  const auto spec = SmallSpec(600, 1, 64);
  auto d = JobDriver::Create(spec, "lbbsp", SnapshotTestOptions());
  REQUIRE(d.ok());
  loft::sched::JournalOptions jo;
  jo.sync = false;
  auto j = Journal::Open(dir, jo);
  REQUIRE(j.ok());
  RandomSteps steps(2024);
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    auto u = steps.Step(**d);
    REQUIRE(u.ok());
    REQUIRE((*j)->AppendAll(*u).ok());
    if ((*j)->entries() >= 40) {
      const auto ws = (*j)->WriteSnapshot((*d)->state().ToSnapshot());
      INFO(ws.ToString());
      REQUIRE(ws.ok());
      if ((*j)->snapshots_written() == 3) std::ofstream(std::string(dir) + ".ready") << "ready\n";
    }
  }
  FAIL("the writer was not killed within 60 s");
}

TEST_CASE("Journal snapshots: kill -9 of a writer at random points leaves a journal that recovers exactly",
          "[journal]") {
  // Whatever instant the writer dies at (inside an append, a snapshot's
  // batch or between them), the journal holds a snapshot and the entries
  // after it that together equal a prefix of what was written, on a
  // batch boundary: a snapshot without its deletions, or deletions
  // without their snapshot, would show up as a gap, a duplicate or a
  // state that matches no prefix.
  std::mt19937_64 rng(std::random_device{}());
  for (int trial = 0; trial < 6; ++trial) {
    TempDir dir;
    const std::string ready = dir.path.string() + ".ready";
    std::filesystem::remove(ready);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    env_strings.push_back("LOFT_JOURNAL_WRITER_DIR=" + dir.path.string());
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::string tag = "[journal-writer]";
    char* argv[] = {self.data(), tag.data(), nullptr};
    pid_t pid = 0;
    REQUIRE(posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, envp.data()) == 0);
    const auto t0 = std::chrono::steady_clock::now();
    while (!std::filesystem::exists(ready) &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const bool started = std::filesystem::exists(ready);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 40000));
    ::kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    std::filesystem::remove(ready);
    REQUIRE(started);
    REQUIRE(WIFSIGNALED(status));  // killed mid-run, not finished or failed

    auto j = Journal::Open(dir.path.string());
    REQUIRE(j.ok());
    INFO("trial " << trial << ": snapshot at " << (*j)->snapshot_seq() << ", next " << (*j)->next_seq());
    CHECK((*j)->snapshot_seq() >= 120);  // at least three snapshots of >= 40 entries
    const auto spec = SmallSpec(600, 1, 64);
    const StateOptions opt = SnapshotTestOptions();
    auto recovered = RecoverFromJournal(**j, spec, "lbbsp", opt);
    // The same steps again, without a journal, up to what was recovered.
    auto expected = JobDriver::Create(spec, "lbbsp", opt);
    REQUIRE(expected.ok());
    RandomSteps steps(2024);
    uint64_t written = 0, last_batch = 0;
    while (written < (*j)->next_seq()) {
      auto u = steps.Step(**expected);
      REQUIRE(u.ok());
      written += u->size();
      last_batch = u->size();
    }
    REQUIRE(written == (*j)->next_seq());  // a whole number of batches
    // Bounded: the writer snapshots once 40 entries follow the last
    // snapshot, so what follows it is under 40 plus the last step's batch
    // (a step's batch is not bounded by a constant: a CheckTimeouts after
    // a burst of plans times out dozens of partitions at once).
    CHECK((*j)->entries() < 40 + last_batch);
    CheckSameState(*recovered, **expected, steps, 100);
  }
}

TEST_CASE("Journal snapshots: a snapshot that does not read back keeps the entries it would cover",
          "[journal]") {
  // A snapshot over 2 GiB could be written but not parsed back (an int
  // size), and the same batch deleted the entries it covered. Any snapshot
  // that does not read back must leave the journal as it was; here one
  // whose string field is not UTF-8 (proto3 refuses it when parsing).
  TempDir dir;
  loft::v1::StateSnapshot first;
  first.set_view(3);
  {
    auto j = Journal::Open(dir.path.string());
    REQUIRE(j.ok());
    for (int i = 0; i < 3; ++i) REQUIRE((*j)->Append(Registered(i, i + 1)).ok());
    REQUIRE((*j)->WriteSnapshot(first).ok());
    for (int i = 3; i < 6; ++i) REQUIRE((*j)->Append(Registered(i, i + 1)).ok());
    loft::v1::StateSnapshot bad;
    bad.set_view(6);
    bad.set_policy(std::string("\xff\xfe not utf-8", 13));
    const loft::Status st = (*j)->WriteSnapshot(bad);
    INFO(st.ToString());
    CHECK_FALSE(st.ok());
    CHECK(st.message().find("snapshot at entry 6") != std::string::npos);
    CHECK(st.message().find("the entries are kept") != std::string::npos);
    CHECK((*j)->snapshot_seq() == 3);
    CHECK((*j)->entries() == 3);
  }
  auto j = Journal::Open(dir.path.string());
  REQUIRE(j.ok());
  CHECK((*j)->snapshot_seq() == 3);
  auto snap = (*j)->ReadSnapshot();
  INFO(snap.status().ToString());
  REQUIRE(snap.ok());
  REQUIRE(snap->has_value());
  CHECK((*snap)->view() == 3);
  auto all = (*j)->ReadAll();
  REQUIRE(all.ok());
  REQUIRE(all->size() == 3);
  for (int i = 0; i < 3; ++i) CHECK((*all)[i].worker_registered().node() == 3 + i);
}

namespace {
// A driver's snapshot after `steps` random events, with a sampler state of
// `samples` bytes: large enough to need many parts of a small part size.
loft::v1::StateSnapshot BusySnapshot(int steps) {
  auto d = JobDriver::Create(SmallSpec(2000, 2, 64), "lbbsp", SnapshotTestOptions());
  REQUIRE(d.ok());
  RandomSteps rs(5);
  for (int i = 0; i < steps; ++i) REQUIRE(rs.Step(**d).ok());
  return (*d)->state().ToSnapshot();
}
}  // namespace

TEST_CASE("Journal snapshots: a snapshot larger than a part is stored in parts and reads back whole",
          "[journal]") {
  const loft::v1::StateSnapshot snap = BusySnapshot(400);
  REQUIRE(snap.ByteSizeLong() > 40 * 1024);
  REQUIRE(snap.ledger().records_size() > 20);
  TempDir dir;
  loft::sched::JournalOptions jo;
  jo.snapshot_part_bytes = 1024;
  {
    auto j = Journal::Open(dir.path.string(), jo);
    REQUIRE(j.ok());
    for (int i = 0; i < 4; ++i) REQUIRE((*j)->Append(Registered(i, i + 1)).ok());
    REQUIRE((*j)->WriteSnapshot(snap).ok());
    CHECK((*j)->entries() == 0);
  }
  {
    RawJournal raw(dir.path.string());
    std::unique_ptr<rocksdb::Iterator> it(raw.db->NewIterator(rocksdb::ReadOptions(), raw.snapshots()));
    size_t heads = 0, parts = 0, over = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      CHECK(it->key().ToStringView().substr(0, 8) == Journal::EncodeKey(4));
      if (it->key().size() == 8) ++heads;
      if (it->key().size() == 12) {
        ++parts;
        if (it->value().size() > 1024 + 12) ++over;
      }
    }
    CHECK(heads == 1);
    CHECK(parts > 20);
    CHECK(over <= 2);  // the samplers' states: one bytes field of 2,000 bytes each, a part of its own
    CHECK(raw.Keys(raw.entries()).empty());
  }
  auto j = Journal::Open(dir.path.string(), jo);
  REQUIRE(j.ok());
  CHECK((*j)->snapshot_seq() == 4);
  auto back = (*j)->ReadSnapshot();
  INFO(back.status().ToString());
  REQUIRE(back.ok());
  REQUIRE(back->has_value());
  CHECK((*back)->SerializeAsString() == snap.SerializeAsString());
}

TEST_CASE(
    "Journal snapshots: a missing or damaged part is DataLoss naming it, and parts without a head are "
    "ignored",
    "[journal]") {
  const loft::v1::StateSnapshot snap = BusySnapshot(300);
  loft::sched::JournalOptions jo;
  jo.snapshot_part_bytes = 2048;
  auto partkey = [](uint64_t seq, uint32_t i) {
    std::string k = Journal::EncodeKey(seq);
    for (int b = 3; b >= 0; --b) k.push_back(static_cast<char>((i >> (8 * b)) & 0xff));
    return k;
  };
  TempDir dir;
  {
    auto j = Journal::Open(dir.path.string(), jo);
    REQUIRE(j.ok());
    for (int i = 0; i < 2; ++i) REQUIRE((*j)->Append(Registered(i, i + 1)).ok());
    REQUIRE((*j)->WriteSnapshot(snap).ok());
    REQUIRE((*j)->Append(Registered(2, 3)).ok());
  }
  {
    // A crash while writing a later snapshot: parts at entry 3, no head.
    RawJournal raw(dir.path.string());
    REQUIRE(raw.db
                ->Put(rocksdb::WriteOptions(), raw.snapshots(), partkey(3, 0),
                      Journal::EncodeSnapshotPart(0, loft::v1::StateSnapshot()))
                .ok());
  }
  {
    auto j = Journal::Open(dir.path.string(), jo);
    REQUIRE(j.ok());
    CHECK((*j)->snapshot_seq() == 2);
    CHECK((*j)->next_seq() == 3);
    auto back = (*j)->ReadSnapshot();
    REQUIRE(back.ok());
    CHECK((*back)->SerializeAsString() == snap.SerializeAsString());
  }
  SECTION("a damaged part") {
    {
      RawJournal raw(dir.path.string());
      std::string v;
      REQUIRE(raw.db->Get(rocksdb::ReadOptions(), raw.snapshots(), partkey(2, 1), &v).ok());
      v[v.size() - 1] ^= 0x20;
      REQUIRE(raw.db->Put(rocksdb::WriteOptions(), raw.snapshots(), partkey(2, 1), v).ok());
    }
    auto j = Journal::Open(dir.path.string(), jo);
    REQUIRE(j.ok());
    auto back = (*j)->ReadSnapshot();
    INFO(back.status().ToString());
    CHECK(back.status().code() == loft::StatusCode::kDataLoss);
    CHECK(back.status().message().find("journal snapshot at entry 2, part 1 of") != std::string::npos);
    CHECK(back.status().message().find("CRC mismatch") != std::string::npos);
  }
  SECTION("a missing part") {
    {
      RawJournal raw(dir.path.string());
      REQUIRE(raw.db->Delete(rocksdb::WriteOptions(), raw.snapshots(), partkey(2, 2)).ok());
    }
    auto j = Journal::Open(dir.path.string(), jo);
    REQUIRE(j.ok());
    auto back = (*j)->ReadSnapshot();
    INFO(back.status().ToString());
    CHECK(back.status().code() == loft::StatusCode::kDataLoss);
    CHECK(back.status().message().find("part 2 of") != std::string::npos);
    CHECK(back.status().message().find("is missing") != std::string::npos);
  }
  SECTION("the next snapshot deletes the old parts and the orphans below it") {
    {
      auto j = Journal::Open(dir.path.string(), jo);
      REQUIRE(j.ok());
      REQUIRE((*j)->Append(Registered(3, 4)).ok());
      REQUIRE((*j)->Append(Registered(4, 5)).ok());
      loft::v1::StateSnapshot small;
      small.set_view(4);
      REQUIRE((*j)->WriteSnapshot(small).ok());
    }
    RawJournal raw(dir.path.string());
    CHECK(raw.Keys(raw.snapshots()) == std::vector<uint64_t>{5});
  }
}

TEST_CASE("Journal snapshots: one over 2 GiB is written in parts and reads back", "[.][large][journal]") {
  // Hidden (about 5 GB of memory and 5 GB of disk): run with
  // build/tests/scheduler_test '[large]'. 40 policy tables of 56 MiB names: 2.3 GB.
  loft::v1::StateSnapshot snap;
  snap.set_view(9);
  for (int i = 0; i < 40; ++i) {
    auto* t = snap.mutable_policy_memory()->add_tables();
    t->set_name(std::string(size_t{56} << 20, static_cast<char>('a' + i % 26)));
    t->add_values()->set_value(i);
  }
  REQUIRE(snap.ByteSizeLong() > (size_t{1} << 31));
  TempDir dir;
  {
    auto j = Journal::Open(dir.path.string());
    REQUIRE(j.ok());
    REQUIRE((*j)->Append(Registered(0, 1)).ok());
    const loft::Status st = (*j)->WriteSnapshot(snap);
    INFO(st.ToString());
    REQUIRE(st.ok());
  }
  auto j = Journal::Open(dir.path.string());
  REQUIRE(j.ok());
  auto back = (*j)->ReadSnapshot();
  INFO(back.status().ToString());
  REQUIRE(back.ok());
  REQUIRE(back->has_value());
  REQUIRE((*back)->policy_memory().tables_size() == 40);
  for (int i = 0; i < 40; ++i) {
    CHECK((*back)->policy_memory().tables(i).name() == snap.policy_memory().tables(i).name());
    CHECK((*back)->policy_memory().tables(i).values(0).value() == i);
  }
  CHECK((*back)->view() == 9);
}
