#include "scheduler/journal.h"

#include <rocksdb/db.h>

#include <boost/crc.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <random>

#include "scheduler/driver.h"
#include "state_fakes.h"

using loft::sched::JobDriver;
using loft::sched::Journal;
using loft::sched::testing::FakePolicy;
using loft::sched::testing::SmallSpec;

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

void PutRaw(const std::string& path, uint64_t seq, const std::string& value) {
  rocksdb::DB* db = nullptr;
  rocksdb::Options o;
  REQUIRE(rocksdb::DB::Open(o, path, &db).ok());
  REQUIRE(db->Put(rocksdb::WriteOptions(), Journal::EncodeKey(seq), value).ok());
  delete db;
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
        loft::v1::PartitionFailed f;
        f.set_partition_id(p.id());
        f.set_attempt(p.attempt());
        f.set_node(p.worker());
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
