#include "models/ring_allreduce.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "models/in_memory_transport.h"
#include "models/replica_vote.h"

using namespace loft;
using namespace loft::models;

namespace {

struct RankResult {
  Status status;
  std::vector<float> data;
  AllReduceReport report;
};

// Runs RingAllReduce on every rank in `view.members`, one thread each;
// ranks not in the view do nothing (a dead or absent worker). Ranks in
// `byzantine` use the options given there.
std::vector<RankResult> RunRing(InMemoryNetwork& net, const RingView& view, uint32_t round,
                                const std::vector<std::vector<float>>& inputs,
                                const std::vector<double>& weights, const AllReduceOptions& opt,
                                const std::map<int, AllReduceOptions>& byzantine = {}) {
  std::vector<RankResult> res(net.world_size());
  std::vector<std::thread> threads;
  for (int r : view.members) {
    res[r].data = inputs[r];
    threads.emplace_back([&, r] {
      auto it = byzantine.find(r);
      RingAllReduce ar(net.endpoint(r), it == byzantine.end() ? opt : it->second);
      res[r].status = ar.Run(view, round, res[r].data, weights, &res[r].report);
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

}  // namespace

TEST_CASE("chunk ranges cover the vector with sizes differing by at most one", "[ring]") {
  for (int n = 1; n <= 8; ++n) {
    for (size_t d : {size_t{0}, size_t{1}, size_t{7}, size_t{37}, size_t{1003}}) {
      size_t expect = 0;
      for (int c = 0; c < n; ++c) {
        auto [b, e] = RingAllReduce::ChunkRange(d, n, c);
        CHECK(b == expect);
        CHECK(e - b >= d / n);
        CHECK(e - b <= d / n + 1);
        expect = e;
      }
      CHECK(expect == d);
    }
  }
}

TEST_CASE("ring all-reduce equals the reducer on full vectors, N = 2..8, uneven chunks", "[ring]") {
  for (ReducerKind kind :
       {ReducerKind::kMean, ReducerKind::kWeightedMean, ReducerKind::kMedian, ReducerKind::kTrimmedMean}) {
    for (int n = 2; n <= 8; ++n) {
      for (size_t d : {size_t{3}, size_t{101}}) {
        InMemoryNetwork net(n);
        auto in = RandomInputs(n, d, 100 * n + d);
        std::vector<double> w(n);
        for (int i = 0; i < n; ++i) w[i] = 8 + 5 * i;  // uneven batch sizes b_i
        AllReduceOptions opt;
        opt.reducer.kind = kind;
        opt.timeout_ms = 5000;
        std::vector<float> direct;
        REQUIRE(Reduce(opt.reducer, in, w, &direct).ok());
        auto res = RunRing(net, {1, Iota(n)}, 0, in, w, opt);
        for (int r = 0; r < n; ++r) {
          INFO(ReducerKindName(kind) << " n=" << n << " d=" << d << " rank " << r << ": " << res[r].status);
          REQUIRE(res[r].status.ok());
          REQUIRE(res[r].data == direct);  // bitwise: same per-coordinate arithmetic
        }
      }
    }
  }
}

TEST_CASE("vector-level reducers are applied per chunk", "[ring]") {
  for (ReducerKind kind : {ReducerKind::kMultiKrum, ReducerKind::kCenteredClipping}) {
    const int n = 5;
    const size_t d = 23;
    InMemoryNetwork net(n);
    auto in = RandomInputs(n, d, 77);
    AllReduceOptions opt;
    opt.reducer.kind = kind;
    auto res = RunRing(net, {3, Iota(n)}, 9, in, {}, opt);
    std::vector<float> expect(d);
    for (int c = 0; c < n; ++c) {
      auto [b, e] = RingAllReduce::ChunkRange(d, n, c);
      std::vector<std::vector<float>> part;
      for (const auto& v : in) part.emplace_back(v.begin() + b, v.begin() + e);
      std::vector<float> out;
      REQUIRE(Reduce(opt.reducer, part, {}, &out).ok());
      std::copy(out.begin(), out.end(), expect.begin() + b);
    }
    for (int r = 0; r < n; ++r) {
      REQUIRE(res[r].status.ok());
      CHECK(res[r].data == expect);
    }
  }
}

TEST_CASE("a silent rank ends the attempt with a timeout, survivors restart in a new view", "[ring]") {
  const int n = 4;
  const size_t d = 10;
  auto in = RandomInputs(n, d, 5);
  AllReduceOptions opt;
  opt.reducer.kind = ReducerKind::kMedian;
  opt.timeout_ms = 200;
  const auto t0 = std::chrono::steady_clock::now();
  InMemoryNetwork net(n);
  std::vector<RankResult> part(n);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r) {
      part[r].data = in[r];
      threads.emplace_back([&, r] {
        RingAllReduce ar(net.endpoint(r), opt);
        part[r].status = ar.Run({1, {0, 1, 2, 3}}, 4, part[r].data, {});
      });
    }
    for (auto& t : threads) t.join();
  }
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));  // a timeout, not a hang
  for (int r = 0; r < 3; ++r) {
    INFO(part[r].status);
    CHECK(part[r].status.code() == StatusCode::kDeadlineExceeded);
    CHECK(part[r].data == in[r]);  // untouched on failure
  }
  // The scheduler issues view 2 without rank 3; the same round restarts.
  auto again = RunRing(net, {2, {0, 1, 2}}, 4, in, {}, opt);
  std::vector<float> direct;
  REQUIRE(Reduce(opt.reducer, {in[0], in[1], in[2]}, {}, &direct).ok());
  for (int r = 0; r < 3; ++r) {
    INFO(again[r].status);
    REQUIRE(again[r].status.ok());
    CHECK(again[r].data == direct);
  }
}

