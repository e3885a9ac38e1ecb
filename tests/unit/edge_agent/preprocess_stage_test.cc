// The agent's preprocessing stage: PartitionRunner::Read with a
// PreprocessPool over a cache of JPEG records (no sockets but a
// DecodedServer's inproc wake pair), and the models' float inputs against
// their own byte scaling.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <zmq.hpp>

#include "cache/sample_cache.h"
#include "core/codec.h"
#include "edge_agent/agent_config.h"
#include "edge_agent/agent_service.h"
#include "edge_agent/decoded_server.h"
#include "edge_agent/zmq_agent_server.h"
#include "models/model.h"
#include "preprocess/jpeg_codec.h"
#include "preprocess/preprocess_pool.h"
#include "preprocess/preprocessor.h"
#include "test_util.h"

using namespace loft;
using namespace loft::agent;
using namespace loft::agent::testing;

namespace {

constexpr uint64_t kBad = 7;  // its record holds bytes that are no JPEG, with a valid CRC

// Sample `id`'s 28x28 image (Payload) as ingest stores it: resized to
// 96x96 and JPEG-encoded at quality 90.
std::vector<uint8_t> JpegPayload(uint64_t id) {
  preprocess::JpegEncoder enc;
  auto jpeg = enc.EncodeGrey(Payload(id), 28, 28, 96, 90);
  REQUIRE(jpeg.ok());
  return std::vector<uint8_t>(jpeg->begin(), jpeg->end());
}

struct JpegFixture {
  TempDir dir;
  metrics::Registry registry;
  AgentMetrics metrics;
  std::unique_ptr<cache::SampleCache> cache;
  preprocess::PreprocessOptions options;

  JpegFixture() {
    auto c = cache::SampleCache::Open(dir.Sub("db"));
    REQUIRE(c.ok());
    cache = std::move(*c);
    for (uint64_t id = 0; id < 20; ++id) {
      std::vector<uint8_t> p = JpegPayload(id);
      // A JPEG truncated to its first half: passes the record's CRC, does not decode.
      if (id == kBad) p.resize(p.size() / 2);
      REQUIRE(cache->Put(id, static_cast<uint16_t>(id % 10), p).ok());
    }
    REQUIRE(cache->Flush().ok());
    auto m = AgentMetrics::Create(&registry);
    REQUIRE(m.ok());
    metrics = *m;
    options.encoding = DatasetEncoding::kJpeg;
    options.augment = AugmentKind::kCropFlip;
    options.seed = 7;
  }
};

v1::Partition LocalPartition(uint64_t id, int64_t epoch, const std::vector<uint64_t>& samples) {
  v1::Partition p;
  p.set_id(id);
  p.set_worker(0);
  p.set_attempt(1);
  p.set_epoch(epoch);
  for (uint64_t s : samples) {
    p.add_sample_ids(s);
    p.add_sources(0);
  }
  return p;
}

}  // namespace

TEST_CASE("The preprocessing stage turns a JPEG batch into the Preprocessor's floats for the epoch") {
  JpegFixture fx;
  auto pool = preprocess::PreprocessPool::Create(fx.options, preprocess::PoolOptions{2, 0, 3});
  REQUIRE(pool.ok());
  ManualClock clock;
  PartitionRunner runner(&clock, fx.cache.get(), nullptr, &fx.metrics);
  runner.SetPreprocess(pool->get());
  const std::vector<uint64_t> ids{3, 0, 12, 5, 19, 1, 8};
  ReadPartition r = runner.Read(LocalPartition(4, /*epoch=*/3, ids), 0);
  REQUIRE(r.status.ok());
  REQUIRE(r.batch.samples.size() == ids.size());
  REQUIRE(r.batch.inputs.size() == ids.size() * 784);
  preprocess::Preprocessor direct(fx.options);
  std::vector<float> want(784), other_epoch(784);
  for (size_t i = 0; i < ids.size(); ++i) {
    REQUIRE(direct.Run(ids[i], 3, JpegPayload(ids[i]), want).ok());
    CHECK(std::memcmp(r.batch.inputs.data() + i * 784, want.data(), 784 * sizeof(float)) == 0);
    CHECK(r.batch.samples[i].label == ids[i] % 10);
  }
  // The epoch seeds the crop: another epoch gives other floats for some sample.
  bool differs = false;
  for (size_t i = 0; i < ids.size() && !differs; ++i) {
    REQUIRE(direct.Run(ids[i], 4, JpegPayload(ids[i]), other_epoch).ok());
    differs = std::memcmp(r.batch.inputs.data() + i * 784, other_epoch.data(), 784 * sizeof(float)) != 0;
  }
  CHECK(differs);
}

