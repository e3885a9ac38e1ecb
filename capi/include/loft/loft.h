/* libloft C API: an in-process planner and the simulator, for programs
 * that cannot link loft's C++ internals (C trainers, gateways, FFI).
 *
 * Conventions (modelled on RocksDB's include/rocksdb/c.h):
 *  - Objects are opaque handles created by loft_X_create and released by
 *    loft_X_destroy. loft_X_destroy(NULL) is a no-op. A handle must not be
 *    used after it is destroyed; destroying it twice is undefined (the
 *    library does not track freed handles). Passing a NULL handle to any
 *    other function is reported through errptr (or returns 0/-1 for
 *    accessors without errptr).
 *  - Every call that can fail takes `char** errptr` last. On failure it
 *    stores a malloc'd, NUL-terminated, human-readable message in *errptr
 *    (freeing any message already there) and returns NULL / -1 / 0 as
 *    documented. On success *errptr is left untouched, so callers
 *    initialise it to NULL and test it after each call. errptr may be NULL
 *    (errors are then only signalled by the return value).
 *  - Strings and buffers returned to the caller are freed with loft_free.
 *  - Thread-safety: distinct handles may be used from different threads;
 *    one handle must not be used concurrently.
 * Every function is exported from libloft.so and listed in capi/loft.symbols.
 */
#ifndef LOFT_C_H_
#define LOFT_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define LOFT_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define LOFT_EXPORT __attribute__((visibility("default")))
#else
#define LOFT_EXPORT
#endif

/* LOFT_VERSION_MAJOR, LOFT_VERSION_MINOR, LOFT_VERSION_PATCH: generated
 * from the top-level project(VERSION) (capi/version.h.in). */
#include "loft/version.h"

/* ---- library ----------------------------------------------------------- */

/* "MAJOR.MINOR.PATCH" of the library actually loaded (static string). */
LOFT_EXPORT const char* loft_version(void);
/* Frees a message or buffer returned by this library. NULL is a no-op. */
LOFT_EXPORT void loft_free(void* ptr);

/* ---- planner ------------------------------------------------------------
 * An in-process copy of the scheduler's planning step: a policy, a set of
 * workers with cost parameters (milliseconds; see DESIGN.md "Planning")
 * and the observed timings it learns from. Each loft_planner_plan call
 * plans one iteration of `global_batch` samples. */
typedef struct loft_planner_t loft_planner_t;
typedef struct loft_plan_t loft_plan_t;

/* policy: "uniform", "lbbsp", "pid", "loft" or "loft-epoch" (when the
 * scheduler provides it). overlap != 0: reads overlap compute. */
LOFT_EXPORT loft_planner_t* loft_planner_create(const char* policy, int64_t global_batch, int overlap,
                                                char** errptr);
LOFT_EXPORT void loft_planner_destroy(loft_planner_t* planner);

/* A worker's cost profile: LOFT_COST_FIELDS doubles (ms) in this order,
 * the fields of scheduler/plan.h CostParams (scheduler/cost_profile.h; the
 * scheduler's status document uses the same names in workers[].profile):
 * compute c0 + c1*b, local read l0 + l1*l, remote read a + r1*r, and u per
 * sample served to peers. */
enum {
  LOFT_COST_COMPUTE_FIXED_MS = 0,
  LOFT_COST_COMPUTE_PER_SAMPLE_MS = 1,
  LOFT_COST_LOCAL_FIXED_MS = 2,
  LOFT_COST_LOCAL_PER_SAMPLE_MS = 3,
  LOFT_COST_REMOTE_FIXED_MS = 4,
  LOFT_COST_REMOTE_PER_SAMPLE_MS = 5,
  LOFT_COST_UPLINK_PER_SAMPLE_MS = 6,
  LOFT_COST_FIELDS = 7
};

/* Adds worker `node` (distinct, >= 0) with its cost profile (above).
 * local_available: samples of the current epoch cached on this node.
 * Returns 0, or -1 on error (a negative or non-finite field is named). */
