#include "scheduler/policies/loft.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>
#include <vector>

namespace loft::sched {
namespace {

constexpr double kInf = 1e300;

// num / den via a precomputed inv = 1/den (den ≥ 0); ±∞ by the sign of num
// when den = 0.
double DivR(double num, double den, double inv) {
  if (den > 0) return num * inv;
  return num >= 0 ? kInf : -kInf;
}

double Inv(double den) {
  return den > 0 ? 1.0 / den : 0.0;
}

// Per-worker constants, precomputed once per plan (with the reciprocals
// the capacity computation needs, so a probe of T does no division).
struct W {
  double c0, c1, l0, l1, a, rr, u, pool, mn, mx;
  double inv_lc = 0, inv_c1 = 0, inv_rc = 0, inv_l1 = 0, inv_rr = 0, inv_u = 0;
  void Precompute() {
    inv_lc = Inv(l1 + c1);
    inv_c1 = Inv(c1);
    inv_rc = Inv(rr + c1);
    inv_l1 = Inv(l1);
    inv_rr = Inv(rr);
    inv_u = Inv(u);
  }
};

// A worker's capacity at makespan T (see loft.h).
struct Cap {
  bool ok = false;
  double local = 0;  // L: most local samples alone
  double ra = 0;     // end of the slope-1 remote segment
  double rb = 0;     // end of the trading segment (rb ≥ ra)
  double sigma = 0;  // gain per remote sample on the trading segment
  double drop = 0;   // local samples given up per remote sample on it
  double max_b() const { return local + ra + sigma * (rb - ra); }
};

Cap CapacityAt(const W& w, double t, bool overlap) {
  Cap c;
  if (t < w.c0) return c;
  c.ok = true;
  if (!overlap) {
    c.local = std::max(0.0, std::min({w.pool, w.mx, DivR(t - w.c0 - w.l0, w.l1 + w.c1, w.inv_lc)}));
    const double tl = c.local > 0 ? w.l0 + w.l1 * c.local : 0.0;
    const double local_bound = DivR(t - w.c0 - tl, w.c1, w.inv_c1) - c.local;
    const double remote_bound = DivR(t - w.a - w.c0 - w.c1 * c.local, w.rr + w.c1, w.inv_rc);
    const double max_bound = w.mx - c.local;
    c.ra = std::max(0.0, std::min({local_bound, remote_bound, max_bound}));
    c.rb = c.ra;
    if (c.local > 0 && w.l1 > 0 && w.c1 > 0 && local_bound <= std::min(remote_bound, max_bound) + 1e-12) {
      const double k1 = t - w.c0 - w.l0;
      const double k2 = t - w.c0 - w.a;
      const double lc = w.l1 + w.c1;
      const double coef = (w.rr + w.c1) - w.c1 * w.c1 / lc;
      const double rx = coef > 0 ? (k2 - w.c1 * k1 / lc) / coef : kInf;
      const double r0 = k1 / w.c1;
      const double rm = (w.mx - k1 / lc) * lc / w.l1;
      const double rb = std::min({rx, r0, rm});
      if (rb > c.ra) {
        c.rb = rb;
        c.sigma = w.l1 / lc;
        c.drop = w.c1 / lc;
      }
    }
  } else {
    const double lt = t >= w.l0 ? DivR(t - w.l0, w.l1, w.inv_l1) : 0.0;
    const double lcmp = DivR(t - w.c0, w.c1, w.inv_c1);
    c.local = std::max(0.0, std::min({w.pool, w.mx, lt, lcmp}));
    const double rt = t >= w.a ? DivR(t - w.a, w.rr, w.inv_rr) : 0.0;
    c.ra = std::max(0.0, std::min({rt, lcmp - c.local, w.mx - c.local}));
    c.rb = c.ra;
  }
  return c;
}

class Solver {
 public:
  Solver(const PlanRequest& req) : req_(req), n_(req.workers.size()), w_(n_), caps_(n_) {
    for (size_t i = 0; i < n_; ++i) {
      const WorkerInput& in = req.workers[i];
      const CostParams& c = in.cost;
      w_[i] = W{c.compute_fixed_ms,
                c.compute_per_sample_ms,
                c.local_fixed_ms,
                c.local_per_sample_ms,
                c.remote_fixed_ms,
                c.remote_per_sample_ms,
                c.uplink_per_sample_ms,
                static_cast<double>(in.local_available),
                static_cast<double>(in.min_batch),
                static_cast<double>(in.max_batch)};
      w_[i].Precompute();
    }
  }