TEST_CASE("a killed rank makes sends fail fast with Unavailable", "[ring]") {
  InMemoryNetwork net(3);
  net.Kill(2);
  AllReduceOptions opt;
  opt.timeout_ms = 5000;
  std::vector<float> v = {1, 2, 3};
  RingAllReduce ar(net.endpoint(0), opt);
  const auto t0 = std::chrono::steady_clock::now();
  Status s = ar.Run({1, {0, 1, 2}}, 0, v, {});
  CHECK(s.code() == StatusCode::kUnavailable);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
}

TEST_CASE("stale messages from an older view are dropped", "[ring]") {
  const int n = 3;
  InMemoryNetwork net(n);
  auto in = RandomInputs(n, 6, 8);
  // Leftovers of an aborted view-1 attempt, same round, wrong contents.
  std::vector<float> junk(2, 1e9f);
  for (int from = 0; from < n; ++from) {
    for (int to = 0; to < n; ++to) {
      if (from == to) continue;
      REQUIRE(
          net.endpoint(from)->Send(to, MakeTag(1, 7, 1), std::as_bytes(std::span<const float>(junk))).ok());
      REQUIRE(
          net.endpoint(from)->Send(to, MakeTag(1, 7, 2), std::as_bytes(std::span<const float>(junk))).ok());
    }
  }
  AllReduceOptions opt;
  opt.reducer.kind = ReducerKind::kMean;
  auto res = RunRing(net, {2, Iota(n)}, 7, in, {}, opt);
  std::vector<float> direct;
  REQUIRE(Reduce(opt.reducer, in, {}, &direct).ok());
  for (int r = 0; r < n; ++r) {
    REQUIRE(res[r].status.ok());
    CHECK(res[r].data == direct);
  }
  // A late view-1 message after the floor was raised is dropped on arrival.
  REQUIRE(net.endpoint(1)->Send(0, MakeTag(1, 7, 1), std::as_bytes(std::span<const float>(junk))).ok());
  auto r = net.endpoint(0)->Recv(1, MakeTag(1, 7, 1), 10);
  CHECK(r.status().code() == StatusCode::kDeadlineExceeded);
}

TEST_CASE("a Byzantine rank cannot move trimmed mean or median far from the honest mean", "[ring]") {
  const int n = 6;
  const size_t d = 257;
  std::mt19937_64 rng(21);
  std::normal_distribution<float> noise(0, 0.01f);
  std::vector<float> truth(d);
  for (size_t j = 0; j < d; ++j) truth[j] = static_cast<float>(std::cos(0.1 * j));
  std::vector<std::vector<float>> honest(n, std::vector<float>(d));
  for (auto& v : honest) {
    for (size_t j = 0; j < d; ++j) v[j] = truth[j] + noise(rng);
  }
  std::vector<double> hmean(d, 0.0);
  for (int r = 0; r < n; ++r) {
    if (r == 2) continue;
    for (size_t j = 0; j < d; ++j) hmean[j] += honest[r][j] / (n - 1);
  }
  enum Attack { kSignFlip, kNaN };
  for (Attack attack : {kSignFlip, kNaN}) {
    auto in = honest;
    for (size_t j = 0; j < d; ++j) {
      in[2][j] = attack == kSignFlip ? -10 * honest[2][j] : std::numeric_limits<float>::quiet_NaN();
    }
    for (ReducerKind kind : {ReducerKind::kTrimmedMean, ReducerKind::kMedian, ReducerKind::kMean}) {
      InMemoryNetwork net(n);
      AllReduceOptions opt;
      opt.reducer.kind = kind;
      auto res = RunRing(net, {1, Iota(n)}, 0, in, {}, opt);
      for (int r = 0; r < n; ++r) {
        REQUIRE(res[r].status.ok());
        double err = 0;
        for (size_t j = 0; j < d; ++j) {
          err = std::max(err, std::isfinite(res[r].data[j]) ? std::abs(res[r].data[j] - hmean[j]) : 1e9);
        }
        INFO(ReducerKindName(kind) << " attack " << attack << " rank " << r << " err " << err);
        if (kind == ReducerKind::kMean) {
          CHECK(err > 0.5);  // the plain mean is dragged away (or NaN)
        } else {
          CHECK(err < 0.05);
        }
      }
    }
  }
}

