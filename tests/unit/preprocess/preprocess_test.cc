#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/idx_reader.h"
#include "cache/sample_encoding.h"
#include "preprocess/bounded_queue.h"
#include "preprocess/jpeg_codec.h"
#include "preprocess/preprocess_pool.h"
#include "preprocess/preprocessor.h"

using namespace loft;
using namespace loft::preprocess;

namespace {

// The test split (10,000 images) loaded once.
const cache::IdxDataset& TestSplit() {
  static const cache::IdxDataset ds = [] {
    auto d = cache::LoadFashionMnist(LOFT_FASHION_MNIST_DIR, "test");
    REQUIRE(d.ok());
    return std::move(*d);
  }();
  return ds;
}

std::span<const uint8_t> Pixels(const cache::IdxDataset& ds, uint64_t id) {
  return {ds.images.data() + id * 784, 784};
}

// Sample `id` of the test split as ingest stores it.
std::vector<uint8_t> Encoded(uint64_t id, int size = 96, int quality = 90) {
  cache::PayloadEncoder enc({DatasetEncoding::kJpeg, size, quality});
  auto p = enc.Encode(TestSplit(), id);
  REQUIRE(p.ok());
  return {p->begin(), p->end()};
}

PreprocessOptions Jpeg(AugmentKind augment = AugmentKind::kNone, uint64_t seed = 7) {
  PreprocessOptions o;
  o.encoding = DatasetEncoding::kJpeg;
  o.augment = augment;
  o.seed = seed;
  return o;
}

std::vector<float> Run(Preprocessor& pre, uint64_t id, int64_t epoch, std::span<const uint8_t> payload) {
  std::vector<float> out(784, -1.0f);
  Status s = pre.Run(id, epoch, payload, out);
  INFO(s.ToString());
  REQUIRE(s.ok());
  return out;
}

double MeanAbsError(const std::vector<float>& got, std::span<const uint8_t> pixels) {
  double sum = 0;
  for (size_t i = 0; i < got.size(); ++i) sum += std::abs(got[i] - pixels[i] / 255.0);
  return sum / static_cast<double>(got.size());
}

}  // namespace

TEST_CASE(
    "jpeg round trip: ingest's 96x96 q90 JPEG decoded and resized back to 28x28 is close to the original") {
  const auto& ds = TestSplit();
  Preprocessor pre(Jpeg());
  double total = 0, worst = 0;
  std::set<size_t> sizes;
  constexpr int kImages = 300;
  for (uint64_t id = 0; id < kImages; ++id) {
    const auto jpeg = Encoded(id);
    sizes.insert(jpeg.size());
    const auto out = Run(pre, id, 0, jpeg);
    for (float v : out) REQUIRE((v >= 0.0f && v <= 1.0f + 1e-6f));
    const double mae = MeanAbsError(out, Pixels(ds, id));
    total += mae;
    worst = std::max(worst, mae);
  }
  INFO("mean abs error " << total / kImages << ", worst image " << worst);
  CHECK(total / kImages < 0.05);
  CHECK(worst < 0.1);
  CHECK(sizes.size() > 100);  // JPEG sizes vary per image
  // A real error would show: the same image against another sample's pixels.
  CHECK(MeanAbsError(Run(pre, 0, 0, Encoded(0)), Pixels(ds, 1)) > 0.1);
}

TEST_CASE("jpeg at 28x28, quality 100: decoding is nearly lossless (no resize either way)") {
  const auto& ds = TestSplit();
  Preprocessor pre(Jpeg());
  for (uint64_t id = 0; id < 20; ++id) {
    const auto out = Run(pre, id, 0, Encoded(id, 28, 100));
    CHECK(MeanAbsError(out, Pixels(ds, id)) < 0.01);
  }
}

TEST_CASE("raw, augment none: the floats are the model's own pixel / 255, bit for bit") {
  const auto& ds = TestSplit();
  Preprocessor pre(PreprocessOptions{});
  for (uint64_t id = 0; id < 10; ++id) {
    const auto out = Run(pre, id, 3, Pixels(ds, id));
    for (size_t i = 0; i < 784; ++i)
      REQUIRE(out[i] == static_cast<float>(Pixels(ds, id)[i]) * (1.0f / 255.0f));
  }
}