  // Whether Σ b ≥ B is reachable at makespan t; when `lf`/`rf` are given,
  // fills a fractional allocation (local, remote per worker).
  bool Feasible(double t, std::vector<double>* lf = nullptr, std::vector<double>* rf = nullptr) {
    shortfall_ = kInf;
    const bool overlap = req_.overlap;
    double supply = 0, potential = 0;
    double base = 0;
    for (size_t i = 0; i < n_; ++i) {
      caps_[i] = CapacityAt(w_[i], t, overlap);
      if (!caps_[i].ok || caps_[i].max_b() < w_[i].mn - 1e-9) return false;
      own_[i] = std::min(DivR(t, w_[i].u, w_[i].inv_u), w_[i].pool - caps_[i].local);
      // What i could serve if it gave up local samples down to min_batch.
      pot_[i] = std::min(DivR(t, w_[i].u, w_[i].inv_u), w_[i].pool - std::min(caps_[i].local, w_[i].mn));
      supply += own_[i];
      potential += pot_[i];
      base += caps_[i].local;
    }
    // A worker cannot read remotely from itself: its remote ≤ the others' supply
    // (or, when that leaves it short of min_batch, their potential supply).
    for (size_t i = 0; i < n_; ++i) {
      Cap& c = caps_[i];
      double others = std::max(0.0, supply - own_[i]);
      if (c.local + std::min(c.ra, others) < w_[i].mn - 1e-9) others = std::max(others, potential - pot_[i]);
      c.ra = std::min(c.ra, others);
      c.rb = std::max(c.ra, std::min(c.rb, others));
      if (c.max_b() < w_[i].mn - 1e-9) return false;
    }
    if (lf) {
      lf->assign(n_, 0.0);
      rf->assign(n_, 0.0);
      for (size_t i = 0; i < n_; ++i) (*lf)[i] = caps_[i].local;
    }
    // min_batch first.
    used1_.assign(n_, 0.0);
    used2_.assign(n_, 0.0);
    for (size_t i = 0; i < n_; ++i) {
      const Cap& c = caps_[i];
      if (c.local >= w_[i].mn) continue;
      double need = w_[i].mn - c.local;
      used1_[i] = std::min(need, c.ra);
      need -= used1_[i];
      if (need > 0) used2_[i] = std::min(need / c.sigma, c.rb - c.ra);
      supply -= used1_[i] + used2_[i];
      base += used1_[i] + used2_[i] * c.sigma;
    }
    if (supply < -1e-9) {
      // Tight pool (loft-epoch's capped requests, the end of an epoch):
      // min_batch needs more remote samples than the workers' leftovers
      // supply. Workers that read nothing remotely give up local samples,
      // which their spare uplink then serves (batch stays ≥ min_batch).
      for (size_t j = 0; j < n_ && supply < -1e-9; ++j) {
        Cap& c = caps_[j];
        if (used1_[j] + used2_[j] > 0) continue;
        const double room = DivR(t, w_[j].u, w_[j].inv_u) - own_[j];
        const double give = std::min({-supply, room, c.local - w_[j].mn});
        if (give <= 0) continue;
        c.local -= give;
        own_[j] += give;
        supply += give;
        base -= give;
      }
      if (supply < -1e-9) return false;
      if (lf) {
        for (size_t i = 0; i < n_; ++i) (*lf)[i] = caps_[i].local;
      }
    }
    const double total = static_cast<double>(req_.global_batch);
    double demand = total - base;
    // Slope-1 segments, shared proportionally.
    if (demand > 0 && supply > 0) {
      double room = 0;
      for (size_t i = 0; i < n_; ++i) room += caps_[i].ra - used1_[i];
      const double take = std::min({room, supply, demand});
      if (take > 0) {
        const double frac = take / room;
        for (size_t i = 0; i < n_; ++i) used1_[i] += (caps_[i].ra - used1_[i]) * frac;
        supply -= take;
        demand -= take;
      }
    }
    // Trading segments by decreasing gain.
    if (demand > 1e-9 && supply > 0) {
      order_.clear();
      for (size_t i = 0; i < n_; ++i) {
        if (caps_[i].rb - caps_[i].ra - used2_[i] > 0) order_.push_back(i);
      }
      std::sort(order_.begin(), order_.end(), [&](size_t x, size_t y) {
        return caps_[x].sigma != caps_[y].sigma ? caps_[x].sigma > caps_[y].sigma : x < y;
      });
      for (size_t i : order_) {
        if (demand <= 0 || supply <= 0) break;
        const Cap& c = caps_[i];
        const double take = std::min({c.rb - c.ra - used2_[i], supply, demand / c.sigma});
        used2_[i] += take;
        supply -= take;
        demand -= take * c.sigma;
      }
    }
    if (lf) {
      for (size_t i = 0; i < n_; ++i) {
        (*rf)[i] = used1_[i] + used2_[i];
        (*lf)[i] = std::max(0.0, caps_[i].local - used2_[i] * caps_[i].drop);
      }
    }
    shortfall_ = std::max(0.0, demand);
    return demand <= 1e-6;
  }

