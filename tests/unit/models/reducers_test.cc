#include "models/reducers.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace loft;
using namespace loft::models;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

ReducerOptions Opt(ReducerKind k) {
  ReducerOptions o;
  o.kind = k;
  return o;
}

std::vector<float> Run(const ReducerOptions& o, const std::vector<std::vector<float>>& in,
                       std::vector<double> w = {}) {
  std::vector<float> out;
  Status s = Reduce(o, in, w, &out);
  INFO(s.ToString());
  REQUIRE(s.ok());
  return out;
}

// Scalar inputs as 1-d vectors.
std::vector<std::vector<float>> Col(std::vector<float> v) {
  std::vector<std::vector<float>> r;
  for (float x : v) r.push_back({x});
  return r;
}

}  // namespace

TEST_CASE("mean and weighted mean", "[reducers]") {
  CHECK(Run(Opt(ReducerKind::kMean), {{1, 2}, {3, 6}})[1] == Approx(4));
  // Both means use the weights when given (sum w_i x_i / sum w_i); mean
  // without weights is the plain mean.
  CHECK(Run(Opt(ReducerKind::kMean), Col({1, 2, 3}))[0] == Approx(2));
  CHECK(Run(Opt(ReducerKind::kMean), Col({1, 2, 3}), {1, 1, 2})[0] == Approx(2.25));
  CHECK(Run(Opt(ReducerKind::kWeightedMean), Col({1, 2, 3}), {1, 1, 2})[0] == Approx(2.25));
  std::vector<float> out;
  CHECK(Reduce(Opt(ReducerKind::kWeightedMean), Col({1, 2}), {}, &out).code() ==
        StatusCode::kInvalidArgument);
  // Documented: the mean is poisoned by a single NaN or Inf input.
  CHECK(std::isnan(Run(Opt(ReducerKind::kMean), Col({1, kNaN, 3}))[0]));
  CHECK(std::isinf(Run(Opt(ReducerKind::kWeightedMean), Col({1, kInf, 3}), {1, 1, 1})[0]));
}

TEST_CASE("a zero weight makes an input absent for every reducer", "[reducers]") {
  // Inputs {1, 2, 3, 0(weight 0)}: the zero-weight 0 must not shift any result.
  const auto in = Col({1, 2, 3, 0});
  const std::vector<double> w{1, 1, 1, 0};
  CHECK(Run(Opt(ReducerKind::kMean), in, w)[0] == Approx(2));
  CHECK(Run(Opt(ReducerKind::kWeightedMean), in, w)[0] == Approx(2));
  CHECK(Run(Opt(ReducerKind::kMedian), in, w)[0] == Approx(2));  // median of 4 incl. 0 would be 1.5
  ReducerOptions t = Opt(ReducerKind::kTrimmedMean);
  t.trim_count = 1;
  CHECK(Run(t, in, w)[0] == Approx(2));  // trimming {0,1,2,3} by 1 would give 1.5
  // trim_count is checked against the inputs that are present: 3 > 2 ok, 2 is not.
  std::vector<float> out;
  CHECK(Reduce(t, Col({1, 2, 3}), std::vector<double>{1, 1, 0}, &out).code() == StatusCode::kInvalidArgument);
  ReducerOptions k = Opt(ReducerKind::kMultiKrum);
  k.krum_f = 1;
  const std::vector<std::vector<float>> vin{{1, 1}, {1.1f, 1}, {0.9f, 1}, {1, 1.1f}, {0, 0}};
  std::vector<float> kr = Run(k, vin, {1, 1, 1, 1, 0});
  CHECK(kr[0] > 0.9f);
  CHECK(kr[1] > 0.9f);
  CHECK(Run(Opt(ReducerKind::kCenteredClipping), in, w)[0] == Approx(2).margin(1e-6));
  // A NaN input with weight 0 does not poison the means either.
  CHECK(Run(Opt(ReducerKind::kMean), Col({1, 3, kNaN}), {1, 1, 0})[0] == Approx(2));
}

