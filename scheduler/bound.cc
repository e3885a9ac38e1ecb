#include "scheduler/bound.h"

#include <fmt/format.h>

#include <ClpSimplex.hpp>
#include <CoinPackedMatrix.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <vector>

namespace loft::sched {
namespace {

// Half-plane al·l + ar·r ≤ g.
struct Half {
  double al, ar, g;
};

struct Vertex {
  double a;  // l + r: the dual value at λ = 0
  double b;  // s − r: its slope in λ
};

constexpr int kMaxHalves = 12;

class Enumerator {
 public:
  void Reset() { count_ = 0; }
  void Add(double al, double ar, double g) { h_[count_++] = Half{al, ar, g}; }

  // Appends to `out` every vertex of the polygon {h} and every point where
  // the line l = kink crosses it, as (l + r, min(up, pool − l) − r).
  void Vertices(double kink, double up, double pool, std::vector<Vertex>& out) const {
    std::array<Half, kMaxHalves + 1> lines;
    int m = 0;
    for (int k = 0; k < count_; ++k) lines[m++] = h_[k];
    lines[m++] = Half{1, 0, kink};
    for (int x = 0; x < m; ++x) {
      for (int y = x + 1; y < m; ++y) {
        const auto corner = Corner(lines[x], lines[y]);
        if (!corner) continue;
        const double lc = std::max(0.0, corner->first);
        const double rc = std::max(0.0, corner->second);
        out.push_back(Vertex{lc + rc, std::min(up, std::max(0.0, pool - lc)) - rc});
      }
    }
  }

  // Every vertex (l, r) of the polygon {h} (clamped at 0).
  void Points(std::vector<std::pair<double, double>>& out) const {
    for (int x = 0; x < count_; ++x) {
      for (int y = x + 1; y < count_; ++y) {
        const auto corner = Corner(h_[x], h_[y]);
        if (corner) out.emplace_back(std::max(0.0, corner->first), std::max(0.0, corner->second));
      }
    }
  }

 private:
  // Where the boundary lines of p and q cross, (l, r), when they are not
  // parallel and the point lies in the polygon {h}; nullopt otherwise.
  std::optional<std::pair<double, double>> Corner(const Half& p, const Half& q) const {
    const double det = p.al * q.ar - p.ar * q.al;
    if (std::abs(det) < 1e-15) return std::nullopt;
    const double l = (p.g * q.ar - p.ar * q.g) / det;
    const double r = (p.al * q.g - p.g * q.al) / det;
    for (int k = 0; k < count_; ++k) {
      const Half& h = h_[k];
      if (!(h.al * l + h.ar * r <= h.g + 1e-9 * (1 + std::abs(h.g)))) return std::nullopt;
    }
    return std::pair{l, r};
  }

  std::array<Half, kMaxHalves> h_{};
  int count_ = 0;
};

// One worker's cost terms (ms; CostParams) and batch limits, as doubles.
struct Worker {
  double compute_fixed, compute_per_sample;  // compute: fixed + per sample
  double local_fixed, local_per_sample;      // local reads
  double remote_fixed, remote_per_sample;    // remote reads (the worker's downlink side)
  double uplink_per_sample;                  // its uplink serving peers, ms per sample (0 = unlimited)
  double local_pool;                         // local samples it may read
  double min_batch, max_batch;
};

class BoundSolver {
 public:
  explicit BoundSolver(const PlanRequest& req) : req_(req) {
    for (const WorkerInput& in : req.workers) {
      const CostParams& c = in.cost;
      w_.push_back(Worker{c.compute_fixed_ms, c.compute_per_sample_ms, c.local_fixed_ms,
                          c.local_per_sample_ms, c.remote_fixed_ms, c.remote_per_sample_ms,
                          c.uplink_per_sample_ms, static_cast<double>(in.local_available),
                          static_cast<double>(in.min_batch), static_cast<double>(in.max_batch)});
    }
    start_.resize(w_.size() + 1);
  }