TEST_CASE("A JPEG record with a valid CRC that does not decode is named bad and fails the partition") {
  JpegFixture fx;
  auto pool = preprocess::PreprocessPool::Create(fx.options, preprocess::PoolOptions{2, 0, 2});
  REQUIRE(pool.ok());
  ManualClock clock;
  PartitionRunner runner(&clock, fx.cache.get(), nullptr, &fx.metrics);
  runner.SetPreprocess(pool->get());
  // The record itself verifies: only decoding finds it bad.
  REQUIRE(fx.cache->Get(kBad).ok());
  ReadPartition r = runner.Read(LocalPartition(5, 0, {1, 2, kBad, 3, 4}), 0);
  CHECK(r.status.code() == StatusCode::kDataLoss);
  CHECK(r.status.ToString().find("sample 7") != std::string::npos);
  CHECK(r.status.ToString().find("does not decode") != std::string::npos);
  CHECK(r.bad_samples == std::vector<uint64_t>{kBad});
  SyntheticTrainer trainer(&clock, ComputeSpec{1.0, 0.0, 0.0}, 1);
  v1::Envelope failed = runner.Finish(std::move(r), &trainer, 0);
  REQUIRE(failed.has_partition_failed());
  const auto& f = failed.partition_failed();
  CHECK(std::vector<uint64_t>(f.bad_samples().begin(), f.bad_samples().end()) == std::vector<uint64_t>{kBad});
  // Its neighbours decode: a partition without it is done.
  ReadPartition ok = runner.Read(LocalPartition(6, 0, {1, 2, 3, 4}), 0);
  CHECK(ok.status.ok());
  CHECK(ok.bad_samples.empty());
  CHECK(runner.Finish(std::move(ok), &trainer, 0).has_partition_done());
}

TEST_CASE("Without a preprocessing stage a batch carries the raw payloads only") {
  TempDir dir;
  MakeCache(dir.Sub("db"), Range(0, 10));
  auto c = cache::SampleCache::Open(dir.Sub("db"));
  REQUIRE(c.ok());
  metrics::Registry registry;
  auto m = AgentMetrics::Create(&registry);
  REQUIRE(m.ok());
  ManualClock clock;
  PartitionRunner runner(&clock, c->get(), nullptr, &*m);
  ReadPartition r = runner.Read(LocalPartition(1, 0, {2, 3}), 0);
  REQUIRE(r.status.ok());
  CHECK(r.batch.inputs.empty());
  CHECK(r.batch.samples[0].payload == Payload(2));
}

TEST_CASE("A model given raw+none preprocessed floats computes what it computes from the bytes") {
  auto model = models::MakeModel(models::ModelKind::kMlp, models::Device::kCpu);
  REQUIRE(model.ok());
  (*model)->Init(7);
  const size_t n = 6;
  std::vector<uint8_t> images, labels;
  std::vector<float> inputs(n * 784);
  preprocess::PreprocessOptions raw;  // encoding raw, augment none
  preprocess::Preprocessor pre(raw);
  for (uint64_t id = 0; id < n; ++id) {
    std::vector<uint8_t> p = Payload(id * 17 + 1);
    images.insert(images.end(), p.begin(), p.end());
    labels.push_back(static_cast<uint8_t>(id % 10));
    REQUIRE(pre.Run(id, 0, p, std::span<float>(inputs).subspan(id * 784, 784)).ok());
  }
  const auto params = static_cast<size_t>((*model)->num_params());
  std::vector<float> g_bytes(params), g_floats(params);
  auto l_bytes = (*model)->LossAndGradient(models::BatchView{images, labels}, g_bytes);
  auto l_floats = (*model)->LossAndGradient(models::BatchView{{}, labels, inputs}, g_floats);
  REQUIRE(l_bytes.ok());
  REQUIRE(l_floats.ok());
  CHECK(*l_bytes == *l_floats);
  CHECK(std::memcmp(g_bytes.data(), g_floats.data(), params * sizeof(float)) == 0);
  auto a_bytes = (*model)->Evaluate(models::BatchView{images, labels});
  auto a_floats = (*model)->Evaluate(models::BatchView{{}, labels, inputs});
  REQUIRE(a_bytes.ok());
  REQUIRE(a_floats.ok());
  CHECK(*a_bytes == *a_floats);
  // A float batch of the wrong size is refused.
  CHECK_FALSE((*model)
                  ->LossAndGradient(models::BatchView{{}, labels, std::span<const float>(inputs).first(783)},
                                    g_floats)
                  .ok());
}

