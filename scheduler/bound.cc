#include "scheduler/bound.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
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
        const Half& p = lines[x];
        const Half& q = lines[y];
        const double det = p.al * q.ar - p.ar * q.al;
        if (std::abs(det) < 1e-15) continue;
        const double l = (p.g * q.ar - p.ar * q.g) / det;
        const double r = (p.al * q.g - p.g * q.al) / det;
        bool inside = true;
        for (int k = 0; k < count_ && inside; ++k) {
          const Half& h = h_[k];
          inside = h.al * l + h.ar * r <= h.g + 1e-9 * (1 + std::abs(h.g));
        }
        if (!inside) continue;
        const double lc = std::max(0.0, l);
        const double rc = std::max(0.0, r);
        out.push_back(Vertex{lc + rc, std::min(up, std::max(0.0, pool - lc)) - rc});
      }
    }
  }

 private:
  std::array<Half, kMaxHalves> h_{};
  int count_ = 0;
};

struct Worker {
  double c0, c1, l0, l1, a, rr, u, pool, mn, mx;
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
      if (t < w.c0) return false;
      const double up = w.u > 0 ? t / w.u : 1e300;
      const double kink = w.pool - up;
      auto common = [&]() {
        en_.Reset();
        en_.Add(-1, 0, 0);
        en_.Add(0, -1, 0);
        en_.Add(1, 0, w.pool);
        en_.Add(1, 1, w.mx);
        en_.Add(-1, -1, -w.mn);
      };
      // r = 0, local read charged.
      common();
      en_.Add(0, 1, 0);
      if (ov) {
        en_.Add(w.l1, 0, t - w.l0);
        en_.Add(w.c1, 0, t - w.c0);
      } else {
        en_.Add(w.l1 + w.c1, 0, t - w.c0 - w.l0);
      }
      en_.Vertices(kink, up, w.pool, verts_);
      // l = 0 and r = 0: the idle point.
      if (w.mn <= 0) verts_.push_back(Vertex{0, std::min(up, w.pool)});
      // l = 0, remote read charged.
      common();
      en_.Add(1, 0, 0);
      if (ov) {
        en_.Add(0, w.rr, t - w.a);
        en_.Add(0, w.c1, t - w.c0);
      } else {
        en_.Add(0, w.rr + w.c1, t - w.c0 - w.a);
      }
      en_.Vertices(kink, up, w.pool, verts_);
      // Both, both charged.
      common();
      if (ov) {
        en_.Add(w.l1, 0, t - w.l0);
        en_.Add(0, w.rr, t - w.a);
        en_.Add(w.c1, w.c1, t - w.c0);
      } else {
        en_.Add(w.l1 + w.c1, w.c1, t - w.c0 - w.l0);
        en_.Add(w.c1, w.rr + w.c1, t - w.c0 - w.a);
      }
      en_.Vertices(kink, up, w.pool, verts_);
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

}  // namespace

StatusOr<double> LowerBoundMs(const PlanRequest& req) {
  LOFT_RETURN_IF_ERROR(ValidatePlanRequest(req));
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
  int doublings = 0;
  while (!solver.MaybeFeasible(hi)) {
    lo = hi;
    hi *= 2;
    if (++doublings > 200)
      return Internal("bound: no feasible makespan found (cost parameters out of range?)");
  }
  while (hi - lo > 1e-7 * hi) {
    const double mid = 0.5 * (lo + hi);
    (solver.MaybeFeasible(mid) ? hi : lo) = mid;
  }
  return lo;
}

StatusOr<double> EpochBoundMs(const PlanRequest& req, std::span<const int64_t> unconsumed_by_node) {
  LOFT_RETURN_IF_ERROR(ValidatePlanRequest(req));
  const size_t n = req.workers.size();
  if (!unconsumed_by_node.empty() && unconsumed_by_node.size() != n) {
    return InvalidArgument(fmt::format("epoch bound: unconsumed_by_node has {} entries for {} workers",
                                       unconsumed_by_node.size(), n));
  }
  std::vector<double> h(n);
  double total = 0;
  for (size_t j = 0; j < n; ++j) {
    const int64_t v = unconsumed_by_node.empty() ? req.workers[j].local_available : unconsumed_by_node[j];
    if (v < 0) {
      return InvalidArgument(
          fmt::format("epoch bound: unconsumed_by_node[{}] (node {}) is negative", j, req.workers[j].node));
    }
    h[j] = static_cast<double>(v);
    total += h[j];
  }
  const double big_b = static_cast<double>(req.global_batch);
  if (total < big_b) {
    return FailedPrecondition(fmt::format(
        "epoch bound: {} unconsumed samples on live nodes, fewer than global_batch {}", total, big_b));
  }
  PlanRequest steady = req;
  for (size_t j = 0; j < n; ++j) {
    const double rate = h[j] * big_b / total;
    steady.workers[j].local_available = static_cast<int64_t>(std::ceil(rate - 1e-9));
  }
  steady.unconsumed_in_epoch = 0;
  for (const WorkerInput& w : steady.workers) steady.unconsumed_in_epoch += w.local_available;
  return LowerBoundMs(steady);
}

}  // namespace loft::sched