  // False only with a certificate that no relaxed plan finishes within t.
  bool MaybeFeasible(double t) {
    if (!BuildVertices(t)) return false;
    const double target = static_cast<double>(req_.global_batch) * (1 - 1e-12) - 1e-9;
    auto probe = [&](double lambda, double* slope) {
      double g = 0, s = 0;
      for (size_t i = 0; i < w_.size(); ++i) {
        double best = -1e300, best_b = 0;
        for (size_t k = start_[i]; k < start_[i + 1]; ++k) {
          const double v = verts_[k].a + lambda * verts_[k].b;
          if (v > best) best = v, best_b = verts_[k].b;
        }
        g += best;
        s += best_b;
      }
      *slope = s;
      return g;
    };
    double slope = 0;
    if (probe(0, &slope) < target) return false;
    if (slope >= 0) return true;
    if (probe(1, &slope) < target) return false;
    if (slope <= 0) return true;
    double lo = 0, hi = 1;
    for (int k = 0; k < 40; ++k) {
      const double mid = 0.5 * (lo + hi);
      if (probe(mid, &slope) < target) return false;
      (slope > 0 ? hi : lo) = mid;
    }
    return true;
  }

 private:
  bool BuildVertices(double t) {
    verts_.clear();
    const bool ov = req_.overlap;
    for (size_t i = 0; i < w_.size(); ++i) {
      start_[i] = verts_.size();
      const Worker& w = w_[i];
      if (t < w.compute_fixed) return false;
      const double up = w.uplink_per_sample > 0 ? t / w.uplink_per_sample : 1e300;
      const double kink = w.local_pool - up;
      auto common = [&]() {
        en_.Reset();
        en_.Add(-1, 0, 0);
        en_.Add(0, -1, 0);
        en_.Add(1, 0, w.local_pool);
        en_.Add(1, 1, w.max_batch);
        en_.Add(-1, -1, -w.min_batch);
      };
      // r = 0, local read charged.
      common();
      en_.Add(0, 1, 0);
      if (ov) {
        en_.Add(w.local_per_sample, 0, t - w.local_fixed);
        en_.Add(w.compute_per_sample, 0, t - w.compute_fixed);
      } else {
        en_.Add(w.local_per_sample + w.compute_per_sample, 0, t - w.compute_fixed - w.local_fixed);
      }
      en_.Vertices(kink, up, w.local_pool, verts_);
      // l = 0 and r = 0: the idle point.
      if (w.min_batch <= 0) verts_.push_back(Vertex{0, std::min(up, w.local_pool)});
      // l = 0, remote read charged.
      common();
      en_.Add(1, 0, 0);
      if (ov) {
        en_.Add(0, w.remote_per_sample, t - w.remote_fixed);
        en_.Add(0, w.compute_per_sample, t - w.compute_fixed);
      } else {
        en_.Add(0, w.remote_per_sample + w.compute_per_sample, t - w.compute_fixed - w.remote_fixed);
      }
      en_.Vertices(kink, up, w.local_pool, verts_);
      // Both, both charged.
      common();
      if (ov) {
        en_.Add(w.local_per_sample, 0, t - w.local_fixed);
        en_.Add(0, w.remote_per_sample, t - w.remote_fixed);
        en_.Add(w.compute_per_sample, w.compute_per_sample, t - w.compute_fixed);
      } else {
        en_.Add(w.local_per_sample + w.compute_per_sample, w.compute_per_sample,
                t - w.compute_fixed - w.local_fixed);
        en_.Add(w.compute_per_sample, w.remote_per_sample + w.compute_per_sample,
                t - w.compute_fixed - w.remote_fixed);
      }
      en_.Vertices(kink, up, w.local_pool, verts_);
      if (verts_.size() == start_[i]) return false;  // cannot even take min_batch
      Prune(start_[i]);
    }
    start_[w_.size()] = verts_.size();
    return true;
  }

  // Drops vertices dominated on λ ∈ [0, 1] (at both ends).
  void Prune(size_t from) {
    scratch_.assign(verts_.begin() + static_cast<std::ptrdiff_t>(from), verts_.end());
    verts_.resize(from);
    for (size_t x = 0; x < scratch_.size(); ++x) {
      const Vertex& v = scratch_[x];
      bool dominated = false;
      for (size_t y = 0; y < scratch_.size() && !dominated; ++y) {
        if (y == x) continue;
        const Vertex& o = scratch_[y];
        const bool ge0 = o.a >= v.a, ge1 = o.a + o.b >= v.a + v.b;
        const bool strict = o.a > v.a || o.a + o.b > v.a + v.b || y < x;
        dominated = ge0 && ge1 && strict;
      }
      if (!dominated) verts_.push_back(v);
    }
  }