TEST_CASE("crop_flip on raw 28x28 images shifts by whole pixels, fills black and mirrors") {
  const auto& ds = TestSplit();
  PreprocessOptions o;
  o.augment = AugmentKind::kCropFlip;
  o.seed = 11;
  Preprocessor pre(o);
  int flipped = 0, shifted = 0;
  for (uint64_t id = 0; id < 64; ++id) {
    const CropFlip cf = DrawCropFlip(o.seed, 2, id, 4);
    flipped += cf.flip;
    shifted += cf.dx != 0 || cf.dy != 0;
    const auto out = Run(pre, id, 2, Pixels(ds, id));
    for (int y = 0; y < 28; ++y) {
      for (int x = 0; x < 28; ++x) {
        const int sx = (cf.flip ? 27 - x : x) + cf.dx;
        const int sy = y + cf.dy;
        const float want = sx < 0 || sx >= 28 || sy < 0 || sy >= 28
                               ? 0.0f
                               : static_cast<float>(Pixels(ds, id)[sy * 28 + sx]) * (1.0f / 255.0f);
        INFO("id " << id << " x " << x << " y " << y << " dx " << cf.dx << " dy " << cf.dy << " flip "
                   << cf.flip);
        REQUIRE(out[y * 28 + x] == want);
      }
    }
  }
  CHECK(flipped > 0);
  CHECK(flipped < 64);
  CHECK(shifted > 0);
}

TEST_CASE("DrawCropFlip: every shift in [-padding, padding], flips about half, a function of the triple") {
  std::set<int> dxs, dys;
  int flips = 0;
  constexpr int kIds = 4000;
  for (uint64_t id = 0; id < kIds; ++id) {
    const CropFlip cf = DrawCropFlip(7, 1, id, 4);
    REQUIRE(cf == DrawCropFlip(7, 1, id, 4));
    dxs.insert(cf.dx);
    dys.insert(cf.dy);
    flips += cf.flip;
  }
  CHECK(dxs == std::set<int>{-4, -3, -2, -1, 0, 1, 2, 3, 4});
  CHECK(dys == std::set<int>{-4, -3, -2, -1, 0, 1, 2, 3, 4});
  CHECK(flips > kIds * 0.45);
  CHECK(flips < kIds * 0.55);
  // Each element of the triple matters.
  int epoch_diff = 0, seed_diff = 0, id_diff = 0;
  for (uint64_t id = 0; id < 100; ++id) {
    epoch_diff += !(DrawCropFlip(7, 1, id, 4) == DrawCropFlip(7, 2, id, 4));
    seed_diff += !(DrawCropFlip(7, 1, id, 4) == DrawCropFlip(8, 1, id, 4));
    id_diff += !(DrawCropFlip(7, 1, id, 4) == DrawCropFlip(7, 1, id + 1000, 4));
  }
  CHECK(epoch_diff > 80);
  CHECK(seed_diff > 80);
  CHECK(id_diff > 80);
}