  const std::vector<W>& workers() const { return w_; }
  // Samples short of B at the last infeasible T probed (∞ when min_batch
  // already failed there).
  double shortfall() const { return shortfall_; }

 private:
  const PlanRequest& req_;
  size_t n_;
  std::vector<W> w_;
  std::vector<Cap> caps_;
  std::vector<double> own_ = std::vector<double>(n_);
  std::vector<double> pot_ = std::vector<double>(n_);
  double shortfall_ = kInf;
  std::vector<double> used1_, used2_;
  std::vector<size_t> order_;
};

}  // namespace

StatusOr<Plan> RoundPlan(const PlanRequest& req, double t, const std::vector<double>& lf,
                         const std::vector<double>& rf, std::string_view name);

StatusOr<Plan> LoftPolicy::PlanIteration(const PlanRequest& req) {
  return PlanIteration(req, 0.0);
}

StatusOr<Plan> LoftPolicy::PlanIteration(const PlanRequest& req, double makespan_hint_ms) {
  LOFT_RETURN_IF_ERROR(ValidatePlanRequest(req));
  return PlanValidated(req, makespan_hint_ms);
}

namespace {
StatusOr<Plan> PlanPlain(const PlanRequest& req, double makespan_hint_ms, std::string_view name);
}  // namespace

StatusOr<Plan> LoftPolicy::PlanValidated(const PlanRequest& req, double makespan_hint_ms) {
  if (!req.coding.encoded) return PlanPlain(req, makespan_hint_ms, name());
  // Encoded samples (README-planning.md "Decode placement"): sizes for
  // decoding at the trainer (its decode folded into compute; with overlap
  // also into the reads), each followed by the placement choice; with
  // placement auto also sizes for the relaxed costs (each sample decoded
  // where it is cheapest). The plan of lowest makespan under the coded
  // model, the first on ties.
  LOFT_ASSIGN_OR_RETURN(Plan best, PlanPlain(FoldTrainerDecode(req, true), 0.0, name()));
  ChooseDecodePlacement(req, best);
  auto consider = [&](const PlanRequest& sizing) {
    StatusOr<Plan> alt = PlanPlain(sizing, 0.0, name());
    if (!alt.ok()) return;
    ChooseDecodePlacement(req, *alt);
    if (alt->makespan_ms < best.makespan_ms) best = std::move(*alt);
  };
  if (req.overlap) consider(FoldTrainerDecode(req, false));
  if (req.coding.placement == DecodePlacement::kAuto) consider(RelaxDecode(req));
  return best;
}

namespace {
StatusOr<Plan> PlanPlain(const PlanRequest& req, double makespan_hint_ms, std::string_view name) {
  const int64_t big_b = req.global_batch;
  int64_t pool_total = 0;
  for (const WorkerInput& w : req.workers) pool_total += w.local_available;
  if (pool_total < big_b) {
    return FailedPrecondition(
        fmt::format("loft: live workers cache {} unconsumed samples in total, fewer than global_batch {}",
                    pool_total, big_b));
  }
  Solver solver(req);
  double hi = 1.0;
  for (const W& w : solver.workers()) hi = std::max(hi, 2 * w.c0);
  if (makespan_hint_ms > 0) hi = makespan_hint_ms;
  double lo = 0;
  int doublings = 0;
  bool found = true;
  while (!solver.Feasible(hi)) {
    lo = hi;
    hi *= 2;
    if (++doublings > 200) {
      found = false;
      break;
    }
  }
  if (found) {
    // Safeguarded secant on the shortfall (samples short of B, decreasing
    // in T) through the last two infeasible probes, aimed just past its
    // root; bisection when there is no usable secant or after a few that
    // fell short. Same bracket invariant as plain bisection.
    double s_lo = kInf, t_prev = 0, s_prev = kInf;
    int short_secants = 0;
    while (hi - lo > 1e-6 * hi) {
      const double eps = 0.25e-6 * hi;
      double t = 0.5 * (lo + hi);
      bool secant = false;
      if (short_secants < 4 && s_lo < kInf && s_prev < kInf && s_prev > s_lo && lo > t_prev) {
        const double root = lo + s_lo * (lo - t_prev) / (s_prev - s_lo) + eps;
        if (root > lo && root < hi) t = root, secant = true;
      }
      if (solver.Feasible(t)) {
        hi = t;
        // A secant that lands just past the root: confirm from below.
        const double below = t - 2 * eps;
        if (secant && below > lo) {
          if (solver.Feasible(below)) {
            hi = below;
          } else {
            t_prev = lo, s_prev = s_lo;
            lo = below, s_lo = solver.shortfall();
          }
        }
      } else {
        t_prev = lo, s_prev = s_lo;
        lo = t, s_lo = solver.shortfall();
        if (secant) ++short_secants;
      }
    }
    std::vector<double> lf, rf;
    (void)solver.Feasible(hi, &lf, &rf);
    StatusOr<Plan> plan = RoundPlan(req, hi, lf, rf, name);
    if (plan.ok()) return plan;
  }
  // The capacity model lets every worker keep all its cached samples, so it
  // finds no makespan when some workers must give up local samples for
  // peers to reach min_batch (a tight pool near the epoch's end). Fallback
  // (README-planning.md "loft"): start from min_batch — local first, the
  // rest remote — and let the rounder add samples where the time is lowest.
  // Always succeeds when Σ min ≤ B ≤ Σ max and B ≤ Σ local_available.
  std::vector<double> lf(req.workers.size()), rf(req.workers.size());
  for (size_t i = 0; i < req.workers.size(); ++i) {
    const WorkerInput& w = req.workers[i];
    lf[i] = static_cast<double>(std::min(w.min_batch, w.local_available));
    rf[i] = static_cast<double>(w.min_batch) - lf[i];
  }
  return RoundPlan(req, 0.0, lf, rf, name);
}
}  // namespace

namespace {

// Integer plan from the fractional allocation at makespan `t` (loft.h step 2
// and 3): floor, assign the floored remote counts to peers (most spare
// samples first, within floor(t/up_j)), then add samples one at a time where
// the resulting time is lowest — a remote sample costs max(the worker's time,
// the chosen peer's uplink time after it) and comes from the peer whose
// uplink would finish first — or trim where the time is highest.
class Rounder {
 public:
  Rounder(const PlanRequest& req)
      : req_(req), n_(req.workers.size()), l_(n_), r_(n_), spare_(n_), served_(n_), from_(n_) {}