  const PlanRequest& req_;
  std::vector<Worker> w_;
  std::vector<Vertex> verts_;
  std::vector<Vertex> scratch_;
  std::vector<size_t> start_;
  Enumerator en_;
};

// ---------------------------------------------------------------------------
// bound-epoch's relaxation above kExactEpochLpMaxWorkers, without
// replication (every drain fixed, d_j = h_j): worker i's (l, r) in the
// convex hull of its mode polygons at T (pool = d_i), with s_i = d_i − l_i
// ≤ T/u_i, i.e. l_i ≥ d_i − T/u_i; supply aggregated (Σ r = Σ s, which with
// Σ d = B is Σ (l + r) = B; reads from oneself allowed). Each worker's set
// is convex, so the sum of l + r ranges over [Σ min_i, Σ max_i]: T is
// feasible iff every set is non-empty and B lies in that range. Exact for
// the aggregated problem; O(N·V log V) per probe (V ≤ ~40 vertices).
class DrainHullSolver {
 public:
  DrainHullSolver(const PlanRequest& req, std::span<const double> drain) : req_(req), drain_(drain) {}

  bool Feasible(double t) {
    double lo_sum = 0, hi_sum = 0;
    for (size_t i = 0; i < req_.workers.size(); ++i) {
      const WorkerInput& in = req_.workers[i];
      const CostParams& c = in.cost;
      const double d = drain_[i], mn = static_cast<double>(in.min_batch),
                   mx = static_cast<double>(in.max_batch);
      if (t < c.compute_fixed_ms) return false;
      pts_.clear();
      auto common = [&]() {
        en_.Reset();
        en_.Add(-1, 0, 0);
        en_.Add(0, -1, 0);
        en_.Add(1, 0, d);
        en_.Add(1, 1, mx);
        en_.Add(-1, -1, -mn);
      };
      const bool ov = req_.overlap;
      common();
      en_.Add(0, 1, 0);
      if (ov) {
        en_.Add(c.local_per_sample_ms, 0, t - c.local_fixed_ms);
        en_.Add(c.compute_per_sample_ms, 0, t - c.compute_fixed_ms);
      } else {
        en_.Add(c.local_per_sample_ms + c.compute_per_sample_ms, 0,
                t - c.compute_fixed_ms - c.local_fixed_ms);
      }
      en_.Points(pts_);
      if (mn <= 0) pts_.emplace_back(0.0, 0.0);
      common();
      en_.Add(1, 0, 0);
      if (ov) {
        en_.Add(0, c.remote_per_sample_ms, t - c.remote_fixed_ms);
        en_.Add(0, c.compute_per_sample_ms, t - c.compute_fixed_ms);
      } else {
        en_.Add(0, c.remote_per_sample_ms + c.compute_per_sample_ms,
                t - c.compute_fixed_ms - c.remote_fixed_ms);
      }
      en_.Points(pts_);
      common();
      if (ov) {
        en_.Add(c.local_per_sample_ms, 0, t - c.local_fixed_ms);
        en_.Add(0, c.remote_per_sample_ms, t - c.remote_fixed_ms);
        en_.Add(c.compute_per_sample_ms, c.compute_per_sample_ms, t - c.compute_fixed_ms);
      } else {
        en_.Add(c.local_per_sample_ms + c.compute_per_sample_ms, c.compute_per_sample_ms,
                t - c.compute_fixed_ms - c.local_fixed_ms);
        en_.Add(c.compute_per_sample_ms, c.remote_per_sample_ms + c.compute_per_sample_ms,
                t - c.compute_fixed_ms - c.remote_fixed_ms);
      }
      en_.Points(pts_);
      if (pts_.empty()) return false;
      const double floor_l = c.uplink_per_sample_ms > 0 ? d - t / c.uplink_per_sample_ms : 0.0;
      double lo = 0, hi = 0;
      if (!ClippedRange(floor_l, &lo, &hi)) return false;
      lo_sum += lo;
      hi_sum += hi;
    }
    const double b = static_cast<double>(req_.global_batch);
    return lo_sum <= b * (1 + 1e-12) + 1e-9 && hi_sum >= b * (1 - 1e-12) - 1e-9;
  }

