// Planner data model shared by every policy, the assigner, the scheduler
// state, the simulator, the daemons and the C API. Pure data + pure
// functions: no sockets, no threads, no clock reads.
//
// Cost model (DESIGN.md "Planning"; a contract: with the spec's priors a
// plan's predicted_ms follows it exactly). Per worker, s = sample bytes:
//   compute      Tc(b) = c0 + c1·b
//   local read   Tl(l) = l0 + l·s/disk      (0 when l = 0)
//   remote read  Tr(r) = a + r·s/down       (0 when r = 0)
//   read         Tread = max(Tl, Tr)        (local and remote run concurrently)
//   iteration    T = Tread + Tc, or max(Tread, Tc) when overlap
//   serving peer j: Σ_i r_ij·s/up_j ≤ T (its uplink carries what it serves)
// Spec priors: c0 = compute.fixed_ms, c1 = compute.per_sample_ms, l0 = 0,
// s/disk = s·8/(disk.read_mbps·1000) ms, a = link.latency_ms,
// s/down = s·8/(link.down_mbps·1000) ms, s/up = s·8/(link.up_mbps·1000) ms.
//
// Encoded samples (PlanRequest::coding.encoded; dataset.encoding: jpeg;
// README-planning.md "Decode placement"). s is then the mean stored
// (encoded) record, so l1, r1 and u above are per encoded sample; a
// decoded sample on the wire weighs ρ = decoded_bytes/encoded_bytes of
// them. δ_k = decode.per_sample_ms + decode.per_kb_ms·s/1024 is node k's
// decode CPU per sample. For each (holder j, trainer i) pair the plan says
// whether j's samples travel encoded (the trainer decodes them) or decoded
// (j decodes them before it sends; WorkerPlan::decoded_from). For worker i
// with l local samples, R^e encoded and R^d decoded remote samples, and
// S^d_i decoded samples it serves to others:
//   remote read  Tr = a + (R^e + ρ·R^d)·r1            (0 when R^e+R^d = 0)
//   decode       D  = δ_i·(l + R^e) + δ_i·S^d_i       (its reader thread and CPU)
//   read stage   Tread = max(Tl, Tr) + D
//   serving peer j: U_j = δ_j·S^d_j + (S^e_j + ρ·S^d_j)·u_j, a floor for
//   every worker it serves
// With coding.encoded false nothing of this applies: the model above,
// bit for bit.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/cluster_spec.h"
#include "core/status.h"