LOFT_EXPORT int loft_planner_add_worker_profile(loft_planner_t* planner, int32_t node,
                                                const double profile[LOFT_COST_FIELDS], int64_t min_batch,
                                                int64_t max_batch, int64_t local_available, char** errptr);
/* The same with the profile's fields as arguments and local_fixed_ms = 0. */
LOFT_EXPORT int loft_planner_add_worker(loft_planner_t* planner, int32_t node, double compute_fixed_ms,
                                        double compute_per_sample_ms, double local_per_sample_ms,
                                        double remote_fixed_ms, double remote_per_sample_ms,
                                        double uplink_per_sample_ms, int64_t min_batch, int64_t max_batch,
                                        int64_t local_available, char** errptr);
/* Updates the cached-sample count of an added worker. 0 or -1. */
LOFT_EXPORT int loft_planner_set_local_available(loft_planner_t* planner, int32_t node,
                                                 int64_t local_available, char** errptr);
LOFT_EXPORT int loft_planner_num_workers(const loft_planner_t* planner);

/* Records what worker `node` measured for its partition of the last
 * planned iteration. The worker's cost model is refitted at once; the
 * policy receives the observations of an iteration together, at the next
 * loft_planner_plan. Negative or non-finite times are rejected. 0 or -1. */
LOFT_EXPORT int loft_planner_observe(loft_planner_t* planner, int32_t node, int64_t batch, int64_t local,
                                     int64_t remote, double local_read_ms, double remote_read_ms,
                                     double compute_ms, double iteration_ms, char** errptr);
/* The cost profile the planner currently uses for `node` (the fitted
 * model when one is available, otherwise the profile it was added with):
 * LOFT_COST_FIELDS doubles in LOFT_COST_* order. 0 or -1. */
LOFT_EXPORT int loft_planner_cost(const loft_planner_t* planner, int32_t node, double out_params[7],
                                  char** errptr);

/* Plans the next iteration. NULL on error (e.g. no workers, the batch
 * does not fit between the workers' min/max). */
LOFT_EXPORT loft_plan_t* loft_planner_plan(loft_planner_t* planner, char** errptr);
/* Lower bound on the makespan of any plan for the current workers
 * (scheduler/bound.h); -1 on error. */
LOFT_EXPORT double loft_planner_bound_ms(const loft_planner_t* planner, char** errptr);

/* Plan accessors. i indexes workers in the order they were added;
 * out-of-range i or a NULL plan gives 0 (or -1 for loft_plan_node). */
LOFT_EXPORT void loft_plan_destroy(loft_plan_t* plan);
LOFT_EXPORT const char* loft_plan_policy(const loft_plan_t* plan); /* valid until destroy */
LOFT_EXPORT int loft_plan_num_workers(const loft_plan_t* plan);
LOFT_EXPORT int32_t loft_plan_node(const loft_plan_t* plan, int i);
LOFT_EXPORT int64_t loft_plan_batch(const loft_plan_t* plan, int i);
LOFT_EXPORT int64_t loft_plan_local(const loft_plan_t* plan, int i);
LOFT_EXPORT int64_t loft_plan_remote(const loft_plan_t* plan, int i);
LOFT_EXPORT double loft_plan_predicted_ms(const loft_plan_t* plan, int i);
LOFT_EXPORT double loft_plan_makespan_ms(const loft_plan_t* plan);

/* ---- simulator ----------------------------------------------------------
 * Runs a cluster spec (YAML text, DESIGN.md "Cluster spec") in virtual
 * time with each policy of the comma-separated list (e.g.
 * "loft,lbbsp,uniform") and returns summary.json text (sim/summary.h
 * format, including bound_mean_iteration_ms), freed with loft_free. NULL
 * with *errptr set on a bad spec, an unknown policy or a failed run. */
