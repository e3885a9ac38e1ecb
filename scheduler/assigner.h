// Assigner: turns a Plan (sizes, and for locality-aware policies the
// local/remote split) into concrete sample ids with a source node each.
//
// Locality-aware plans (Policy::locality_aware()), per worker in plan
// order:
//   1. take `local` pooled samples the worker holds (smallest epoch
//      position first);
//   2. for each (peer, count) of remote_from: take `count` pooled samples
//      that live peer holds, source = peer;
//   3. shortfall (replicas already taken by an earlier worker, a dead or
//      exhausted peer): fill from the epoch's global order; source = the
//      worker itself if it holds the sample, else the best live holder.
// Global-shuffle plans: each worker takes the next `batch` assignable
// samples of the epoch's permutation order; source = itself if it holds
// the sample, else the best live holder.
// "Best live holder" = the live holder with the most pooled samples
// (EpochSampler::available), then the one serving fewest samples in this
// assignment so far, then the lowest node index.
//
// Distrusted sources (SourceDistrusted in state.proto): a node
// marked in `distrusted` serves nobody but itself. Another worker reads a
// sample it holds only from another live, trusted holder (remote_from
// entries naming it are skipped and filled by step 3); a sample whose only
// live holders are distrusted is assignable only to those holders. A
// distrusted worker of a global-shuffle plan takes the samples it holds
// first (nobody else may read those it alone holds), then the global order.
// An empty mask (the default) means every node is trusted.
//
// Reported samples (`suspects`, scheduler/quarantine.h; null or nothing
// pending = none): after the steps above, a worker holding a sample it has
// itself reported bad swaps it with a sample of another worker that has
// not reported it and can read it (the sample it gets back is one it can
// read and has not reported); with no such sample to swap (a retry alone at
// an epoch's end) the sample moves to the least loaded such worker below
// its max_batch (that worker's size grows by one, the reporter's shrinks).
// And a reported sample is read from a live
// holder whose copy nobody reported where one is readable (the worker's
// own copy first). So one worker naming its samples bad cannot keep them
// to itself, a reported holder's copy is read again only when it is the
// last one, and a genuinely corrupt record gathers reports from distinct
// workers.
//
// Dead holders: a pooled sample whose holders are all dead is not
// assignable; it stays pooled (never lost) and becomes assignable again
// when a holder is live. At an epoch's end the plan may ask for more than
// is assignable: each worker gets what is left in plan order (the last
// iteration of an epoch is smaller; no top-up from the next epoch, so
// exactly-once per epoch holds trivially). Shortfalls are reported.
//
// The Assigner takes samples from the sampler (they become "taken"); the
// caller may Untake them (SchedulerState plans as a dry run and commits
// the result through Apply).
// Not responsible for: sizes (Policy), lineage (Ledger), liveness tracking.
// Thread-safety: stateless; the sampler it is given is not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/placement.h"
#include "core/status.h"
#include "scheduler/epoch_sampler.h"
#include "scheduler/plan.h"
#include "scheduler/quarantine.h"

namespace loft::sched {

struct AssignedWorker {
  int32_t node = 0;
  std::vector<uint64_t> sample_ids;
  std::vector<int32_t> sources;  // serving node per sample, parallel to sample_ids
  int64_t planned_batch = 0;     // what the plan asked for
  int64_t local = 0;             // actual: sources[k] == node
  int64_t remote = 0;            // actual: sources[k] != node
  double predicted_ms = 0;       // PredictMs(cost, local, remote, overlap)
  // The plan's WorkerPlan::decoded_from: serving nodes that decode for it.
  std::vector<int32_t> decoded_from;
  int64_t shortfall() const { return planned_batch - static_cast<int64_t>(sample_ids.size()); }
};

struct Assignment {
  std::vector<AssignedWorker> workers;  // parallel to plan.workers
  int64_t planned = 0;                  // Σ plan batch
  int64_t assigned = 0;                 // Σ samples assigned
  int64_t locality_fallbacks = 0;       // samples filled by step 3 (locality-aware only)
  double makespan_ms = 0;               // max predicted_ms
};

class Assigner {
 public:
  // `live[node]` tells which nodes may serve (size = placement nodes).
  // `request` supplies each worker's cost (matched by node) and overlap.
  // Errors: a plan worker not in the request, a negative count, a
  // remote_from peer out of range.
  static StatusOr<Assignment> Assign(const Plan& plan, const PlanRequest& request, bool locality_aware,
                                     const Placement& placement, const std::vector<bool>& live,
                                     EpochSampler& sampler, const std::vector<bool>& distrusted = {},
                                     const SampleQuarantine* suspects = nullptr);

 private:
  // The "Reported samples" step on a finished assignment (sources and
  // ids only; the counts are computed after it).
  // max_batch: each assigned worker's (parallel to a.workers).
  static void SpreadReported(Assignment& a, const std::vector<int64_t>& max_batch, const Placement& placement,
                             const std::vector<bool>& live, const std::vector<bool>& distrusted,
                             const SampleQuarantine& suspects);
};

}  // namespace loft::sched