TEST_CASE("a malformed scatter payload counts as a Byzantine input", "[ring]") {
  const int n = 4;
  const size_t d = 9;
  InMemoryNetwork net(n);
  auto in = RandomInputs(n, d, 3);
  AllReduceOptions opt;
  opt.reducer.kind = ReducerKind::kMedian;
  opt.timeout_ms = 2000;
  std::vector<RankResult> res(n);
  std::vector<AllReduceReport> reports(n);
  std::vector<std::thread> threads;
  const RingView view{5, Iota(n)};
  for (int r = 0; r < 3; ++r) {
    res[r].data = in[r];
    threads.emplace_back([&, r] {
      RingAllReduce ar(net.endpoint(r), opt);
      res[r].status = ar.Run(view, 1, res[r].data, {}, &reports[r]);
    });
  }
  // Rank 3: sends 3 bytes instead of each chunk, then owns chunk 3 honestly.
  // (No Catch2 assertions off the main thread: failures are collected.)
  std::string byz_error;
  threads.emplace_back([&] {
    Transport* t = net.endpoint(3);
    const std::byte junk[3] = {};
    for (int to = 0; to < 3; ++to) {
      if (!t->Send(to, MakeTag(5, 1, 1), junk).ok()) byz_error = "send failed";
    }
    auto [b, e] = RingAllReduce::ChunkRange(d, n, 3);
    std::vector<std::vector<float>> copies;
    for (int from = 0; from < 3; ++from) {
      auto bytes = t->Recv(from, MakeTag(5, 1, 1), 2000);
      if (!bytes.ok() || bytes->size() != (e - b) * sizeof(float)) {
        byz_error = "bad scatter copy";
        return;
      }
      std::vector<float> c(e - b);
      std::memcpy(c.data(), bytes->data(), bytes->size());
      copies.push_back(c);
    }
    copies.emplace_back(in[3].begin() + b, in[3].begin() + e);
    std::vector<float> out;
    if (!Reduce(opt.reducer, copies, {}, &out).ok()) byz_error = "reduce failed";
    for (int to = 0; to < 3; ++to) {
      if (!t->Send(to, MakeTag(5, 1, 2), std::as_bytes(std::span<const float>(out))).ok())
        byz_error = "send failed";
    }
  });
  for (auto& th : threads) th.join();
  REQUIRE(byz_error.empty());
  for (int r = 0; r < 3; ++r) {
    INFO(res[r].status);
    REQUIRE(res[r].status.ok());
    CHECK(reports[r].malformed_from == std::vector<int>{3});
    for (size_t j = 0; j < d; ++j) CHECK(std::isfinite(res[r].data[j]));
  }
}

TEST_CASE("tags order by view, then round, then phase", "[ring]") {
  CHECK(MakeTag(2, 0, 0) > MakeTag(1, 0xFFFFFFFFu, 255));
  CHECK(MakeTag(1, 8, 0) > MakeTag(1, 7, 2));
  CHECK(TagView(MakeTag(77, 123456789, 2)) == 77);
  CHECK(TagRound(MakeTag(77, 123456789, 2)) == 123456789u);
}

