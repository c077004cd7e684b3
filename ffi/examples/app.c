/* The C ABI example of docs/c-abi.md (README.md, "The C ABI"): reads an
 * HLO module, runs the layout pass with a measure callback and prints the
 * result. Built and run by ffi/tests/c_api.rs with the command line the docs
 * quote; docs/c-abi.md shows this file, and a test keeps the two equal. */
#include <stdio.h>
#include <stdlib.h>
#include "hlo_opt.h"

/* Runs a candidate on the target; returns its runtime, negative on failure. */
static double measure(void *ctx, const char *module_text, size_t len) {
  (void)ctx, (void)module_text, (void)len;
  return -1.0; /* no hardware here: keep the cost model's choice */
}

/* Reads all of `f` into a malloc'ed buffer; NULL on a read error. */
static char *read_all(FILE *f, size_t *len) {
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf != NULL) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break; /* end of file or error */
    char *bigger = realloc(buf, cap *= 2);
    if (bigger == NULL) free(buf);
    buf = bigger;
  }
  if (buf != NULL && ferror(f)) {
    free(buf);
    buf = NULL;
  }
  *len = n;
  return buf;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODULE.hlo\n", argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  size_t len = 0;
  char *text = f != NULL ? read_all(f, &len) : NULL;
  if (f != NULL) fclose(f);
  if (text == NULL) {
    perror(argv[1]);
    return 1;
  }

  hlo_opt_module_t *m = NULL;
  hlo_opt_options_t *opts = NULL;
  char *report = NULL, *out = NULL;
  int changed = 0, ok =
      hlo_opt_module_parse(text, len, &m) == HLO_OPT_OK &&
      hlo_opt_options_new(&opts) == HLO_OPT_OK &&
      hlo_opt_options_set_seed(opts, 42) == HLO_OPT_OK &&
      hlo_opt_options_set_top_k(opts, 4) == HLO_OPT_OK &&
      hlo_opt_options_set_measure(opts, measure, NULL) == HLO_OPT_OK &&
      hlo_opt_module_run_passes(m, "layout", opts, &changed, &report) == HLO_OPT_OK &&
      hlo_opt_module_print(m, &out, NULL) == HLO_OPT_OK;
  if (ok) {
    fprintf(stderr, "%s(changed: %d)\n", report, changed);
    fputs(out, stdout);
  } else {
    fprintf(stderr, "hlo-opt %s: %s\n", hlo_opt_version(), hlo_opt_last_error());
  }
  hlo_opt_string_free(report);
  hlo_opt_string_free(out);
  hlo_opt_options_free(opts);
  hlo_opt_module_free(m);
  free(text);
  return ok ? 0 : 1;
}