 private:
  // min and max of l + r over conv(pts_) ∩ {l ≥ floor_l}; false if empty.
  bool ClippedRange(double floor_l, double* lo, double* hi) {
    std::sort(pts_.begin(), pts_.end());
    pts_.erase(std::unique(pts_.begin(), pts_.end()), pts_.end());
    // Andrew's monotone chain.
    hull_.clear();
    auto cross = [](const auto& o, const auto& a, const auto& b) {
      return (a.first - o.first) * (b.second - o.second) - (a.second - o.second) * (b.first - o.first);
    };
    for (int pass = 0; pass < 2; ++pass) {
      const size_t start = hull_.size();
      for (size_t k = 0; k < pts_.size(); ++k) {
        const auto& p = pass == 0 ? pts_[k] : pts_[pts_.size() - 1 - k];
        while (hull_.size() >= start + 2 && cross(hull_[hull_.size() - 2], hull_.back(), p) <= 0)
          hull_.pop_back();
        hull_.push_back(p);
      }
      hull_.pop_back();
    }
    if (hull_.empty()) hull_.push_back(pts_.front());
    // Clip the closed polygon with l ≥ floor_l (Sutherland–Hodgman).
    *lo = 1e300;
    *hi = -1e300;
    const double eps = 1e-9 * (1 + std::abs(floor_l));
    auto take = [&](double l, double r) {
      *lo = std::min(*lo, l + r);
      *hi = std::max(*hi, l + r);
    };
    for (size_t k = 0; k < hull_.size(); ++k) {
      const auto& p = hull_[k];
      const auto& q = hull_[(k + 1) % hull_.size()];
      const bool pin = p.first >= floor_l - eps, qin = q.first >= floor_l - eps;
      if (pin) take(p.first, p.second);
      if (pin != qin) {
        const double f = (floor_l - p.first) / (q.first - p.first);
        take(floor_l, p.second + f * (q.second - p.second));
      }
    }
    return *lo <= *hi;
  }

  const PlanRequest& req_;
  std::span<const double> drain_;
  Enumerator en_;
  std::vector<std::pair<double, double>> pts_, hull_;
};

// ---------------------------------------------------------------------------
// Exact LP of the per-worker convex-hull relaxation (bound.h "Relaxation").
// Each worker's modes m ∈ {local only, remote only, both, idle} get
// disaggregated copies (λ_m, l_m, r_m) of its counts (Balas' hull
// formulation): the constraints of mode m multiplied by λ_m, Σ_m λ_m = 1.
// Coupling: s_j = samples node j serves, l_j + s_j ≤ pool_j (or in
// [drain_lo_j, drain_hi_j] for bound-epoch),
// u_j·s_j ≤ T, and the transportation conditions for reads from peers other
// than oneself: Σ_i r_i ≤ S = Σ_j s_j and r_i + s_i ≤ S for every i (exact
// for a complete bipartite supply graph minus the diagonal).
class HullLp {
 public:
  // Feasibility LP at makespan t. drain_hi empty: l_j + s_j ≤ local_available_j; else drain_lo[j] ≤
  // l_j + s_j ≤ drain_hi[j].
  HullLp(const PlanRequest& req, double t, std::span<const double> drain_lo, std::span<const double> drain_hi)
      : req_(req), t_(t), drain_lo_(drain_lo), drain_hi_(drain_hi) {}

  // Whether the relaxation is feasible at t. `basis` (CLP status per
  // column and row): a warm start from the previous probe when it has the
  // right size (the LP's shape does not depend on t); replaced by this
  // solve's final basis.
  bool Feasible(std::vector<unsigned char>& basis) {
    Build();
    ClpSimplex lp;
    lp.setLogLevel(0);
    const int ncols = static_cast<int>(col_lo_.size()), nrows = static_cast<int>(row_lo_.size());
    CoinPackedMatrix m(true, rows_.data(), cols_.data(), vals_.data(), static_cast<int>(vals_.size()));
    m.setDimensions(nrows, ncols);
    lp.loadProblem(m, col_lo_.data(), col_hi_.data(), obj_.data(), row_lo_.data(), row_hi_.data());
    lp.setPrimalTolerance(1e-9);
    lp.setDualTolerance(1e-9);
    if (basis.size() == static_cast<size_t>(ncols + nrows)) lp.copyinStatus(basis.data());
    lp.dual();
    basis.assign(lp.statusArray(), lp.statusArray() + ncols + nrows);
    return lp.status() == 0;
  }