TEST_CASE("a member with weight 0 (no samples) takes part and does not change the result", "[ring]") {
  // 5 members; member 3 has no samples and passes garbage (it must be absent
  // for every reducer, including as chunk owner).
  const int n = 5;
  const size_t d = 23;
  auto in = RandomInputs(n, d, 77);
  for (float& x : in[3]) x = 1e6f;
  const std::vector<double> b{40, 10, 25, 0, 33};
  for (ReducerKind kind : {ReducerKind::kMean, ReducerKind::kWeightedMean, ReducerKind::kMedian,
                           ReducerKind::kTrimmedMean, ReducerKind::kCenteredClipping}) {
    AllReduceOptions opt;
    opt.reducer.kind = kind;
    opt.reducer.trim_count = 1;
    opt.reducer.clip_tau = 10;
    const std::vector<double> w = AggregationWeights(kind, b);
    // Direct computation over the four members with samples only.
    std::vector<std::vector<float>> present{in[0], in[1], in[2], in[4]};
    std::vector<double> pw{w[0], w[1], w[2], w[4]};
    std::vector<float> want;
    REQUIRE(Reduce(opt.reducer, present, pw, &want).ok());
    InMemoryNetwork net(n);
    auto res = RunRing(net, {2, Iota(n)}, 3, in, w, opt);
    for (int r = 0; r < n; ++r) {
      INFO(ReducerKindName(kind) << " rank " << r << ": " << res[r].status.ToString());
      REQUIRE(res[r].status.ok());
      if (kind == ReducerKind::kCenteredClipping) {
        // Per-chunk (BTARD); still unaffected by the absent member's 1e6.
        for (float x : res[r].data) CHECK(std::abs(x) < 10);
      } else {
        CHECK(res[r].data == want);
      }
    }
  }
}

namespace {
// Options of a Byzantine chunk owner that replaces its reduced chunk(s).
AllReduceOptions Corrupting(AllReduceOptions o, bool garbage) {
  o.corrupt_owned_chunk = [garbage](std::span<float> c) {
    for (float& x : c) x = garbage ? 12345.0f : 25.0f * x;
  };
  return o;
}
}  // namespace

TEST_CASE("plain ring: a malicious chunk owner sets its 1/N of everyone's result to anything", "[ring]") {
  const int n = 6;
  const size_t d = 60;
  auto in = RandomInputs(n, d, 5);
  AllReduceOptions opt;
  opt.reducer.kind = ReducerKind::kMedian;
  InMemoryNetwork net(n);
  AllReduceOptions bad = Corrupting(opt, /*garbage=*/true);
  auto res = RunRing(net, {1, Iota(n)}, 0, in, {}, opt, {{2, bad}});
  const auto [b, e] = RingAllReduce::ChunkRange(d, n, 2);
  for (int r = 0; r < n; ++r) {
    REQUIRE(res[r].status.ok());
    for (size_t j = b; j < e; ++j) CHECK(res[r].data[j] == 12345.0f);  // every member applies it
    CHECK(res[r].data == res[0].data);                                 // so parameter hashes agree
    CHECK(res[r].report.chunk_mismatch_from.empty());                  // and nobody notices
  }
}

TEST_CASE("verified chunks (f = 1): the honest result is taken and the owner named, N = 3..7", "[ring]") {
  for (int n = 3; n <= 7; ++n) {
    for (bool garbage : {true, false}) {
      for (ReducerKind kind : {ReducerKind::kMedian, ReducerKind::kTrimmedMean, ReducerKind::kMean}) {
        const size_t d = 101;
        auto in = RandomInputs(n, d, 40 + n);
        AllReduceOptions plain;
        plain.reducer.kind = kind;
        plain.reducer.trim_count = 1;
        InMemoryNetwork clean_net(n);
        auto clean = RunRing(clean_net, {1, Iota(n)}, 0, in, {}, plain);
        AllReduceOptions opt = plain;
        opt.tolerance = 1;
        AllReduceOptions bad = Corrupting(opt, garbage);
        InMemoryNetwork net(n);
        const int attacker = n / 2;
        auto res = RunRing(net, {1, Iota(n)}, 3, in, {}, opt, {{attacker, bad}});
        for (int r = 0; r < n; ++r) {
          INFO("n " << n << " garbage " << garbage << " " << ReducerKindName(kind) << " rank " << r);
          REQUIRE(res[r].status.ok());
          REQUIRE(clean[r].status.ok());
          if (r == attacker) continue;
          CHECK(res[r].data == clean[r].data);  // bitwise the plain ring's honest result
          CHECK(res[r].report.chunk_mismatch_from == std::vector<int>{attacker});
        }
      }
    }
  }
}

TEST_CASE("verified chunks without an attacker equal the plain ring and name nobody", "[ring]") {
  for (int n : {1, 2, 4, 6}) {
    const size_t d = 37;
    auto in = RandomInputs(n, d, 7);
    std::vector<double> w(n, 1.0);
    AllReduceOptions plain;
    plain.reducer.kind = ReducerKind::kMedian;
    InMemoryNetwork a(n), b(n);
    auto p = RunRing(a, {1, Iota(n)}, 0, in, w, plain);
    AllReduceOptions ver = plain;
    ver.tolerance = 1;
    auto v = RunRing(b, {1, Iota(n)}, 0, in, w, ver);
    for (int r = 0; r < n; ++r) {
      REQUIRE(v[r].status.ok());
      CHECK(v[r].data == p[r].data);
      CHECK(v[r].report.chunk_mismatch_from.empty());
      CHECK(v[r].report.fetched_copies == 0);  // digests agree: nothing fetched
    }
  }
}

