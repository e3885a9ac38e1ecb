#include "scheduler/assigner.h"

#include <algorithm>
#include <functional>
#include <string>

namespace loft::sched {

namespace {
bool Listed(const std::vector<int32_t>& sorted, int32_t node) {
  return std::binary_search(sorted.begin(), sorted.end(), node);
}
}  // namespace

void Assigner::SpreadReported(Assignment& a, const std::vector<int64_t>& max_batch,
                              const Placement& placement, const std::vector<bool>& live,
                              const std::vector<bool>& distrusted, const SampleQuarantine& suspects) {
  const bool any_distrusted = std::find(distrusted.begin(), distrusted.end(), true) != distrusted.end();
  auto trusted = [&](int32_t n) { return !any_distrusted || !distrusted[n]; };
  // May `self` read `id`: it holds it, or a live trusted node does.
  auto can_read = [&](uint64_t id, int32_t self) {
    for (int32_t h : placement.Holders(id)) {
      if (live[h] && (h == self || trusted(h))) return true;
    }
    return false;
  };
  // The source for `self` reading `id`: its own copy, else the first live
  // trusted holder; either avoiding copies already reported where possible.
  auto source = [&](uint64_t id, int32_t self) {
    const SampleQuarantine::Pending* p = suspects.pending(id);
    int32_t any = -1;
    if (placement.Holds(self, id)) {
      if (p == nullptr || !Listed(p->holders, self)) return self;
      any = self;
    }
    for (int32_t h : placement.Holders(id)) {
      if (h == self || !live[h] || !trusted(h)) continue;
      if (p == nullptr || !Listed(p->holders, h)) return h;
      if (any < 0) any = h;
    }
    return any;
  };
  // 1. A worker that reported a sample hands it to one that has not (and
  //    can read it) for a sample it can read and has not reported.
  for (AssignedWorker& w : a.workers) {
    for (size_t k = 0; k < w.sample_ids.size(); ++k) {
      const uint64_t id = w.sample_ids[k];
      const SampleQuarantine::Pending* p = suspects.pending(id);
      if (p == nullptr || !Listed(p->reporters, w.node)) continue;
      bool swapped = false;
      for (AssignedWorker& v : a.workers) {
        if (swapped) break;
        if (&v == &w || Listed(p->reporters, v.node) || !can_read(id, v.node)) continue;
        for (size_t j = 0; j < v.sample_ids.size(); ++j) {
          const uint64_t t = v.sample_ids[j];
          const SampleQuarantine::Pending* q = suspects.pending(t);
          if ((q != nullptr && Listed(q->reporters, w.node)) || !can_read(t, w.node)) continue;
          std::swap(w.sample_ids[k], v.sample_ids[j]);
          w.sources[k] = source(t, w.node);
          v.sources[j] = source(id, v.node);
          swapped = true;
          break;
        }
      }
      if (swapped) continue;
      // Nothing to swap with (e.g. a retry alone at an epoch's end): move it
      // to the least loaded worker that has not reported it and has room.
      AssignedWorker* to = nullptr;
      for (size_t x = 0; x < a.workers.size(); ++x) {
        AssignedWorker& v = a.workers[x];
        if (&v == &w || Listed(p->reporters, v.node) || !can_read(id, v.node) ||
            static_cast<int64_t>(v.sample_ids.size()) >= max_batch[x])
          continue;
        if (to == nullptr || v.sample_ids.size() < to->sample_ids.size()) to = &v;
      }
      if (to == nullptr) continue;
      to->sample_ids.push_back(id);
      to->sources.push_back(source(id, to->node));
      w.sample_ids.erase(w.sample_ids.begin() + static_cast<std::ptrdiff_t>(k));
      w.sources.erase(w.sources.begin() + static_cast<std::ptrdiff_t>(k));
      --k;  // the next sample moved into slot k
    }
  }
  // 2. Every reported sample is read from a copy nobody reported where a
  //    live one is readable.
  for (AssignedWorker& w : a.workers) {
    for (size_t k = 0; k < w.sample_ids.size(); ++k) {
      const SampleQuarantine::Pending* p = suspects.pending(w.sample_ids[k]);
      if (p != nullptr && Listed(p->holders, w.sources[k])) w.sources[k] = source(w.sample_ids[k], w.node);
    }
  }
}

StatusOr<Assignment> Assigner::Assign(const Plan& plan, const PlanRequest& request, bool locality_aware,
                                      const Placement& placement, const std::vector<bool>& live,
                                      EpochSampler& sampler, const std::vector<bool>& distrusted,
                                      const SampleQuarantine* suspects) {
  const int nodes = placement.num_nodes();
  if (static_cast<int>(live.size()) != nodes) {
    return InvalidArgument("assign: live mask has " + std::to_string(live.size()) +
                           " entries, placement has " + std::to_string(nodes) + " nodes");
  }
  // Validate the whole plan before taking anything.
  std::vector<int> request_index(nodes, -1);  // node -> index in request.workers
  for (size_t k = 0; k < request.workers.size(); ++k) {
    const int32_t n = request.workers[k].node;
    if (n >= 0 && n < nodes) request_index[n] = static_cast<int>(k);
  }
  std::vector<int> cost_index(plan.workers.size(), -1);
  for (size_t w = 0; w < plan.workers.size(); ++w) {
    const WorkerPlan& wp = plan.workers[w];
    if (wp.node >= 0 && wp.node < nodes) cost_index[w] = request_index[wp.node];
    if (cost_index[w] < 0 || wp.node < 0 || wp.node >= nodes) {
      return InvalidArgument("assign: plan worker node " + std::to_string(wp.node) +
                             " is not in the request");
    }
    if (wp.batch < 0 || wp.local < 0 || wp.remote < 0) {
      return InvalidArgument("assign: plan worker node " + std::to_string(wp.node) + " has a negative count");
    }
    for (const auto& [peer, count] : wp.remote_from) {
      if (peer < 0 || peer >= nodes || count < 0) {
        return InvalidArgument("assign: plan worker node " + std::to_string(wp.node) + " remote_from (" +
                               std::to_string(peer) + ", " + std::to_string(count) + ") is invalid");
      }
    }
  }

  if (!distrusted.empty() && static_cast<int>(distrusted.size()) != nodes) {
    return InvalidArgument("assign: distrusted mask has " + std::to_string(distrusted.size()) +
                           " entries, placement has " + std::to_string(nodes) + " nodes");
  }
  const bool any_distrusted = std::find(distrusted.begin(), distrusted.end(), true) != distrusted.end();
  auto trusted = [&](int32_t n) { return !any_distrusted || !distrusted[n]; };

  std::vector<int64_t> served(nodes, 0);
  const bool all_live = std::find(live.begin(), live.end(), false) == live.end();
  std::function<bool(uint64_t)> assignable;  // empty: every sample (all nodes live)
  if (!all_live) {
    assignable = [&](uint64_t id) {
      for (int32_t h : placement.Holders(id)) {
        if (live[h]) return true;
      }
      return false;
    };
  }
  // With distrusted nodes: may `self` read `id` (it holds it, or a live
  // trusted node does)?
  auto readable_by = [&](uint64_t id, int32_t self) {
    for (int32_t h : placement.Holders(id)) {
      if (live[h] && (h == self || !distrusted[h])) return true;
    }
    return false;
  };
  const bool single = placement.replication() == 1;
  auto source_for = [&](uint64_t id, int32_t self, int32_t primary) {
    // One replica: the only holder (live, or the sample would not have
    // been assignable), which is `self` when the worker holds it.
    if (single) return primary;
    if (placement.Holds(self, id)) return self;
    int32_t best = -1;
    for (int32_t h : placement.Holders(id)) {
      if (!live[h] || !trusted(h)) continue;
      if (best < 0 || sampler.available(h) > sampler.available(best) ||
          (sampler.available(h) == sampler.available(best) &&
           (served[h] < served[best] || (served[h] == served[best] && h < best)))) {
        best = h;
      }
    }
    return best;
  };

  Assignment out;
  out.workers.reserve(plan.workers.size());
  std::vector<uint64_t> tmp;
  std::vector<int32_t> primaries;
  for (size_t w = 0; w < plan.workers.size(); ++w) {
    const WorkerPlan& wp = plan.workers[w];
    AssignedWorker aw;
    aw.node = wp.node;
    aw.planned_batch = wp.batch;
    aw.decoded_from = wp.decoded_from;
    aw.sample_ids.reserve(static_cast<size_t>(wp.batch));
    aw.sources.reserve(static_cast<size_t>(wp.batch));
    auto add = [&](uint64_t id, int32_t src) {
      aw.sample_ids.push_back(id);
      aw.sources.push_back(src);
      if (src != wp.node) ++served[src];
    };
    int64_t got = 0;
    if (locality_aware) {
      // Taken ids go straight into the worker's list; their sources are
      // the node they were taken from.
      got += sampler.TakeHeldBy(wp.node, std::min(wp.local, wp.batch), aw.sample_ids);
      aw.sources.resize(aw.sample_ids.size(), wp.node);
      for (const auto& [peer, count] : wp.remote_from) {
        if (peer == wp.node || !live[peer] || !trusted(peer) || got >= wp.batch) continue;
        const int64_t n = sampler.TakeHeldBy(peer, std::min(count, wp.batch - got), aw.sample_ids);
        got += n;
        aw.sources.resize(aw.sample_ids.size(), peer);
        served[peer] += n;
      }
    }
    if (!locality_aware && !trusted(wp.node)) {
      got += sampler.TakeHeldBy(wp.node, wp.batch, aw.sample_ids);
      aw.sources.resize(aw.sample_ids.size(), wp.node);
    }
    if (got < wp.batch) {
      tmp.clear();
      primaries.clear();
      std::function<bool(uint64_t)> worker_assignable;
      if (any_distrusted) {
        const int32_t self = wp.node;
        worker_assignable = [&, self](uint64_t id) { return readable_by(id, self); };
      }
      const int64_t n = sampler.TakeInOrder(wp.batch - got, any_distrusted ? worker_assignable : assignable,
                                            tmp, &primaries);
      got += n;
      if (locality_aware) out.locality_fallbacks += n;
      for (size_t k = 0; k < tmp.size(); ++k) add(tmp[k], source_for(tmp[k], wp.node, primaries[k]));
    }
    out.planned += wp.batch;
    out.assigned += got;
    out.workers.push_back(std::move(aw));
  }
  if (suspects != nullptr && suspects->any_pending()) {
    std::vector<int64_t> max_batch;
    for (size_t w = 0; w < out.workers.size(); ++w)
      max_batch.push_back(request.workers[cost_index[w]].max_batch);
    SpreadReported(out, max_batch, placement, live, any_distrusted ? distrusted : std::vector<bool>{},
                   *suspects);
  }
  for (size_t w = 0; w < out.workers.size(); ++w) {
    AssignedWorker& aw = out.workers[w];
    for (int32_t s : aw.sources) (s == aw.node ? aw.local : aw.remote)++;
    aw.predicted_ms = aw.sample_ids.empty()
                          ? 0.0
                          : PredictMsDecodingAtTrainer(request.workers[cost_index[w]].cost,
                                                       request.workers[cost_index[w]].decode, request.coding,
                                                       aw.local, aw.remote, request.overlap);
    out.makespan_ms = std::max(out.makespan_ms, aw.predicted_ms);
  }
  return out;
}

}  // namespace loft::sched