TEST_CASE("loft-agent starts on a jpeg spec, and refuses it with compute_mode external") {
  TempDir dir;
  MakeCache(dir.Sub("db"), Range(0, 10));
  const std::string spec = dir.Sub("jpeg.yaml");
  {
    std::ofstream out(spec);
    out << "dataset: {name: test, samples: 1000, sample_bytes: 784, encoding: jpeg, image_size: 64}\n"
           "placement: {kind: shards, replication: 1}\n"
           "training: {global_batch: 64, min_batch: 1, iterations: 10, seed: 7}\n"
           "nodes:\n"
           "  - name: a\n"
           "    compute: {fixed_ms: 1.0, per_sample_ms: 0.01, jitter: 0.0}\n"
           "    link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 1}\n";
  }
  AgentConfig c;
  c.node_name = "a";
  c.cluster_spec = spec;
  c.cache_dir = dir.Sub("db");
  c.peer_bind = "tcp://127.0.0.1:*";
  c.insecure = true;
  c.check_cache = false;
  c.log_level = "warn";
  {
    metrics::Registry r;
    auto server = ZmqAgentServer::Create(c, SystemClock::Default(), &r);
    CHECK(server.ok());
  }
  c.compute_mode = "external";
  c.consumer_endpoint = "ipc://" + dir.Sub("consumer.ipc");
  metrics::Registry r;
  auto server = ZmqAgentServer::Create(c, SystemClock::Default(), &r);
  REQUIRE_FALSE(server.ok());
  CHECK(server.status().code() == StatusCode::kUnimplemented);
  CHECK(server.status().message().find("compute_mode external") != std::string::npos);
}

TEST_CASE("MaxJpegBytes bounds the largest JPEG of an image, the peer fetch's frame limit for jpeg") {
  // Noise at quality 100: about the largest JPEG an image of this size gives.
  std::vector<uint8_t> noise(28 * 28);
  uint64_t x = 88172645463325252ull;
  for (auto& p : noise) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p = static_cast<uint8_t>(x);
  }
  preprocess::JpegEncoder enc;
  for (int size : {28, 96, 200}) {
    auto jpeg = enc.EncodeGrey(noise, 28, 28, size, 100);
    REQUIRE(jpeg.ok());
    CHECK(jpeg->size() <= preprocess::MaxJpegBytes(size));
    CHECK(jpeg->size() > static_cast<size_t>(size) * size / 4);  // a real bound, not a tiny one
  }
  CHECK(preprocess::MaxJpegBytes(96) < (64u << 10));  // the default 64 KiB frame already holds one
}