  StatusOr<Plan> Run(double t, const std::vector<double>& lf, const std::vector<double>& rf,
                     std::string_view name) {
    const int64_t big_b = req_.global_batch;
    int64_t sum = 0;
    std::vector<double> frac(n_);
    for (size_t i = 0; i < n_; ++i) {
      const WorkerInput& w = req_.workers[i];
      l_[i] = std::clamp<int64_t>(static_cast<int64_t>(std::floor(lf[i] + 1e-9)), 0,
                                  std::min(w.local_available, w.max_batch));
      const double bf = lf[i] + rf[i];
      int64_t b = static_cast<int64_t>(std::floor(bf + 1e-9));
      frac[i] = bf - static_cast<double>(b);
      b = std::clamp<int64_t>(b, std::max(l_[i], w.min_batch), w.max_batch);
      r_[i] = b - l_[i];
      sum += b;
    }
    // Largest remainder towards Σ = B: the fractional plan fits in t, so a
    // rounded-up worker is at most one sample over it.
    if (sum < big_b) {
      std::vector<size_t> order(n_);
      std::iota(order.begin(), order.end(), size_t{0});
      std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return frac[x] > frac[y]; });
      for (size_t i : order) {
        if (sum >= big_b) break;
        if (frac[i] <= 1e-9 || l_[i] + r_[i] >= req_.workers[i].max_batch) continue;
        // Local if the worker still has cached samples (no remote latency).
        ++(l_[i] < req_.workers[i].local_available ? l_[i] : r_[i]);
        ++sum;
      }
    }
    for (size_t i = 0; i < n_; ++i) spare_[i] = req_.workers[i].local_available - l_[i];
    AssignFloored(t);
    for (size_t j = 0; j < n_; ++j) peers_.emplace(Key(j), j);
    // Remote counts that did not fit the uplink budgets: cheapest peer each.
    for (size_t i = 0; i < n_; ++i) {
      while (pending_[i] > 0) {
        const size_t j = BestPeer(i);
        if (j < n_) {
          Take(i, j, 1);
          peers_.emplace(Key(j), j);
        } else if (spare_[i] > 0 && l_[i] < req_.workers[i].local_available) {
          ++l_[i];
          --spare_[i];
          --r_[i];
        } else {
          --r_[i];
          --sum;
        }
        --pending_[i];
      }
    }
    for (size_t i = 0; i < n_; ++i) {
      while (l_[i] + r_[i] < req_.workers[i].min_batch) {
        auto [cost, local] = BestAdd(i);
        if (cost >= kInf)
          return Internal(fmt::format("loft: cannot reach min_batch for node {}", req_.workers[i].node));
        Add(i, local);
        ++sum;
      }
    }
    using Item = std::pair<double, size_t>;
    if (sum < big_b) {
      std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
      for (size_t i = 0; i < n_; ++i) {
        const double cost = BestAdd(i).first;
        if (cost < kInf) heap.emplace(cost, i);
      }
      while (sum < big_b) {
        if (heap.empty())
          return FailedPrecondition("loft: not enough samples or batch room to reach global_batch");
        auto [cost, i] = heap.top();
        heap.pop();
        auto [now, local] = BestAdd(i);
        if (now >= kInf) continue;
        if (now > cost + 1e-12) {
          heap.emplace(now, i);
          continue;
        }
        Add(i, local);
        ++sum;
        const double next = BestAdd(i).first;
        if (next < kInf) heap.emplace(next, i);
      }
    } else if (sum > big_b) {
      std::priority_queue<Item> heap;  // largest time first
      for (size_t i = 0; i < n_; ++i) {
        if (l_[i] + r_[i] > req_.workers[i].min_batch) heap.emplace(Time(i, l_[i], r_[i]), i);
      }
      while (sum > big_b) {
        if (heap.empty()) return Internal("loft: cannot trim the plan to global_batch");
        auto [tm, i] = heap.top();
        heap.pop();
        if (l_[i] + r_[i] <= req_.workers[i].min_batch) continue;
        const double now = Time(i, l_[i], r_[i]);
        if (std::abs(now - tm) > 1e-12) {
          heap.emplace(now, i);
          continue;
        }
        const double drop_l = l_[i] > 0 ? Time(i, l_[i] - 1, r_[i]) : kInf;
        const double drop_r = r_[i] > 0 ? Time(i, l_[i], r_[i] - 1) : kInf;
        if (drop_r <= drop_l) {
          auto& back = from_[i].back();
          --served_[back.first];
          ++spare_[back.first];
          if (--back.second == 0) from_[i].pop_back();
          --r_[i];
        } else {
          --l_[i];
          ++spare_[i];
        }
        --sum;
        if (l_[i] + r_[i] > req_.workers[i].min_batch) heap.emplace(Time(i, l_[i], r_[i]), i);
      }
    }
    Improve();
    Plan plan;
    plan.policy = std::string(name);
    plan.workers.resize(n_);
    for (size_t i = 0; i < n_; ++i) {
      WorkerPlan& wp = plan.workers[i];
      wp.node = req_.workers[i].node;
      wp.local = l_[i];
      wp.remote = r_[i];
      wp.batch = l_[i] + r_[i];
      for (const auto& [j, count] : from_[i]) wp.remote_from.emplace_back(req_.workers[j].node, count);
    }
    EvaluateLocalityPlan(req_, plan);
    return plan;
  }

