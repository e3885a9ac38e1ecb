// The C shim over loft (capi/include/loft/loft.h): converts arguments,
// forwards to capi::PlannerSession / capi::RunSimulationSummary and turns
// Status into errptr messages. No logic lives here (STYLE.md item 10;
// model: rocksdb db/c.cc).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "capi/src/consumer_session.h"
#include "capi/src/planner_session.h"
#include "core/status.h"
#include "loft/loft.h"
#include "scheduler/cost_profile.h"

using loft::Status;
using loft::capi::PlannerSession;

extern "C" {
struct loft_planner_t {
  PlannerSession* rep;
};
struct loft_plan_t {
  loft::sched::Plan rep;
};
struct loft_consumer_t {
  loft::capi::ConsumerSession* rep;
};
struct loft_batch_t {
  loft::capi::ConsumerBatchData* rep;
  loft::capi::ConsumerSession* session;
};
}

namespace {

// How long loft_batch_allreduce waits for the round: the agent always
// answers (an error at worst) within its ring deadlines; this bounds a
// dead agent.
constexpr int kAllReduceTimeoutMs = 120000;

char* CopyString(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out != nullptr) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

void SetError(char** errptr, const std::string& message) {
  if (errptr == nullptr) return;
  std::free(*errptr);
  *errptr = CopyString(message);
}

// True (and *errptr set) when `s` is an error.
bool SaveError(char** errptr, const Status& s) {
  if (s.ok()) return false;
  SetError(errptr, s.message());
  return true;
}

bool NullArg(const void* p, const char* fn, const char* what, char** errptr) {
  if (p != nullptr) return false;
  SetError(errptr, std::string(fn) + ": " + what + " is NULL");
  return true;
}

// No C++ exception crosses the C boundary: one escaping the library
// (std::bad_alloc, a library bug) becomes an errptr message.
template <typename Fn, typename R>
R Guard(const char* fn, char** errptr, R on_error, Fn&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    SetError(errptr, std::string(fn) + ": " + e.what());
  } catch (...) {
    SetError(errptr, std::string(fn) + ": unknown exception");
  }
  return on_error;
}

// The C enum and the one list of profile fields agree (scheduler/cost_profile.h).
static_assert(LOFT_COST_FIELDS == loft::sched::kCostFields.size());
static_assert(loft::sched::kCostFields[LOFT_COST_COMPUTE_FIXED_MS].name == "compute_fixed_ms");
static_assert(loft::sched::kCostFields[LOFT_COST_COMPUTE_PER_SAMPLE_MS].name == "compute_per_sample_ms");
static_assert(loft::sched::kCostFields[LOFT_COST_LOCAL_FIXED_MS].name == "local_fixed_ms");
static_assert(loft::sched::kCostFields[LOFT_COST_LOCAL_PER_SAMPLE_MS].name == "local_per_sample_ms");
static_assert(loft::sched::kCostFields[LOFT_COST_REMOTE_FIXED_MS].name == "remote_fixed_ms");
static_assert(loft::sched::kCostFields[LOFT_COST_REMOTE_PER_SAMPLE_MS].name == "remote_per_sample_ms");
static_assert(loft::sched::kCostFields[LOFT_COST_UPLINK_PER_SAMPLE_MS].name == "uplink_per_sample_ms");

int AddWorker(loft_planner_t* planner, int32_t node, const double* profile, int64_t min_batch,
              int64_t max_batch, int64_t local_available, char** errptr) {
  loft::sched::WorkerInput w;
  w.node = node;
  w.cost = loft::sched::CostFromArray(std::span<const double, LOFT_COST_FIELDS>(profile, LOFT_COST_FIELDS));
  w.min_batch = min_batch;
  w.max_batch = max_batch;
  w.local_available = local_available;
  return SaveError(errptr, planner->rep->AddWorker(w)) ? -1 : 0;
}