TEST_CASE("verified chunks: a malformed result counts as NaN and its owner is named", "[ring]") {
  const int n = 4;
  const size_t d = 16;
  auto in = RandomInputs(n, d, 9);
  AllReduceOptions opt;
  opt.reducer.kind = ReducerKind::kMedian;
  opt.tolerance = 1;
  AllReduceOptions bad = opt;
  bad.corrupt_owned_chunk = [](std::span<float> c) {
    std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
  };
  InMemoryNetwork net(n);
  auto res = RunRing(net, {1, Iota(n)}, 0, in, {}, opt, {{1, bad}});
  for (int r : {0, 2, 3}) {
    REQUIRE(res[r].status.ok());
    for (float x : res[r].data) CHECK(std::isfinite(x));
    CHECK(res[r].report.chunk_mismatch_from == std::vector<int>{1});
  }
  AllReduceOptions bad_tol;
  bad_tol.tolerance = 32;
  CHECK(bad_tol.Validate().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("verified chunks: the identical-results fast path is taken only when every bit agrees", "[ring]") {
  const size_t len = 1000;
  std::vector<float> a(len);
  for (size_t k = 0; k < len; ++k) a[k] = std::sin(static_cast<float>(k)) * 3.0f;
  std::vector<float> out(len);
  {
    std::vector<std::span<const float>> rs{a, a, a};
    CHECK(MedianOfReplicas(rs, out));
    CHECK(out == a);
  }
  // One replica one ulp off at one coordinate (the last): the coordinate-wise
  // median runs and takes the value the other two agree on.
  for (size_t at : {size_t{0}, len / 2, len - 1}) {
    std::vector<float> b = a;
    b[at] = std::nextafter(b[at], 1e9f);
    for (int slot = 0; slot < 3; ++slot) {
      std::vector<std::span<const float>> rs{a, a, a};
      rs[static_cast<size_t>(slot)] = b;
      std::fill(out.begin(), out.end(), 0.0f);
      CHECK_FALSE(MedianOfReplicas(rs, out));
      CHECK(std::memcmp(out.data(), a.data(), len * sizeof(float)) == 0);
    }
  }
  // +0 and -0 compare equal but differ in bits: not the fast path.
  std::vector<float> z(4, 0.0f), nz(4, -0.0f);
  std::vector<float> o4(4);
  std::vector<std::span<const float>> zs{z, nz, z};
  CHECK_FALSE(MedianOfReplicas(zs, o4));
  // A malformed (all-NaN) replica: the median of the other two's equal values.
  std::vector<float> nan(len, std::numeric_limits<float>::quiet_NaN());
  std::vector<std::span<const float>> rn{a, nan, a};
  CHECK_FALSE(MedianOfReplicas(rn, out));
  CHECK(out == a);
}

TEST_CASE("verified chunks: an owner that changes one bit of one coordinate is named", "[ring]") {
  for (int n : {3, 6}) {
    const size_t d = 5000;
    auto in = RandomInputs(n, d, 21);
    AllReduceOptions opt;
    opt.reducer.kind = ReducerKind::kMedian;
    InMemoryNetwork clean_net(n);
    auto clean = RunRing(clean_net, {1, Iota(n)}, 0, in, {}, opt);
    opt.tolerance = 1;
    AllReduceOptions bad = opt;
    bad.corrupt_owned_chunk = [](std::span<float> c) {
      if (!c.empty()) c[c.size() / 2] = std::nextafter(c[c.size() / 2], 1e9f);
    };
    InMemoryNetwork net(n);
    const int attacker = 1;
    auto res = RunRing(net, {1, Iota(n)}, 0, in, {}, opt, {{attacker, bad}});
    for (int r = 0; r < n; ++r) {
      INFO("n " << n << " rank " << r);
      REQUIRE(res[r].status.ok());
      if (r == attacker) continue;
      CHECK(res[r].data == clean[r].data);
      CHECK(res[r].report.chunk_mismatch_from == std::vector<int>{attacker});
    }
  }
}

namespace {

// Verified-ring options whose all-gather payloads of `kind` are changed
// (every float set to 12345, or one digest byte flipped) or withheld.
AllReduceOptions Tampering(AllReduceOptions o, GatherPayload kind, bool withhold = false) {
  o.tamper_gather = [kind, withhold](GatherPayload k, int, std::span<std::byte> bytes) {
    if (k != kind) return true;
    if (withhold) return false;
    if (k == GatherPayload::kDigest) {
      bytes[0] ^= std::byte{1};
    } else {
      const float g = 12345.0f;
      for (size_t i = 0; i + sizeof g <= bytes.size(); i += sizeof g) std::memcpy(&bytes[i], &g, sizeof g);
    }
    return true;
  };
  return o;
}

AllReduceOptions Verified(int f, int64_t timeout_ms = 10000) {
  AllReduceOptions o;
  o.reducer.kind = ReducerKind::kMedian;
  o.tolerance = f;
  o.timeout_ms = timeout_ms;
  return o;
}

// The plain ring's result (every rank's), the honest reference.
std::vector<float> CleanResult(int n, const std::vector<std::vector<float>>& in) {
  AllReduceOptions plain;
  plain.reducer.kind = ReducerKind::kMedian;
  InMemoryNetwork net(n);
  auto res = RunRing(net, {1, Iota(n)}, 0, in, {}, plain);
  for (const auto& r : res) REQUIRE(r.status.ok());
  return res[0].data;
}

}  // namespace

TEST_CASE("verified ring: f+1 primaries, one full copy per chunk plus digests, 1.5 times the plain traffic",
          "[ring]") {
  const int n = 6;
  const size_t d = 6000;
  auto in = RandomInputs(n, d, 31);
  AllReduceOptions plain;
  plain.reducer.kind = ReducerKind::kMedian;
  InMemoryNetwork a(n), b(n);
  auto p = RunRing(a, {1, Iota(n)}, 0, in, {}, plain);
  auto v = RunRing(b, {1, Iota(n)}, 0, in, {}, Verified(1));
  for (int r = 0; r < n; ++r) {
    REQUIRE(v[r].status.ok());
    CHECK(v[r].data == p[r].data);
    CHECK(v[r].report.fetched_copies == 0);
  }
  // Plain: 2(n-1) chunks of d/n floats per member. Verified (f = 1, two
  // primaries): 2(n-1) scatter chunks, n-1 full chunks, n-1 digests of 32
  // bytes, n-1 dispute bitmaps of 1 byte; nothing to the backups.
  const int64_t chunk = static_cast<int64_t>(d / n * sizeof(float));
  CHECK(a.sent_bytes() == n * 2 * (n - 1) * chunk);
  CHECK(b.sent_bytes() == n * (3 * (n - 1) * chunk + (n - 1) * 32 + (n - 1) * 1));
  CHECK(static_cast<double>(b.sent_bytes()) / static_cast<double>(a.sent_bytes()) < 1.51);
}

TEST_CASE("verified ring: the full copy rotates with the round, so every member sends N-1 full chunks",
          "[ring]") {
  const int n = 5;
  const size_t d = 50;
  auto in = RandomInputs(n, d, 4);
  for (uint32_t round : {0u, 1u, 2u, 3u}) {
    std::vector<std::vector<int>> full_to(n);  // full copies each rank sent, by recipient
    std::mutex mu;
    std::map<int, AllReduceOptions> spies;
    for (int r = 0; r < n; ++r) {
      AllReduceOptions o = Verified(1);
      o.tamper_gather = [&, r](GatherPayload k, int to, std::span<std::byte>) {
        std::lock_guard<std::mutex> lock(mu);
        if (k == GatherPayload::kFullCopy) full_to[r].push_back(to);
        return true;
      };
      spies[r] = o;
    }
    InMemoryNetwork net(n);
    auto res = RunRing(net, {1, Iota(n)}, round, in, {}, Verified(1), spies);
    for (int r = 0; r < n; ++r) {
      REQUIRE(res[r].status.ok());
      CHECK(full_to[r].size() == static_cast<size_t>(n - 1));
    }
  }
}

TEST_CASE("verified ring: a Byzantine full-copy sender is outvoted once its chunk is escalated to the backup",
          "[ring]") {
  const int n = 6;
  const size_t d = 600;
  auto in = RandomInputs(n, d, 11);
  const std::vector<float> clean = CleanResult(n, in);
  // Round 4: primary 0 of every chunk sends the full copy, so rank 2 sends
  // chunk 2 (primaries 2, 3; backup 4) in full, as garbage. Every other
  // member disputes chunk 2 and fetches the copies of ranks 3 and 4.
  const int attacker = 2;
  InMemoryNetwork net(n);
  auto res = RunRing(net, {1, Iota(n)}, 4, in, {}, Verified(1),
                     {{attacker, Tampering(Verified(1), GatherPayload::kFullCopy)}});
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << res[r].status);
    REQUIRE(res[r].status.ok());
    if (r == attacker) continue;
    CHECK(res[r].data == clean);  // bitwise the honest result
    CHECK(res[r].report.chunk_mismatch_from == std::vector<int>{attacker});
    CHECK(res[r].report.fetched_copies == (r == 3 || r == 4 ? 1 : 2));  // 3 and 4 hold their own
  }
}

