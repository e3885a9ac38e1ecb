#include "cache/ingest.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <set>
#include <vector>

#include "cache/manifest.h"
#include "cache/sample_cache.h"
#include "cache/sample_encoding.h"
#include "preprocess/jpeg_codec.h"
#include "tests/unit/cache/test_util.h"

using namespace loft;
using namespace loft::cache;
using loft::cache::testing::TempDir;

namespace {

const IdxDataset& TestSplit() {
  static const IdxDataset ds = [] {
    auto d = LoadFashionMnist(LOFT_FASHION_MNIST_DIR, "test");
    REQUIRE(d.ok());
    return std::move(*d);
  }();
  return ds;
}

std::vector<uint64_t> Ids(uint64_t n) {
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < n; ++i) ids.push_back(i * 3);  // not contiguous
  return ids;
}

}  // namespace

TEST_CASE("Ingest with encoding raw stores the dataset's pixel bytes, every record 804 bytes", "[cache]") {
  TempDir tmp;
  const auto& ds = TestSplit();
  auto cache = SampleCache::Open(tmp.Sub("db"));
  REQUIRE(cache.ok());
  IngestOptions opts;
  opts.batch_samples = 7;
  const auto ids = Ids(50);
  auto r = IngestSamples(**cache, ds, ids, opts);
  REQUIRE(r.ok());
  CHECK(r->samples == 50);
  CHECK(r->payload_bytes == 50 * 784);
  for (uint64_t id : ids) {
    auto s = (*cache)->Get(id);
    REQUIRE(s.ok());
    CHECK(s->label == ds.labels[id]);
    REQUIRE(s->payload.size() == 784);
    CHECK(std::memcmp(s->payload.data(), ds.images.data() + id * 784, 784) == 0);
  }
  auto st = (*cache)->Stats();
  REQUIRE(st.ok());
  CHECK(st->record_bytes.count == 50);
  CHECK(st->record_bytes.min == 804);
  CHECK(st->record_bytes.max == 804);
  CHECK(st->record_bytes.p50 == 804);
  CHECK(st->record_bytes.p95 == 804);
  CHECK(st->record_bytes.mean == 804.0);
  CHECK(st->record_bytes.total == 50 * 804);
}

TEST_CASE("Ingest with encoding jpeg stores CRC-checked JPEGs of varying size that decode to image_size",
          "[cache]") {
  TempDir tmp;
  const auto& ds = TestSplit();
  auto cache = SampleCache::Open(tmp.Sub("db"));
  REQUIRE(cache.ok());
  IngestOptions opts;
  opts.batch_samples = 16;  // several batches: payload spans into the batch's buffer stay right
  opts.encoding = {DatasetEncoding::kJpeg, 64, 85};
  const auto ids = Ids(100);
  auto r = IngestSamples(**cache, ds, ids, opts);
  REQUIRE(r.ok());
  CHECK(r->samples == 100);

  PayloadEncoder encoder(opts.encoding);
  preprocess::JpegDecoder decoder;
  preprocess::GreyImage img;
  std::set<size_t> sizes;
  int64_t payload_bytes = 0;
  for (uint64_t id : ids) {
    auto s = (*cache)->Get(id);  // header, CRC and id checked
    REQUIRE(s.ok());
    CHECK(s->label == ds.labels[id]);
    REQUIRE(s->payload.size() > 2);
    CHECK(s->payload[0] == 0xFF);  // JPEG SOI
    CHECK(s->payload[1] == 0xD8);
    // Exactly what the encoder makes for this sample (the manifest relies on it).
    auto want = encoder.Encode(ds, id);
    REQUIRE(want.ok());
    CHECK(std::vector<uint8_t>(want->begin(), want->end()) == s->payload);
    REQUIRE(decoder.DecodeGrey(id, s->payload, &img).ok());
    CHECK(img.width == 64);
    CHECK(img.height == 64);
    sizes.insert(s->payload.size());
    payload_bytes += static_cast<int64_t>(s->payload.size());
  }
  CHECK(r->payload_bytes == payload_bytes);
  CHECK(sizes.size() > 20);

  auto st = (*cache)->Stats();
  REQUIRE(st.ok());
  const SizeDistribution& rb = st->record_bytes;
  CHECK(rb.count == 100);
  CHECK(rb.total == payload_bytes + 100 * 20);  // + header and CRC per record
  CHECK(rb.min == static_cast<int64_t>(*sizes.begin()) + 20);
  CHECK(rb.max == static_cast<int64_t>(*sizes.rbegin()) + 20);
  CHECK(rb.min < rb.p50);
  CHECK(rb.p50 <= rb.p95);
  CHECK(rb.p95 <= rb.max);
  CHECK(rb.mean == Approx(static_cast<double>(rb.total) / 100));

  // The manifest of the same encoding matches every record; a raw manifest does not.
  auto jpeg_manifest = Manifest::Build(ds, 300, opts.encoding);
  auto raw_manifest = Manifest::Build(ds, 300);
  REQUIRE(jpeg_manifest.ok());
  REQUIRE(raw_manifest.ok());
  for (uint64_t id : ids) {
    auto s = (*cache)->Get(id);
    REQUIRE(s.ok());
    CHECK(jpeg_manifest->Check(id, s->label, s->payload) == ManifestCheck::kMatch);
    CHECK(raw_manifest->Check(id, s->label, s->payload) == ManifestCheck::kMismatch);
  }
}

TEST_CASE("SummarizeSizes: nearest-rank percentiles, zeros when empty", "[cache]") {
  const SizeDistribution d = SummarizeSizes({4, 1, 3, 2});
  CHECK(d.count == 4);
  CHECK(d.min == 1);
  CHECK(d.max == 4);
  CHECK(d.p50 == 2);
  CHECK(d.p95 == 4);
  CHECK(d.total == 10);
  CHECK(d.mean == 2.5);
  std::vector<int64_t> hundred;
  for (int64_t i = 100; i >= 1; --i) hundred.push_back(i);
  const SizeDistribution h = SummarizeSizes(hundred);
  CHECK(h.p50 == 50);
  CHECK(h.p95 == 95);
  const SizeDistribution e = SummarizeSizes({});
  CHECK(e.count == 0);
  CHECK(e.max == 0);
  CHECK(e.mean == 0);
}

TEST_CASE("A jpeg spec's sample_bytes must still be the decoded image's size, and the error says so",
          "[cache]") {
  auto spec = ParseClusterSpec(
      "dataset: {samples: 100, sample_bytes: 3000, encoding: jpeg}\ntraining: {global_batch: 8}\nnodes: "
      "[{name: a}]\n",
      "j.yaml");
  REQUIRE(spec.ok());
  Status s = CheckSpecAgainstDataset(*spec, TestSplit(), "test");
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() ==
        "j.yaml: dataset.sample_bytes is 3000 but Fashion-MNIST samples are 28x28 = 784 bytes (with encoding "
        "jpeg, sample_bytes is the decoded model input's size)");
  spec->dataset.sample_bytes = 784;
  CHECK(CheckSpecAgainstDataset(*spec, TestSplit(), "test").ok());
}