 private:
  double Time(size_t i, int64_t l, int64_t r) const {
    return PredictMs(req_.workers[i].cost, l, r, req_.overlap);
  }
  // Worker i's time including the busiest uplink among its peers.
  double FullTime(size_t i, int64_t l, int64_t r) const {
    double floor_ms = 0;
    for (const auto& [j, count] : from_[i]) {
      if (count > 0)
        floor_ms =
            std::max(floor_ms, static_cast<double>(served_[j]) * req_.workers[j].cost.uplink_per_sample_ms);
    }
    return PredictMsWithUplink(req_.workers[i].cost, static_cast<double>(l), static_cast<double>(r), floor_ms,
                               req_.overlap);
  }

  // Index in from_[i] of the peer whose uplink is busiest (the one to give
  // a remote sample back to).
  size_t BusiestSource(size_t i) const {
    size_t best = 0;
    double key = -1;
    for (size_t k = 0; k < from_[i].size(); ++k) {
      const size_t j = from_[i][k].first;
      const double v = static_cast<double>(served_[j]) * req_.workers[j].cost.uplink_per_sample_ms;
      if (v > key) key = v, best = k;
    }
    return best;
  }

  // Gives one of i's remote samples back to its busiest source; returns it.
  size_t ReturnRemote(size_t i) {
    const size_t k = BusiestSource(i);
    auto& src = from_[i][k];
    const size_t j = src.first;
    --served_[j];
    if (spare_[j]++ <= 0) peers_.emplace(Key(j), j);
    if (--src.second == 0) from_[i].erase(from_[i].begin() + static_cast<std::ptrdiff_t>(k));
    --r_[i];
    return j;
  }