 private:
  int Col(double lo, double hi) {
    col_lo_.push_back(lo);
    col_hi_.push_back(hi);
    obj_.push_back(0);
    return static_cast<int>(col_lo_.size()) - 1;
  }
  int Row(double lo, double hi) {
    row_lo_.push_back(lo);
    row_hi_.push_back(hi);
    return static_cast<int>(row_lo_.size()) - 1;
  }
  void Set(int row, int col, double v) {
    if (v == 0) return;
    rows_.push_back(row);
    cols_.push_back(col);
    vals_.push_back(v);
  }

  void Build() {
    const double kInf = COIN_DBL_MAX;
    const size_t n = req_.workers.size();
    const int scol = Col(0, kInf);
    const int served_sum = Row(0, 0);      // Σ s_j − S = 0
    const int remote_sum = Row(-kInf, 0);  // Σ r_i − S ≤ 0
    const int batch_sum = Row(static_cast<double>(req_.global_batch), static_cast<double>(req_.global_batch));
    Set(served_sum, scol, -1);
    Set(remote_sum, scol, -1);
    for (size_t i = 0; i < n; ++i) {
      const WorkerInput& w = req_.workers[i];
      const CostParams& c = w.cost;
      const double pool = drain_hi_.empty() ? static_cast<double>(w.local_available) : drain_hi_[i];
      const double mn = static_cast<double>(w.min_batch), mx = static_cast<double>(w.max_batch);
      const double up = c.uplink_per_sample_ms <= 0 ? kInf : t_ / c.uplink_per_sample_ms;
      const int s = Col(0, std::min(up, pool));
      Set(served_sum, s, 1);
      const int own = Row(drain_hi_.empty() ? -kInf : drain_lo_[i], pool);  // l + s vs pool/drain
      Set(own, s, 1);
      const int self = Row(-kInf, 0);  // r + s − S ≤ 0
      Set(self, s, 1);
      Set(self, scol, -1);
      const int convex = Row(1, 1);
      for (int mode = 0; mode < 4; ++mode) {  // local only, remote only, both, idle
        const bool has_l = mode == 0 || mode == 2, has_r = mode == 1 || mode == 2;
        const int lam = Col(0, mode == 3 && mn > 0 ? 0 : 1);
        Set(convex, lam, 1);
        const int l = has_l ? Col(0, kInf) : -1;
        const int r = has_r ? Col(0, kInf) : -1;
        // cl·l + cr·r + k·λ ≤ t·λ (the mode's constraint scaled by λ).
        auto time_row = [&](double cl, double cr, double k) {
          const int row = Row(-kInf, 0);
          if (l >= 0) Set(row, l, cl);
          if (r >= 0) Set(row, r, cr);
          Set(row, lam, k - t_);
        };
        const double c0 = c.compute_fixed_ms, c1 = c.compute_per_sample_ms;
        if (req_.overlap) {
          if (has_l) time_row(c.local_per_sample_ms, 0, c.local_fixed_ms);
          if (has_r) time_row(0, c.remote_per_sample_ms, c.remote_fixed_ms);
          time_row(c1, c1, c0);
        } else {
          if (has_l) time_row(c.local_per_sample_ms + c1, c1, c0 + c.local_fixed_ms);
          if (has_r) time_row(c1, c.remote_per_sample_ms + c1, c0 + c.remote_fixed_ms);
          if (!has_l && !has_r) time_row(0, 0, c0);
        }
        if (mode == 3) continue;
        // mn·λ ≤ l + r ≤ mx·λ, l ≤ min(pool, mx)·λ.
        const int lo = Row(0, kInf), hi = Row(-kInf, 0);
        Set(lo, lam, -mn);
        Set(hi, lam, -mx);
        for (int v : {l, r}) {
          if (v < 0) continue;
          Set(lo, v, 1);
          Set(hi, v, 1);
          Set(batch_sum, v, 1);
        }
        if (l >= 0) {
          const int cap = Row(-kInf, 0);
          Set(cap, l, 1);
          Set(cap, lam, -std::min(pool, mx));
          Set(own, l, 1);
        }
        if (r >= 0) {
          Set(self, r, 1);
          Set(remote_sum, r, 1);
        }
      }
    }
  }

