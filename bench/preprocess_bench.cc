// preprocess_bench: the preprocessing stage of dataset.encoding jpeg
// (preprocess/preprocessor.h) against libjpeg-turbo's decoding alone.
// Prints one JSON object on stdout.
//
// The first --images images of the Fashion-MNIST training split are
// encoded as ingest stores them (cache::PayloadEncoder: resized to
// --image-size, greyscale JPEG at --quality). Then, per round (--rounds,
// medians reported), on one thread over the same encoded bytes, the three
// modes alternating every 100 images (a change in the machine's load
// falls on all three alike):
//   decode      tjDecompress2 alone into a known-size grey buffer (the
//               floor: what any consumer of these records pays)
//   none        Preprocessor::Run, augment none: header + decode + area
//               resize to 28x28 + floats in [0, 1]
//   crop_flip   the same with the seeded crop (padding 4) and flip
// ratio_vs_decode.<mode> = images/s of <mode> / images/s of decode, per
// thread (target >= 0.8), from wall time; cpu_time.* the same from the
// thread's CPU time (the time it was preempted left out). Then PreprocessPool with 1 .. --threads
// threads over batches of 512 (images/s and images/s per thread; on a
// machine with fewer free cores than threads the per-thread rate drops).
//
// usage: preprocess_bench [--source DIR] [--images N] [--image-size S]
//                         [--quality Q] [--rounds R] [--threads T]
#include <turbojpeg.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cache/idx_reader.h"
#include "cache/sample_encoding.h"
#include "preprocess/preprocess_pool.h"
#include "preprocess/preprocessor.h"

using namespace loft;
using namespace loft::preprocess;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "preprocess_bench: %s\n", msg.c_str());
  std::exit(1);
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string FlagValue(int& i, int argc, char** argv) {
  if (i + 1 >= argc) Die(std::string("missing value for ") + argv[i]);
  return argv[++i];
}

// Keeps the work observable.
double g_sink = 0;

// Wall and this thread's CPU seconds of one stretch of work.
struct Spent {
  double wall = 0;
  double cpu = 0;
};

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

template <typename Fn>
void Measure(Spent* spent, Fn&& fn) {
  const double c0 = ThreadCpuSeconds();
  const auto t0 = Clock::now();
  fn();
  spent->wall += Seconds(t0, Clock::now());
  spent->cpu += ThreadCpuSeconds() - c0;
}

void Decode(tjhandle tj, const std::vector<std::vector<uint8_t>>& jpegs, size_t begin, size_t end, int size,
            std::vector<uint8_t>* buf) {
  for (size_t i = begin; i < end; ++i) {
    const auto& j = jpegs[i];
    if (tjDecompress2(tj, j.data(), j.size(), buf->data(), size, 0, size, TJPF_GRAY,
                      TJFLAG_ACCURATEDCT | TJFLAG_STOPONWARNING) != 0)
      Die(std::string("tjDecompress2: ") + tjGetErrorStr2(tj));
    g_sink += (*buf)[buf->size() / 2];
  }
}

void Preprocess(Preprocessor& pre, const std::vector<std::vector<uint8_t>>& jpegs, size_t begin, size_t end,
                int64_t epoch, std::vector<float>* out) {
  for (size_t i = begin; i < end; ++i) {
    if (Status s = pre.Run(i, epoch, jpegs[i], *out); !s.ok()) Die(s.ToString());
    g_sink += (*out)[out->size() / 2];
  }
}

double TimePool(PreprocessPool& pool, const std::vector<std::vector<uint8_t>>& jpegs, int64_t epoch) {
  constexpr size_t kBatch = 512;
  const auto dim = static_cast<size_t>(pool.options().input_size());
  std::vector<float> out(kBatch * dim);
  std::vector<PreprocessItem> items;
  const auto t0 = Clock::now();
  for (size_t b = 0; b < jpegs.size(); b += kBatch) {
    items.clear();
    for (size_t i = b; i < std::min(jpegs.size(), b + kBatch); ++i)
      items.push_back({i, epoch, jpegs[i], std::span<float>(out.data() + (i - b) * dim, dim)});
    if (Status s = pool.Run(items); !s.ok()) Die(s.ToString());
    g_sink += out[dim / 2];
  }
  return static_cast<double>(jpegs.size()) / Seconds(t0, Clock::now());
}

}  // namespace