TEST_CASE("aggregation weights: batch sizes for the means, equal for robust reducers", "[reducers]") {
  const std::vector<double> b{100, 0, 50, std::nan(""), 10};
  using W = std::vector<double>;
  CHECK(AggregationWeights(ReducerKind::kMean, b) == W{100, 0, 50, 0, 10});
  CHECK(AggregationWeights(ReducerKind::kWeightedMean, b) == W{100, 0, 50, 0, 10});
  for (ReducerKind k : {ReducerKind::kMedian, ReducerKind::kTrimmedMean, ReducerKind::kMultiKrum,
                        ReducerKind::kCenteredClipping}) {
    CHECK(AggregationWeights(k, b) == W{1, 0, 1, 0, 1});
  }
  // The mean with these weights is the gradient of the global batch:
  // sum (b_i / B) g_i with B = 160.
  const auto g = Col({1, 7, 2, 5, 4});
  CHECK(Run(Opt(ReducerKind::kMean), g, AggregationWeights(ReducerKind::kMean, b))[0] ==
        Approx((100 * 1 + 50 * 2 + 10 * 4) / 160.0));
  // A Byzantine worker claiming a huge batch cannot buy the median.
  const std::vector<double> lie{1e9, 100, 100, 100, 100};
  CHECK(Run(Opt(ReducerKind::kMedian), Col({-1000, 1, 2, 3, 4}),
            AggregationWeights(ReducerKind::kMedian, lie))[0] == Approx(2));
}

TEST_CASE("trimmed_mean weights: batch sizes capped at an even share of the planned global batch",
          "[reducers]") {
  const std::vector<double> b{100, 0, 50, std::nan(""), 10};
  using W = std::vector<double>;
  // Three members with samples: the even share of 300 is 100, of 150 is 50.
  CHECK(AggregationWeights(ReducerKind::kTrimmedMean, b, 300) == W{100, 0, 50, 0, 10});
  CHECK(AggregationWeights(ReducerKind::kTrimmedMean, b, 150) == W{50, 0, 50, 0, 10});
  // Without the planned global batch every member with samples counts once.
  CHECK(AggregationWeights(ReducerKind::kTrimmedMean, b, 0) == W{1, 0, 1, 0, 1});
  CHECK(AggregationWeights(ReducerKind::kTrimmedMean, b, std::nan("")) == W{1, 0, 1, 0, 1});
  // The means keep b_i; the median, Krum and clipping keep one per member:
  // a weighted median would be decided by any member holding half the weight.
  CHECK(AggregationWeights(ReducerKind::kWeightedMean, b, 150) == W{100, 0, 50, 0, 10});
  for (ReducerKind k : {ReducerKind::kMedian, ReducerKind::kMultiKrum, ReducerKind::kCenteredClipping}) {
    CHECK(AggregationWeights(k, b, 150) == W{1, 0, 1, 0, 1});
  }
  // The kept values are averaged by weight: {1, 2, 3, 4, 5} trimmed by one
  // per side keeps {2, 3, 4}; with batches 8, 8, 64, 8, 8 (cap 96/5) the
  // member on the large batch weighs 19.2 against 8 and 8.
  ReducerOptions t = Opt(ReducerKind::kTrimmedMean);
  t.trim_count = 1;
  const W w = AggregationWeights(ReducerKind::kTrimmedMean, W{8, 8, 64, 8, 8}, 96);
  CHECK(w[2] == Approx(19.2));
  CHECK(Run(t, Col({1, 2, 3, 4, 5}), w)[0] == Approx((8 * 2 + 19.2 * 3 + 8 * 4) / 35.2));
}