// ---------------------------------------------------------------------------
// Decoded serving (Partition.decoded_from; README "Decoded serving"): a real
// holder AgentService answers the trainer's PartitionRunner through a
// PeerClient that hands it the FetchRequest frames (no sockets).
namespace {

v1::Envelope GrantFor(uint64_t partition, int32_t requester, const std::vector<uint64_t>& ids, bool decoded) {
  v1::Envelope env;
  env.set_protocol_version(kProtocolVersion);
  auto* g = env.mutable_serve_grant();
  g->set_partition_id(partition);
  g->set_requester(requester);
  g->set_decoded(decoded);
  for (uint64_t id : ids) g->add_sample_ids(id);
  return env;
}

std::string FrameOf(const v1::Envelope& env) {
  auto b = Encode(env);
  REQUIRE(b.ok());
  return *b;
}

// Sends each group to `holder` (node 1) as the PeerFetcher would.
class HolderPeers final : public PeerClient {
 public:
  explicit HolderPeers(AgentService* holder) : holder_(holder) {}
  std::map<int32_t, PeerFetchResult> FetchAll(uint64_t partition_id, int32_t requester,
                                              const std::map<int32_t, std::vector<uint64_t>>& ids) override {
    return FetchAllDecoded(partition_id, requester, ids, {}, 0);
  }
  std::map<int32_t, PeerFetchResult> FetchAllDecoded(uint64_t partition_id, int32_t requester,
                                                     const std::map<int32_t, std::vector<uint64_t>>& ids,
                                                     const std::vector<int32_t>& decoded_peers,
                                                     int64_t epoch) override {
    std::map<int32_t, PeerFetchResult> out;
    for (const auto& [peer, list] : ids) {
      v1::Envelope env;
      env.set_protocol_version(kProtocolVersion);
      auto* f = env.mutable_fetch_request();
      f->set_request_id(++rid_);
      f->set_partition_id(partition_id);
      f->set_requester(requester);
      const bool decoded = std::find(decoded_peers.begin(), decoded_peers.end(), peer) != decoded_peers.end();
      f->set_decoded(decoded);
      f->set_epoch(epoch);
      for (uint64_t id : list) f->add_sample_ids(id);
      (decoded ? decoded_requests : record_requests) += static_cast<int>(list.size());
      PeerReply reply = holder_->HandlePeer(FrameOf(env), 0, "");
      // An accepted decoded request is answered by ServeDecoded, as the
      // agent's DecodedServer does off its poll thread.
      if (reply.decoded) reply = holder_->ServeDecoded(*reply.decoded);
      PeerFetchResult& r = out[peer];
      if (reply.header.has_error()) {
        r.status = StatusFromError(reply.header.error());
        r.bad_samples.assign(reply.header.error().bad_samples().begin(),
                             reply.header.error().bad_samples().end());
        continue;
      }
      for (size_t k = 0; k < reply.records.size(); ++k) r.records.emplace_back(reply.records[k]);
      r.bytes = reply.records.bytes();
    }
    return out;
  }
  int decoded_requests = 0;  // ids asked for decoded
  int record_requests = 0;   // ids asked for as records
 private:
  AgentService* holder_;
  uint64_t rid_ = 0;
};

// Trainer node 0 reads `ids` from holder node 1, which decodes them for it.
v1::Partition DecodedPartition(uint64_t id, int64_t epoch, const std::vector<uint64_t>& samples) {
  v1::Partition p;
  p.set_id(id);
  p.set_worker(0);
  p.set_epoch(epoch);
  for (uint64_t s : samples) {
    p.add_sample_ids(s);
    p.add_sources(1);
  }
  p.add_decoded_from(1);
  return p;
}

struct DecodedFixture {
  JpegFixture fx;
  std::unique_ptr<preprocess::PreprocessPool> holder_pool, trainer_pool;
  std::unique_ptr<AgentService> holder;
  ManualClock clock;

  explicit DecodedFixture(bool poison_decoded = false) {
    auto hp = preprocess::PreprocessPool::Create(fx.options, preprocess::PoolOptions{2, 0, 3});
    auto tp = preprocess::PreprocessPool::Create(fx.options, preprocess::PoolOptions{2, 0, 3});
    REQUIRE(hp.ok());
    REQUIRE(tp.ok());
    holder_pool = std::move(*hp);
    trainer_pool = std::move(*tp);
    AgentServiceOptions o;
    o.node_name = "holder";
    o.poison_decoded = poison_decoded;
    holder = std::make_unique<AgentService>(o, fx.cache.get(), &fx.metrics);
    holder->SetDecodePool(holder_pool.get());
  }
  void Grant(uint64_t partition, const std::vector<uint64_t>& ids, bool decoded = true) {
    (void)holder->HandleScheduler(FrameOf(GrantFor(partition, 0, ids, decoded)), 0);
  }
};

}  // namespace

