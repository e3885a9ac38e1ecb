/* Simulator through the C API: summary.json names every policy run and
 * the bound; bad YAML, an invalid spec and an unknown policy give
 * readable messages. */
#include "capi_test.h"
#include "loft/loft.h"

static const char* kSpec =
    "dataset: {name: toy, samples: 4000, sample_bytes: 784}\n"
    "placement: {kind: shards, replication: 1}\n"
    "training: {global_batch: 128, min_batch: 4, iterations: 20, overlap: true, seed: 7,\n"
    "           model: mlp, aggregation: mean}\n"
    "nodes:\n"
    "  - name: fast\n"
    "    count: 2\n"
    "    compute: {fixed_ms: 2.0, per_sample_ms: 0.05, jitter: 0.05}\n"
    "    disk: {read_mbps: 800}\n"
    "    link: {up_mbps: 100, down_mbps: 100, latency_ms: 2}\n"
    "  - name: slow\n"
    "    count: 1\n"
    "    compute: {fixed_ms: 4.0, per_sample_ms: 0.2, jitter: 0.05}\n"
    "    disk: {read_mbps: 800}\n"
    "    link: {up_mbps: 100, down_mbps: 100, latency_ms: 2}\n";

static void TestRun(void) {
  char* err = NULL;
  char* json = loft_sim_run(kSpec, "loft,uniform,lbbsp", &err);
  CHECK_NO_ERROR(err);
  CHECK(json != NULL);
  CHECK(strstr(json, "\"policies\"") != NULL);
  CHECK(strstr(json, "\"loft\"") != NULL);
  CHECK(strstr(json, "\"uniform\"") != NULL);
  CHECK(strstr(json, "\"lbbsp\"") != NULL);
  CHECK(strstr(json, "\"pid\"") == NULL);
  CHECK(strstr(json, "\"mean_iteration_ms\"") != NULL);
  CHECK(strstr(json, "\"bound_mean_iteration_ms\"") != NULL);
  /* 20 iterations per policy (from the spec). */
  CHECK(strstr(json, "\"iterations\": 20") != NULL || strstr(json, "\"iterations\":20") != NULL);
  loft_free(json);
}

static void TestRunWith(void) {
  char* err = NULL;
  char* a = loft_sim_run_with(kSpec, "pid", 5, 11, 0, &err);
  char* b;
  CHECK_NO_ERROR(err);
  CHECK(strstr(a, "\"pid\"") != NULL);
  CHECK(strstr(a, "\"iterations\": 5") != NULL || strstr(a, "\"iterations\":5") != NULL);
  /* Deterministic: same spec, policy and seed → the same summary. */
  b = loft_sim_run_with(kSpec, "pid", 5, 11, 0, &err);
  CHECK_NO_ERROR(err);
  CHECK(strcmp(a, b) == 0);
  loft_free(a);
  loft_free(b);
}

static void TestErrors(void) {
  char* err = NULL;
  CHECK(loft_sim_run("nodes: [unclosed", "loft", &err) == NULL);
  CHECK(err != NULL && strlen(err) > 10);
  fprintf(stderr, "sim_test: bad YAML -> %s\n", err);
  loft_free(err);
  err = NULL;
  /* Valid YAML, invalid spec: the message names the field. */
  CHECK(loft_sim_run("dataset: {name: toy, samples: 10, sample_bytes: 1}\n", "loft", &err) == NULL);
  CHECK(err != NULL);
  fprintf(stderr, "sim_test: bad spec -> %s\n", err);
  loft_free(err);
  err = NULL;
  CHECK(loft_sim_run(kSpec, "loft,bogus", &err) == NULL);
  CHECK_ERROR_CONTAINS(err, "unknown policy 'bogus'");
  CHECK(loft_sim_run(kSpec, ",,", &err) == NULL);
  CHECK_ERROR_CONTAINS(err, "names no policy");
  CHECK(loft_sim_run(NULL, "loft", &err) == NULL);
  CHECK_ERROR_CONTAINS(err, "spec_yaml is NULL");
  CHECK(loft_sim_run(kSpec, NULL, &err) == NULL);
  CHECK_ERROR_CONTAINS(err, "policies is NULL");
  CHECK(loft_sim_run_with(kSpec, "loft", -1, 0, 0, &err) == NULL);
  CHECK_ERROR_CONTAINS(err, "iterations must be >= 0");
}

int main(void) {
  TestRun();
  TestRunWith();
  TestErrors();
  printf("sim_test: ok\n");
  return 0;
}