const loft::sched::WorkerPlan* At(const loft_plan_t* plan, int i) {
  if (plan == nullptr || i < 0 || static_cast<size_t>(i) >= plan->rep.workers.size()) return nullptr;
  return &plan->rep.workers[static_cast<size_t>(i)];
}

}  // namespace

extern "C" {

const char* loft_version(void) {
  return LOFT_VERSION_STRING;
}

void loft_free(void* ptr) {
  std::free(ptr);
}

loft_planner_t* loft_planner_create(const char* policy, int64_t global_batch, int overlap, char** errptr) {
  return Guard("loft_planner_create", errptr, static_cast<loft_planner_t*>(nullptr),
               [&]() -> loft_planner_t* {
                 if (NullArg(policy, "loft_planner_create", "policy", errptr)) return nullptr;
                 auto s = PlannerSession::Create(policy, global_batch, overlap != 0);
                 if (SaveError(errptr, s.status())) return nullptr;
                 return new loft_planner_t{s->release()};
               });
}

void loft_planner_destroy(loft_planner_t* planner) {
  if (planner == nullptr) return;
  delete planner->rep;
  delete planner;
}

int loft_planner_add_worker(loft_planner_t* planner, int32_t node, double compute_fixed_ms,
                            double compute_per_sample_ms, double local_per_sample_ms, double remote_fixed_ms,
                            double remote_per_sample_ms, double uplink_per_sample_ms, int64_t min_batch,
                            int64_t max_batch, int64_t local_available, char** errptr) {
  return Guard("loft_planner_add_worker", errptr, -1, [&]() -> int {
    if (NullArg(planner, "loft_planner_add_worker", "planner", errptr)) return -1;
    double profile[LOFT_COST_FIELDS] = {0};
    profile[LOFT_COST_COMPUTE_FIXED_MS] = compute_fixed_ms;
    profile[LOFT_COST_COMPUTE_PER_SAMPLE_MS] = compute_per_sample_ms;
    profile[LOFT_COST_LOCAL_PER_SAMPLE_MS] = local_per_sample_ms;
    profile[LOFT_COST_REMOTE_FIXED_MS] = remote_fixed_ms;
    profile[LOFT_COST_REMOTE_PER_SAMPLE_MS] = remote_per_sample_ms;
    profile[LOFT_COST_UPLINK_PER_SAMPLE_MS] = uplink_per_sample_ms;
    return AddWorker(planner, node, profile, min_batch, max_batch, local_available, errptr);
  });
}

int loft_planner_add_worker_profile(loft_planner_t* planner, int32_t node,
                                    const double profile[LOFT_COST_FIELDS], int64_t min_batch,
                                    int64_t max_batch, int64_t local_available, char** errptr) {
  return Guard("loft_planner_add_worker_profile", errptr, -1, [&]() -> int {
    if (NullArg(planner, "loft_planner_add_worker_profile", "planner", errptr)) return -1;
    if (NullArg(profile, "loft_planner_add_worker_profile", "profile", errptr)) return -1;
    return AddWorker(planner, node, profile, min_batch, max_batch, local_available, errptr);
  });
}

int loft_planner_set_local_available(loft_planner_t* planner, int32_t node, int64_t local_available,
                                     char** errptr) {
  return Guard("loft_planner_set_local_available", errptr, -1, [&]() -> int {
    if (NullArg(planner, "loft_planner_set_local_available", "planner", errptr)) return -1;
    return SaveError(errptr, planner->rep->SetLocalAvailable(node, local_available)) ? -1 : 0;
  });
}

int loft_planner_num_workers(const loft_planner_t* planner) {
  return planner == nullptr ? 0 : planner->rep->num_workers();
}

int loft_planner_observe(loft_planner_t* planner, int32_t node, int64_t batch, int64_t local, int64_t remote,
                         double local_read_ms, double remote_read_ms, double compute_ms, double iteration_ms,
                         char** errptr) {
  return Guard("loft_planner_observe", errptr, -1, [&]() -> int {
    if (NullArg(planner, "loft_planner_observe", "planner", errptr)) return -1;
    loft::sched::Observation o;
    o.node = node;
    o.batch = batch;
    o.local = local;
    o.remote = remote;
    o.local_read_ms = local_read_ms;
    o.remote_read_ms = remote_read_ms;
    o.compute_ms = compute_ms;
    o.iteration_ms = iteration_ms;
    return SaveError(errptr, planner->rep->Observe(o)) ? -1 : 0;
  });
}

int loft_planner_cost(const loft_planner_t* planner, int32_t node, double out_params[7], char** errptr) {
  return Guard("loft_planner_cost", errptr, -1, [&]() -> int {
    if (NullArg(planner, "loft_planner_cost", "planner", errptr)) return -1;
    if (NullArg(out_params, "loft_planner_cost", "out_params", errptr)) return -1;
    auto c = planner->rep->Cost(node);
    if (SaveError(errptr, c.status())) return -1;
    const auto v = loft::sched::CostToArray(*c);
    std::memcpy(out_params, v.data(), sizeof(double) * v.size());
    return 0;
  });
}

loft_plan_t* loft_planner_plan(loft_planner_t* planner, char** errptr) {
  return Guard("loft_planner_plan", errptr, static_cast<loft_plan_t*>(nullptr), [&]() -> loft_plan_t* {
    if (NullArg(planner, "loft_planner_plan", "planner", errptr)) return nullptr;
    auto p = planner->rep->Plan();
    if (SaveError(errptr, p.status())) return nullptr;
    return new loft_plan_t{std::move(*p)};
  });
}

double loft_planner_bound_ms(const loft_planner_t* planner, char** errptr) {
  return Guard("loft_planner_bound_ms", errptr, -1.0, [&]() -> double {
    if (NullArg(planner, "loft_planner_bound_ms", "planner", errptr)) return -1;
    auto b = planner->rep->BoundMs();
    if (SaveError(errptr, b.status())) return -1;
    return *b;
  });
}

void loft_plan_destroy(loft_plan_t* plan) {
  delete plan;
}

const char* loft_plan_policy(const loft_plan_t* plan) {
  return plan == nullptr ? "" : plan->rep.policy.c_str();
}

int loft_plan_num_workers(const loft_plan_t* plan) {
  return plan == nullptr ? 0 : static_cast<int>(plan->rep.workers.size());
}

int32_t loft_plan_node(const loft_plan_t* plan, int i) {
  const auto* w = At(plan, i);
  return w == nullptr ? -1 : w->node;
}

int64_t loft_plan_batch(const loft_plan_t* plan, int i) {
  const auto* w = At(plan, i);
  return w == nullptr ? 0 : w->batch;
}

int64_t loft_plan_local(const loft_plan_t* plan, int i) {
  const auto* w = At(plan, i);
  return w == nullptr ? 0 : w->local;
}

int64_t loft_plan_remote(const loft_plan_t* plan, int i) {
  const auto* w = At(plan, i);
  return w == nullptr ? 0 : w->remote;
}

double loft_plan_predicted_ms(const loft_plan_t* plan, int i) {
  const auto* w = At(plan, i);
  return w == nullptr ? 0 : w->predicted_ms;
}

double loft_plan_makespan_ms(const loft_plan_t* plan) {
  return plan == nullptr ? 0 : plan->rep.makespan_ms;
}

char* loft_sim_run(const char* spec_yaml, const char* policies, char** errptr) {
  return loft_sim_run_with(spec_yaml, policies, 0, 0, 1, errptr);
}

char* loft_sim_run_with(const char* spec_yaml, const char* policies, int64_t iterations, uint64_t seed,
                        int compute_bound, char** errptr) {
  return Guard("loft_sim_run_with", errptr, static_cast<char*>(nullptr), [&]() -> char* {
    if (NullArg(spec_yaml, "loft_sim_run", "spec_yaml", errptr)) return nullptr;
    if (NullArg(policies, "loft_sim_run", "policies", errptr)) return nullptr;
    if (iterations < 0) {
      SetError(errptr, "loft_sim_run: iterations must be >= 0");
      return nullptr;
    }
    loft::capi::SimRunOptions o;
    o.iterations = iterations;
    o.seed = seed;
    o.compute_bound = compute_bound != 0;
    auto s = loft::capi::RunSimulationSummary(spec_yaml, policies, o);
    if (SaveError(errptr, s.status())) return nullptr;
    return CopyString(*s);
  });
}

loft_consumer_t* loft_consumer_open(const char* endpoint, char** errptr) {
  return Guard("loft_consumer_open", errptr, static_cast<loft_consumer_t*>(nullptr),
               [&]() -> loft_consumer_t* {
                 if (NullArg(endpoint, "loft_consumer_open", "endpoint", errptr)) return nullptr;
                 auto s = loft::capi::ConsumerSession::Open(endpoint, "libloft");
                 if (SaveError(errptr, s.status())) return nullptr;
                 return new loft_consumer_t{s->release()};
               });
}

loft_batch_t* loft_consumer_next(loft_consumer_t* consumer, int timeout_ms, char** errptr) {
  return Guard("loft_consumer_next", errptr, static_cast<loft_batch_t*>(nullptr), [&]() -> loft_batch_t* {
    if (NullArg(consumer, "loft_consumer_next", "consumer", errptr)) return nullptr;
    auto b = consumer->rep->Next(timeout_ms);
    if (SaveError(errptr, b.status())) return nullptr;
    return new loft_batch_t{b->release(), consumer->rep};
  });
}

void loft_consumer_close(loft_consumer_t* consumer) {
  if (consumer == nullptr) return;
  delete consumer->rep;
  delete consumer;
}

uint64_t loft_batch_partition_id(const loft_batch_t* batch) {
  return batch == nullptr ? 0 : batch->rep->partition_id;
}

int64_t loft_batch_count(const loft_batch_t* batch) {
  return batch == nullptr ? 0 : static_cast<int64_t>(batch->rep->sample_ids.size());
}

uint64_t loft_batch_sample_id(const loft_batch_t* batch, int64_t i) {
  if (i < 0 || i >= loft_batch_count(batch)) return 0;
  return batch->rep->sample_ids[static_cast<size_t>(i)];
}

const uint8_t* loft_batch_payload(const loft_batch_t* batch, int64_t i, size_t* len) {
  if (i < 0 || i >= loft_batch_count(batch)) {
    if (len != nullptr) *len = 0;
    return nullptr;
  }
  const size_t k = static_cast<size_t>(i);
  if (len != nullptr) *len = batch->rep->offsets[k + 1] - batch->rep->offsets[k];
  return static_cast<const uint8_t*>(batch->rep->payload.data()) + batch->rep->offsets[k];
}

const uint64_t* loft_batch_sample_ids(const loft_batch_t* batch) {
  if (loft_batch_count(batch) <= 0) return nullptr;
  return batch->rep->sample_ids.data();
}

const int32_t* loft_batch_labels(const loft_batch_t* batch) {
  if (loft_batch_count(batch) <= 0) return nullptr;
  return batch->rep->labels.data();
}

const uint8_t* loft_batch_payloads(const loft_batch_t* batch, size_t* len) {
  if (batch == nullptr || batch->rep->payload.size() == 0) {
    if (len != nullptr) *len = 0;
    return nullptr;
  }
  if (len != nullptr) *len = batch->rep->payload.size();
  return static_cast<const uint8_t*>(batch->rep->payload.data());
}

int64_t loft_batch_round(const loft_batch_t* batch) {
  return batch == nullptr || !batch->rep->ring ? -1 : batch->rep->round;
}

int loft_batch_allreduce(loft_batch_t* batch, float* data, size_t n, char** errptr) {
  return Guard("loft_batch_allreduce", errptr, -1, [&]() -> int {
    if (NullArg(batch, "loft_batch_allreduce", "batch", errptr)) return -1;
    auto r = batch->session->AllReduce(batch->rep, data, n, kAllReduceTimeoutMs);
    if (SaveError(errptr, r.status())) return -1;
    return *r;
  });
}

int loft_batch_local_step(const loft_batch_t* batch) {
  return batch != nullptr && batch->rep->local_step ? 1 : 0;
}

int loft_batch_delta_exchange(const loft_batch_t* batch) {
  return batch != nullptr && batch->rep->delta_exchange ? 1 : 0;
}

double loft_batch_local_scale(const loft_batch_t* batch) {
  return batch == nullptr ? 1.0 : batch->rep->local_scale;
}

int64_t loft_batch_round_steps(const loft_batch_t* batch) {
  return batch == nullptr ? 0 : batch->rep->round_steps;
}

const uint8_t* loft_batch_state(const loft_batch_t* batch, size_t* len) {
  if (batch == nullptr || batch->rep->state.empty()) {
    if (len != nullptr) *len = 0;
    return nullptr;
  }
  if (len != nullptr) *len = batch->rep->state.size();
  return reinterpret_cast<const uint8_t*>(batch->rep->state.data());
}

void loft_batch_set_metrics(loft_batch_t* batch, double loss, double test_accuracy, uint64_t param_hash) {
  if (batch == nullptr) return;
  if (std::isfinite(loss)) batch->rep->loss = loss;
  if (std::isfinite(test_accuracy)) batch->rep->test_accuracy = test_accuracy;
  if (param_hash != 0) batch->rep->param_hash = param_hash;
}

void loft_consumer_put_state(loft_consumer_t* consumer, const void* blob, size_t len, char** errptr) {
  Guard("loft_consumer_put_state", errptr, 0, [&]() -> int {
    if (NullArg(consumer, "loft_consumer_put_state", "consumer", errptr)) return 0;
    if (blob == nullptr && len > 0) {
      SetError(errptr, "loft_consumer_put_state: blob is NULL");
      return 0;
    }
    SaveError(errptr, consumer->rep->PutState(blob, len));
    return 0;
  });
}

uint8_t* loft_consumer_sync_state(loft_consumer_t* consumer, int timeout_ms, int64_t* round, size_t* len,
                                  char** errptr) {
  if (len != nullptr) *len = 0;
  if (round != nullptr) *round = -1;
  return Guard("loft_consumer_sync_state", errptr, static_cast<uint8_t*>(nullptr), [&]() -> uint8_t* {
    if (NullArg(consumer, "loft_consumer_sync_state", "consumer", errptr)) return nullptr;
    auto r = consumer->rep->SyncState(timeout_ms);
    if (SaveError(errptr, r.status())) return nullptr;
    if (round != nullptr) *round = r->first;
    if (r->second.empty()) return nullptr;
    auto* out = static_cast<uint8_t*>(std::malloc(r->second.size()));
    if (out == nullptr) {
      SetError(errptr, "loft_consumer_sync_state: out of memory");
      return nullptr;
    }
    std::memcpy(out, r->second.data(), r->second.size());
    if (len != nullptr) *len = r->second.size();
    return out;
  });
}

int loft_batch_label(const loft_batch_t* batch, int64_t i) {
  if (i < 0 || i >= loft_batch_count(batch)) return -1;
  return batch->rep->labels[static_cast<size_t>(i)];
}

void loft_batch_report(loft_batch_t* batch, double compute_ms, char** errptr) {
  Guard("loft_batch_report", errptr, 0, [&]() -> int {
    if (NullArg(batch, "loft_batch_report", "batch", errptr)) return 0;
    SaveError(errptr, batch->session->Report(batch->rep, compute_ms));
    return 0;
  });
}

void loft_batch_destroy(loft_batch_t* batch) {
  if (batch == nullptr) return;
  delete batch->rep;
  delete batch;
}

}  // extern "C"
