/* Minimal assertion helpers for the C API tests (compiled as C99). */
#ifndef LOFT_CAPI_TEST_H_
#define LOFT_CAPI_TEST_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

/* *err must be NULL (no error); prints the message otherwise. */
#define CHECK_NO_ERROR(err)                                                        \
  do {                                                                             \
    if ((err) != NULL) {                                                           \
      fprintf(stderr, "%s:%d: unexpected error: %s\n", __FILE__, __LINE__, (err)); \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

/* err must be set and contain `needle`; frees it and resets it to NULL. */
#define CHECK_ERROR_CONTAINS(err, needle)                                                              \
  do {                                                                                                 \
    if ((err) == NULL) {                                                                               \
      fprintf(stderr, "%s:%d: expected an error containing '%s'\n", __FILE__, __LINE__, needle);       \
      exit(1);                                                                                         \
    }                                                                                                  \
    if (strstr((err), (needle)) == NULL) {                                                             \
      fprintf(stderr, "%s:%d: error '%s' does not contain '%s'\n", __FILE__, __LINE__, (err), needle); \
      exit(1);                                                                                         \
    }                                                                                                  \
    loft_free(err);                                                                                    \
    (err) = NULL;                                                                                      \
  } while (0)

#endif /* LOFT_CAPI_TEST_H_ */