namespace loft::sched {

// All in milliseconds.
struct CostParams {
  double compute_fixed_ms = 0;       // c0
  double compute_per_sample_ms = 0;  // c1
  double local_fixed_ms = 0;         // l0
  double local_per_sample_ms = 0;    // s/disk
  double remote_fixed_ms = 0;        // a
  double remote_per_sample_ms = 0;   // s/down
  double uplink_per_sample_ms = 0;   // s/up, as a serving peer
};

// The cluster spec's prior for node `node` (formulas above; s is
// SampleWireBytes(spec)).
CostParams PriorFromSpec(const ClusterSpec& spec, int node);

// A node's decode law: δ(sample of k KB) = per_sample_ms + per_kb_ms·k.
struct DecodeCost {
  double per_sample_ms = 0;
  double per_kb_ms = 0;
};

// Where remote encoded samples are decoded. kTrainer: always by the worker
// that trains on them (what agents do today). kAuto: the planner chooses
// per (holder, trainer) pair (ChooseDecodePlacement).
enum class DecodePlacement { kTrainer, kAuto };

// How samples are stored and moved (PlanRequest::coding).
struct SampleCoding {
  bool encoded = false;      // false: raw samples, no decode terms (the default)
  double encoded_bytes = 0;  // mean bytes of a stored record (s); > 0 when encoded
  double decoded_bytes = 0;  // bytes of one decoded sample on the wire; > 0 when encoded
  DecodePlacement placement = DecodePlacement::kTrainer;
  // ρ: a decoded sample's link cost in encoded samples.
  double ratio() const { return encoded_bytes > 0 ? decoded_bytes / encoded_bytes : 1.0; }
};

// s = SampleWireBytes(spec) and the decoded form DecodedWireBytes(spec)
// are in core/cluster_spec.h (loft-sim charges the same bytes).
// The spec's coding: encoded with jpeg (encoded_bytes = SampleWireBytes,
// decoded_bytes = DecodedWireBytes, placement = dataset.decode_placement),
// else the raw default.
SampleCoding CodingFromSpec(const ClusterSpec& spec);
// Node `node`'s decode prior: nodes[].decode, divided by compute.cpu_cores
// when the node has a quota below one core (a quota node decodes slower).
// Zero with encoding raw.
DecodeCost DecodePriorFromSpec(const ClusterSpec& spec, int node);
// δ: ms to decode one sample of `encoded_bytes`.
double DecodeMsPerSample(const DecodeCost& d, double encoded_bytes);

double ComputeMs(const CostParams& c, int64_t batch);
double LocalReadMs(const CostParams& c, int64_t local);
double RemoteReadMs(const CostParams& c, int64_t remote);
// Iteration time of a worker reading `local` samples from its cache and
// `remote` from peers, computing on local + remote.
double PredictMs(const CostParams& c, int64_t local, int64_t remote, bool overlap);

// PredictMs with encoded samples decoded by the worker itself (placement
// trainer; like PredictMs, no serving peer's floor): the read stage grows
// by δ·(local + remote). Exactly PredictMs when !coding.encoded.
double PredictMsDecodingAtTrainer(const CostParams& c, const DecodeCost& d, const SampleCoding& coding,
                                  int64_t local, int64_t remote, bool overlap);

// One live worker as the planner sees it. Live workers are also the only
// nodes that can serve samples to peers.
struct WorkerInput {
  int32_t node = 0;  // index in the expanded cluster spec
  CostParams cost;
  int64_t min_batch = 0;
  int64_t max_batch = 0;
  // Unconsumed samples of the current epoch cached on this node. With
  // replication > 1 these counts overlap between holders.
  int64_t local_available = 0;
  // Optional (−1 = not provided): how many of those samples no other live
  // worker caches. Only bound-epoch reads it (a node must drain at least
  // its exclusive samples; shared ones can go to any holder). Without it,
  // at least local_available − (Σ local_available − unconsumed_in_epoch)
  // are assumed exclusive, exact without replication.
  int64_t exclusive_available = -1;
  // Decode law (used only when PlanRequest::coding.encoded).
  DecodeCost decode;
};

struct PlanRequest {
  int64_t global_batch = 0;  // B; Σ batch must equal it
  bool overlap = false;
  std::vector<WorkerInput> workers;
  int64_t epoch = 0;
  int64_t iteration = 0;                 // global iteration counter
  int64_t iterations_left_in_epoch = 1;  // including this one
  int64_t unconsumed_in_epoch = 0;       // samples not yet consumed this epoch
  // Whether the iteration is planned while the previous one still runs, so
  // that with `overlap` its reads can overlap that one's compute. False
  // when planned with nothing in flight (SchedulerState: the job's first
  // iteration, each epoch's first — an epoch starts only once the last is
  // committed —, and every iteration without plan-ahead): its reads then
  // precede its compute. Only loft-epoch reads it (to choose batch sizes);
  // predicted_ms follows the cost model with `overlap` whatever it says.
  bool pipelined = true;
  // Encoded samples and where they are decoded (header comment). Default:
  // raw, the model without decode terms.
  SampleCoding coding;
};

struct WorkerPlan {
  int32_t node = 0;
  int64_t batch = 0;
  int64_t local = 0;
  int64_t remote = 0;
  // (serving node, count) with Σ count = remote. Empty when the policy
  // leaves the choice of samples to the assigner (global-shuffle policies).
  std::vector<std::pair<int32_t, int64_t>> remote_from;
  double predicted_ms = 0;
  // Serving nodes (ascending, each in remote_from) whose samples travel to
  // this worker decoded: the holder decodes them. Empty: every remote
  // sample travels encoded (and with raw samples nothing is decoded).
  // Only a request with coding.placement kAuto gets entries.
  std::vector<int32_t> decoded_from;
};

struct Plan {
  std::string policy;
  std::vector<WorkerPlan> workers;  // parallel to PlanRequest::workers
  double makespan_ms = 0;           // max predicted_ms
};

// What a worker reported for one completed partition.
struct Observation {
  int32_t node = 0;
  int64_t batch = 0;
  int64_t local = 0;
  int64_t remote = 0;
  double local_read_ms = 0;
  double remote_read_ms = 0;
  double compute_ms = 0;
  double iteration_ms = 0;  // read + compute as experienced (overlap-aware)
  // Encoded samples: the preprocessing stage's time for the partition and
  // the samples and stored bytes it decoded (0 when it did not run).
  double decode_ms = 0;
  int64_t decode_samples = 0;
  int64_t decode_bytes = 0;
};

// A policy's own memory as named per-node tables (lbbsp: "throughput";
// pid: "last_batch", "last_ms"), what a scheduler-state snapshot stores
// (Policy::SaveMemory).
using PolicyMemory = std::map<std::string, std::map<int32_t, double>>;

// A batching policy. Implementations keep their own memory (lbbsp's
// throughput EWMA, pid's previous sizes) and learn it through Observe.
// Not responsible for: choosing concrete sample ids (the Assigner) or
// fitting cost models (CostModel).
// Thread-safety: not thread-safe; one instance per scheduler.
class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  // True when the plan's local/remote split and remote_from are binding
  // (loft, loft-epoch); false when samples come from the global shuffle
  // (uniform, lbbsp, pid) and the split is decided by the assigner.
  virtual bool locality_aware() const = 0;
  // Integer plan with Σ batch = B and min_batch ≤ batch ≤ max_batch.
  virtual StatusOr<Plan> PlanIteration(const PlanRequest& req) = 0;
  virtual void Observe(std::span<const Observation> observations) { (void)observations; }
  // The memory that Observe and PlanIteration built, for a snapshot of the
  // scheduler state (scheduler/journal.h "Snapshots"), and its restoration
  // into a fresh instance: afterwards the policy plans as the saved one
  // would. Policies without memory keep the defaults (nothing saved;
  // restoring a non-empty memory is InvalidArgument naming the table).
  virtual PolicyMemory SaveMemory() const { return {}; }
  virtual Status RestoreMemory(const PolicyMemory& memory);
};

