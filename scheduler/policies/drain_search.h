// Local search on a loft-epoch plan whose per-node drains are fixed
// (README-planning.md "loft-epoch"): every node j must give up exactly
// local_j + served_j samples this iteration, so the only freedom left is
// who reads a served sample and whether a node reads its own samples
// locally or ships them. loft's own local search works on the request's
// pools and cannot see these moves; in a tight pool its rounding can leave
// one serving uplink or one slow worker a whole sample above the
// stationary makespan. Moves (all keep every drain, Σ batch = B and
// min/max_batch): the slowest worker i hands one remote sample back to its
// holder (read locally there) or to another reader, or ships one of its
// local samples to another worker; when i is held up by a peer's uplink,
// one sample that peer serves is read by the peer itself instead. Moves
// of q samples at once, q halving from B/(2N) to 1; steepest descent on
// (makespan, number of workers at it), at most 4N + 64 moves per q; never
// raises the makespan. Full re-evaluation per candidate (O(N²)), so
// only for plans of up to kDrainSearchMaxWorkers workers.
// Not responsible for: choosing the drains (loft-epoch), sample ids.
// Thread-safety: pure function.
#pragma once

#include <cstddef>

#include "scheduler/plan.h"

namespace loft::sched {

inline constexpr size_t kDrainSearchMaxWorkers = 32;

// `plan` is parallel to `req.workers`, valid for req (remote_from names
// live peers other than the reader). Rewrites batch/local/remote/
// remote_from of the improved plan and re-evaluates it
// (EvaluateLocalityPlan). No-op above kDrainSearchMaxWorkers workers.
void ImproveFixedDrainPlan(const PlanRequest& req, Plan& plan);

}  // namespace loft::sched