  const PlanRequest& req_;
  double t_;
  std::span<const double> drain_lo_, drain_hi_;
  std::vector<double> col_lo_, col_hi_, obj_, row_lo_, row_hi_;
  std::vector<int> rows_, cols_;
  std::vector<double> vals_;
};

// Narrows [lo, hi] (feasible(hi) true, feasible(lo) false or lo a proven
// floor) to 1e-7 relative by bisection; `feasible` is monotone in t.
template <typename Feasible>
void Bisect(Feasible&& feasible, double& lo, double& hi) {
  while (hi - lo > 1e-7 * hi) {
    const double mid = 0.5 * (lo + hi);
    (feasible(mid) ? hi : lo) = mid;
  }
}

// Doubles hi (moving lo up to each infeasible value) until feasible(hi),
// at most max_doublings times, then bisects. False when it gave up.
template <typename Feasible>
bool GrowThenBisect(Feasible&& feasible, double& lo, double& hi, int max_doublings) {
  int doublings = 0;
  while (!feasible(hi)) {
    lo = hi;
    hi *= 2;
    if (++doublings > max_doublings) return false;
  }
  Bisect(feasible, lo, hi);
  return true;
}

// Smallest t (to 1e-7 relative) at which the fixed-t hull LP is feasible,
// given `lo` at or below it; returns the largest t proven infeasible (or
// lo), so the result never exceeds the LP's optimum.
StatusOr<double> BisectLp(const PlanRequest& req, std::span<const double> drain_lo,
                          std::span<const double> drain_hi, double lo) {
  std::vector<unsigned char> basis;
  auto feasible = [&](double t) { return HullLp(req, t, drain_lo, drain_hi).Feasible(basis); };
  double hi = std::max(lo, 1e-6) * (1 + 1e-6);
  if (feasible(hi)) return lo;
  int doublings = 0;
  while (!feasible(hi * 2)) {
    hi *= 2;
    if (++doublings > 60)
      return Internal("bound: the hull LP stays infeasible (cost parameters out of range?)");
  }
  lo = hi;
  hi *= 2;
  Bisect(feasible, lo, hi);
  return lo;
}

}  // namespace

StatusOr<double> LowerBoundMs(const PlanRequest& req) {
  LOFT_RETURN_IF_ERROR(ValidatePlanRequest(req));
  // Encoded samples: the bound of the relaxed plain request, whose costs
  // are at most every decode placement's (bound.h "Decode placement").
  if (req.coding.encoded) return LowerBoundMs(RelaxDecode(req));
  int64_t pool_total = 0;
  double hi = 1.0;
  for (const WorkerInput& w : req.workers) {
    pool_total += w.local_available;
    hi = std::max(hi, 2 * w.cost.compute_fixed_ms);
  }
  if (pool_total < req.global_batch) {
    return FailedPrecondition(
        fmt::format("bound: live workers cache {} unconsumed samples in total, fewer than global_batch {}",
                    pool_total, req.global_batch));
  }
  BoundSolver solver(req);
  double lo = 0;
  if (!GrowThenBisect([&](double t) { return solver.MaybeFeasible(t); }, lo, hi, 200))
    return Internal("bound: no feasible makespan found (cost parameters out of range?)");
  // The Lagrangian relaxes the aggregated supply; the exact LP adds the
  // per-peer conditions (no reads from oneself). Affordable for small N.
  if (req.workers.size() <= kExactLpMaxWorkers) return BisectLp(req, {}, {}, lo);
  return lo;
}

namespace {

StatusOr<double> EpochBound(const PlanRequest& req, std::span<const int64_t> unconsumed_by_node, bool exact) {
  LOFT_RETURN_IF_ERROR(ValidatePlanRequest(req));
  const size_t n = req.workers.size();
  if (!unconsumed_by_node.empty() && unconsumed_by_node.size() != n) {
    return InvalidArgument(fmt::format("epoch bound: unconsumed_by_node has {} entries for {} workers",
                                       unconsumed_by_node.size(), n));
  }
  std::vector<double> hi(n), lo(n);
  double total = 0;
  for (size_t j = 0; j < n; ++j) {
    const int64_t v = unconsumed_by_node.empty() ? req.workers[j].local_available : unconsumed_by_node[j];
    if (v < 0) {
      return InvalidArgument(
          fmt::format("epoch bound: unconsumed_by_node[{}] (node {}) is negative", j, req.workers[j].node));
    }
    hi[j] = static_cast<double>(v);
    total += hi[j];
  }
  const double big_b = static_cast<double>(req.global_batch);
  if (total < big_b) {
    return FailedPrecondition(fmt::format(
        "epoch bound: {} unconsumed samples on live nodes, fewer than global_batch {}", total, big_b));
  }
  // U: distinct unconsumed samples within reach. With replication the H_j
  // overlap (ΣH > U); a node must drain at least its exclusive samples
  // (given, or at least H_j − (ΣH − U)) and at most H_j, at rate B/U.
  const double unconsumed = static_cast<double>(req.unconsumed_in_epoch);
  const double u = unconsumed_by_node.empty() && unconsumed >= big_b ? std::min(total, unconsumed) : total;
  for (size_t j = 0; j < n; ++j) {
    const int64_t exclusive = req.workers[j].exclusive_available;
    double e = exclusive >= 0 ? std::min(static_cast<double>(exclusive), hi[j]) : hi[j] - (total - u);
    lo[j] = std::max(0.0, e) * big_b / u;
    hi[j] = hi[j] * big_b / u;
  }
  // The hull-relaxation bound on ⌈hi⌉ pools (aggregated supply, no lower
  // drain) relaxes the LP, so the LP is infeasible below it: a bracket.
  PlanRequest steady = req;
  for (size_t j = 0; j < n; ++j) {
    steady.workers[j].local_available = static_cast<int64_t>(std::ceil(hi[j] - 1e-9));
    steady.workers[j].exclusive_available = -1;
  }
  steady.unconsumed_in_epoch = 0;
  for (const WorkerInput& w : steady.workers) steady.unconsumed_in_epoch += w.local_available;
  LOFT_ASSIGN_OR_RETURN(double relaxed, LowerBoundMs(steady));
  // Without replication (every drain fixed) the aggregated fixed-drain
  // relaxation is also valid and much tighter (the bracket lets a node
  // drain less than h_j): the larger of the two.
  bool fixed = true;
  for (size_t j = 0; j < n; ++j) fixed = fixed && hi[j] - lo[j] <= 1e-9 * (1 + hi[j]);
  if (fixed) {
    DrainHullSolver drained(req, hi);
    double a = relaxed, b = std::max(relaxed, 1e-6) * 2;
    if (!GrowThenBisect([&](double t) { return drained.Feasible(t); }, a, b, 60))
      return Internal("epoch bound: no feasible makespan (cost parameters out of range?)");
    relaxed = std::max(relaxed, a);
  }
  if (!exact) return relaxed;
  return BisectLp(req, lo, hi, relaxed);
}

}  // namespace

StatusOr<double> EpochBoundMs(const PlanRequest& req, std::span<const int64_t> unconsumed_by_node) {
  if (req.coding.encoded) {
    LOFT_RETURN_IF_ERROR(ValidatePlanRequest(req));
    return EpochBoundMs(RelaxDecode(req), unconsumed_by_node);
  }
  return EpochBound(req, unconsumed_by_node, req.workers.size() <= kExactEpochLpMaxWorkers);
}

StatusOr<double> EpochHullBoundMs(const PlanRequest& req, std::span<const int64_t> unconsumed_by_node) {
  if (req.coding.encoded) {
    LOFT_RETURN_IF_ERROR(ValidatePlanRequest(req));
    return EpochHullBoundMs(RelaxDecode(req), unconsumed_by_node);
  }
  return EpochBound(req, unconsumed_by_node, false);
}

}  // namespace loft::sched
