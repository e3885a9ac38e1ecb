/* Compile-time ABI check: every exported function keeps the signature it
 * was released with. Changing one breaks this file's build; removing one
 * also fails check_symbols.cmake (capi/loft.symbols). Compiled as C99
 * with -pedantic -Werror, so it also proves loft.h is valid C99. */
#include <stdint.h>
#include <string.h>

#include "capi_test.h"
#include "loft/loft.h"

int main(void) {
  const char* (*version)(void) = loft_version;
  void (*free_fn)(void*) = loft_free;
  loft_planner_t* (*planner_create)(const char*, int64_t, int, char**) = loft_planner_create;
  void (*planner_destroy)(loft_planner_t*) = loft_planner_destroy;
  int (*add_worker)(loft_planner_t*, int32_t, double, double, double, double, double, double, int64_t,
                    int64_t, int64_t, char**) = loft_planner_add_worker;
  int (*add_profile)(loft_planner_t*, int32_t, const double*, int64_t, int64_t, int64_t, char**) =
      loft_planner_add_worker_profile;
  int (*set_local)(loft_planner_t*, int32_t, int64_t, char**) = loft_planner_set_local_available;
  int (*planner_workers)(const loft_planner_t*) = loft_planner_num_workers;
  int (*observe)(loft_planner_t*, int32_t, int64_t, int64_t, int64_t, double, double, double, double,
                 char**) = loft_planner_observe;
  int (*cost)(const loft_planner_t*, int32_t, double*, char**) = loft_planner_cost;
  loft_plan_t* (*plan)(loft_planner_t*, char**) = loft_planner_plan;
  double (*bound)(const loft_planner_t*, char**) = loft_planner_bound_ms;
  void (*plan_destroy)(loft_plan_t*) = loft_plan_destroy;
  const char* (*plan_policy)(const loft_plan_t*) = loft_plan_policy;
  int (*plan_workers)(const loft_plan_t*) = loft_plan_num_workers;
  int32_t (*plan_node)(const loft_plan_t*, int) = loft_plan_node;
  int64_t (*plan_batch)(const loft_plan_t*, int) = loft_plan_batch;
  int64_t (*plan_local)(const loft_plan_t*, int) = loft_plan_local;
  int64_t (*plan_remote)(const loft_plan_t*, int) = loft_plan_remote;
  double (*plan_pred)(const loft_plan_t*, int) = loft_plan_predicted_ms;
  double (*plan_makespan)(const loft_plan_t*) = loft_plan_makespan_ms;
  char* (*sim_run)(const char*, const char*, char**) = loft_sim_run;
  char* (*sim_run_with)(const char*, const char*, int64_t, uint64_t, int, char**) = loft_sim_run_with;
  CHECK(version != NULL && free_fn != NULL && planner_create != NULL && planner_destroy != NULL);
  CHECK(add_profile != NULL && LOFT_COST_FIELDS == 7 && LOFT_COST_UPLINK_PER_SAMPLE_MS == 6);
  CHECK(add_worker != NULL && set_local != NULL && planner_workers != NULL && observe != NULL);
  CHECK(cost != NULL && plan != NULL && bound != NULL && plan_destroy != NULL && plan_policy != NULL);
  CHECK(plan_workers != NULL && plan_node != NULL && plan_batch != NULL && plan_local != NULL);
  CHECK(plan_remote != NULL && plan_pred != NULL && plan_makespan != NULL && sim_run != NULL);
  CHECK(sim_run_with != NULL);
  {
    /* The gradient exchange (training.model external). */
    int64_t (*batch_round)(const loft_batch_t*) = loft_batch_round;
    const uint8_t* (*batch_payloads)(const loft_batch_t*, size_t*) = loft_batch_payloads;
    int (*batch_allreduce)(loft_batch_t*, float*, size_t, char**) = loft_batch_allreduce;
    const uint8_t* (*batch_state)(const loft_batch_t*, size_t*) = loft_batch_state;
    void (*batch_metrics)(loft_batch_t*, double, double, uint64_t) = loft_batch_set_metrics;
    void (*put_state)(loft_consumer_t*, const void*, size_t, char**) = loft_consumer_put_state;
    uint8_t* (*sync_state)(loft_consumer_t*, int, int64_t*, size_t*, char**) = loft_consumer_sync_state;
    size_t len = 7;
    CHECK(batch_round != NULL && batch_payloads != NULL && batch_allreduce != NULL && batch_state != NULL);
    CHECK(batch_metrics != NULL && put_state != NULL && sync_state != NULL);
    CHECK(batch_round(NULL) == -1 && batch_payloads(NULL, &len) == NULL && len == 0);
    len = 7;
    CHECK(batch_state(NULL, &len) == NULL && len == 0);
  }
  {
    /* Exchange modes (training.exchange period > 1 / auto). */
    int (*local_step)(const loft_batch_t*) = loft_batch_local_step;
    int (*delta_exchange)(const loft_batch_t*) = loft_batch_delta_exchange;
    double (*local_scale)(const loft_batch_t*) = loft_batch_local_scale;
    int64_t (*round_steps)(const loft_batch_t*) = loft_batch_round_steps;
    CHECK(local_step != NULL && delta_exchange != NULL && local_scale != NULL && round_steps != NULL);
    CHECK(local_step(NULL) == 0 && delta_exchange(NULL) == 0 && local_scale(NULL) == 1.0);
    CHECK(round_steps(NULL) == 0);
  }
  CHECK(strlen(version()) >= 5);
  printf("abi_test: ok\n");
  return 0;
}