TEST_CASE("Decoded serving: the holder's inputs equal the trainer's own preprocessing bit for bit") {
  DecodedFixture d;
  HolderPeers peers(d.holder.get());
  PartitionRunner runner(&d.clock, d.fx.cache.get(), &peers, &d.fx.metrics);
  runner.SetPreprocess(d.trainer_pool.get());
  SpotCheck check;
  check.every = 1 << 30;  // practically none: the trainer uses what the holder sent
  check.probation = 0;
  runner.SetSpotCheck(check);
  const std::vector<uint64_t> ids{3, 0, 12, 5, 19, 1, 8};
  d.Grant(9, ids);
  ReadPartition r = runner.Read(DecodedPartition(9, /*epoch=*/3, ids), 0);
  INFO(r.status.ToString());
  REQUIRE(r.status.ok());
  CHECK(peers.decoded_requests == static_cast<int>(ids.size()));
  CHECK(r.timings.remote_decoded_samples() == static_cast<int64_t>(ids.size()));
  // Each decoded sample on the wire: the 784 levels in a record (16-byte
  // header, CRC32C), half of a 96 px JPEG record.
  CHECK(r.timings.remote_decoded_bytes() == static_cast<int64_t>(ids.size() * (784 + 20)));
  REQUIRE(r.batch.inputs.size() == ids.size() * 784);
  // Placement trainer: the same partition read as records and preprocessed here.
  PartitionRunner local(&d.clock, d.fx.cache.get(), nullptr, &d.fx.metrics);
  local.SetPreprocess(d.trainer_pool.get());
  ReadPartition own = local.Read(LocalPartition(10, 3, ids), 0);
  REQUIRE(own.status.ok());
  REQUIRE(own.batch.inputs.size() == r.batch.inputs.size());
  CHECK(std::memcmp(own.batch.inputs.data(), r.batch.inputs.data(), r.batch.inputs.size() * sizeof(float)) ==
        0);
  for (size_t i = 0; i < ids.size(); ++i) CHECK(r.batch.samples[i].label == ids[i] % 10);
  // Each id was granted once decoded and once as a record: a second decoded
  // fetch is refused.
  HolderPeers again(d.holder.get());
  auto twice = again.FetchAllDecoded(9, 0, {{1, {3}}}, {1}, 3);
  CHECK(twice[1].status.code() == StatusCode::kPermissionDenied);
}

TEST_CASE(
    "Decoded serving: a grant without decoded refuses a decoded fetch, and a holder without a pool too") {
  DecodedFixture d;
  d.Grant(11, {1, 2}, /*decoded=*/false);
  HolderPeers peers(d.holder.get());
  auto r = peers.FetchAllDecoded(11, 0, {{1, {1, 2}}}, {1}, 0);
  CHECK(r[1].status.code() == StatusCode::kPermissionDenied);
  CHECK(r[1].status.ToString().find("decoded") != std::string::npos);
  // The record is still granted.
  auto rec = peers.FetchAll(11, 0, {{1, {1, 2}}});
  CHECK(rec[1].status.ok());
  d.holder->SetDecodePool(nullptr);
  d.Grant(12, {1});
  auto none = peers.FetchAllDecoded(12, 0, {{1, {1}}}, {1}, 0);
  CHECK(none[1].status.code() == StatusCode::kFailedPrecondition);
  CHECK(none[1].status.ToString().find("does not decode for peers") != std::string::npos);
}

TEST_CASE(
    "Decoded serving: a sample that does not decode at the holder is named bad and fails the partition") {
  DecodedFixture d;
  HolderPeers peers(d.holder.get());
  PartitionRunner runner(&d.clock, d.fx.cache.get(), &peers, &d.fx.metrics);
  runner.SetPreprocess(d.trainer_pool.get());
  const std::vector<uint64_t> ids{1, kBad, 2};
  d.Grant(13, ids);
  ReadPartition r = runner.Read(DecodedPartition(13, 0, ids), 0);
  CHECK(r.status.code() == StatusCode::kDataLoss);
  CHECK(r.status.ToString().find("sample 7") != std::string::npos);
  CHECK(r.status.ToString().find("does not decode") != std::string::npos);
  CHECK(r.bad_samples == std::vector<uint64_t>{kBad});
  CHECK(r.poisoned.empty());
  SyntheticTrainer trainer(&d.clock, ComputeSpec{1.0, 0.0, 0.0}, 1);
  v1::Envelope failed = runner.Finish(std::move(r), &trainer, 0);
  REQUIRE(failed.has_partition_failed());
  CHECK(failed.partition_failed().bad_samples_size() == 1);
}