  // Local search on the integer plan (README-planning.md "loft"): while the
  // slowest worker can be made faster — by reading one remote sample
  // locally instead, or by handing one sample (local or remote) to the
  // worker whose cheapest addition stays below the makespan — do it. Removes
  // rounding artefacts such as a single remote sample over a slow link that
  // costs the link's latency. Never increases the makespan: a move is taken
  // only when every time it changes ends below the current maximum.
  void Improve() {
    using Item = std::pair<double, size_t>;
    std::priority_queue<Item> slow;                                      // largest time first
    std::priority_queue<Item, std::vector<Item>, std::greater<>> cheap;  // cheapest addition first
    for (size_t i = 0; i < n_; ++i) {
      slow.emplace(FullTime(i, l_[i], r_[i]), i);
      const double add = BestAdd(i).first;
      if (add < kInf) cheap.emplace(add, i);
    }
    const size_t budget = 4 * n_ + 64;
    for (size_t move = 0; move < budget && !slow.empty(); ++move) {
      auto [key, i] = slow.top();
      slow.pop();
      const double m = FullTime(i, l_[i], r_[i]);
      if (std::abs(m - key) > 1e-12 * (1 + m)) {
        slow.emplace(m, i);
        continue;
      }
      const double below = m * (1 - 1e-9);
      const WorkerInput& w = req_.workers[i];
      // Read one remote sample locally instead (same batch, no receiver).
      if (r_[i] > 0 && l_[i] < w.local_available && spare_[i] > 0 && Time(i, l_[i] + 1, r_[i] - 1) < below) {
        (void)ReturnRemote(i);
        ++l_[i];
        --spare_[i];
        slow.emplace(FullTime(i, l_[i], r_[i]), i);
        continue;
      }
      if (l_[i] + r_[i] <= w.min_batch) break;
      // Hand one sample to the cheapest other worker.
      const double drop_l = l_[i] > 0 ? Time(i, l_[i] - 1, r_[i]) : kInf;
      const double drop_r = r_[i] > 0 ? Time(i, l_[i], r_[i] - 1) : kInf;
      const bool remote = drop_r <= drop_l;
      if (std::min(drop_l, drop_r) >= below) break;
      // Apply the drop first so the receiver may read from i's freed sample.
      if (remote) {
        // The source got a spare sample back: it may now add it locally
        // (its heap entry may be stale high).
        const size_t j = ReturnRemote(i);
        const double add = BestAdd(j).first;
        if (add < kInf) cheap.emplace(add, j);
      } else {
        --l_[i];
        if (spare_[i]++ <= 0) peers_.emplace(Key(i), i);
      }
      size_t k = n_;
      std::vector<Item> held;
      while (!cheap.empty()) {
        auto [c, x] = cheap.top();
        if (x == i) {
          held.push_back(cheap.top());
          cheap.pop();
          continue;
        }
        const double now = BestAdd(x).first;
        if (std::abs(now - c) > 1e-12 * (1 + now)) {
          cheap.pop();
          if (now < kInf) cheap.emplace(now, x);
          continue;
        }
        if (now < below) k = x;
        break;
      }
      for (const Item& h : held) cheap.push(h);
      if (k == n_ || FullTime(i, l_[i], r_[i]) >= below) {
        // Undo: no receiver below the makespan.
        if (remote) {
          const size_t j = BestPeer(i);
          if (j == n_) break;
          ++r_[i];
          Take(i, j, 1);
          peers_.emplace(Key(j), j);
        } else {
          ++l_[i];
          --spare_[i];
        }
        break;
      }
      Add(k, BestAdd(k).second);
      slow.emplace(FullTime(i, l_[i], r_[i]), i);
      slow.emplace(FullTime(k, l_[k], r_[k]), k);
      for (size_t x : {i, k}) {
        const double add = BestAdd(x).first;
        if (add < kInf) cheap.emplace(add, x);
      }
    }
  }