LOFT_EXPORT char* loft_sim_run(const char* spec_yaml, const char* policies, char** errptr);
/* As loft_sim_run with the number of iterations per policy (0: the spec's
 * training.iterations), the jitter seed (0: the spec's training.seed) and
 * whether to evaluate the lower bound (compute_bound != 0). */
LOFT_EXPORT char* loft_sim_run_with(const char* spec_yaml, const char* policies, int64_t iterations,
                                    uint64_t seed, int compute_bound, char** errptr);

/* ---- consumer ------------------------------------------------------------
 * Takes partitions from a local loft-agent running with compute_mode
 * external (consumer_endpoint: ipc:///path or tcp://127.0.0.1:port). Each
 * batch is one partition: sample ids, labels and payloads. Payload pointers
 * point into the received message (zero copy) and stay valid until
 * loft_batch_destroy. Report the compute time (loft_batch_report) within the
 * agent's consumer_timeout_ms, or the partition is failed and retried
 * elsewhere. One consumer per agent; not thread-safe; destroy every batch
 * before closing its consumer. */
typedef struct loft_consumer_t loft_consumer_t;
typedef struct loft_batch_t loft_batch_t;

LOFT_EXPORT loft_consumer_t* loft_consumer_open(const char* endpoint, char** errptr);
/* The next batch, waiting up to timeout_ms (< 0: forever; a signal does
 * not end the wait). NULL with *errptr containing "timeout" when none
 * arrived in time. */
LOFT_EXPORT loft_batch_t* loft_consumer_next(loft_consumer_t* consumer, int timeout_ms, char** errptr);
LOFT_EXPORT void loft_consumer_close(loft_consumer_t* consumer);

/* Accessors; out-of-range i or a NULL batch gives 0 (NULL payload, -1 label). */
LOFT_EXPORT uint64_t loft_batch_partition_id(const loft_batch_t* batch);
LOFT_EXPORT int64_t loft_batch_count(const loft_batch_t* batch);
LOFT_EXPORT uint64_t loft_batch_sample_id(const loft_batch_t* batch, int64_t i);
LOFT_EXPORT const uint8_t* loft_batch_payload(const loft_batch_t* batch, int64_t i, size_t* len);
LOFT_EXPORT int loft_batch_label(const loft_batch_t* batch, int64_t i);
/* Every sample id / every label of the batch as one array of
 * loft_batch_count entries (zero copy, valid until loft_batch_destroy);
 * NULL for an empty or NULL batch. One call instead of one per sample. */
LOFT_EXPORT const uint64_t* loft_batch_sample_ids(const loft_batch_t* batch);
LOFT_EXPORT const int32_t* loft_batch_labels(const loft_batch_t* batch);
/* Every payload back to back (payload i starts where i-1 ends; one
 * contiguous, zero-copy region); NULL and *len 0 for an empty batch. */
LOFT_EXPORT const uint8_t* loft_batch_payloads(const loft_batch_t* batch, size_t* len);
/* Acknowledges the batch with its compute time in ms (once per batch). */
LOFT_EXPORT void loft_batch_report(loft_batch_t* batch, double compute_ms, char** errptr);
LOFT_EXPORT void loft_batch_destroy(loft_batch_t* batch);

/* ---- gradient exchange (agent spec training.model: external) -------------
 * The batch's all-reduce round; -1 when the agent runs no ring. A training
 * batch may be empty (count 0): a round this agent has no samples for. The
 * consumer still calls loft_batch_allreduce (data: n zeros, weight 0) and
 * applies the aggregate, so every member's parameters stay identical. */
LOFT_EXPORT int64_t loft_batch_round(const loft_batch_t* batch);
/* In place: data = the mean gradient over the batch's samples (n floats,
 * the same n on every member) -> the round's aggregate (the spec's
 * aggregation over the members' gradients, b_i/B weights for the means).
 * Returns 1: data holds the aggregate, apply it with the optimizer;
 *         0: nothing to apply (the round was already done here: the
 *            gradient is carried into the next round);
 *         2: this consumer's state was not the ring majority's: load
 *            loft_batch_state() first, then apply data (the partition is
 *            retried elsewhere);
 *        -1: error (*errptr): another gradient length than the members',
 *            a non-finite aggregate (mean over a NaN/Inf input), a ring
 *            failure; apply nothing. Once per batch; waits at most 120 s. */
