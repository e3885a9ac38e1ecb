/* Consumes batches from a local loft-agent running with
 *   compute_mode: external
 *   consumer_endpoint: ipc:///run/loft/agent.sock
 * and reports a compute time for each. Build:
 *   cc consumer.c $(pkg-config --cflags --libs loft)
 * Run: ./consumer ipc:///run/loft/agent.sock [idle_timeout_ms] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "loft/loft.h"

static double NowMs(void) {
  return (double)clock() * 1000.0 / CLOCKS_PER_SEC;
}

int main(int argc, char** argv) {
  char* err = NULL;
  const char* endpoint = argc > 1 ? argv[1] : "ipc:///run/loft/agent.sock";
  int idle_ms = argc > 2 ? atoi(argv[2]) : 10000;
  loft_consumer_t* consumer = loft_consumer_open(endpoint, &err);
  if (consumer == NULL) {
    fprintf(stderr, "open: %s\n", err);
    loft_free(err);
    return 1;
  }
  for (;;) {
    int64_t i, n;
    double t0, sum = 0;
    loft_batch_t* batch = loft_consumer_next(consumer, idle_ms, &err);
    if (batch == NULL) { /* "timeout ..." when the agent has nothing for idle_ms */
      fprintf(stderr, "next: %s\n", err);
      loft_free(err);
      break;
    }
    t0 = NowMs();
    n = loft_batch_count(batch);
    for (i = 0; i < n; ++i) { /* "train": here, the mean pixel value */
      size_t len = 0, k;
      const uint8_t* px = loft_batch_payload(batch, i, &len); /* zero copy, valid until destroy */
      for (k = 0; k < len; ++k) sum += px[k];
    }
    printf("partition %llu: %lld samples, first label %d, mean pixel %.1f\n",
           (unsigned long long)loft_batch_partition_id(batch), (long long)n, loft_batch_label(batch, 0),
           n > 0 ? sum / (double)(n * 784) : 0.0);
    loft_batch_report(batch, NowMs() - t0, &err); /* acknowledge with the compute time */
    if (err != NULL) {
      fprintf(stderr, "report: %s\n", err);
      loft_free(err);
      err = NULL;
    }
    loft_batch_destroy(batch);
  }
  loft_consumer_close(consumer);
  return 0;
}