TEST_CASE("verified ring: a replica that sends a wrong digest is named and its chunk escalated", "[ring]") {
  for (int n : {3, 4, 6, 7}) {
    const size_t d = 301;
    auto in = RandomInputs(n, d, 12 + n);
    const std::vector<float> clean = CleanResult(n, in);
    // Round 2: rank 1 is the digest-sending primary of chunk 0 (primaries 0, 1; backup 2).
    const int attacker = 1;
    InMemoryNetwork net(n);
    auto res = RunRing(net, {1, Iota(n)}, 2, in, {}, Verified(1),
                       {{attacker, Tampering(Verified(1), GatherPayload::kDigest)}});
    for (int r = 0; r < n; ++r) {
      INFO("n " << n << " rank " << r << ": " << res[r].status);
      REQUIRE(res[r].status.ok());
      if (r == attacker) continue;
      CHECK(res[r].data == clean);
      CHECK(res[r].report.chunk_mismatch_from == std::vector<int>{attacker});
      CHECK(res[r].report.fetched_copies == (r == 2 ? 1 : 2));
    }
  }
}

TEST_CASE("verified ring (f = 2): a right digest with a garbage fetched copy is caught by its hash",
          "[ring]") {
  // N = 6, f = 2: primaries c, c+1, c+2, backups c+3, c+4. Round 3: primary
  // 0 sends the full copy, so rank 1 sends chunk 1 in full, as garbage;
  // every other member disputes chunk 1, and rank 3 (a primary that sent
  // its correct digest) answers with a garbage full copy.
  const int n = 6;
  const size_t d = 120;
  auto in = RandomInputs(n, d, 13);
  const std::vector<float> clean = CleanResult(n, in);
  InMemoryNetwork net(n);
  auto res = RunRing(net, {1, Iota(n)}, 3, in, {}, Verified(2),
                     {{1, Tampering(Verified(2), GatherPayload::kFullCopy)},
                      {3, Tampering(Verified(2), GatherPayload::kFetched)}});
  for (int r : {0, 2, 4, 5}) {
    INFO("rank " << r << ": " << res[r].status);
    REQUIRE(res[r].status.ok());
    CHECK(res[r].data == clean);
    CHECK(res[r].report.chunk_mismatch_from == std::vector<int>{1, 3});
    CHECK(res[r].report.fetched_copies == (r == 0 ? 4 : 3));
  }
}