LOFT_EXPORT int loft_batch_allreduce(loft_batch_t* batch, float* data, size_t n, char** errptr);
/* After loft_batch_allreduce returned 2: the majority's state blob (valid
 * until loft_batch_destroy); else NULL, *len 0. */
LOFT_EXPORT const uint8_t* loft_batch_state(const loft_batch_t* batch, size_t* len);
/* Optional figures sent with loft_batch_report (NaN / 0 = none): the batch
 * loss, a test accuracy, a hash of the parameters after this round. */
LOFT_EXPORT void loft_batch_set_metrics(loft_batch_t* batch, double loss, double test_accuracy,
                                        uint64_t param_hash);
/* Publishes the consumer's state (an opaque blob: parameters + optimizer)
 * for restarted members; call it before each loft_batch_allreduce (the
 * state the gradient was computed on). The same state must give the same
 * bytes on every member (its hash is compared). */
LOFT_EXPORT void loft_consumer_put_state(loft_consumer_t* consumer, const void* blob, size_t len,
                                         char** errptr);
/* The ring majority's state (malloc'd, free with loft_free) and the round
 * it holds; NULL with *round -1 and no error when no member has progress
 * yet (keep your own). For a restarted consumer, before its first batch. */
LOFT_EXPORT uint8_t* loft_consumer_sync_state(loft_consumer_t* consumer, int timeout_ms, int64_t* round,
                                              size_t* len, char** errptr);

/* ---- exchange modes (spec training.exchange: period 1 | N | auto) --------
 * With period 1 (the default) every batch is exchanged as above: its
 * gradient is all-reduced. With period > 1 or auto the agent marks each
 * batch of a round but the last as a local step:
 *  - loft_batch_local_step(batch) == 1: multiply the batch's gradient by
 *    loft_batch_local_scale(batch) (this member's share of the global
 *    batch, b / (B / N)), take the optimizer step, report; no
 *    loft_batch_allreduce (it fails for a local step);
 *  - the round's last batch (local_step 0, loft_batch_delta_exchange 1):
 *    take its step the same way, publish the round's starting state
 *    (loft_consumer_put_state: the parameters and optimizer state the
 *    round began with, identical on every member), then call
 *    loft_batch_allreduce with data = parameters - the round's starting
 *    parameters (an empty batch: the same, weight from this member's
 *    local steps). Result 1: set parameters = starting parameters + data;
 *    2: load loft_batch_state() (the majority's starting state) and do the
 *    same; 0: the round was exchanged already, this step belongs to the
 *    next round (keep the parameters); -1: go back to the starting state.
 *    Momentum: set the velocity to -data / (sum of the learning rates of
 *    the loft_batch_round_steps(batch) planned steps the round spans) so
 *    every member holds the same optimizer state (as the built-in trainer,
 *    edge_agent/model_trainer.h "Exchange modes"). The new parameters and
 *    optimizer state start the next round.
 * compression int8 and overlap need nothing from the consumer. These
 * accessors give 0 (1.0 for the scale) for a NULL batch. A consumer that
 * does not know them (libloft before 0.2) is refused by an agent whose
 * spec exchanges deltas. */
LOFT_EXPORT int loft_batch_local_step(const loft_batch_t* batch);
LOFT_EXPORT int loft_batch_delta_exchange(const loft_batch_t* batch);
LOFT_EXPORT double loft_batch_local_scale(const loft_batch_t* batch);
/* After loft_batch_allreduce returned 1 or 2: the planned steps the
 * aggregate spans (1 for a gradient exchange); else 0. */
LOFT_EXPORT int64_t loft_batch_round_steps(const loft_batch_t* batch);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOFT_C_H_ */
