#include "scheduler/policies/drain_search.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace loft::sched {
namespace {

struct Score {
  double makespan = 0;
  int critical = 0;
  size_t slowest = 0;
  bool BetterThan(const Score& o) const {
    if (makespan < o.makespan * (1 - 1e-12) - 1e-12) return true;
    return makespan <= o.makespan * (1 + 1e-12) + 1e-12 && critical < o.critical;
  }
};

class DrainState {
 public:
  DrainState(const PlanRequest& req, const Plan& plan) : req_(req), n_(req.workers.size()) {
    std::unordered_map<int32_t, size_t> index;
    for (size_t i = 0; i < n_; ++i) index[req.workers[i].node] = i;
    local_.resize(n_);
    flow_.assign(n_ * n_, 0);
    for (size_t i = 0; i < n_; ++i) {
      local_[i] = plan.workers[i].local;
      for (const auto& [peer, count] : plan.workers[i].remote_from) flow_[i * n_ + index.at(peer)] += count;
    }
    remote_.assign(n_, 0);
    served_.assign(n_, 0);
    for (size_t i = 0; i < n_; ++i) {
      for (size_t j = 0; j < n_; ++j) {
        remote_[i] += flow_[i * n_ + j];
        served_[j] += flow_[i * n_ + j];
      }
    }
    times_.resize(n_);
  }

  Score Evaluate() {
    Score s;
    for (size_t i = 0; i < n_; ++i) {
      double floor_ms = 0;
      if (remote_[i] > 0) {
        for (size_t j = 0; j < n_; ++j) {
          if (flow_[i * n_ + j] > 0)
            floor_ms = std::max(floor_ms, static_cast<double>(served_[j]) * Cost(j).uplink_per_sample_ms);
        }
      }
      times_[i] = PredictMsWithUplink(Cost(i), static_cast<double>(local_[i]),
                                      static_cast<double>(remote_[i]), floor_ms, req_.overlap);
      if (times_[i] > s.makespan) s.makespan = times_[i], s.slowest = i;
    }
    for (size_t i = 0; i < n_; ++i) s.critical += times_[i] >= s.makespan * (1 - 1e-12) - 1e-12 ? 1 : 0;
    return s;
  }

  // Candidate moves around the slowest worker; applies the best one that
  // improves `cur`. Returns whether one was applied.
  bool Step(Score& cur, int64_t q) {
    const size_t i = cur.slowest;
    Score best = cur;
    Move best_move;
    auto consider = [&](const Move& m) {
      if (!Apply(m, q)) return;
      const Score s = Evaluate();
      Apply(m, -q);
      if (s.BetterThan(best)) best = s, best_move = m;
    };
    // The uplink that holds i up, if any.
    size_t bottleneck = n_;
    double own = PredictMsWithUplink(Cost(i), static_cast<double>(local_[i]), static_cast<double>(remote_[i]),
                                     0, req_.overlap);
    double worst_up = own;
    for (size_t j = 0; j < n_ && remote_[i] > 0; ++j) {
      const double up = static_cast<double>(served_[j]) * Cost(j).uplink_per_sample_ms;
      if (flow_[i * n_ + j] > 0 && up > worst_up) worst_up = up, bottleneck = j;
    }
    for (size_t j = 0; j < n_; ++j) {
      if (flow_[i * n_ + j] > 0) {
        consider(Move{i, j, j});  // i's sample from j read by j itself
        for (size_t k = 0; k < n_; ++k) {
          if (k != i && k != j) consider(Move{i, j, k});  // read by k instead
        }
      }
    }
    if (local_[i] > 0) {
      for (size_t k = 0; k < n_; ++k) {
        if (k != i) consider(Move{i, i, k});  // i's local sample shipped to k
      }
    }
    if (bottleneck < n_) {
      for (size_t k = 0; k < n_; ++k) {
        if (flow_[k * n_ + bottleneck] > 0) consider(Move{k, bottleneck, bottleneck});
      }
    }
    if (!best.BetterThan(cur)) return false;
    Apply(best_move, q);
    cur = Evaluate();
    return true;
  }

  void WriteBack(Plan& plan) const {
    for (size_t i = 0; i < n_; ++i) {
      WorkerPlan& wp = plan.workers[i];
      wp.local = local_[i];
      wp.remote = remote_[i];
      wp.batch = local_[i] + remote_[i];
      wp.remote_from.clear();
      for (size_t j = 0; j < n_; ++j) {
        if (flow_[i * n_ + j] > 0) wp.remote_from.emplace_back(req_.workers[j].node, flow_[i * n_ + j]);
      }
    }
  }

 private:
  // One sample that `from` consumes from `holder` (holder == from: a local
  // sample) is consumed by `to` instead (to == holder: read locally).
  struct Move {
    size_t from = 0, holder = 0, to = 0;
  };

  const CostParams& Cost(size_t i) const { return req_.workers[i].cost; }

  // Moves d > 0 samples; −d reverts (always valid after a successful d).
  bool Apply(const Move& m, int64_t d) {
    if (d > 0) {
      const WorkerInput& f = req_.workers[m.from];
      const WorkerInput& t = req_.workers[m.to];
      if (local_[m.from] + remote_[m.from] - d < f.min_batch) return false;
      if (local_[m.to] + remote_[m.to] + d > t.max_batch) return false;
      if ((m.from == m.holder ? local_[m.from] : flow_[m.from * n_ + m.holder]) < d) return false;
    }
    if (m.from == m.holder) {
      local_[m.from] -= d;
    } else {
      flow_[m.from * n_ + m.holder] -= d;
      remote_[m.from] -= d;
      served_[m.holder] -= d;
    }
    if (m.to == m.holder) {
      local_[m.to] += d;
    } else {
      flow_[m.to * n_ + m.holder] += d;
      remote_[m.to] += d;
      served_[m.holder] += d;
    }
    return true;
  }

  const PlanRequest& req_;
  size_t n_;
  std::vector<int64_t> local_, remote_, served_, flow_;
  std::vector<double> times_;
};

}  // namespace

void ImproveFixedDrainPlan(const PlanRequest& req, Plan& plan) {
  const size_t n = req.workers.size();
  if (n < 2 || n > kDrainSearchMaxWorkers || plan.workers.size() != n) return;
  DrainState state(req, plan);
  Score cur = state.Evaluate();
  const int max_moves = 4 * static_cast<int>(n) + 64;
  bool moved = false;
  // Moves of q samples, q halving from B/(2N) to 1 (a plan far from
  // balance needs ~B/N single-sample moves).
  for (int64_t q = std::max<int64_t>(1, req.global_batch / (2 * static_cast<int64_t>(n)));; q /= 2) {
    for (int k = 0; k < max_moves && state.Step(cur, q); ++k) moved = true;
    if (q == 1) break;
  }
  if (!moved) return;
  state.WriteBack(plan);
  EvaluateLocalityPlan(req, plan);
}

}  // namespace loft::sched