// uniform | lbbsp | pid | loft | loft-epoch
StatusOr<std::unique_ptr<Policy>> MakePolicy(std::string_view name);

}  // namespace loft::sched

// ---------------------------------------------------------------------------
// Planning helpers (appended; scheduler/README-planning.md explains them).
namespace loft::sched {

// Checks B > 0, at least one worker, distinct nodes, finite non-negative
// costs, 0 ≤ min_batch ≤ max_batch, local_available ≥ 0, −1 ≤
// exclusive_available ≤ local_available, Σ min ≤ B ≤ Σ max.
// InvalidArgument naming the offending worker/field otherwise.
Status ValidatePlanRequest(const PlanRequest& req);

// Iteration time with fractional counts of a worker that reads remotely
// from peers whose uplinks are busy for up to `uplink_floor_ms` this
// iteration: the iteration cannot end before that (DESIGN.md: a serving
// peer's Σ_i r_ij·s/up_j ≤ T). The floor applies only when remote > 0.
// PredictMs(c, l, r, o) == PredictMsWithUplink(c, l, r, 0, o).
double PredictMsWithUplink(const CostParams& c, double local, double remote, double uplink_floor_ms,
                           bool overlap);

// Expected behaviour of a global-shuffle plan (uniform, lbbsp, pid) under
// the cost model. Rule: a sample drawn from the shuffle is cached on worker
// i with probability f_i = min(1, local_available_i / U), U =
// unconsumed_in_epoch (or Σ local_available if larger). Expected local_i =
// b_i·f_i, remote_i = b_i − local_i, the remote part split across peers
// j ≠ i ∝ local_available_j. Peer j's uplink time is u_j·(expected samples
// it serves); a worker that reads remotely finishes no earlier than the
// busiest uplink among its peers (PredictMsWithUplink). predicted_ms uses the fractional expectations; the
// plan's integer local/remote are the rounded expectations and remote_from
// is left empty. Keeps plan.policy and the batch sizes.
Plan EvaluateShuffle(const PlanRequest& req, Plan plan);

// Recomputes predicted_ms and makespan_ms of a locality-aware plan from
// its local, remote and remote_from: peer j serves Σ counts naming it, its
// uplink time is that times s/up_j, and every worker it serves finishes no
// earlier than that (PredictMsWithUplink). Unknown peers in remote_from are ignored.
void EvaluateLocalityPlan(const PlanRequest& req, Plan& plan);

// With coding.encoded and placement kAuto: chooses decoded_from for every
// (holder, trainer) pair of a locality-aware plan by local search — toggle
// the pair whose change lowers (makespan, Σ predicted_ms) the most, until
// none does (at most 4·pairs + 16 toggles) — and re-evaluates the plan.
// Otherwise clears decoded_from and only re-evaluates. Never raises the
// makespan of the all-encoded plan.
void ChooseDecodePlacement(const PlanRequest& req, Plan& plan);

// The request with the trainer's decode folded into its per-sample costs,
// what the batch-size search sees (README-planning.md "Decode placement"):
// compute_per_sample += δ_i without overlap (exact when every sample is
// decoded at the trainer) or with overlap and `into_compute`; with overlap
// and not `into_compute`, local_ and remote_per_sample += δ_i. With overlap
// both under-estimate T = max(max(Tl, Tr) + D, Tc), in different cases
// (a worker reading both; a read-bound worker), so loft plans both and
// keeps the better. The result is a raw request (coding reset); a raw
// request comes back unchanged.
PlanRequest FoldTrainerDecode(const PlanRequest& req, bool into_compute = true);

// The request whose plain-model makespan lower-bounds every plan's with
// any decode placement (bound.h): local_per_sample += δ_i, remote per
// sample min(r1 + δ_i, ρ·r1) (kTrainer: r1 + δ_i), uplink per sample
// min(u_j, ρ·u_j + δ_j) (kTrainer: u_j); with overlap the decode moves
// into the max, which only lowers it. The result is a raw request (coding
// reset); a raw request comes back unchanged.
PlanRequest RelaxDecode(const PlanRequest& req);

}  // namespace loft::sched

namespace loft {
class Placement;
}

namespace loft::sched {

// The request for the first iteration of epoch 0 of a cluster spec: every
// node a live worker, cost = PriorFromSpec, min_batch = training.min_batch,
// max_batch = spec.MaxBatch(i), local_available = samples placed on the node
// (primary or replica), exclusive_available = local_available without
// replication and 0 with it, nothing consumed yet (unconsumed = dataset.samples,
// iterations_left = ⌈samples / B⌉). Used by `loftctl plan`.
PlanRequest FirstIterationRequest(const ClusterSpec& spec, const Placement& placement);

}  // namespace loft::sched