TEST_CASE("verified ring: with no carrying digest every copy is fetched and the median taken", "[ring]") {
  // Two Byzantine members (more than f = 1) with different results: in
  // chunks 0 and 1 (primaries 0,1 and 1,2; backups 2 and 3) no digest has
  // 2 claims, so each member takes the coordinate-wise median of the three
  // copies, as the ring did before digests.
  const int n = 5;
  const size_t d = 100;
  auto in = RandomInputs(n, d, 14);
  const std::vector<float> clean = CleanResult(n, in);
  std::map<int, AllReduceOptions> byz{{1, Corrupting(Verified(1), /*garbage=*/true)},
                                      {2, Corrupting(Verified(1), /*garbage=*/false)}};
  InMemoryNetwork net(n);
  auto res = RunRing(net, {1, Iota(n)}, 0, in, {}, Verified(1), byz);
  std::vector<float> want = clean;
  for (int c : {0, 1}) {
    const auto [b, e] = RingAllReduce::ChunkRange(d, n, c);
    std::vector<float> h(clean.begin() + b, clean.begin() + e), g(e - b, 12345.0f), s(e - b);
    for (size_t k = 0; k < s.size(); ++k) s[k] = 25.0f * h[k];
    std::vector<std::span<const float>> copies{h, g, s};
    CHECK_FALSE(MedianOfReplicas(copies, std::span(want).subspan(b, e - b)));
  }
  CHECK(want != clean);
  for (int r : {0, 3, 4}) {
    INFO("rank " << r << ": " << res[r].status);
    REQUIRE(res[r].status.ok());
    CHECK(res[r].data == want);
    CHECK(res[r].report.fetched_copies > 0);
    // Named only where f+1 replicas still agreed (chunk 2: 3 and backup 4 against 2).
    CHECK(res[r].report.chunk_mismatch_from == std::vector<int>{2});
  }
}