TEST_CASE(
    "capped trimmed mean: a Byzantine member's largest claim moves the result no further than an "
    "equal-weight member",
    "[reducers]") {
  // Eight members, trim 1 per side, planned global batch 512 (even share 64).
  // Member 0 is Byzantine: it sends any value and claims any batch.
  ReducerOptions t = Opt(ReducerKind::kTrimmedMean);
  t.trim_count = 1;
  std::mt19937_64 rng(5);
  std::normal_distribution<float> g(0, 1);
  const int n = 8, d = 64;
  std::vector<std::vector<float>> in(n, std::vector<float>(d));
  for (int i = 1; i < n; ++i) {
    for (float& x : in[i]) x = g(rng);
  }
  const std::vector<float> attacks{-1e6f, -3, -0.5f, 0, 0.5f, 3, 1e6f};
  // (1) Honest members on even shares: whatever the Byzantine claims (the
  // even share or far more), the result is bitwise the equal-weight rule's.
  std::vector<double> even(n, 64);
  for (float v : attacks) {
    std::fill(in[0].begin(), in[0].end(), v);
    const std::vector<float> equal = Run(t, in, AggregationWeights(ReducerKind::kTrimmedMean, even, 0));
    for (double claim : {64.0, 640.0, 1e9}) {
      std::vector<double> b = even;
      b[0] = claim;
      CHECK(Run(t, in, AggregationWeights(ReducerKind::kTrimmedMean, b, 512)) == equal);
    }
  }
  // (2) Uneven honest batches (a locality plan's epoch tail: 8 samples on
  // most members, 232 on two): a claim above the even share buys nothing
  // (bitwise the result of claiming 64, the most an honest member weighs),
  // and for every value the result stays within the honest values of each
  // coordinate, as with equal weights (k = 1 >= one Byzantine member).
  const std::vector<double> tail{0, 8, 8, 8, 8, 8, 232, 232};
  for (float v : attacks) {
    std::fill(in[0].begin(), in[0].end(), v);
    std::vector<double> b = tail;
    b[0] = 64;
    const std::vector<float> at_cap = Run(t, in, AggregationWeights(ReducerKind::kTrimmedMean, b, 512));
    for (double claim : {65.0, 512.0, 1e9}) {
      b[0] = claim;
      CHECK(Run(t, in, AggregationWeights(ReducerKind::kTrimmedMean, b, 512)) == at_cap);
    }
    for (int j = 0; j < d; ++j) {
      float lo = in[1][j], hi = in[1][j];
      for (int i = 2; i < n; ++i) {
        lo = std::min(lo, in[i][j]);
        hi = std::max(hi, in[i][j]);
      }
      CHECK(at_cap[j] >= lo);
      CHECK(at_cap[j] <= hi);
    }
  }
}

TEST_CASE("coordinate-wise median", "[reducers]") {
  const ReducerOptions o = Opt(ReducerKind::kMedian);
  CHECK(Run(o, Col({1, 100, 2}))[0] == 2);
  CHECK(Run(o, Col({1, 2, 3, 100}))[0] == Approx(2.5));
  CHECK(Run(o, Col({1, kNaN, 2, kInf, 3}))[0] == 2);
  CHECK(Run(o, Col({-kInf, 5, 6, 7}))[0] == 6);
  // Weighted: the heavy input wins.
  CHECK(Run(o, Col({1, 2, 3}), {1, 1, 5})[0] == 3);
  // Per coordinate, independently.
  std::vector<float> r = Run(o, {{1, 30}, {2, 10}, {3, 20}});
  CHECK(r[0] == 2);
  CHECK(r[1] == 20);
  std::vector<float> out;
  Status s = Reduce(o, Col({kNaN, kInf}), {}, &out);
  CHECK(s.code() == StatusCode::kDataLoss);
  CHECK(s.message().find("coordinate 0") != std::string::npos);
}

