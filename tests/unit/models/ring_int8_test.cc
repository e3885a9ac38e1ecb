// RingAllReduce with int8 compression (models/ring_allreduce.h,
// "Compression"): the result against the reducer over the decoded inputs,
// the verified ring, NaN and malformed inputs, error feedback and traffic.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "models/chunk_codec.h"
#include "models/in_memory_transport.h"
#include "models/ring_allreduce.h"

using namespace loft;
using namespace loft::models;

namespace {

struct RankResult {
  Status status;
  std::vector<float> data;
  std::vector<float> residual;
  AllReduceReport report;
};

// One thread per member of `view`; ranks in `special` use the options given there.
std::vector<RankResult> RunRing(InMemoryNetwork& net, const RingView& view, uint32_t round,
                                const std::vector<std::vector<float>>& inputs,
                                const std::vector<double>& weights, const AllReduceOptions& opt,
                                const std::map<int, AllReduceOptions>& special = {}) {
  std::vector<RankResult> res(net.world_size());
  std::vector<std::thread> threads;
  for (int r : view.members) {
    res[r].data = inputs[r];
    threads.emplace_back([&, r] {
      auto it = special.find(r);
      RingAllReduce ar(net.endpoint(r), it == special.end() ? opt : it->second);
      res[r].status = ar.Run(view, round, res[r].data, weights, &res[r].report, &res[r].residual);
    });
  }
  for (auto& t : threads) t.join();
  return res;
}

std::vector<std::vector<float>> RandomInputs(int n, size_t d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::vector<std::vector<float>> v(n, std::vector<float>(d));
  for (auto& x : v) {
    for (auto& y : x) y = g(rng);
  }
  return v;
}

std::vector<int> Iota(int n) {
  std::vector<int> m(n);
  for (int i = 0; i < n; ++i) m[i] = i;
  return m;
}

// x quantized chunk by chunk (the ring's n chunks) and decoded.
std::vector<float> Quantized(const std::vector<float>& x, int n) {
  std::vector<float> out(x.size());
  for (int c = 0; c < n; ++c) {
    const auto [b, e] = RingAllReduce::ChunkRange(x.size(), n, c);
    std::vector<std::byte> wire(ChunkWireBytes(Compression::kInt8, e - b));
    EncodeInt8(std::span(x).subspan(b, e - b), wire);
    REQUIRE(DecodeInt8(wire, std::span(out).subspan(b, e - b)));
  }
  return out;
}

// What the int8 ring must return: per chunk, the reducer over every
// member's decoded chunk, quantized again.
std::vector<float> ExpectedInt8(const ReducerOptions& reducer, const std::vector<std::vector<float>>& in,
                                const std::vector<double>& w) {
  const int n = static_cast<int>(in.size());
  const size_t d = in[0].size();
  std::vector<std::vector<float>> dec;
  for (const auto& x : in) dec.push_back(Quantized(x, n));
  std::vector<float> reduced(d);
  for (int c = 0; c < n; ++c) {
    const auto [b, e] = RingAllReduce::ChunkRange(d, n, c);
    std::vector<std::vector<float>> part;
    for (const auto& v : dec) part.emplace_back(v.begin() + b, v.begin() + e);
    std::vector<float> out;
    REQUIRE(Reduce(reducer, part, w, &out).ok());
    std::copy(out.begin(), out.end(), reduced.begin() + b);
  }
  return Quantized(reduced, n);
}

AllReduceOptions Int8(ReducerKind kind, int tolerance = 0) {
  AllReduceOptions o;
  o.reducer.kind = kind;
  o.reducer.trim_count = 1;
  o.compression = Compression::kInt8;
  o.tolerance = tolerance;
  o.timeout_ms = 10000;
  return o;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

double RelError(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    num += (static_cast<double>(got[k]) - want[k]) * (static_cast<double>(got[k]) - want[k]);
    den += static_cast<double>(want[k]) * want[k];
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("int8 ring: the reducer over the decoded inputs, quantized again, the same bits on every member",
          "[ring][int8]") {
  for (ReducerKind kind : {ReducerKind::kMean, ReducerKind::kWeightedMean, ReducerKind::kTrimmedMean}) {
    for (int n = 2; n <= 7; ++n) {
      for (size_t d : {size_t{3}, size_t{101}, size_t{1000}}) {
        auto in = RandomInputs(n, d, 100 * n + d);
        std::vector<double> w(n);
        for (int i = 0; i < n; ++i) w[i] = 8 + 5 * i;  // uneven batch sizes b_i
        AllReduceOptions opt = Int8(kind);
        if (n <= 2) opt.reducer.trim_count = 0;
        const std::vector<float> want = ExpectedInt8(opt.reducer, in, w);
        InMemoryNetwork net(n);
        auto res = RunRing(net, {1, Iota(n)}, 0, in, w, opt);
        for (int r = 0; r < n; ++r) {
          INFO(ReducerKindName(kind) << " n=" << n << " d=" << d << " rank " << r << ": " << res[r].status);
          REQUIRE(res[r].status.ok());
          CHECK(SameBits(res[r].data, want));
          CHECK(SameBits(res[r].data, res[0].data));
          // Error feedback: what this member's quantization dropped.
          const std::vector<float> sent = Quantized(in[r], n);
          REQUIRE(res[r].residual.size() == d);
          for (size_t k = 0; k < d; ++k) CHECK(res[r].residual[k] == in[r][k] - sent[k]);
        }
        if (d < 1000) continue;
        // Quantized for real, and close: the same ring without compression.
        AllReduceOptions plain = opt;
        plain.compression = Compression::kNone;
        InMemoryNetwork pnet(n);
        auto p = RunRing(pnet, {1, Iota(n)}, 0, in, w, plain);
        REQUIRE(p[0].status.ok());
        CHECK(p[0].residual == std::vector<float>(d, 0.0f));
        CHECK(res[0].data != p[0].data);
        // About 1% for the means; up to 3% for trimmed_mean, whose weights
        // follow the members: a reordering by quantization trims another weight.
        CHECK(RelError(res[0].data, p[0].data) < (kind == ReducerKind::kTrimmedMean ? 0.05 : 0.02));
      }
    }
  }
}

TEST_CASE("int8 verified ring (f = 1): no attacker equals the plain int8 ring, a garbage owner is outvoted",
          "[ring][int8]") {
  for (int n = 4; n <= 6; ++n) {
    for (ReducerKind kind : {ReducerKind::kTrimmedMean, ReducerKind::kMean}) {
      const size_t d = 301;
      auto in = RandomInputs(n, d, 40 + n);
      InMemoryNetwork plain_net(n);
      auto plain = RunRing(plain_net, {1, Iota(n)}, 0, in, {}, Int8(kind));
      REQUIRE(plain[0].status.ok());
      const std::vector<float>& clean = plain[0].data;
      {
        InMemoryNetwork net(n);
        auto v = RunRing(net, {1, Iota(n)}, 3, in, {}, Int8(kind, 1));
        for (int r = 0; r < n; ++r) {
          INFO("n " << n << " rank " << r << ": " << v[r].status);
          REQUIRE(v[r].status.ok());
          CHECK(SameBits(v[r].data, clean));
          CHECK(v[r].residual == plain[r].residual);
          CHECK(v[r].report.chunk_mismatch_from.empty());
          CHECK(v[r].report.fetched_copies == 0);
        }
      }
      // chunk_garbage: the attacker's reduced chunks (before encoding) are all 12345.
      AllReduceOptions bad = Int8(kind, 1);
      bad.corrupt_owned_chunk = [](std::span<float> c) {
        for (float& x : c) x = 12345.0f;
      };
      const int attacker = n / 2;
      InMemoryNetwork net(n);
      auto res = RunRing(net, {1, Iota(n)}, 3, in, {}, Int8(kind, 1), {{attacker, bad}});
      for (int r = 0; r < n; ++r) {
        INFO("n " << n << " " << ReducerKindName(kind) << " rank " << r << ": " << res[r].status);
        REQUIRE(res[r].status.ok());
        if (r == attacker) continue;
        CHECK(SameBits(res[r].data, clean));
        CHECK(res[r].report.chunk_mismatch_from == std::vector<int>{attacker});
      }
    }
  }
}

TEST_CASE("int8 verified ring: a Byzantine full-copy sender is outvoted with encoded copies fetched",
          "[ring][int8]") {
  // As in the uncompressed case: round 4, rank 2 sends chunk 2 in full
  // (primaries 2, 3; backup 4); it changes the encoded bytes it sends. The
  // others dispute chunk 2, escalate their encoded copies to the backup and
  // fetch the encoded results of ranks 3 and 4.
  const int n = 6;
  const size_t d = 600;
  auto in = RandomInputs(n, d, 11);
  InMemoryNetwork plain_net(n);
  auto plain = RunRing(plain_net, {1, Iota(n)}, 0, in, {}, Int8(ReducerKind::kMedian));
  REQUIRE(plain[0].status.ok());
  std::mutex mu;
  std::vector<size_t> full_sizes;
  AllReduceOptions bad = Int8(ReducerKind::kMedian, 1);
  bad.tamper_gather = [&](GatherPayload k, int, std::span<std::byte> bytes) {
    if (k != GatherPayload::kFullCopy) return true;
    std::lock_guard<std::mutex> lock(mu);
    full_sizes.push_back(bytes.size());
    for (size_t i = 4; i < bytes.size(); ++i) bytes[i] = std::byte{0x7f};  // every value +127 * scale
    return true;
  };
  const int attacker = 2;
  InMemoryNetwork net(n);
  auto res = RunRing(net, {1, Iota(n)}, 4, in, {}, Int8(ReducerKind::kMedian, 1), {{attacker, bad}});
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << res[r].status);
    REQUIRE(res[r].status.ok());
    if (r == attacker) continue;
    CHECK(SameBits(res[r].data, plain[0].data));
    CHECK(res[r].report.chunk_mismatch_from == std::vector<int>{attacker});
    CHECK(res[r].report.fetched_copies == (r == 3 || r == 4 ? 1 : 2));
  }
  // tamper_gather saw the encoded chunk: 4 + 100 bytes, to each of the 5 others.
  CHECK(full_sizes == std::vector<size_t>(n - 1, ChunkWireBytes(Compression::kInt8, d / n)));
}

TEST_CASE("int8 ring: a NaN input decodes to a NaN chunk that robust reducers discard", "[ring][int8]") {
  const int n = 5;
  const size_t d = 50;
  auto in = RandomInputs(n, d, 8);
  in[1][12] = std::numeric_limits<float>::quiet_NaN();  // chunk 1 of rank 1
  const auto [b, e] = RingAllReduce::ChunkRange(d, n, 1);
  REQUIRE((b <= 12 && 12 < e));
  for (ReducerKind kind : {ReducerKind::kTrimmedMean, ReducerKind::kMedian, ReducerKind::kMean}) {
    for (int f : {0, 1}) {
      AllReduceOptions opt = Int8(kind, f);
      InMemoryNetwork net(n);
      auto res = RunRing(net, {1, Iota(n)}, 0, in, {}, opt);
      for (int r = 0; r < n; ++r) {
        INFO(ReducerKindName(kind) << " f " << f << " rank " << r << ": " << res[r].status);
        REQUIRE(res[r].status.ok());
        if (kind == ReducerKind::kMean) {
          for (size_t k = b; k < e; ++k) CHECK(std::isnan(res[r].data[k]));  // poisoned by design
          continue;
        }
        CHECK(SameBits(res[r].data, ExpectedInt8(opt.reducer, in, {})));
        for (float x : res[r].data) CHECK(std::isfinite(x));
      }
      // The NaN chunk leaves no residual (it would poison the next rounds).
      const std::vector<float> sent = Quantized(in[1], n);
      for (size_t k = 0; k < d; ++k) {
        CHECK(res[1].residual[k] == (k >= b && k < e ? 0.0f : in[1][k] - sent[k]));
      }
    }
  }
}

TEST_CASE("int8 ring: a scatter payload of the wrong size is a Byzantine input, its sender listed",
          "[ring][int8]") {
  const int n = 4;
  const size_t d = 9;
  auto in = RandomInputs(n, d, 3);
  AllReduceOptions opt = Int8(ReducerKind::kMedian);
  opt.timeout_ms = 2000;
  InMemoryNetwork net(n);
  std::vector<RankResult> res(n);
  std::vector<std::thread> threads;
  const RingView view{5, Iota(n)};
  for (int r = 0; r < 3; ++r) {
    res[r].data = in[r];
    threads.emplace_back([&, r] {
      RingAllReduce ar(net.endpoint(r), opt);
      res[r].status = ar.Run(view, 1, res[r].data, {}, &res[r].report);
    });
  }
  // Rank 3 sends its chunks as floats (4 bytes each: the uncompressed size),
  // then owns chunk 3 honestly: decodes, reduces, encodes. (No Catch2
  // assertions off the main thread: failures are collected.)
  std::string byz_error;
  threads.emplace_back([&] {
    Transport* t = net.endpoint(3);
    for (int to = 0; to < 3; ++to) {
      const auto [b, e] = RingAllReduce::ChunkRange(d, n, to);
      if (!t->Send(to, MakeTag(5, 1, 1), std::as_bytes(std::span(in[3]).subspan(b, e - b))).ok())
        byz_error = "send failed";
    }
    const auto [b, e] = RingAllReduce::ChunkRange(d, n, 3);
    std::vector<std::vector<float>> copies;
    for (int from = 0; from < 3; ++from) {
      auto bytes = t->Recv(from, MakeTag(5, 1, 1), 2000);
      std::vector<float> c(e - b);
      if (!bytes.ok() || !DecodeInt8(*bytes, c)) {
        byz_error = "bad scatter copy";
        return;
      }
      copies.push_back(c);
    }
    copies.emplace_back(in[3].begin() + b, in[3].begin() + e);
    std::vector<float> out;
    if (!Reduce(opt.reducer, copies, {}, &out).ok()) byz_error = "reduce failed";
    std::vector<std::byte> wire(ChunkWireBytes(Compression::kInt8, out.size()));
    EncodeInt8(out, wire);
    for (int to = 0; to < 3; ++to) {
      if (!t->Send(to, MakeTag(5, 1, 2), wire).ok()) byz_error = "send failed";
    }
  });
  for (auto& th : threads) th.join();
  REQUIRE(byz_error.empty());
  for (int r = 0; r < 3; ++r) {
    INFO(res[r].status);
    REQUIRE(res[r].status.ok());
    CHECK(res[r].report.malformed_from == std::vector<int>{3});
    for (size_t j = 0; j < d; ++j) CHECK(std::isfinite(res[r].data[j]));
  }
}

TEST_CASE("int8 ring: members that disagree on the compression fail the plain ring with DataLoss",
          "[ring][int8]") {
  // Rank 3 runs uncompressed: its scatter payloads are malformed for the
  // others (listed) and its all-gather payload has the wrong size (4 * len
  // bytes where 4 + len are expected): DataLoss, `data` untouched.
  const int n = 4;
  const size_t d = 40;
  auto in = RandomInputs(n, d, 17);
  AllReduceOptions opt = Int8(ReducerKind::kMedian);
  opt.timeout_ms = 2000;
  AllReduceOptions plain = opt;
  plain.compression = Compression::kNone;
  InMemoryNetwork net(n);
  auto res = RunRing(net, {1, Iota(n)}, 0, in, {}, opt, {{3, plain}});
  for (int r = 0; r < 3; ++r) {
    INFO(res[r].status);
    CHECK(res[r].status.code() == StatusCode::kDataLoss);
    CHECK(res[r].status.message().find("expected 14") != std::string::npos);  // 4 + 10 bytes
    CHECK(res[r].data == in[r]);
    CHECK(res[r].residual.empty());  // untouched on error
  }
}

TEST_CASE("int8 ring: with the residual fed back, the running mean of the output converges", "[ring][int8]") {
  // Every member's input is the same constant x every round; each keeps its
  // residual and adds it to its next input, as the trainer does. The sum of
  // what a member sends telescopes (x + e_{t-1} - e_t), so the mean output
  // approaches x at rate ~scale/T; without the residual the quantization
  // error of x stays (up to scale/2 per value).
  const int n = 4;
  const size_t d = 1000;
  const int rounds = 300;
  std::mt19937_64 rng(9);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> x(d);
  for (float& v : x) v = g(rng) * g(rng);  // heavy-tailed, as gradients are
  for (bool feedback : {true, false}) {
    InMemoryNetwork net(n);
    std::vector<std::vector<float>> residual(n, std::vector<float>(d, 0.0f));
    std::vector<double> sum(d, 0.0);
    for (int t = 0; t < rounds; ++t) {
      std::vector<std::vector<float>> in(n, x);
      for (int r = 0; r < n && feedback; ++r) {
        for (size_t k = 0; k < d; ++k) in[r][k] += residual[r][k];
      }
      auto res = RunRing(net, {1, Iota(n)}, static_cast<uint32_t>(t), in, {}, Int8(ReducerKind::kMean));
      for (int r = 0; r < n; ++r) {
        REQUIRE(res[r].status.ok());
        REQUIRE(SameBits(res[r].data, res[0].data));
        residual[r] = res[r].residual;
      }
      for (size_t k = 0; k < d; ++k) sum[k] += res[0].data[k];
    }
    double max_err = 0, max_x = 0;
    for (size_t k = 0; k < d; ++k) {
      max_err = std::max(max_err, std::abs(sum[k] / rounds - x[k]));
      max_x = std::max(max_x, static_cast<double>(std::abs(x[k])));
    }
    const double step = max_x / 127;  // about the largest chunk scale
    INFO("feedback " << feedback << ": max error " << max_err << " = " << max_err / step << " steps");
    if (feedback) {
      CHECK(max_err < 2 * step / rounds);
    } else {
      CHECK(max_err > 0.2 * step);
    }
  }
}

TEST_CASE("int8 ring: with different inputs the residual takes the mean error below the all-gather's",
          "[ring][int8]") {
  // Members with different constant inputs: the scatter's error is fed back,
  // the all-gather's rounding of the reduced chunk is not (ring_allreduce.h),
  // so the mean output stays within about half a step of the mean input
  // instead of converging, but much closer than without the residual.
  const int n = 4;
  const size_t d = 1000;
  const int rounds = 300;
  std::mt19937_64 rng(10);
  std::normal_distribution<float> g(0, 1);
  std::vector<std::vector<float>> x(n, std::vector<float>(d));
  std::vector<float> base(d);
  for (float& v : base) v = g(rng) * g(rng);
  for (auto& xr : x) {
    for (size_t k = 0; k < d; ++k) xr[k] = base[k] + 0.5f * g(rng) * (std::abs(base[k]) + 0.1f);
  }
  std::vector<double> target(d, 0.0);
  double max_t = 0;
  for (size_t k = 0; k < d; ++k) {
    for (int r = 0; r < n; ++r) target[k] += x[r][k] / n;
    max_t = std::max(max_t, std::abs(target[k]));
  }
  double rms[2];
  for (bool feedback : {true, false}) {
    InMemoryNetwork net(n);
    std::vector<std::vector<float>> residual(n, std::vector<float>(d, 0.0f));
    std::vector<double> sum(d, 0.0);
    for (int t = 0; t < rounds; ++t) {
      std::vector<std::vector<float>> in = x;
      for (int r = 0; r < n && feedback; ++r) {
        for (size_t k = 0; k < d; ++k) in[r][k] += residual[r][k];
      }
      auto res = RunRing(net, {1, Iota(n)}, static_cast<uint32_t>(t), in, {}, Int8(ReducerKind::kMean));
      for (int r = 0; r < n; ++r) {
        REQUIRE(res[r].status.ok());
        residual[r] = res[r].residual;
      }
      for (size_t k = 0; k < d; ++k) sum[k] += res[0].data[k];
    }
    double sq = 0, max_err = 0;
    for (size_t k = 0; k < d; ++k) {
      const double err = sum[k] / rounds - target[k];
      sq += err * err;
      max_err = std::max(max_err, std::abs(err));
    }
    rms[feedback] = std::sqrt(sq / d);
    const double step = max_t / 127;
    INFO("feedback " << feedback << ": max error " << max_err / step << " steps, rms "
                     << rms[feedback] / step);
    if (feedback) CHECK(max_err < 0.5 * step);
  }
  CHECK(rms[1] < 0.5 * rms[0]);
}

TEST_CASE("int8 ring: about a quarter of the uncompressed bytes, plain and verified", "[ring][int8]") {
  const int n = 6;
  const size_t d = 6000;  // chunks of 1000 values
  auto in = RandomInputs(n, d, 31);
  for (int f : {0, 1}) {
    AllReduceOptions none = Int8(ReducerKind::kMedian, f);
    none.compression = Compression::kNone;
    InMemoryNetwork a(n), b(n);
    for (const auto& r : RunRing(a, {1, Iota(n)}, 0, in, {}, none)) REQUIRE(r.status.ok());
    for (const auto& r : RunRing(b, {1, Iota(n)}, 0, in, {}, Int8(ReducerKind::kMedian, f)))
      REQUIRE(r.status.ok());
    // Per member: plain 2(n-1) chunk messages; verified (two primaries) 3(n-1)
    // plus n-1 digests of 32 bytes and n-1 bitmaps of 1 byte.
    const auto per_member = [&](Compression c) {
      const int64_t chunk = static_cast<int64_t>(ChunkWireBytes(c, d / n));
      return f == 0 ? 2 * (n - 1) * chunk : 3 * (n - 1) * chunk + (n - 1) * 32 + (n - 1);
    };
    INFO("f " << f << ": none " << a.sent_bytes() << " int8 " << b.sent_bytes());
    CHECK(a.sent_bytes() == n * per_member(Compression::kNone));
    CHECK(b.sent_bytes() == n * per_member(Compression::kInt8));
    const double ratio = static_cast<double>(b.sent_bytes()) / static_cast<double>(a.sent_bytes());
    CHECK(ratio > 0.25);
    CHECK(ratio < 0.26);
  }
}