TEST_CASE("verified ring: a silent replica ends the attempt with a timeout, never a hang", "[ring]") {
  const int n = 6;
  const size_t d = 60;
  auto in = RandomInputs(n, d, 15);
  SECTION("digests withheld") {
    InMemoryNetwork net(n);
    const auto t0 = std::chrono::steady_clock::now();
    auto res = RunRing(net, {1, Iota(n)}, 0, in, {}, Verified(1, 300),
                       {{2, Tampering(Verified(1, 300), GatherPayload::kDigest, /*withhold=*/true)}});
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));
    for (int r = 0; r < n; ++r) {
      if (r == 2) continue;
      INFO("rank " << r << ": " << res[r].status);
      CHECK(res[r].status.code() == StatusCode::kDeadlineExceeded);
      CHECK(res[r].data == in[r]);  // untouched on failure
    }
  }
  SECTION("a full copy withheld from a member that disputes") {
    // As in the f = 2 case above, chunk 1 is disputed; rank 3 does not answer.
    InMemoryNetwork net(n);
    const auto t0 = std::chrono::steady_clock::now();
    auto res = RunRing(net, {1, Iota(n)}, 3, in, {}, Verified(2, 300),
                       {{1, Tampering(Verified(2, 300), GatherPayload::kFullCopy)},
                        {3, Tampering(Verified(2, 300), GatherPayload::kFetched, /*withhold=*/true)}});
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));
    for (int r : {0, 2, 4, 5}) {
      INFO("rank " << r << ": " << res[r].status);
      CHECK(res[r].status.code() == StatusCode::kDeadlineExceeded);
      CHECK(res[r].data == in[r]);
    }
  }
  SECTION("a member absent from the ring") {
    std::vector<RankResult> part(n);
    std::vector<std::thread> threads;
    InMemoryNetwork net(n);
    for (int r = 0; r < n - 1; ++r) {
      part[r].data = in[r];
      threads.emplace_back([&, r] {
        RingAllReduce ar(net.endpoint(r), Verified(1, 200));
        part[r].status = ar.Run({1, Iota(n)}, 0, part[r].data, {});
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < n - 1; ++r) {
      CHECK(part[r].status.code() == StatusCode::kDeadlineExceeded);
      CHECK(part[r].data == in[r]);
    }
  }
  SECTION("a killed member") {
    InMemoryNetwork net(3);
    net.Kill(2);
    std::vector<float> v = {1, 2, 3};
    RingAllReduce ar(net.endpoint(0), Verified(1, 5000));
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(ar.Run({1, {0, 1, 2}}, 0, v, {}).code() == StatusCode::kUnavailable);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
  }
}

TEST_CASE("verified ring: wrong-size digests and dispute bitmaps, stale verified messages dropped",
          "[ring]") {
  const int n = 4;
  const size_t d = 40;
  auto in = RandomInputs(n, d, 16);
  const std::vector<float> clean = CleanResult(n, in);
  InMemoryNetwork net(n);
  const std::vector<std::byte> junk(5, std::byte{7});
  // Leftovers of view 1 on every verified phase: dropped by view 2's floor.
  for (int from = 0; from < n; ++from) {
    for (int to = 0; to < n; ++to) {
      if (from == to) continue;
      for (uint8_t phase : {uint8_t{16}, uint8_t{18}, uint8_t{80}, uint8_t{81}, uint8_t{144}, uint8_t{208}})
        REQUIRE(net.endpoint(from)->Send(to, MakeTag(1, 3, phase), junk).ok());
    }
  }
  // View 2, round 3 (primary 1 sends full copies): rank 3, the
  // digest-sending primary of chunk 3 (primaries 3, 0; backup 1), first
  // sends rank 0 a 5-byte digest; rank 1 first sends rank 2 a 5-byte
  // dispute bitmap.
  REQUIRE(net.endpoint(3)->Send(0, MakeTag(2, 3, 144), junk).ok());
  REQUIRE(net.endpoint(1)->Send(2, MakeTag(2, 3, 208), junk).ok());
  auto res = RunRing(net, {2, Iota(n)}, 3, in, {}, Verified(1));
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << res[r].status);
    REQUIRE(res[r].status.ok());
    CHECK(res[r].data == clean);
  }
  // Rank 0 disputes chunk 3 and takes it after escalation; rank 3 is named.
  CHECK(res[0].report.chunk_mismatch_from == std::vector<int>{3});
  CHECK(res[0].report.fetched_copies == 2);
  CHECK(res[2].report.malformed_from == std::vector<int>{1});
  for (int r : {1, 2, 3}) {
    CHECK(res[r].report.chunk_mismatch_from.empty());
    CHECK(res[r].report.fetched_copies == 0);
  }
}