  double Key(size_t j) const {
    return static_cast<double>(served_[j] + 1) * req_.workers[j].cost.uplink_per_sample_ms;
  }

  void Take(size_t i, size_t j, int64_t count) {
    served_[j] += count;
    spare_[j] -= count;
    if (!from_[i].empty() && from_[i].back().first == j) {
      from_[i].back().second += count;
    } else {
      from_[i].emplace_back(j, count);
    }
  }

  // Floored remote counts: peers with the most spare samples first, each
  // within its uplink budget at t; what does not fit goes through BestPeer.
  void AssignFloored(double t) {
    std::vector<size_t> order;
    std::vector<int64_t> budget(n_);
    for (size_t j = 0; j < n_; ++j) {
      const double u = req_.workers[j].cost.uplink_per_sample_ms;
      const double up = u > 0 ? std::floor(t * (1 + 1e-9) / u) : 9e18;
      budget[j] = std::min<int64_t>(spare_[j], static_cast<int64_t>(std::min(up, 9e18)));
      if (budget[j] > 0) order.push_back(j);
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return spare_[x] > spare_[y]; });
    std::vector<int64_t> need(r_);
    size_t ptr = 0;
    for (size_t i = 0; i < n_; ++i) {
      size_t k = ptr;
      while (need[i] > 0 && k < order.size()) {
        const size_t j = order[k];
        if (budget[j] == 0) {
          if (k == ptr) ++ptr;
          ++k;
          continue;
        }
        if (j == i) {
          ++k;
          continue;
        }
        const int64_t take = std::min(need[i], budget[j]);
        budget[j] -= take;
        need[i] -= take;
        Take(i, j, take);
      }
    }
    pending_ = std::move(need);
  }

  // Peer whose uplink would finish first after one more sample, ≠ exclude,
  // with spare samples; n_ if none.
  size_t BestPeer(size_t exclude) {
    std::vector<std::pair<double, size_t>> held;
    size_t best = n_;
    while (!peers_.empty()) {
      auto [key, j] = peers_.top();
      if (spare_[j] <= 0) {
        peers_.pop();
        continue;
      }
      if (key != Key(j)) {
        peers_.pop();
        peers_.emplace(Key(j), j);
        continue;
      }
      if (j == exclude) {
        held.emplace_back(key, j);
        peers_.pop();
        continue;
      }
      best = j;
      break;
    }
    for (auto& h : held) peers_.push(h);
    return best;
  }

  // {cost, local?} of the cheapest one-sample addition to worker i.
  std::pair<double, bool> BestAdd(size_t i) {
    const WorkerInput& w = req_.workers[i];
    std::pair<double, bool> best{kInf, true};
    if (l_[i] + r_[i] >= w.max_batch) return best;
    if (l_[i] < w.local_available && spare_[i] > 0) best = {Time(i, l_[i] + 1, r_[i]), true};
    const size_t j = BestPeer(i);
    if (j < n_) {
      const double cost = std::max(Time(i, l_[i], r_[i] + 1), Key(j));
      if (cost < best.first) best = {cost, false};
    }
    return best;
  }

  void Add(size_t i, bool local) {
    if (local) {
      ++l_[i];
      --spare_[i];
    } else {
      const size_t j = BestPeer(i);
      ++r_[i];
      Take(i, j, 1);
      peers_.emplace(Key(j), j);
    }
  }

  const PlanRequest& req_;
  size_t n_;
  std::vector<int64_t> l_, r_, spare_, served_, pending_;
  std::vector<std::vector<std::pair<size_t, int64_t>>> from_;
  std::priority_queue<std::pair<double, size_t>, std::vector<std::pair<double, size_t>>, std::greater<>>
      peers_;
};

}  // namespace

StatusOr<Plan> RoundPlan(const PlanRequest& req, double t, const std::vector<double>& lf,
                         const std::vector<double>& rf, std::string_view name) {
  Rounder rounder(req);
  return rounder.Run(t, lf, rf, name);
}

}  // namespace loft::sched
