/* C consumer driven by tests/integration/capi/consumer_test.py against a real
 * loft-agent (compute_mode external) and loft-scheduler. Compiled as C99.
 *   consumer_it errors <unused-endpoint>   bad endpoint + timeout errptrs
 *   consumer_it abandon <endpoint>         takes one batch, exits unreported
 *   consumer_it consume <endpoint> <idle_ms>
 *       takes batches until none arrives for idle_ms, checks every payload
 *       is 784 bytes and every label 0..9, reports 250 ms per batch; prints
 *       "batches=N samples=M". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test.h"
#include "loft/loft.h"

static int Errors(const char* unused_endpoint) {
  char* err = NULL;
  loft_consumer_t* c = loft_consumer_open("not-an-endpoint", &err);
  CHECK(c == NULL);
  CHECK_ERROR_CONTAINS(err, "not-an-endpoint");
  c = loft_consumer_open("tcp://no-such-host-name:x", &err);
  CHECK(c == NULL);
  CHECK_ERROR_CONTAINS(err, "consumer endpoint");
  c = loft_consumer_open(NULL, &err);
  CHECK(c == NULL);
  CHECK_ERROR_CONTAINS(err, "endpoint is NULL");
  /* Nobody serves this endpoint: connect succeeds (ZeroMQ connects
   * lazily), next times out. */
  c = loft_consumer_open(unused_endpoint, &err);
  CHECK_NO_ERROR(err);
  CHECK(c != NULL);
  CHECK(loft_consumer_next(c, 200, &err) == NULL);
  CHECK_ERROR_CONTAINS(err, "timeout");
  CHECK(loft_consumer_next(NULL, 10, &err) == NULL);
  CHECK_ERROR_CONTAINS(err, "consumer is NULL");
  loft_batch_report(NULL, 1.0, &err);
  CHECK_ERROR_CONTAINS(err, "batch is NULL");
  CHECK(loft_batch_count(NULL) == 0);
  CHECK(loft_batch_payload(NULL, 0, NULL) == NULL);
  CHECK(loft_batch_label(NULL, 0) == -1);
  CHECK(loft_batch_sample_ids(NULL) == NULL);
  CHECK(loft_batch_labels(NULL) == NULL);
  loft_batch_destroy(NULL);
  loft_consumer_close(c);
  loft_consumer_close(NULL);
  printf("errors ok\n");
  return 0;
}

static int Abandon(const char* endpoint) {
  char* err = NULL;
  loft_consumer_t* c = loft_consumer_open(endpoint, &err);
  CHECK_NO_ERROR(err);
  loft_batch_t* b = loft_consumer_next(c, 30000, &err);
  CHECK_NO_ERROR(err);
  CHECK(loft_batch_count(b) > 0);
  printf("abandoned partition %llu (%lld samples)\n", (unsigned long long)loft_batch_partition_id(b),
         (long long)loft_batch_count(b));
  loft_batch_destroy(b);
  loft_consumer_close(c);
  return 0;
}

static int Consume(const char* endpoint, int idle_ms) {
  char* err = NULL;
  long long batches = 0, samples = 0;
  loft_consumer_t* c = loft_consumer_open(endpoint, &err);
  CHECK_NO_ERROR(err);
  for (;;) {
    int64_t i, n;
    uint64_t checksum = 0;
    loft_batch_t* b = loft_consumer_next(c, idle_ms, &err);
    if (b == NULL) {
      CHECK_ERROR_CONTAINS(err, "timeout");
      break;
    }
    n = loft_batch_count(b);
    CHECK(n > 0);
    const uint64_t* ids = loft_batch_sample_ids(b);
    const int32_t* labels = loft_batch_labels(b);
    CHECK(ids != NULL && labels != NULL);
    for (i = 0; i < n; ++i) {
      size_t len = 0;
      const uint8_t* p = loft_batch_payload(b, i, &len);
      int label = loft_batch_label(b, i);
      CHECK(p != NULL);
      CHECK(len == 784);
      CHECK(label >= 0 && label <= 9);
      /* The bulk arrays hold what the per-sample accessors return. */
      CHECK(ids[i] == loft_batch_sample_id(b, i));
      CHECK(labels[i] == label);
      checksum += p[0] + p[len - 1] + loft_batch_sample_id(b, i);
    }
    CHECK(loft_batch_payload(b, n, NULL) == NULL);
    (void)checksum;
    /* A recognisable compute time (the test finds it in the agent's metrics). */
    loft_batch_report(b, 250.0, &err);
    CHECK_NO_ERROR(err);
    loft_batch_report(b, 1.0, &err); /* a batch is acknowledged once */
    CHECK_ERROR_CONTAINS(err, "already reported");
    loft_batch_destroy(b);
    ++batches;
    samples += n;
  }
  loft_consumer_close(c);
  printf("batches=%lld samples=%lld\n", batches, samples);
  return batches > 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "errors") == 0) return Errors(argv[2]);
  if (argc >= 3 && strcmp(argv[1], "abandon") == 0) return Abandon(argv[2]);
  if (argc >= 4 && strcmp(argv[1], "consume") == 0) return Consume(argv[2], atoi(argv[3]));
  fprintf(stderr, "usage: consumer_it errors|abandon|consume ENDPOINT [IDLE_MS]\n");
  return 2;
}
