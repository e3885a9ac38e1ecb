/* Runs a cluster spec file through the simulator with libloft and prints
 * summary.json. Usage: simulate SPEC.yaml [POLICIES] (default
 * "loft,lbbsp,uniform,pid").
 *   cc simulate.c $(pkg-config --cflags --libs loft) -o simulate */
#include <loft/loft.h>
#include <stdio.h>
#include <stdlib.h>

static char* ReadFile(const char* path) {
  FILE* f = fopen(path, "rb");
  char* buf;
  long n;
  if (f == NULL) return NULL;
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return NULL;
  }
  buf = malloc((size_t)n + 1);
  if (buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n) {
    buf[n] = '\0';
  } else {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  return buf;
}

int main(int argc, char** argv) {
  char* err = NULL;
  char* spec;
  char* summary;
  if (argc < 2) {
    fprintf(stderr, "usage: %s SPEC.yaml [POLICIES]\n", argv[0]);
    return 2;
  }
  spec = ReadFile(argv[1]);
  if (spec == NULL) {
    fprintf(stderr, "simulate: cannot read %s\n", argv[1]);
    return 1;
  }
  summary = loft_sim_run(spec, argc > 2 ? argv[2] : "loft,lbbsp,uniform,pid", &err);
  free(spec);
  if (summary == NULL) {
    fprintf(stderr, "simulate: %s\n", err);
    loft_free(err);
    return 1;
  }
  printf("%s\n", summary);
  loft_free(summary);
  return 0;
}
