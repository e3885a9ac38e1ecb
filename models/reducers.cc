#include "models/reducers.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

namespace loft::models {

StatusOr<ReducerKind> ParseReducerKind(std::string_view name) {
  if (name == "mean") return ReducerKind::kMean;
  if (name == "weighted_mean") return ReducerKind::kWeightedMean;
  if (name == "median") return ReducerKind::kMedian;
  if (name == "trimmed_mean") return ReducerKind::kTrimmedMean;
  if (name == "multi_krum" || name == "krum") return ReducerKind::kMultiKrum;
  if (name == "centered_clipping") return ReducerKind::kCenteredClipping;
  return InvalidArgument(
      "unknown reducer '" + std::string(name) +
      "' (expected mean | weighted_mean | median | trimmed_mean | multi_krum | centered_clipping)");
}

std::vector<double> AggregationWeights(ReducerKind kind, std::span<const double> batch_sizes,
                                       double global_batch) {
  std::vector<double> w;
  w.reserve(batch_sizes.size());
  const auto present = [](double b) { return std::isfinite(b) && b > 0; };
  const bool by_size = kind == ReducerKind::kMean || kind == ReducerKind::kWeightedMean;
  const bool capped = kind == ReducerKind::kTrimmedMean && std::isfinite(global_batch) && global_batch > 0;
  const double n = static_cast<double>(std::count_if(batch_sizes.begin(), batch_sizes.end(), present));
  const double cap = capped && n > 0 ? global_batch / n : 0;
  for (double b : batch_sizes) {
    w.push_back(!present(b) ? 0.0 : by_size ? b : capped ? std::min(b, cap) : 1.0);
  }
  return w;
}

std::string_view ReducerKindName(ReducerKind kind) {
  switch (kind) {
    case ReducerKind::kMean: return "mean";
    case ReducerKind::kWeightedMean: return "weighted_mean";
    case ReducerKind::kMedian: return "median";
    case ReducerKind::kTrimmedMean: return "trimmed_mean";
    case ReducerKind::kMultiKrum: return "multi_krum";
    case ReducerKind::kCenteredClipping: return "centered_clipping";
  }
  return "?";
}

Status ReducerOptions::Validate() const {
  if (!(trim_fraction >= 0 && trim_fraction < 0.5)) {
    return InvalidArgument("reducer trim_fraction must be in [0, 0.5), got " + std::to_string(trim_fraction));
  }
  if (trim_count < -1) return InvalidArgument("reducer trim_count must be >= 0 (or -1 to use trim_fraction)");
  if (krum_f < 0) return InvalidArgument("reducer krum_f must be >= 0");
  if (krum_m < 0) return InvalidArgument("reducer krum_m must be >= 0 (0 = N - f)");
  if (!(clip_tau >= 0) || !std::isfinite(clip_tau))
    return InvalidArgument("reducer clip_tau must be finite and >= 0 (0 = adaptive radius)");
  if (clip_iterations < 1) return InvalidArgument("reducer clip_iterations must be >= 1");
  return OkStatus();
}

namespace {

using Inputs = std::span<const std::span<const float>>;

bool AllFinite(std::span<const float> v) {
  for (float x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

// Sorts (value, weight) pairs by value (more than 16 pairs; fewer are
// sorted as they are gathered, by SortedFinite).
void SortByValue(std::span<std::pair<float, double>> vw) {
  std::sort(vw.begin(), vw.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
}

// Weighted median of (value, weight) pairs sorted by value, weights > 0.
double WeightedMedian(std::span<const std::pair<float, double>> vw) {
  double total = 0;
  for (const auto& p : vw) total += p.second;
  const double half = total / 2;
  double cum = 0;
  for (size_t i = 0; i < vw.size(); ++i) {
    cum += vw[i].second;
    if (cum >= half * (1 - 1e-12)) {
      if (std::abs(cum - half) <= 1e-12 * total && i + 1 < vw.size()) {
        return 0.5 * (static_cast<double>(vw[i].first) + static_cast<double>(vw[i + 1].first));
      }
      return vw[i].first;
    }
  }
  return vw.back().first;
}

// The (value, weight) pairs of coordinate j with a finite value and a
// positive weight, sorted by value (ties in input order), into `vw`
// (capacity >= in.size()); returns how many.
size_t SortedFinite(Inputs in, std::span<const double> w, size_t j, std::pair<float, double>* vw) {
  size_t m = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const float x = in[i][j];
    if (!(std::isfinite(x) && w[i] > 0)) continue;
    // Insert after every value <= x: a stable insertion sort. libstdc++'s
    // std::sort sorts <= 16 elements by exactly this insertion sort, so the
    // order (ties included) and every sum taken over it are the same as
    // before this fast path (reducers_test checks it against std::sort).
    size_t p = m;
    while (p > 0 && x < vw[p - 1].first) {
      vw[p] = vw[p - 1];
      --p;
    }
    vw[p] = {x, w[i]};
    ++m;
  }
  return m;
}

// The median of a sorted column of m finite values, as WeightedMedian
// gives it for equal weights.
float MiddleOf(const float* v, size_t m) {
  return m % 2 == 1
             ? v[m / 2]
             : static_cast<float>(0.5 * (static_cast<double>(v[m / 2 - 1]) + static_cast<double>(v[m / 2])));
}

// The median of the finite values of every coordinate when all n <= 16
// inputs have the same weight. Bitwise what WeightedMedian gives then: with
// m equal weights the cumulative weight first reaches half the total at
// the middle value (m odd) or exactly at half after m/2 values (m even,
// where it averages the two middle values in double); the weight is normal
// and m <= 16, so the sums' rounding (relative < 1e-14) stays far inside
// WeightedMedian's 1e-12 tolerance. Ties (only -0 and +0 compare equal) are
// kept in input order: blocks with a -0 or a non-finite value go through
// SortedFinite.
Status EqualWeightMedian(Inputs in, std::span<const double> w, std::span<float> out) {
  const size_t n = in.size();
  // Blocks of kB coordinates whose inputs are all finite and none is -0 go
  // through a sorting network applied to the whole block (min/max, which
  // the compiler vectorises). Among such values equal means bitwise equal,
  // so the sorted column is the one SortedFinite produces. A
  // block with a non-finite value or a -0 (equal to +0, other bits) takes
  // SortedFinite, coordinate by coordinate.
  constexpr size_t kB = 64;
  std::array<std::array<float, kB>, 16> col{};
  std::array<float, 16> v{};
  std::array<std::pair<float, double>, 16> pairs{};
  for (size_t j0 = 0; j0 < out.size(); j0 += kB) {
    const size_t bl = std::min(kB, out.size() - j0);
    bool plain = bl == kB;
    for (size_t i = 0; i < n && plain; ++i) {
      uint32_t bad = 0;
      for (size_t k = 0; k < kB; ++k) {
        uint32_t bits;
        std::memcpy(&bits, &in[i][j0 + k], sizeof bits);
        bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u) |
               static_cast<uint32_t>(bits == 0x80000000u);
      }
      plain = bad == 0;
    }
    if (plain) {
      for (size_t i = 0; i < n; ++i) std::memcpy(col[i].data(), &in[i][j0], kB * sizeof(float));
      // Odd-even transposition sort: n rounds sort n values.
      for (size_t round = 0; round < n; ++round) {
        for (size_t i = round % 2; i + 1 < n; i += 2) {
          float* a = col[i].data();
          float* b = col[i + 1].data();
          for (size_t k = 0; k < kB; ++k) {
            const float lo = std::min(a[k], b[k]), hi = std::max(a[k], b[k]);
            a[k] = lo;
            b[k] = hi;
          }
        }
      }
      for (size_t k = 0; k < kB; ++k) {
        for (size_t i = 0; i < n; ++i) v[i] = col[i][k];
        out[j0 + k] = MiddleOf(v.data(), n);
      }
      continue;
    }
    for (size_t j = j0; j < j0 + bl; ++j) {
      const size_t m = SortedFinite(in, w, j, pairs.data());
      for (size_t i = 0; i < m; ++i) v[i] = pairs[i].first;
      if (m == 0) {
        return DataLoss("median: coordinate " + std::to_string(j) +
                        " has no finite input with positive weight");
      }
      out[j] = MiddleOf(v.data(), m);
    }
  }
  return OkStatus();
}

Status CoordinateWise(const ReducerOptions& o, Inputs in, std::span<const double> w, std::span<float> out) {
  const size_t n = in.size();
  if (o.kind == ReducerKind::kMedian && n > 0 && n <= 16 && w[0] >= 1e-300 && w[0] <= 1e300 &&
      std::all_of(w.begin(), w.end(), [&](double x) { return x == w[0]; })) {
    return EqualWeightMedian(in, w, out);
  }
  const size_t k = o.trim_count >= 0
                       ? static_cast<size_t>(o.trim_count)
                       : static_cast<size_t>(std::floor(o.trim_fraction * static_cast<double>(n)));
  // Up to 16 inputs: pairs on the stack, sorted as they are gathered
  // (identical order to std::sort, see SortedFinite); more: std::sort.
  constexpr size_t kSmall = 16;
  std::array<std::pair<float, double>, kSmall> small{};
  std::vector<std::pair<float, double>> large;
  if (n > kSmall) large.reserve(n);
  for (size_t j = 0; j < out.size(); ++j) {
    std::span<std::pair<float, double>> vw;
    if (n <= kSmall) {
      vw = std::span(small.data(), SortedFinite(in, w, j, small.data()));
    } else {
      large.clear();
      for (size_t i = 0; i < n; ++i) {
        const float x = in[i][j];
        if (std::isfinite(x) && w[i] > 0) large.emplace_back(x, w[i]);
      }
      SortByValue(large);
      vw = large;
    }
    if (vw.empty()) {
      return DataLoss(std::string(ReducerKindName(o.kind)) + ": coordinate " + std::to_string(j) +
                      " has no finite input with positive weight");
    }
    if (o.kind == ReducerKind::kTrimmedMean && vw.size() > 2 * k) {
      double s = 0, ws = 0;
      for (size_t i = k; i < vw.size() - k; ++i) {
        s += vw[i].second * vw[i].first;
        ws += vw[i].second;
      }
      out[j] = static_cast<float>(s / ws);
    } else {
      out[j] = static_cast<float>(WeightedMedian(vw));
    }
  }
  return OkStatus();
}

double SquaredDistance(std::span<const float> a, std::span<const float> b) {
  double s = 0;
  for (size_t j = 0; j < a.size(); ++j) {
    const double d = static_cast<double>(a[j]) - b[j];
    s += d * d;
  }
  return s;
}

void WeightedAverage(Inputs in, std::span<const double> w, const std::vector<size_t>& pick,
                     std::span<float> out) {
  double ws = 0;
  for (size_t i : pick) ws += w[i];
  std::vector<double> acc(out.size(), 0.0);
  for (size_t i : pick) {
    const double c = ws > 0 ? w[i] / ws : 1.0 / static_cast<double>(pick.size());
    for (size_t j = 0; j < out.size(); ++j) acc[j] += c * in[i][j];
  }
  for (size_t j = 0; j < out.size(); ++j) out[j] = static_cast<float>(acc[j]);
}

std::vector<size_t> Eligible(Inputs in, std::span<const double> w) {
  std::vector<size_t> e;
  for (size_t i = 0; i < in.size(); ++i) {
    if (w[i] > 0 && AllFinite(in[i])) e.push_back(i);
  }
  return e;
}

Status MultiKrum(const ReducerOptions& o, Inputs in, std::span<const double> w, std::span<float> out) {
  const size_t n = in.size();
  const size_t f = static_cast<size_t>(o.krum_f);
  if (n < f + 3) {
    return InvalidArgument("multi_krum with f=" + std::to_string(f) + " needs at least f+3=" +
                           std::to_string(f + 3) + " inputs, got " + std::to_string(n));
  }
  const std::vector<size_t> e = Eligible(in, w);
  if (e.empty()) return DataLoss("multi_krum: every input has a non-finite value or zero weight");
  const size_t ne = e.size();
  const size_t neighbours = ne > f + 2 ? ne - f - 2 : 1;
  std::vector<double> dist(ne * ne, 0.0);
  for (size_t a = 0; a < ne; ++a) {
    for (size_t b = a + 1; b < ne; ++b)
      dist[a * ne + b] = dist[b * ne + a] = SquaredDistance(in[e[a]], in[e[b]]);
  }
  std::vector<std::pair<double, size_t>> score(ne);
  std::vector<double> row;
  for (size_t a = 0; a < ne; ++a) {
    row.clear();
    for (size_t b = 0; b < ne; ++b) {
      if (b != a) row.push_back(dist[a * ne + b]);
    }
    const size_t take = std::min(neighbours, row.size());
    std::partial_sort(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(take), row.end());
    score[a] = {std::accumulate(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(take), 0.0), e[a]};
  }
  std::sort(score.begin(), score.end());
  const size_t m = std::min(o.krum_m > 0 ? static_cast<size_t>(o.krum_m) : n - f, ne);
  std::vector<size_t> pick;
  for (size_t i = 0; i < m; ++i) pick.push_back(score[i].second);
  WeightedAverage(in, w, pick, out);
  return OkStatus();
}

// The element at index (n - 1) / 2 of the sorted values: with more than
// half of them honest, it is no larger than some honest value.
double LowerMedian(std::vector<double> x) {
  const auto mid = x.begin() + static_cast<std::ptrdiff_t>((x.size() - 1) / 2);
  std::nth_element(x.begin(), mid, x.end());
  return *mid;
}

Status CenteredClipping(const ReducerOptions& o, Inputs in, std::span<const double> w, std::span<float> out) {
  const std::vector<size_t> e = Eligible(in, w);
  if (e.empty()) return DataLoss("centered_clipping: every input has a non-finite value or zero weight");
  std::vector<std::span<const float>> sub;
  std::vector<double> sw;
  for (size_t i : e) {
    sub.push_back(in[i]);
    sw.push_back(w[i]);
  }
  ReducerOptions med = o;
  med.kind = ReducerKind::kMedian;
  LOFT_RETURN_IF_ERROR(CoordinateWise(med, sub, sw, out));
  const double ws = std::accumulate(sw.begin(), sw.end(), 0.0);
  std::vector<double> v(out.begin(), out.end()), step(out.size());
  std::vector<double> norm(sub.size());
  for (int it = 0; it < o.clip_iterations; ++it) {
    for (size_t i = 0; i < sub.size(); ++i) {
      double norm2 = 0;
      for (size_t j = 0; j < v.size(); ++j) {
        const double d = sub[i][j] - v[j];
        norm2 += d * d;
      }
      norm[i] = std::sqrt(norm2);
    }
    const double tau = o.clip_tau > 0 ? o.clip_tau : LowerMedian(norm);
    std::fill(step.begin(), step.end(), 0.0);
    for (size_t i = 0; i < sub.size(); ++i) {
      const double scale = (norm[i] > tau ? tau / norm[i] : 1.0) * sw[i] / ws;
      for (size_t j = 0; j < v.size(); ++j) step[j] += scale * (sub[i][j] - v[j]);
    }
    for (size_t j = 0; j < v.size(); ++j) v[j] += step[j];
  }
  for (size_t j = 0; j < v.size(); ++j) out[j] = static_cast<float>(v[j]);
  return OkStatus();
}

}  // namespace

Status Reduce(const ReducerOptions& options, std::span<const std::span<const float>> inputs,
              std::span<const double> weights, std::span<float> out) {
  LOFT_RETURN_IF_ERROR(options.Validate());
  const std::string name(ReducerKindName(options.kind));
  if (inputs.empty()) return InvalidArgument(name + ": no inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].size() != out.size()) {
      return InvalidArgument(name + ": input " + std::to_string(i) + " has " +
                             std::to_string(inputs[i].size()) + " values, output has " +
                             std::to_string(out.size()));
    }
  }
  std::vector<double> w;
  if (weights.empty()) {
    if (options.kind == ReducerKind::kWeightedMean) return InvalidArgument("weighted_mean needs weights");
    w.assign(inputs.size(), 1.0);
  } else {
    if (weights.size() != inputs.size()) {
      return InvalidArgument(name + ": " + std::to_string(weights.size()) + " weights for " +
                             std::to_string(inputs.size()) + " inputs");
    }
    double sum = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
      if (!(weights[i] >= 0) || !std::isfinite(weights[i])) {
        return InvalidArgument(name + ": weight " + std::to_string(i) + " must be finite and >= 0");
      }
      sum += weights[i];
    }
    if (!(sum > 0)) return InvalidArgument(name + ": weights sum to zero");
    w.assign(weights.begin(), weights.end());
    if (!std::isfinite(sum)) {
      // Finite weights whose sum overflows: rescale (same ratios) so that
      // w_i / sum w does not become 0 for every input.
      const double mx = *std::max_element(w.begin(), w.end());
      for (double& x : w) x /= mx;
    }
  }
  // A zero weight means "no input" for every reducer (a member with no
  // samples this iteration): drop those inputs before reducing.
  if (std::find(w.begin(), w.end(), 0.0) != w.end()) {
    std::vector<std::span<const float>> kept;
    std::vector<double> kw;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (w[i] > 0) {
        kept.push_back(inputs[i]);
        kw.push_back(w[i]);
      }
    }
    return Reduce(options, kept, kw, out);
  }
  switch (options.kind) {
    case ReducerKind::kMean:
    case ReducerKind::kWeightedMean: {
      // Both are sum w_i x_i / sum w_i (w = 1 when no weights were given).
      const double ws = std::accumulate(w.begin(), w.end(), 0.0);
      std::vector<double> acc(out.size(), 0.0);
      for (size_t i = 0; i < inputs.size(); ++i) {
        const double c = w[i] / ws;
        for (size_t j = 0; j < out.size(); ++j) acc[j] += c * inputs[i][j];
      }
      for (size_t j = 0; j < out.size(); ++j) out[j] = static_cast<float>(acc[j]);
      return OkStatus();
    }
    case ReducerKind::kMedian: return CoordinateWise(options, inputs, w, out);
    case ReducerKind::kTrimmedMean:
      if (options.trim_count >= 0 && inputs.size() <= 2 * static_cast<size_t>(options.trim_count)) {
        return InvalidArgument("trimmed_mean with trim_count=" + std::to_string(options.trim_count) +
                               " needs more than " + std::to_string(2 * options.trim_count) +
                               " inputs, got " + std::to_string(inputs.size()));
      }
      return CoordinateWise(options, inputs, w, out);
    case ReducerKind::kMultiKrum: return MultiKrum(options, inputs, w, out);
    case ReducerKind::kCenteredClipping: return CenteredClipping(options, inputs, w, out);
  }
  return Internal("unhandled reducer kind");
}

Status Reduce(const ReducerOptions& options, const std::vector<std::vector<float>>& inputs,
              std::span<const double> weights, std::vector<float>* out) {
  std::vector<std::span<const float>> spans(inputs.begin(), inputs.end());
  out->assign(inputs.empty() ? 0 : inputs.front().size(), 0.0f);
  return Reduce(options, spans, weights, *out);
}

}  // namespace loft::models
