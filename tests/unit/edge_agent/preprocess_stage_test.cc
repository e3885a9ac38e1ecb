// The agent's preprocessing stage: PartitionRunner::Read with a
// PreprocessPool over a cache of JPEG records (no sockets), and the
// models' float inputs against their own byte scaling.
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>

#include "cache/sample_cache.h"
#include "edge_agent/agent_config.h"
#include "edge_agent/agent_service.h"
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
