// Calibration (`loftctl calibrate RUN_DIR --out SPEC.yaml`): a cluster spec
// whose per-node compute, disk and link constants are the scheduler's
// fitted cost models from a real run (status.json "workers[].profile"),
// inverted through the spec-prior formulas of scheduler/plan.h:
//   compute.fixed_ms      = c0               compute.per_sample_ms = c1
//   disk.read_mbps        = s·8 / (l1·1000)  (l1 = local_per_sample_ms)
//   link.latency_ms       = a                link.down_mbps = s·8 / (r1·1000)
//   link.up_mbps          = s·8 / (u·1000)   (u = uplink_per_sample_ms)
// so that PriorFromSpec(calibrated spec) = the fitted profile. A constant
// the run did not observe (the profile still equals the spec's prior) keeps
// the spec's value. The fitted local read intercept l0 has no spec field:
// it is reported, not written. Everything else (dataset, placement,
// training, failures, slowdowns, …) is copied; `count` groups are written
// expanded, one entry per node, in the same order (placement unchanged).
//
// With the run's iterations.csv (scheduler/run_recorder.h), also the
// per-iteration constants the cost models lack (the
// iterations with a failed row are left out):
//  - the ring all-reduce: per iteration, the smallest allreduce_ms of its
//    rows (the last member to join waits for nobody) = the ring's own
//    time M at N members (the distinct nodes with a batch). Its transfer +
//    latency part is what sim/allreduce_model.h charges on the calibrated
//    spec's links at that iteration's members (parameter bytes over the
//    slowest ring link); the rest, over all iterations, goes into
//    training.allreduce.reduce_ns_per_element (Σ rest / Σ elements, so a
//    run whose membership changed fits rings of every size it ran), so the calibrated model
//    scales with the parameter bytes, the links and N. If the ring ran
//    faster than the links allow, links: false and all of M is per element.
//  - compute.jitter per node, lognormal (compute.jitter_kind): s = the
//    robust standard deviation (1.4826·MAD) of ln(compute_ms / (fixed_ms +
//    per_sample_ms·batch)) over the run's rows, written as the relative
//    std-dev sqrt(e^(s²) − 1)
//    (iteration 0 and failed rows left out; at least kMinJitterRows rows,
//    else the spec's): on a shared machine the compute of an agent varies
//    far more than a spec's prior says, and the ring waits for the slowest
//    member, so this spread is part of every iteration's time.
//  - then (CalibrateSpec with match_ring, as `loftctl calibrate` runs it)
//    MatchSimulatedRing corrects reduce_ns_per_element through loft-sim;
//  - scheduler.handoff_ms: the median ack_ms of the rows not planned ahead
//    (all rows of a run without plan-ahead, training.overlap false; with
//    it, those sent after their iteration started, stream_ms > 0;
//    iteration 0 and failed rows left out; at least kMinHandoffRows rows,
//    else the spec's): for those the agent's reader was waiting, so own −
//    read − compute − all-reduce is the control path (the assignment's
//    delivery, the agent's thread wake-ups, the report's way back), which
//    loft-sim charges between a send and the agent's reader.
//  - scheduler.overhead_ms: mean over iterations of plan_ms + journal_ms,
//    the scheduler's time from "iteration t may be planned" to its
//    partitions leaving (loft-sim delays every planned iteration's send by
//    it). Not makespan − reads − compute − ring: with plan-ahead and the
//    agents' reader/compute pipeline, reads hide behind the ring, so that
//    difference measures the pipeline, not the scheduler.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/cluster_spec.h"
#include "core/status.h"
#include "scheduler/run_recorder.h"

