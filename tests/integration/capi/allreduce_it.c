/* C consumer of the gradient exchange (loft_batch_allreduce), driven by
 * tests/integration/capi/allreduce_test.py against real agents whose spec says
 * training.model external. Compiled as C99.
 *   allreduce_it <endpoint> <node> <n> <mode> <last_round>
 * For every batch: gradient[j] = (node + 1) * (j + 1) (n floats), all-reduce,
 * print "round R count C outcome O agg0 X aggN Y" (or "... outcome -1 err
 * MESSAGE"), report, until round last_round or 20 s without a batch.
 * mode: normal | byz (rounds 2-3: NaN gradient; round 4: n + 2 floats;
 * round 6: exits without all-reducing or reporting). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test.h"
#include "loft/loft.h"

int main(int argc, char** argv) {
  char* err = NULL;
  const char* endpoint;
  int node, n, byz;
  long last;
  loft_consumer_t* c;
  float* g;
  if (argc != 6) {
    fprintf(stderr, "usage: allreduce_it <endpoint> <node> <n> <normal|byz> <last_round>\n");
    return 2;
  }
  endpoint = argv[1];
  node = atoi(argv[2]);
  n = atoi(argv[3]);
  byz = strcmp(argv[4], "byz") == 0;
  last = atol(argv[5]);
  c = loft_consumer_open(endpoint, &err);
  CHECK_NO_ERROR(err);
  /* Errors before any ring: NULL batch, no state yet. */
  CHECK(loft_batch_allreduce(NULL, NULL, 0, &err) == -1);
  CHECK_ERROR_CONTAINS(err, "batch is NULL");
  g = (float*)malloc(sizeof(float) * (size_t)(n + 2));
  CHECK(g != NULL);
  for (;;) {
    int64_t round, count;
    int j, len = n, outcome;
    loft_batch_t* b = loft_consumer_next(c, 20000, &err);
    if (b == NULL) {
      CHECK_ERROR_CONTAINS(err, "timeout");
      break;
    }
    round = loft_batch_round(b);
    count = loft_batch_count(b);
    CHECK(round >= 0); /* the agent runs a ring */
    if (byz && round == 6) {
      printf("round %ld dying\n", (long)round);
      fflush(stdout);
      _Exit(3); /* a consumer that dies mid-round: no all-reduce, no report */
    }
    if (byz && round == 4) len = n + 2;
    for (j = 0; j < len; ++j) g[j] = (float)((node + 1) * (j + 1));
    if (byz && (round == 2 || round == 3)) g[0] = (float)NAN;
    outcome = loft_batch_allreduce(b, g, (size_t)len, &err);
    if (outcome < 0) {
      printf("round %ld count %ld outcome -1 err %s\n", (long)round, (long)count, err);
      loft_free(err);
      err = NULL;
    } else {
      printf("round %ld count %ld outcome %d agg0 %.9g aggN %.9g\n", (long)round, (long)count, outcome, g[0],
             g[len - 1]);
    }
    /* A second all-reduce of the same batch is refused. */
    CHECK(loft_batch_allreduce(b, g, (size_t)len, &err) == -1);
    CHECK_ERROR_CONTAINS(err, "already");
    loft_batch_report(b, 1.0, &err);
    CHECK_NO_ERROR(err);
    loft_batch_destroy(b);
    fflush(stdout);
    if (round >= last) break;
  }
  free(g);
  loft_consumer_close(c);
  return 0;
}