int main(int argc, char** argv) {
  std::string source = cache::kDefaultFashionMnistDir;
  int64_t images = 5000;
  int size = 96;
  int quality = 90;
  int rounds = 5;
  int threads = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--source") {
      source = FlagValue(i, argc, argv);
    } else if (a == "--images") {
      images = std::stoll(FlagValue(i, argc, argv));
    } else if (a == "--image-size") {
      size = std::stoi(FlagValue(i, argc, argv));
    } else if (a == "--quality") {
      quality = std::stoi(FlagValue(i, argc, argv));
    } else if (a == "--rounds") {
      rounds = std::stoi(FlagValue(i, argc, argv));
    } else if (a == "--threads") {
      threads = std::stoi(FlagValue(i, argc, argv));
    } else {
      Die("unknown argument " + a + " (see the comment at the top of bench/preprocess_bench.cc)");
    }
  }
  if (images < 1 || rounds < 1 || threads < 1 || size < kMinImageSize || size > kMaxImageSize ||
      quality < 1 || quality > 100)
    Die("--images, --rounds, --threads must be >= 1, --image-size in [28, 1024], --quality in [1, 100]");

  auto ds = cache::LoadFashionMnist(source, "train");
  if (!ds.ok()) Die(ds.status().ToString());
  images = std::min(images, ds->count);
  cache::PayloadEncoder encoder({DatasetEncoding::kJpeg, size, quality});
  std::vector<std::vector<uint8_t>> jpegs;
  int64_t jpeg_bytes = 0;
  const auto t_enc = Clock::now();
  for (int64_t id = 0; id < images; ++id) {
    auto p = encoder.Encode(*ds, static_cast<uint64_t>(id));
    if (!p.ok()) Die(p.status().ToString());
    jpegs.emplace_back(p->begin(), p->end());
    jpeg_bytes += static_cast<int64_t>(p->size());
  }
  const double encode_s = Seconds(t_enc, Clock::now());

  PreprocessOptions none;
  none.encoding = DatasetEncoding::kJpeg;
  none.seed = 7;
  PreprocessOptions crop = none;
  crop.augment = AugmentKind::kCropFlip;
  Preprocessor pre_none(none), pre_crop(crop);
  tjhandle tj = tjInitDecompress();
  if (tj == nullptr) Die("tjInitDecompress failed");

  std::vector<uint8_t> decoded(static_cast<size_t>(size) * size);
  std::vector<float> floats(static_cast<size_t>(none.input_size()));
  // Warm-up: caches, branch predictors, the decoders' first allocations.
  Decode(tj, jpegs, 0, jpegs.size(), size, &decoded);
  Preprocess(pre_none, jpegs, 0, jpegs.size(), 0, &floats);
  Preprocess(pre_crop, jpegs, 0, jpegs.size(), 0, &floats);

  // The three modes alternate every kChunk images, so that a change in the
  // machine's load falls on all three alike.
  constexpr size_t kChunk = 100;
  std::map<std::string, std::vector<double>> wall, cpu;
  for (int r = 0; r < rounds; ++r) {
    Spent decode, plain, cropped;
    for (size_t b = 0; b < jpegs.size(); b += kChunk) {
      const size_t e = std::min(jpegs.size(), b + kChunk);
      Measure(&decode, [&] { Decode(tj, jpegs, b, e, size, &decoded); });
      Measure(&plain, [&] { Preprocess(pre_none, jpegs, b, e, r, &floats); });
      Measure(&cropped, [&] { Preprocess(pre_crop, jpegs, b, e, r, &floats); });
    }
    const auto n = static_cast<double>(jpegs.size());
    for (const auto& [name, spent] : {std::pair{"decode", decode}, {"none", plain}, {"crop_flip", cropped}}) {
      wall[name].push_back(n / spent.wall);
      cpu[name].push_back(n / spent.cpu);
    }
  }
  tjDestroy(tj);

  nlohmann::json pool = nlohmann::json::array();
  for (int t = 1; t <= threads; ++t) {
    PoolOptions po;
    po.threads = t;
    auto p = PreprocessPool::Create(crop, po);
    if (!p.ok()) Die(p.status().ToString());
    std::vector<double> rates;
    for (int r = 0; r < rounds; ++r) rates.push_back(TimePool(**p, jpegs, r));
    const double rate = Median(rates);
    pool.push_back({{"threads", t},
                    {"augment", "crop_flip"},
                    {"images_per_s", rate},
                    {"images_per_s_per_thread", rate / t},
                    {"max_queue_depth", (*p)->max_queue_depth()},
                    {"queue_capacity", (*p)->queue_capacity()}});
  }

  nlohmann::json out;
  out["benchmark"] = "preprocess_bench";
  out["dataset"] = "fashion-mnist train";
  out["images"] = images;
  out["image_size"] = size;
  out["jpeg_quality"] = quality;
  out["input"] = "28x28 floats in [0, 1]";
  out["mean_jpeg_bytes"] = static_cast<double>(jpeg_bytes) / static_cast<double>(images);
  out["encode_images_per_s"] = static_cast<double>(images) / encode_s;
  out["rounds"] = rounds;
  out["decode_images_per_s"] = Median(wall["decode"]);
  out["preprocess_images_per_s"] = {{"none", Median(wall["none"])}, {"crop_flip", Median(wall["crop_flip"])}};
  out["ratio_vs_decode"] = {{"none", Median(wall["none"]) / Median(wall["decode"])},
                            {"crop_flip", Median(wall["crop_flip"]) / Median(wall["decode"])}};
  // The same from the thread's CPU time (time the thread was not running,
  // on a busy machine, left out).
  out["cpu_time"] = {
      {"decode_images_per_s", Median(cpu["decode"])},
      {"preprocess_images_per_s", {{"none", Median(cpu["none"])}, {"crop_flip", Median(cpu["crop_flip"])}}},
      {"ratio_vs_decode",
       {{"none", Median(cpu["none"]) / Median(cpu["decode"])},
        {"crop_flip", Median(cpu["crop_flip"]) / Median(cpu["decode"])}}}};
  out["pool"] = pool;
  out["targets"] = {{"ratio_vs_decode_min", 0.8}};
  out["checksum"] = g_sink;
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