TEST_CASE("Decoded serving: the spot check catches a holder that serves wrong decoded samples") {
  DecodedFixture d(/*poison_decoded=*/true);
  HolderPeers peers(d.holder.get());
  PartitionRunner runner(&d.clock, d.fx.cache.get(), &peers, &d.fx.metrics);
  runner.SetPreprocess(d.trainer_pool.get());
  SpotCheck check;
  check.seed = 7;
  check.salt = 99;
  check.every = 4;
  check.probation = 0;  // the sampled rate alone (probation: the next case)
  runner.SetSpotCheck(check);
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < 20; ++id)
    if (id != kBad) ids.push_back(id);
  int64_t expect_checked = 0;
  for (uint64_t id : ids) expect_checked += check.Checks(2, id);
  REQUIRE(expect_checked > 0);
  REQUIRE(expect_checked < static_cast<int64_t>(ids.size()));  // a fraction, not all
  d.Grant(14, ids);
  ReadPartition r = runner.Read(DecodedPartition(14, 2, ids), 0);
  // Every checked sample was forged: each is refused, the holder reported.
  CHECK(r.status.code() == StatusCode::kDataLoss);
  CHECK(r.status.ToString().find("spot check: peer 1") != std::string::npos);
  CHECK(r.timings.spot_checked_samples() == expect_checked);
  REQUIRE(r.poisoned.count(1) == 1);
  CHECK(r.poisoned.at(1) == expect_checked);
  CHECK(peers.record_requests == expect_checked);  // only the checked ones travel twice
  SyntheticTrainer trainer(&d.clock, ComputeSpec{1.0, 0.0, 0.0}, 1);
  v1::Envelope failed = runner.Finish(std::move(r), &trainer, 0);
  REQUIRE(failed.has_partition_failed());
  REQUIRE(failed.partition_failed().poisoned_by_size() == 1);
  CHECK(failed.partition_failed().poisoned_by(0) == 1);
  CHECK(failed.partition_failed().poisoned_samples(0) == expect_checked);

  // An honest holder passes the same check.
  DecodedFixture honest;
  HolderPeers hpeers(honest.holder.get());
  PartitionRunner hrunner(&honest.clock, honest.fx.cache.get(), &hpeers, &honest.fx.metrics);
  hrunner.SetPreprocess(honest.trainer_pool.get());
  hrunner.SetSpotCheck(check);
  honest.Grant(14, ids);
  ReadPartition ok = hrunner.Read(DecodedPartition(14, 2, ids), 0);
  INFO(ok.status.ToString());
  CHECK(ok.status.ok());
  CHECK(ok.poisoned.empty());
  CHECK(ok.timings.spot_checked_samples() == expect_checked);
}

TEST_CASE("Decoded serving: a holder's first decoded samples are all checked (probation), then a fraction") {
  DecodedFixture d(/*poison_decoded=*/true);
  HolderPeers peers(d.holder.get());
  PartitionRunner runner(&d.clock, d.fx.cache.get(), &peers, &d.fx.metrics);
  runner.SetPreprocess(d.trainer_pool.get());
  SpotCheck check;
  check.seed = 7;
  check.salt = 99;
  check.every = 1 << 30;  // after probation practically none
  check.probation = 5;
  runner.SetSpotCheck(check);
  // The first partition: 3 samples, all in probation, all forged and caught.
  const std::vector<uint64_t> first{0, 1, 2};
  d.Grant(20, first);
  ReadPartition r1 = runner.Read(DecodedPartition(20, 0, first), 0);
  CHECK(r1.status.code() == StatusCode::kDataLoss);
  CHECK(r1.timings.spot_checked_samples() == 3);
  REQUIRE(r1.poisoned.count(1) == 1);
  CHECK(r1.poisoned.at(1) == 3);
  // The second: the holder has served 3, so 2 more are in probation.
  const std::vector<uint64_t> second{3, 4, 5, 6};
  d.Grant(21, second);
  ReadPartition r2 = runner.Read(DecodedPartition(21, 0, second), 0);
  CHECK(r2.timings.spot_checked_samples() == 2);
  REQUIRE(r2.poisoned.count(1) == 1);
  CHECK(r2.poisoned.at(1) == 2);
  // The third: probation is over; the sampled rate (none here) decides.
  const std::vector<uint64_t> third{8, 9, 10};
  d.Grant(22, third);
  ReadPartition r3 = runner.Read(DecodedPartition(22, 0, third), 0);
  CHECK(r3.timings.spot_checked_samples() == 0);
  CHECK(r3.poisoned.empty());
  CHECK(peers.record_requests == 5);
  // The rule: probation by the count served before, then the sampled rate.
  CHECK(check.Checks(0, 3, 4));
  CHECK_FALSE(check.Checks(0, 3, 5));
}

