#include "scheduler/journal.h"

#include <rocksdb/db.h>

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
  loft::sched::SchedulerOptions opt;
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

TEST_CASE("Journal mirrors are wire-identical to the wire messages", "[journal]") {
  loft::v1::PartitionDone d;
  d.set_partition_id(42);
  d.set_attempt(3);
  d.set_node(5);
  auto* t = d.mutable_timings();
  t->set_local_read_ms(1.5);
  t->set_remote_read_ms(2.5);
  t->set_compute_ms(3.5);
  t->set_local_samples(7);
  t->set_remote_samples(8);
  t->set_local_bytes(700);
  t->set_remote_bytes(800);
  (*t->mutable_remote_read_ms_by_peer())[2] = 0.25;
  t->set_wait_ms(9.5);
  const auto j = loft::sched::ToJournal(d);
  CHECK(j.partition_id() == 42);
  CHECK(j.timings().remote_bytes() == 800);
  CHECK(j.timings().remote_read_ms_by_peer().at(2) == 0.25);
  CHECK(j.timings().wait_ms() == 9.5);
  loft::v1::PartitionDone back;
  REQUIRE(back.ParseFromString(j.SerializeAsString()));
  CHECK(back.SerializeAsString() == d.SerializeAsString());

  loft::v1::Partition p;
  p.set_id(1);
  p.set_job(2);
  p.set_epoch(3);
  p.set_iteration(4);
  p.set_worker(5);
  p.set_attempt(6);
  p.set_parent(7);
  p.add_sample_ids(8);
  p.add_sources(9);
  p.set_plan_id(10);
  p.set_predicted_ms(11.5);
  p.set_view(12);
  CHECK(loft::sched::ToWire(loft::sched::ToJournal(p)).SerializeAsString() == p.SerializeAsString());
  loft::v1::PartitionFailed f;
  f.set_partition_id(1);
  f.set_attempt(2);
  f.set_node(3);
  f.set_reason("disk");
  CHECK(loft::sched::ToJournal(f).reason() == "disk");
}