TEST_CASE("determinism: the same (seed, epoch, id) gives identical floats, another epoch another crop") {
  Preprocessor a(Jpeg(AugmentKind::kCropFlip, 5));
  Preprocessor b(Jpeg(AugmentKind::kCropFlip, 5));
  int differs = 0;
  for (uint64_t id = 0; id < 30; ++id) {
    const auto jpeg = Encoded(id);
    const auto x = Run(a, id, 4, jpeg);
    const auto y = Run(b, id, 4, jpeg);
    REQUIRE(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
    // b has run other samples in between: no state leaks from one to the next.
    REQUIRE(Run(a, id, 4, jpeg) == x);
    if (Run(b, id, 5, jpeg) != x) ++differs;
  }
  CHECK(differs > 20);
  // crop_flip changes the image: not the un-augmented floats.
  Preprocessor plain(Jpeg());
  int augmented = 0;
  for (uint64_t id = 0; id < 30; ++id) {
    const auto jpeg = Encoded(id);
    if (Run(plain, id, 4, jpeg) != Run(a, id, 4, jpeg)) ++augmented;
  }
  CHECK(augmented > 20);
}

TEST_CASE("a payload that does not decode is a DataLoss naming the sample and what failed") {
  Preprocessor pre(Jpeg());
  std::vector<float> out(784);
  const auto good = Encoded(3);
  REQUIRE(good.size() > 100);
  auto expect = [&](std::vector<uint8_t> bytes, const std::string& what) {
    Status s = pre.Run(123, 0, bytes, out);
    INFO(s.ToString());
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == StatusCode::kDataLoss);
    CHECK(s.message().find("sample 123: JPEG payload (" + std::to_string(bytes.size()) +
                           " bytes) does not decode: ") == 0);
    CHECK(s.message().find(what) != std::string::npos);
  };
  SECTION("truncated") {
    expect(std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2), "data: ");
  }
  SECTION("not a JPEG") {
    expect(std::vector<uint8_t>(200, 0x42), "header: ");
  }
  SECTION("empty") {
    expect({}, "empty payload");
  }
  SECTION("a header claiming more pixels than any dataset.image_size") {
    auto bytes = good;
    bool patched = false;
    for (size_t i = 0; i + 9 < bytes.size(); ++i) {
      if (bytes[i] == 0xFF && bytes[i + 1] == 0xC0) {  // SOF0: length(2) precision(1) height(2) width(2)
        bytes[i + 7] = 0x07;                           // width 2000 = 0x07D0
        bytes[i + 8] = 0xD0;
        patched = true;
        break;
      }
    }
    REQUIRE(patched);
    expect(bytes, "header claims 2000x96 pixels");
  }
  SECTION("a raw payload of the wrong size") {
    Preprocessor raw(PreprocessOptions{});
    std::vector<uint8_t> short_payload(700);
    Status s = raw.Run(9, 0, short_payload, out);
    CHECK(s.code() == StatusCode::kDataLoss);
    CHECK(s.message() == "sample 9: raw payload is 700 bytes, expected 784 (28x28)");
  }
  // The decoder recovers: the next good payload decodes.
  CHECK(pre.Run(3, 0, good, out).ok());
}

TEST_CASE("PreprocessOptions::FromSpec takes encoding, augment, seed and a square model input") {
  auto spec = ParseClusterSpec(
      "dataset: {samples: 100, sample_bytes: 784, encoding: jpeg, augment: crop_flip}\n"
      "training: {global_batch: 8, seed: 42}\nnodes: [{name: a}]\n",
      "s.yaml");
  REQUIRE(spec.ok());
  auto o = PreprocessOptions::FromSpec(*spec);
  REQUIRE(o.ok());
  CHECK(o->encoding == DatasetEncoding::kJpeg);
  CHECK(o->augment == AugmentKind::kCropFlip);
  CHECK(o->seed == 42);
  CHECK(o->input_width == 28);
  CHECK(o->input_height == 28);
  spec->dataset.sample_bytes = 780;
  auto bad = PreprocessOptions::FromSpec(*spec);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find(
            "s.yaml: dataset.sample_bytes (780) is not the pixel count of a square") == 0);
}