TEST_CASE("Decoded serving: the spot check picks a deterministic fraction that depends on the salt") {
  SpotCheck a;
  a.seed = 1;
  a.salt = 5;
  SpotCheck b = a;
  b.salt = 6;
  int picked = 0, same = 0;
  for (uint64_t id = 0; id < 32000; ++id) {
    picked += a.Checks(4, id);
    same += a.Checks(4, id) && b.Checks(4, id);
  }
  // The same (salt, seed, epoch, id) always gives the same answer.
  SpotCheck a2 = a;
  int again = 0;
  for (uint64_t id = 0; id < 32000; ++id) again += a2.Checks(4, id);
  CHECK(again == picked);
  // 1 in 32, within 4 standard deviations (σ ≈ 31).
  CHECK(std::abs(picked - 1000) < 125);
  // Another salt picks other samples (independent: ~1000/32 in common).
  CHECK(same < 100);
}

TEST_CASE("Decoded serving: a record fetch is answered while a decoded request is preprocessed") {
  DecodedFixture d;
  const std::vector<uint64_t> ids{3, 0, 12, 5};
  d.Grant(21, ids);
  (void)d.holder->HandleScheduler(FrameOf(GrantFor(22, 2, {4}, /*decoded=*/false)), 0);
  // Preprocessing held until the test releases it (the latch), as a long
  // request on a small CPU quota holds it.
  std::mutex mu;
  std::condition_variable cv;
  bool started = false, release = false;
  zmq::context_t ctx;
  auto server = DecodedServer::Create(
      &ctx,
      [&](const v1::FetchRequest& req) {
        std::unique_lock lock(mu);
        started = true;
        cv.notify_all();
        cv.wait(lock, [&] { return release; });
        lock.unlock();
        return d.holder->ServeDecoded(req);
      },
      1);
  REQUIRE(server.ok());
  v1::Envelope dec;
  dec.set_protocol_version(kProtocolVersion);
  auto* f = dec.mutable_fetch_request();
  f->set_request_id(1);
  f->set_partition_id(21);
  f->set_requester(0);
  f->set_decoded(true);
  f->set_epoch(3);
  for (uint64_t id : ids) f->add_sample_ids(id);
  // The poll loop's part: the decoded request is checked and handed on, not
  // preprocessed (the old holder preprocessed it here, on the poll thread).
  PeerReply accepted = d.holder->HandlePeer(FrameOf(dec), 0, "");
  CHECK_FALSE(accepted.header.has_fetch_reply());
  CHECK_FALSE(accepted.header.has_error());
  REQUIRE(accepted.decoded);
  (*server)->Submit("node-0", *accepted.decoded);
  {
    std::unique_lock lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return started; }));
  }
  // Another peer's record fetch, answered while the decoded one is held.
  v1::Envelope rec;
  rec.set_protocol_version(kProtocolVersion);
  auto* r = rec.mutable_fetch_request();
  r->set_request_id(2);
  r->set_partition_id(22);
  r->set_requester(2);
  r->add_sample_ids(4);
  PeerReply record = d.holder->HandlePeer(FrameOf(rec), 0, "");
  REQUIRE(record.header.has_fetch_reply());
  CHECK(record.header.fetch_reply().request_id() == 2);
  CHECK(record.records.size() == 1);
  CHECK((*server)->TakeFinished().empty());
  CHECK((*server)->pending() == 1);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  // The finished reply wakes the poll loop, which takes it with its route.
  zmq::pollitem_t wake{(*server)->wake_socket().handle(), 0, ZMQ_POLLIN, 0};
  REQUIRE(zmq::poll(&wake, 1, std::chrono::milliseconds(10000)) == 1);
  (*server)->DrainWakes();
  std::deque<DecodedServer::Finished> done = (*server)->TakeFinished();
  REQUIRE(done.size() == 1);
  CHECK(done[0].route == "node-0");
  const PeerReply& reply = done[0].reply;
  REQUIRE(reply.header.has_fetch_reply());
  CHECK(reply.header.fetch_reply().request_id() == 1);
  REQUIRE(reply.records.size() == ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto s = cache::DecodeRecord(ids[i], reply.records[i]);
    REQUIRE(s.ok());
    CHECK(s->payload.size() == 784);
    CHECK(s->label == ids[i] % 10);
  }
  CHECK((*server)->pending() == 0);
}
