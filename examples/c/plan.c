/* Plans one iteration of 256 samples over three workers with the loft
 * policy through libloft, prints each worker's share and the bound.
 * Build against an installed loft:
 *   cc plan.c $(pkg-config --cflags --libs loft) -o plan */
#include <loft/loft.h>
#include <stdio.h>

int main(void) {
  char* err = NULL;
  int i;
  loft_planner_t* planner = loft_planner_create("loft", 256, 1, &err);
  if (err != NULL) goto fail;
  /* node, c0, c1, local/sample, remote fixed, remote/sample, uplink/sample, min, max, cached */
  loft_planner_add_worker(planner, 0, 2.0, 0.05, 0.001, 2.0, 0.06, 0.06, 8, 256, 5000, &err);
  loft_planner_add_worker(planner, 1, 2.0, 0.05, 0.001, 2.0, 0.06, 0.06, 8, 256, 5000, &err);
  loft_planner_add_worker(planner, 2, 4.0, 0.20, 0.001, 2.0, 0.06, 0.06, 8, 256, 5000, &err);
  if (err != NULL) goto fail;
  {
    loft_plan_t* plan = loft_planner_plan(planner, &err);
    double bound;
    if (err != NULL) goto fail;
    printf("loft %s, policy %s\n", loft_version(), loft_plan_policy(plan));
    for (i = 0; i < loft_plan_num_workers(plan); ++i) {
      printf("worker %d: batch %lld (local %lld, remote %lld) predicted %.3f ms\n",
             (int)loft_plan_node(plan, i), (long long)loft_plan_batch(plan, i),
             (long long)loft_plan_local(plan, i), (long long)loft_plan_remote(plan, i),
             loft_plan_predicted_ms(plan, i));
    }
    bound = loft_planner_bound_ms(planner, &err);
    if (err != NULL) goto fail;
    printf("makespan %.3f ms, lower bound %.3f ms\n", loft_plan_makespan_ms(plan), bound);
    loft_plan_destroy(plan);
  }
  loft_planner_destroy(planner);
  return 0;
fail:
  fprintf(stderr, "plan: %s\n", err);
  loft_free(err);
  loft_planner_destroy(planner);
  return 1;
}