TEST_CASE("BoundedQueue: Push waits while full, TryPush refuses, Close drains then ends") {
  BoundedQueue<int> q(2);
  REQUIRE(q.TryPush(1));
  REQUIRE(q.TryPush(2));
  CHECK_FALSE(q.TryPush(3));
  CHECK(q.size() == 2);
  std::atomic<bool> pushed{false};
  std::thread producer([&] {
    REQUIRE(q.Push(3));
    pushed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(pushed.load());  // still blocked: the queue is full
  CHECK(q.Pop() == 1);
  producer.join();
  CHECK(pushed.load());
  CHECK(q.size() == 2);
  CHECK(q.max_depth() == 2);
  q.Close();
  CHECK_FALSE(q.Push(4));
  CHECK(q.Pop() == 2);
  CHECK(q.Pop() == 3);
  CHECK_FALSE(q.Pop().has_value());
}

TEST_CASE("PreprocessPool: the same floats as one Preprocessor, the queue never beyond its capacity") {
  constexpr size_t kItems = 600;
  std::vector<std::vector<uint8_t>> payloads;
  for (uint64_t id = 0; id < kItems; ++id) payloads.push_back(Encoded(id % 100));
  const PreprocessOptions o = Jpeg(AugmentKind::kCropFlip, 3);
  PoolOptions po;
  po.threads = 3;
  po.queue_capacity = 4;
  po.samples_per_task = 2;
  auto pool = PreprocessPool::Create(o, po);
  REQUIRE(pool.ok());
  CHECK((*pool)->threads() == 3);
  std::vector<float> out(kItems * 784, -1.0f);
  std::vector<PreprocessItem> items;
  for (size_t i = 0; i < kItems; ++i)
    items.push_back({i, 9, payloads[i], std::span<float>(out.data() + i * 784, 784)});
  REQUIRE((*pool)->Run(items).ok());
  Preprocessor one(o);
  for (size_t i = 0; i < kItems; ++i) {
    const auto want = Run(one, i, 9, payloads[i]);
    REQUIRE(std::memcmp(want.data(), out.data() + i * 784, 784 * sizeof(float)) == 0);
  }
  CHECK((*pool)->queue_capacity() == 4);
  CHECK((*pool)->max_queue_depth() >= 1);
  CHECK((*pool)->max_queue_depth() <= 4);

  // Errors: the lowest-indexed bad item is named; the others are still done.
  std::vector<uint8_t> junk(50, 0x11);
  items[7].payload = junk;
  items[400].payload = junk;
  std::fill(out.begin(), out.end(), -1.0f);
  Status s = (*pool)->Run(items);
  CHECK(s.code() == StatusCode::kDataLoss);
  CHECK(s.message().find("sample 7: JPEG payload") == 0);
  CHECK(out[8 * 784] >= 0.0f);
  CHECK(out[(kItems - 1) * 784] >= 0.0f);
}

TEST_CASE("PreprocessPool refuses bad options") {
  PoolOptions po;
  po.threads = 0;
  CHECK(PreprocessPool::Create(PreprocessOptions{}, po).status().code() == StatusCode::kInvalidArgument);
  po.threads = 1;
  po.samples_per_task = 0;
  CHECK(PreprocessPool::Create(PreprocessOptions{}, po).status().code() == StatusCode::kInvalidArgument);
  PreprocessOptions o;
  o.crop_padding = 28;
  CHECK(PreprocessPool::Create(o, PoolOptions{}).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("decoded serving: the holder's uint8 input equals the trainer's own floats bit for bit") {
  // Placement trainer runs Run on the record; placement holder runs
  // RunBytes at the holder and the trainer dequantises the 784 bytes. Both
  // with jpeg + crop_flip, where the area resize gives fractional levels.
  PreprocessOptions o = Jpeg();
  o.augment = AugmentKind::kCropFlip;
  o.seed = 7;
  Preprocessor trainer(o), holder(o);
  for (uint64_t id = 0; id < 40; ++id) {
    const auto jpeg = Encoded(id);
    const auto own = Run(trainer, id, 3, jpeg);
    std::vector<uint8_t> bytes(784);
    REQUIRE(holder.RunBytes(id, 3, jpeg, bytes).ok());
    std::vector<float> served(784);
    REQUIRE(DequantiseInputs(bytes, served).ok());
    for (size_t i = 0; i < 784; ++i) {
      INFO("id " << id << " pixel " << i);
      REQUIRE(std::memcmp(&own[i], &served[i], sizeof(float)) == 0);
    }
  }
  // A different epoch is a different crop: the holder must use the trainer's.
  std::vector<uint8_t> a(784), b(784);
  REQUIRE(holder.RunBytes(5, 3, Encoded(5), a).ok());
  bool differ = false;
  for (uint64_t e = 4; e < 12 && !differ; ++e) {
    REQUIRE(holder.RunBytes(5, static_cast<int64_t>(e), Encoded(5), b).ok());
    differ = a != b;
  }
  CHECK(differ);
}

TEST_CASE("quantise: levels round to nearest and clamp") {
  CHECK(QuantiseInput(0.0f) == 0);
  CHECK(QuantiseInput(-0.5f) == 0);
  CHECK(QuantiseInput(1.0f) == 255);
  CHECK(QuantiseInput(2.0f) == 255);
  CHECK(QuantiseInput(std::nanf("")) == 0);
  CHECK(QuantiseInput(100.4f / 255.0f) == 100);
  CHECK(QuantiseInput(100.6f / 255.0f) == 101);
  for (int q = 0; q < 256; ++q) CHECK(QuantiseInput(DequantiseInput(static_cast<uint8_t>(q))) == q);
  std::vector<uint8_t> in(3);
  std::vector<float> out(4);
  CHECK(DequantiseInputs(in, out).code() == StatusCode::kInvalidArgument);
}