TEST_CASE("trimmed mean", "[reducers]") {
  ReducerOptions o = Opt(ReducerKind::kTrimmedMean);
  o.trim_fraction = 0.2;  // k = 1 of 5
  CHECK(Run(o, Col({1, 2, 3, 4, 1000}))[0] == Approx(3));
  CHECK(Run(o, Col({-1000, 2, 3, 4, 5}))[0] == Approx(3));
  // Non-finite values are dropped, then k per side of the finite rest.
  CHECK(Run(o, Col({1, 2, 3, kNaN, -kInf}))[0] == Approx(2));
  // Too few finite values to trim: median of the finite ones.
  CHECK(Run(o, Col({1, 2, kNaN, kNaN, kInf}))[0] == Approx(1.5));
  o.trim_fraction = 0;
  CHECK(Run(o, Col({1, 2, 6}))[0] == Approx(3));
  // trim_count overrides the fraction (floor(0.2 * 4) would trim nothing).
  o.trim_fraction = 0.2;
  o.trim_count = 1;
  CHECK(Run(o, Col({1, 2, 3, 1000}))[0] == Approx(2.5));
  std::vector<float> out2;
  CHECK(Reduce(o, Col({1, 2}), {}, &out2).code() == StatusCode::kInvalidArgument);
  o.trim_count = -1;
  o.trim_fraction = 0.5;
  std::vector<float> out;
  CHECK(Reduce(o, Col({1, 2}), {}, &out).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("multi-Krum drops far and non-finite vectors", "[reducers]") {
  ReducerOptions o = Opt(ReducerKind::kMultiKrum);
  o.krum_f = 2;
  std::vector<std::vector<float>> in = {{1, 1, 1},    {1.1f, 0.9f, 1}, {0.9f, 1.1f, 1}, {1, 1, 1.2f},
                                        {1, 1, 0.8f}, {100, -100, 50}, {kNaN, 1, 1}};
  std::vector<float> r = Run(o, in);  // m = N - f = 5: exactly the honest ones
  CHECK(r[0] == Approx(1.0));
  CHECK(r[1] == Approx(1.0));
  CHECK(r[2] == Approx(1.0));
  o.krum_m = 1;
  r = Run(o, in);
  CHECK(std::abs(r[0] - 1) <= 0.11f);
  o.krum_f = 5;  // needs N >= 8
  std::vector<float> out;
  CHECK(Reduce(o, in, {}, &out).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("centered clipping bounds the pull of outliers", "[reducers]") {
  ReducerOptions o = Opt(ReducerKind::kCenteredClipping);
  o.clip_tau = 0.5;
  o.clip_iterations = 5;
  std::vector<std::vector<float>> in = {{1, 1},    {1.2f, 0.8f},  {0.8f, 1.2f},
                                        {1, 1.1f}, {1e6f, -1e6f}, {kInf, 0}};
  std::vector<float> r = Run(o, in);
  // The far vector contributes at most tau/5 per iteration.
  CHECK(std::abs(r[0] - 1) < 0.5);
  CHECK(std::abs(r[1] - 1) < 0.5);
  // With no outliers and a large tau it is the mean.
  o.clip_tau = 100;
  r = Run(o, {{0, 0}, {2, 4}});
  CHECK(r[0] == Approx(1));
  CHECK(r[1] == Approx(2));
}

TEST_CASE("robust reducers stay near the honest mean with one Byzantine input", "[reducers]") {
  const int n = 7, d = 50;
  std::mt19937_64 rng(4);
  std::normal_distribution<float> noise(0, 0.02f);
  std::vector<std::vector<float>> honest(n - 1, std::vector<float>(d));
  std::vector<double> mean(d, 0.0);
  for (auto& v : honest) {
    for (int j = 0; j < d; ++j) {
      v[j] = static_cast<float>(std::sin(j)) + noise(rng);
      mean[j] += v[j] / (n - 1);
    }
  }
  std::vector<std::vector<float>> attacks;
  std::vector<float> flip(d), nan(d), inf(d, kInf);
  for (int j = 0; j < d; ++j) {
    flip[j] = static_cast<float>(-10 * mean[j]);
    nan[j] = j % 2 ? kNaN : 1e30f;
  }
  attacks = {flip, nan, inf};
  for (const auto& bad : attacks) {
    std::vector<std::vector<float>> in = honest;
    in.insert(in.begin() + 3, bad);
    for (ReducerKind k : {ReducerKind::kMedian, ReducerKind::kTrimmedMean, ReducerKind::kMultiKrum,
                          ReducerKind::kCenteredClipping}) {
      ReducerOptions o = Opt(k);
      o.clip_tau = 0.5;
      std::vector<float> r = Run(o, in, {1, 2, 1, 1, 1, 2, 1});
      double err = 0;
      for (int j = 0; j < d; ++j) err = std::max(err, std::abs(r[j] - mean[j]));
      INFO(ReducerKindName(k));
      CHECK(err < 0.1);
    }
    std::vector<float> m = Run(Opt(ReducerKind::kMean), in);
    double err = 0;
    for (int j = 0; j < d; ++j) err = std::max(err, std::isfinite(m[j]) ? std::abs(m[j] - mean[j]) : 1e9);
    CHECK(err > 0.5);  // the plain mean is poisoned
  }
}

TEST_CASE("centered clipping's default radius holds a scaled sign flip at any scale", "[reducers]") {
  // Five honest inputs near m (a model delta of several local steps is
  // small, a sum of gradients may be large) and one that sends -10 m.
  const int d = 40;
  for (double scale : {1e-3, 1.0, 1e3}) {
    std::mt19937_64 rng(11);
    std::normal_distribution<double> noise(0, 0.05);
    std::vector<double> m(d);
    for (int j = 0; j < d; ++j) m[j] = scale * std::cos(j);
    std::vector<std::vector<float>> in;
    for (int i = 0; i < 5; ++i) {
      std::vector<float> v(d);
      for (int j = 0; j < d; ++j) v[j] = static_cast<float>(m[j] * (1 + noise(rng)));
      in.push_back(v);
    }
    std::vector<float> flip(d);
    for (int j = 0; j < d; ++j) flip[j] = static_cast<float>(-10 * m[j]);
    in.insert(in.begin() + 2, flip);
    auto rel_err = [&](const std::vector<float>& r) {
      double e = 0;
      for (int j = 0; j < d; ++j) e = std::max(e, std::abs(r[j] - m[j]) / scale);
      return e;
    };
    INFO("scale " << scale);
    CHECK(rel_err(Run(Opt(ReducerKind::kCenteredClipping), in)) < 0.2);
    if (scale < 1) {
      // A radius of 1 clips nothing at this scale: the plain mean, pulled
      // to about -5/6 m.
      ReducerOptions fixed = Opt(ReducerKind::kCenteredClipping);
      fixed.clip_tau = 1.0;
      CHECK(rel_err(Run(fixed, in)) > 1.0);
    }
  }
}

TEST_CASE("reducer input validation", "[reducers]") {
  std::vector<float> out;
  CHECK(Reduce(Opt(ReducerKind::kMedian), {}, {}, &out).code() == StatusCode::kInvalidArgument);
  CHECK(Reduce(Opt(ReducerKind::kMedian), {{1, 2}, {1}}, {}, &out).code() == StatusCode::kInvalidArgument);
  CHECK(Reduce(Opt(ReducerKind::kMedian), Col({1, 2}), std::vector<double>{1}, &out).code() ==
        StatusCode::kInvalidArgument);
  CHECK(Reduce(Opt(ReducerKind::kMedian), Col({1, 2}), std::vector<double>{1, -1}, &out).code() ==
        StatusCode::kInvalidArgument);
  CHECK(Reduce(Opt(ReducerKind::kMedian), Col({1, 2}), std::vector<double>{0, 0}, &out).code() ==
        StatusCode::kInvalidArgument);
  CHECK(*ParseReducerKind("trimmed_mean") == ReducerKind::kTrimmedMean);
  CHECK(!ParseReducerKind("avg").ok());
}

TEST_CASE("finite weights whose sum overflows still give the weighted result", "[reducers]") {
  // Two workers claiming b = 1e308 (self-reported, finite): the sum is +Inf,
  // which used to turn every coefficient into 0 and the mean into 0.
  const auto in = Col({1, 3, 100});
  const std::vector<double> w{1e308, 1e308, 1};
  CHECK(Run(Opt(ReducerKind::kMean), in, w)[0] == Approx(2));
  CHECK(Run(Opt(ReducerKind::kWeightedMean), in, w)[0] == Approx(2));
  CHECK(Run(Opt(ReducerKind::kMedian), in, w)[0] == Approx(2).margin(1));
}

namespace {

// The coordinate-wise median / trimmed mean as written before the small-n
// fast paths: (value, weight) pairs, std::sort, the weighted median rule.
std::vector<float> ReferenceCoordinateWise(ReducerKind kind, size_t trim,
                                           const std::vector<std::vector<float>>& in,
                                           const std::vector<double>& w) {
  std::vector<float> out(in[0].size());
  for (size_t j = 0; j < out.size(); ++j) {
    std::vector<std::pair<float, double>> vw;
    for (size_t i = 0; i < in.size(); ++i) {
      if (std::isfinite(in[i][j]) && w[i] > 0) vw.emplace_back(in[i][j], w[i]);
    }
    std::sort(vw.begin(), vw.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    if (kind == ReducerKind::kTrimmedMean && vw.size() > 2 * trim) {
      double s = 0, ws = 0;
      for (size_t i = trim; i < vw.size() - trim; ++i) {
        s += vw[i].second * vw[i].first;
        ws += vw[i].second;
      }
      out[j] = static_cast<float>(s / ws);
      continue;
    }
    double total = 0;
    for (const auto& p : vw) total += p.second;
    const double half = total / 2;
    double cum = 0;
    float v = vw.back().first;
    for (size_t i = 0; i < vw.size(); ++i) {
      cum += vw[i].second;
      if (cum >= half * (1 - 1e-12)) {
        v = std::abs(cum - half) <= 1e-12 * total && i + 1 < vw.size()
                ? static_cast<float>(
                      0.5 * (static_cast<double>(vw[i].first) + static_cast<double>(vw[i + 1].first)))
                : vw[i].first;
        break;
      }
    }
    out[j] = v;
  }
  return out;
}

}  // namespace

TEST_CASE("median and trimmed mean are bitwise the std::sort reference, ties, signed zeros, weights",
          "[reducers]") {
  std::mt19937_64 rng(5);
  // Few distinct values so ties are common; -0 and +0 tie but differ in bits.
  const std::vector<float> pool{-0.0f, 0.0f, 1.0f, -1.5f, 2.25f, 1e-30f, 3.0f, kNaN, kInf, 0.1f};
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = 1 + rng() % 20;  // both sides of the 16-input fast path
    // 200 coordinates: three full blocks of the vectorised median and a
    // partial one. Odd trials: finite values only, except one -0 or NaN in
    // a random block now and then (that block takes the scalar path).
    const size_t d = 200;
    const size_t pool_size = trial % 2 == 1 ? 7 : pool.size();
    std::vector<std::vector<float>> in(n, std::vector<float>(d));
    for (auto& v : in) {
      for (auto& x : v) x = pool[2 + rng() % (pool_size - 2)];
    }
    if (trial % 2 == 0) {
      for (auto& v : in) {
        for (auto& x : v) x = pool[rng() % pool.size()];
      }
    } else if (trial % 3 == 0) {
      in[rng() % n][rng() % d] = rng() % 2 ? -0.0f : kNaN;
    }
    for (size_t j = 0; j < d; ++j) in[rng() % n][j] = 7.0f;  // every coordinate has a finite input
    std::vector<double> w(n, 1.0);
    const int wk = trial % 4;
    for (auto& x : w) {
      if (wk == 1) x = 0.1;                                        // equal, not exact in binary
      if (wk == 2) x = 1.0 + static_cast<double>(rng() % 3);       // unequal: weighted rule
      if (wk == 3) x = 64.0 * static_cast<double>(1 + rng() % 2);  // batch sizes
    }
    for (ReducerKind kind : {ReducerKind::kMedian, ReducerKind::kTrimmedMean}) {
      if (kind == ReducerKind::kTrimmedMean && n <= 2) continue;  // needs more than 2 * trim_count inputs
      ReducerOptions o = Opt(kind);
      o.trim_count = 1;
      INFO("trial " << trial << " n " << n << " " << ReducerKindName(kind));
      auto got = Run(o, in, w);
      auto want = ReferenceCoordinateWise(kind, 1, in, w);
      REQUIRE(got.size() == want.size());
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    }
  }
}