namespace loft::ctl {

struct Calibration {
  std::string yaml;                // the calibrated spec
  std::vector<std::string> notes;  // per node: what was kept from the spec or dropped, and why
};

inline constexpr size_t kMinHandoffRows = 10;

// `status`: the scheduler's status JSON of the run (status.json).
// `iterations_csv`: the run's iterations.csv text (nullptr: the
// per-iteration constants are kept from the spec).
// `fit_links` false: every node's link (up_mbps, down_mbps, latency_ms)
// is kept from the spec, the fitted values go into the notes. For runs
// whose links were enforced at the spec's values (the testbed's tbf, the
// agents' link emulation): there the fitted remote-read law holds the
// contention with the ring and the other fetches on the same link, which
// loft-sim models itself (flows sharing links), so writing it back would
// count that contention twice.
// `match_ring`: after the ring's constants are fitted, MatchSimulatedRing
// (below) runs loft-sim on the calibrated spec and corrects them.
StatusOr<Calibration> CalibrateSpec(const ClusterSpec& spec, const nlohmann::json& status,
                                    const std::string& source, const std::string* iterations_csv = nullptr,
                                    const std::string& csv_source = "iterations.csv", bool fit_links = true,
                                    bool match_ring = false, const std::string* training_csv = nullptr,
                                    const std::string& training_source = "training.csv");

// The ring a run measured (CalibrateIterationTail): its policy, its
// iterations and its typical ring span: the mean of the iterations'
// rings up to 3× their median (ms; < 0 = no ring fitted).
struct RingMeasure {
  std::string policy;
  int64_t iterations = 0;
  double ring_ms = -1;
};

// What iterations.csv (its text; `source` names it) says about the ring
// and the overhead; writes them into `spec` (the calibrated one) and
// appends notes. Policies other than the first in the file are ignored.
// `refit_fixed` (indexed by node; may be null): nodes whose
// compute.per_sample_ms was kept from the spec because the fit gave 0
// (every batch about the same size, e.g. uniform): their fixed_ms, which
// the fit made the whole compute time, becomes the mean of compute_ms −
// per_sample_ms·batch over their rows, so that the law still gives the
// run's compute at its batches. Every numeric field of the policy's rows
// (batch, the *_ms columns) must be a finite number >= 0; the error names
// `source`, the line, the column and the text.
// `measured` (may be null): what the ring fit was made from.
Status CalibrateIterationTail(const std::string& csv_text, const std::string& source, ClusterSpec* spec,
                              std::vector<std::string>* notes, const std::vector<bool>* refit_fixed = nullptr,
                              RingMeasure* measured = nullptr);

// training.eval.relative_cost from a run's evaluated steps (the rows of
// `training_csv`, training.csv's text named `source`, with a
// test_accuracy): at each, the member whose compute_ms exceeds its law
// plus its typical residual the most is the evaluator, and the excess per
// test sample and per its compute.per_sample_ms is one measure; the
// median of them, when there are at least two (else kept, with a note).
Status CalibrateEvalCost(const std::string& iterations_csv, const std::string& training_csv,
                         const std::string& source, ClusterSpec* spec, std::vector<std::string>* notes);

// The fitted ring is the measured one, which already holds the contention
// with the reads of the next iteration that ran beside it; loft-sim adds
// that contention itself (its ring shares the links with the reads), so
// run as fitted it would count it twice (homogeneous training: measured
// ring 159.5 ms, loft-sim's 164.9). This runs loft-sim on `spec` (the
// calibrated spec) with the measured run's policy and iterations, takes
// its typical ring span the way CalibrateIterationTail takes the run's
// (without the rings over 3× the median: a failure's stalled ring is an
// outlier in both), and
// moves training.allreduce.reduce_ns_per_element (never below 0) until
// the two are within 0.2 ms, for at most five loft-sim passes: first by
// the difference per element, then by secant steps on the slope the
// passes measured (a member with a CPU quota runs the reducer at its
// cpu_cores, so one ns per element can be several ns of ring). A note
// gives both rings, the change and the passes; a second one warns when
// loft-sim's ring stays slower than the measured one with a free reducer
// (the spec's links or agent.cpu_ms_per_allreduce_mb charge more than the
// run paid). No-op when nothing was fitted.
Status MatchSimulatedRing(const RingMeasure& measured, ClusterSpec* spec, std::vector<std::string>* notes);

// The typical ring span of simulated iterations (the mean of those up to
// 3× their median): per iteration with a ring, the latest member's end
// (own_ms) less the latest start (own_ms − allreduce_ms); iterations with
// a failed row left out, as CalibrateIterationTail leaves them out of the
// run's; -1 when none had a ring.
double TypicalRingSpanMs(const std::vector<sched::IterationRecord>& iterations);

// scheduler.handoff_ms from `acks`, the ack_ms of the rows not planned
// ahead: their median when there are at least
// kMinHandoffRows, else the spec's is kept (noted).
void CalibrateHandoff(std::vector<double> acks, const std::string& policy, ClusterSpec* spec,
                      std::vector<std::string>* notes);

// compute.jitter of every node with at least kMinJitterRows (batch,
// compute_ms) rows: their relative spread around the node's compute law in
// `spec` (calibrated). Appends a note per node.
inline constexpr size_t kMinJitterRows = 10;
void CalibrateComputeJitter(const std::map<int32_t, std::vector<std::pair<double, double>>>& computes,
                            const std::string& policy, ClusterSpec* spec, std::vector<std::string>* notes);

// The spec as YAML that ParseClusterSpec reads back to the same values
// (nodes expanded).
std::string ClusterSpecToYaml(const ClusterSpec& spec);

}  // namespace loft::ctl
