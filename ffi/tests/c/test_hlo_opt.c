/*
 * The C ABI's specification, as a C program a compiler engineer could write.
 * Built and run by ffi/tests/c_api.rs (also under valgrind):
 *
 *   test_hlo_opt MODULE_A MODULE_B EXPECTED_VERSION
 *
 * MODULE_A and MODULE_B are real HLO modules with configurable nodes. The
 * environment variable HLO_OPT_TEST_PASSES=1 enables the parts that run the
 * layout pass with its default model (they need ONNX Runtime); with 0 they are
 * skipped with a message. HLO_OPT_TEST_BUDGET=N (optional) caps the layout
 * search at N configurations so that the valgrind run stays affordable.
 * Exit status 0 when every check passed.
 */
#include "hlo_opt.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static size_t search_budget = 0; /* 0: the library's default */
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  pthread_mutex_lock(&report_lock);
  fprintf(stderr, "%s:%d: check failed: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  failures++;
  pthread_mutex_unlock(&report_lock);
}

#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) fail(__FILE__, __LINE__, __VA_ARGS__);   \
  } while (0)

/* The call returned `want`, and the last error says so (non-empty on error). */
#define CHECK_STATUS(call, want)                                                        \
  do {                                                                                  \
    hlo_opt_status_t got_ = (call);                                                     \
    const char *msg_ = hlo_opt_last_error();                                            \
    CHECK(got_ == (want), "%s returned %d, want %d (last error: %s)", #call, (int)got_, \
          (int)(want), msg_);                                                           \
    CHECK(msg_ != NULL, "hlo_opt_last_error() returned NULL");                          \
    if (msg_ != NULL) {                                                                 \
      if ((want) == HLO_OPT_OK)                                                         \
        CHECK(msg_[0] == '\0', "last error after success is \"%s\", want \"\"", msg_);  \
      else                                                                              \
        CHECK(msg_[0] != '\0', "%s failed with an empty last error", #call);            \
    }                                                                                   \
  } while (0)

#define CHECK_ERROR_MENTIONS(needle)                                                \
  CHECK(strstr(hlo_opt_last_error(), (needle)) != NULL,                             \
        "last error \"%s\" does not mention \"%s\"", hlo_opt_last_error(), (needle))

/* Reads the whole file (any size) into a malloc'ed, NUL-terminated buffer;
   exits with status 2 when it cannot be opened or read. */
static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    exit(2);
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  while (buf != NULL) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    char *bigger = realloc(buf, (cap *= 2) + 1);
    if (bigger == NULL) free(buf);
    buf = bigger;
  }
  if (buf == NULL || ferror(f)) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(2);
  }
  fclose(f);
  buf[n] = '\0';
  *len = n;
  return buf;
}

static int count(const char *haystack, const char *needle) {
  int n = 0;
  for (const char *p = strstr(haystack, needle); p != NULL; p = strstr(p + 1, needle)) n++;
  return n;
}

/* Parses `text` (must succeed). */
static hlo_opt_module_t *parse_ok(const char *text, size_t len) {
  hlo_opt_module_t *m = NULL;
  CHECK_STATUS(hlo_opt_module_parse(text, len, &m), HLO_OPT_OK);
  CHECK(m != NULL, "parse succeeded but returned NULL");
  return m;
}

/* Prints `m` (must succeed); the caller frees the result with hlo_opt_string_free. */
static char *print_ok(const hlo_opt_module_t *m) {
  char *text = NULL;
  size_t len = 0;
  CHECK_STATUS(hlo_opt_module_print(m, &text, &len), HLO_OPT_OK);
  CHECK(text != NULL, "print succeeded but returned NULL");
  if (text != NULL) CHECK(strlen(text) == len, "printed length %zu, strlen %zu", len, strlen(text));
  return text;
}

/* Parses `text`, prints it: the printed text (caller frees). */
static char *reprint(const char *text) {
  hlo_opt_module_t *m = parse_ok(text, strlen(text));
  char *out = m != NULL ? print_ok(m) : NULL;
  hlo_opt_module_free(m);
  return out;
}

/* Runs `passes` on a fresh parse of `text` with `opts`: the printed result. */
static char *optimize(const char *text, const char *passes, const hlo_opt_options_t *opts) {
  hlo_opt_module_t *m = parse_ok(text, strlen(text));
  char *out = NULL;
  if (m == NULL) return NULL;
  CHECK_STATUS(hlo_opt_module_run_passes(m, passes, opts, NULL, NULL), HLO_OPT_OK);
  out = print_ok(m);
  hlo_opt_module_free(m);
  return out;
}

static int same(const char *a, const char *b) { return a != NULL && b != NULL && strcmp(a, b) == 0; }

/* New options with the test's search budget (free with hlo_opt_options_free). */
static hlo_opt_options_t *new_options(void) {
  hlo_opt_options_t *opts = NULL;
  CHECK_STATUS(hlo_opt_options_new(&opts), HLO_OPT_OK);
  if (search_budget > 0) CHECK_STATUS(hlo_opt_options_set_budget(opts, search_budget), HLO_OPT_OK);
  return opts;
}

/* ------------------------------------------------------------------------ */

static void test_version(const char *expected) {
  const char *v = hlo_opt_version();
  CHECK(v != NULL && strcmp(v, expected) == 0, "version \"%s\", want \"%s\"", v ? v : "(null)", expected);
  CHECK(hlo_opt_version() == v, "the version string is static");
  CHECK(hlo_opt_last_error() != NULL && hlo_opt_last_error()[0] == '\0',
        "a fresh thread has an empty last error");
}

/* Parse a real module, print it, and the printed text parses to the same text. */
static void test_parse_print(const char *text, size_t len) {
  hlo_opt_module_t *m = parse_ok(text, len);
  if (m == NULL) return;
  char *printed = print_ok(m);
  CHECK(printed != NULL && strncmp(printed, "HloModule ", 10) == 0, "printed text starts with HloModule");
  CHECK(printed != NULL && strstr(printed, "ENTRY") != NULL, "printed text has an ENTRY computation");
  CHECK(printed != NULL && count(printed, " dot(") == count(text, " dot("), "printing keeps every dot");
  /* len_out is optional */
  char *again = NULL;
  CHECK_STATUS(hlo_opt_module_print(m, &again, NULL), HLO_OPT_OK);
  CHECK(same(printed, again), "printing twice gives the same text");
  hlo_opt_string_free(again);
  char *round = reprint(printed);
  CHECK(same(printed, round), "print(parse(print(m))) == print(m)");
  hlo_opt_string_free(round);
  hlo_opt_string_free(printed);
  hlo_opt_module_free(m);

  /* The text need not be NUL-terminated: only `len` bytes are read. */
  char *copy = malloc(len + 16);
  memcpy(copy, text, len);
  memset(copy + len, '@', 16); /* garbage after the module */
  m = parse_ok(copy, len);
  hlo_opt_module_free(m);
  free(copy);
}

/* Whether `m` serializes to exactly the `n` bytes at `want`. */
static int proto_is(const hlo_opt_module_t *m, const uint8_t *want, size_t n) {
  uint8_t *got = NULL;
  size_t len = 0;
  CHECK_STATUS(hlo_opt_module_serialize_proto(m, &got, &len), HLO_OPT_OK);
  int equal = got != NULL && len == n && memcmp(got, want, n) == 0;
  hlo_opt_bytes_free(got, len);
  return equal;
}

/* HloModuleProto out and back in: the module read from the proto is the
 * same module (its proto is the same bytes: ids, order and every attribute
 * kept), and its printed text parses to a module that prints the same text.
 * (A module read from a proto prints its computations in XLA's order, so
 * the reparsed module's proto may list them in another order; and the
 * original text need not come back: the text parser keeps spellings such
 * as `dimensions={}` that a proto cannot hold.) */
static void test_proto_round_trip(const char *text, size_t len) {
  hlo_opt_module_t *m = parse_ok(text, len);
  if (m == NULL) return;
  uint8_t *bytes = NULL;
  size_t n = 0;
  CHECK_STATUS(hlo_opt_module_serialize_proto(m, &bytes, &n), HLO_OPT_OK);
  CHECK(bytes != NULL && n > 0, "serialize returned %zu bytes", n);
  if (bytes == NULL) return;
  hlo_opt_module_t *back = NULL;
  CHECK_STATUS(hlo_opt_module_parse_proto(bytes, n, &back), HLO_OPT_OK);
  if (back != NULL) {
    CHECK(proto_is(back, bytes, n), "the proto of the read module differs");
    char *printed = print_ok(back);
    hlo_opt_module_t *reparsed = printed ? parse_ok(printed, strlen(printed)) : NULL;
    if (reparsed != NULL) {
      char *again = print_ok(reparsed);
      CHECK(again != NULL && strcmp(again, printed) == 0,
            "the text of the read module parses to a module that prints differently");
      hlo_opt_string_free(again);
      hlo_opt_module_free(reparsed);
    }
    hlo_opt_string_free(printed);
    hlo_opt_module_free(back);
  }
  /* Truncated, garbage and empty-of-computations bytes: a parse error with
   * a message, never a crash; *out is NULL afterwards. */
  hlo_opt_module_t *bad = (hlo_opt_module_t *)&bad;
  CHECK_STATUS(hlo_opt_module_parse_proto(bytes, n / 2, &bad), HLO_OPT_ERROR_PARSE);
  CHECK_ERROR_MENTIONS("HloModuleProto");
  CHECK(bad == NULL, "a failed parse leaves *out NULL");
  /* field 1 (name) declaring a 4 GiB string in 7 bytes */
  const uint8_t huge_length[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01};
  bad = (hlo_opt_module_t *)&bad;
  CHECK_STATUS(hlo_opt_module_parse_proto(huge_length, sizeof huge_length, &bad), HLO_OPT_ERROR_PARSE);
  CHECK_ERROR_MENTIONS("HloModuleProto");
  CHECK(bad == NULL, "a failed parse leaves *out NULL");
  /* HLO text is not a proto */
  CHECK_STATUS(hlo_opt_module_parse_proto((const uint8_t *)text, len, &bad), HLO_OPT_ERROR_PARSE);
  CHECK(bad == NULL, "a failed parse leaves *out NULL");
  /* a well-formed proto of a module without computations */
  const uint8_t no_entry[] = {0x0a, 0x01, 'm'};
  CHECK_STATUS(hlo_opt_module_parse_proto(no_entry, sizeof no_entry, &bad), HLO_OPT_ERROR_PARSE);
  CHECK(bad == NULL, "a failed parse leaves *out NULL");
  CHECK_STATUS(hlo_opt_module_parse_proto(bytes, 0, &bad), HLO_OPT_ERROR_PARSE);

  /* NULL arguments */
  bad = (hlo_opt_module_t *)&bad;
  CHECK_STATUS(hlo_opt_module_parse_proto(NULL, 4, &bad), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_ERROR_MENTIONS("bytes");
  CHECK(bad == NULL, "a failed parse leaves *out NULL");
  CHECK_STATUS(hlo_opt_module_parse_proto(bytes, n, NULL), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_ERROR_MENTIONS("out");
  uint8_t *none = (uint8_t *)&none;
  size_t none_len = 99;
  CHECK_STATUS(hlo_opt_module_serialize_proto(NULL, &none, &none_len), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_ERROR_MENTIONS("module");
  CHECK(none == NULL && none_len == 0, "a failed serialize leaves NULL and 0 behind");
  CHECK_STATUS(hlo_opt_module_serialize_proto(m, NULL, &none_len), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_ERROR_MENTIONS("bytes_out");
  CHECK_STATUS(hlo_opt_module_serialize_proto(m, &none, NULL), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_ERROR_MENTIONS("len_out");
  hlo_opt_bytes_free(NULL, 0);
  hlo_opt_bytes_free(bytes, n);
  hlo_opt_module_free(m);
}

static void test_error_paths(const char *text, size_t len) {
  hlo_opt_module_t *m = (hlo_opt_module_t *)&m; /* non-NULL garbage: must be overwritten */
  char *s = (char *)&s;

  /* NULL arguments */
  CHECK_STATUS(hlo_opt_module_parse(NULL, 10, &m), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_ERROR_MENTIONS("text");
  CHECK(m == NULL, "a failed parse sets *out to NULL");
  CHECK_STATUS(hlo_opt_module_parse(text, len, NULL), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_ERROR_MENTIONS("out");
  CHECK_STATUS(hlo_opt_module_print(NULL, &s, NULL), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK(s == NULL, "a failed print sets *text_out to NULL");
  CHECK_STATUS(hlo_opt_list_passes(NULL), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_new(NULL), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_seed(NULL, 1), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_budget(NULL, 1), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_top_k(NULL, 1), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_threads(NULL, 1), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_min_gain(NULL, 1.0), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_trust_radius(NULL, 3), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_verify_each(NULL, 1), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_layout_model(NULL, NULL), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_tile_model(NULL, NULL), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_measure(NULL, NULL, NULL), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_measure_pjrt(NULL, NULL), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(hlo_opt_module_run_passes(NULL, "layout", NULL, NULL, NULL), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_ERROR_MENTIONS("module");
  /* Freeing NULL is a no-op. */
  hlo_opt_module_free(NULL);
  hlo_opt_options_free(NULL);
  hlo_opt_string_free(NULL);

  /* Invalid HLO: status PARSE, message with line:col. */
  m = (hlo_opt_module_t *)&m;
  const char *bad = "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] frobnicate(p)\n}\n";
  CHECK_STATUS(hlo_opt_module_parse(bad, strlen(bad), &m), HLO_OPT_ERROR_PARSE);
  CHECK_ERROR_MENTIONS(":5:");
  CHECK(m == NULL, "a failed parse sets *out to NULL");
  CHECK_STATUS(hlo_opt_module_parse("", 0, &m), HLO_OPT_ERROR_PARSE);
  CHECK_STATUS(hlo_opt_module_parse("\xff\xfe", 2, &m), HLO_OPT_ERROR_PARSE);
  CHECK_ERROR_MENTIONS("UTF-8");
  /* a module cut short (len < the text) */
  CHECK_STATUS(hlo_opt_module_parse(text, len / 2, &m), HLO_OPT_ERROR_PARSE);
  CHECK(m == NULL, "a failed parse sets *out to NULL");

  /* A success clears the last error. */
  hlo_opt_module_t *good = parse_ok(text, len);
  if (good == NULL) return;

  /* Unknown pass: the module is unchanged, the message lists the known passes. */
  char *before = print_ok(good);
  int changed = 7;
  char *explain = (char *)&explain;
  CHECK_STATUS(hlo_opt_module_run_passes(good, "no-such-pass", NULL, &changed, &explain),
               HLO_OPT_ERROR_UNKNOWN_PASS);
  CHECK_ERROR_MENTIONS("no-such-pass");
  CHECK_ERROR_MENTIONS("layout");
  CHECK(explain == NULL, "a failed run sets *explain_out to NULL");
  CHECK(changed == 7, "a failed run leaves *changed_out alone");
  CHECK_STATUS(hlo_opt_module_run_passes(good, "layout,no-such-pass", NULL, NULL, NULL),
               HLO_OPT_ERROR_UNKNOWN_PASS);
  CHECK_STATUS(hlo_opt_module_run_passes(good, "", NULL, NULL, NULL), HLO_OPT_ERROR_UNKNOWN_PASS);
  CHECK_STATUS(hlo_opt_module_run_passes(good, NULL, NULL, NULL, NULL), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_ERROR_MENTIONS("passes");
  char *after = print_ok(good);
  CHECK(same(before, after), "a failed run leaves the module unchanged");
  hlo_opt_string_free(before);
  hlo_opt_string_free(after);

  /* Invalid option values. */
  hlo_opt_options_t *opts = NULL;
  CHECK_STATUS(hlo_opt_options_new(&opts), HLO_OPT_OK);
  CHECK_STATUS(hlo_opt_options_set_budget(opts, 0), HLO_OPT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_top_k(opts, 0), HLO_OPT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_layout_model(opts, ""), HLO_OPT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_layout_model(opts, NULL), HLO_OPT_OK);
  hlo_opt_options_free(opts);

  /* The pass list names the layout pass. */
  char *list = NULL;
  CHECK_STATUS(hlo_opt_list_passes(&list), HLO_OPT_OK);
  CHECK(list != NULL && strstr(list, "layout\n") != NULL, "pass list \"%s\" names layout", list ? list : "");
  hlo_opt_string_free(list);

  hlo_opt_module_free(good);
}

/* The last error belongs to the thread that made the failing call. */
static void *fail_on_other_thread(void *arg) {
  (void)arg;
  hlo_opt_module_t *m = NULL;
  hlo_opt_module_parse("not hlo", 7, &m);
  return strdup(hlo_opt_last_error());
}

static void test_last_error_is_thread_local(void) {
  char *list = NULL;
  CHECK_STATUS(hlo_opt_list_passes(&list), HLO_OPT_OK); /* clears this thread's error */
  hlo_opt_string_free(list);
  pthread_t t;
  char *other = NULL;
  pthread_create(&t, NULL, fail_on_other_thread, NULL);
  pthread_join(t, (void **)&other);
  CHECK(other != NULL && other[0] != '\0', "the failing thread sees its error");
  CHECK(hlo_opt_last_error()[0] == '\0', "another thread's failure does not show here: \"%s\"",
        hlo_opt_last_error());
  free(other);
}

/* ------------------------------------------------------------------------ */
/* Passes (need ONNX Runtime for the default model)                          */

/* Parses `text` and runs the layout pass on it with `opts` (NULL: the
 * defaults), which must succeed; `*changed` and `*explain` (freed by the
 * caller with hlo_opt_string_free) get the pass's answers. Returns the module
 * (NULL when the parse failed, already reported). */
static hlo_opt_module_t *run_layout(const char *text, size_t len, const hlo_opt_options_t *opts, int *changed,
                                   char **explain) {
  *changed = -1;
  *explain = NULL;
  hlo_opt_module_t *m = parse_ok(text, len);
  if (m == NULL) return NULL;
  CHECK_STATUS(hlo_opt_module_run_passes(m, "layout", opts, changed, explain), HLO_OPT_OK);
  return m;
}

/* Runs the layout pass with the default model and checks the result. */
static void test_layout(const char *text, size_t len) {
  int changed;
  char *explain;
  /* NULL options = the defaults (unless the test caps the budget). */
  hlo_opt_options_t *opts = search_budget > 0 ? new_options() : NULL;
  hlo_opt_module_t *m = run_layout(text, len, opts, &changed, &explain);
  if (m == NULL) {
    hlo_opt_options_free(opts);
    return;
  }
  CHECK(changed == 0 || changed == 1, "changed_out is 0 or 1, got %d", changed);
  CHECK(explain != NULL && strncmp(explain, "layout", 6) == 0, "the report starts with the pass name: %s",
        explain ? explain : "(null)");
  char *out = print_ok(m);
  printf("--- layout report ---\n%s--- module after layout ---\n%s\n", explain ? explain : "", out ? out : "");
  if (out != NULL) {
    CHECK(strncmp(out, text, 10) == 0 && strstr(out, "ENTRY") != NULL, "the result is an HLO module");
    CHECK(count(out, " dot(") == count(text, " dot("), "layout assignment keeps every dot");
    /* Compared with the input as the library prints it (the input file's
     * own spelling may differ: names without %, spacing). */
    char *canon = reprint(text);
    CHECK(changed == !same(out, canon), "changed_out=%d agrees with the text", changed);
    hlo_opt_string_free(canon);
    char *round = reprint(out);
    CHECK(same(out, round), "the result parses, verifies and prints back the same");
    hlo_opt_string_free(round);
  }
  /* Deterministic: the same input, model and seed give the same module. */
  char *again = optimize(text, "layout", opts);
  CHECK(same(out, again), "two runs with the same seed give the same module");
  hlo_opt_string_free(again);
  hlo_opt_string_free(out);
  hlo_opt_string_free(explain);
  hlo_opt_options_free(opts);
  hlo_opt_module_free(m);
}

static void test_missing_model(const char *text, size_t len) {
  hlo_opt_module_t *m = parse_ok(text, len);
  hlo_opt_options_t *opts = new_options();
  CHECK_STATUS(hlo_opt_options_set_layout_model(opts, "/nonexistent/hlo-opt/layout.hlocm"), HLO_OPT_OK);
  char *before = print_ok(m);
  CHECK_STATUS(hlo_opt_module_run_passes(m, "layout", opts, NULL, NULL), HLO_OPT_ERROR_MODEL);
  CHECK_ERROR_MENTIONS("/nonexistent/hlo-opt/layout.hlocm");
  char *after = print_ok(m);
  CHECK(same(before, after), "a failed run leaves the module unchanged");
  hlo_opt_string_free(before);
  hlo_opt_string_free(after);
  hlo_opt_options_free(opts);
  hlo_opt_module_free(m);
}

/* --min-gain: with no minimum the layout pass takes the model's best
 * configuration (which, on this module, differs from the compiler default);
 * with a minimum no prediction can reach, it keeps the module and says why.
 * Out-of-range minimums are refused. */
static void test_min_gain(const char *text, size_t len) {
  hlo_opt_options_t *opts = new_options();
  /* The rule on the whole configuration: no trust region, and a budget at
   * which the search's best on mlp needs few copies (at valgrind's 300 the
   * default model's best needs 6 copies, 44% of the module's bytes). */
  CHECK_STATUS(hlo_opt_options_set_trust_radius(opts, -1), HLO_OPT_OK);
  CHECK_STATUS(hlo_opt_options_set_budget(opts, 1000), HLO_OPT_OK);
  CHECK_STATUS(hlo_opt_options_set_min_gain(opts, 0.0), HLO_OPT_OK);
  int changed;
  char *explain;
  hlo_opt_module_t *m = run_layout(text, len, opts, &changed, &explain);
  CHECK(changed == 1, "with --min-gain 0 the layout pass changes the module: %s", explain ? explain : "");
  hlo_opt_string_free(explain);
  hlo_opt_module_free(m);

  CHECK_STATUS(hlo_opt_options_set_min_gain(opts, 99.0), HLO_OPT_OK);
  m = run_layout(text, len, opts, &changed, &explain);
  CHECK(changed == 0, "with --min-gain 99 the layout pass keeps the module");
  CHECK(explain != NULL && strstr(explain, "kept the compiler default") != NULL &&
            strstr(explain, "--min-gain 99%") != NULL,
        "the report names the minimum gain that kept the default: %s", explain ? explain : "(null)");
  char *out = print_ok(m);
  char *canon = reprint(text);
  CHECK(same(out, canon), "a kept module prints as the input");
  hlo_opt_string_free(out);
  hlo_opt_string_free(canon);
  hlo_opt_string_free(explain);
  hlo_opt_module_free(m);

  CHECK_STATUS(hlo_opt_options_set_min_gain(opts, -0.5), HLO_OPT_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_MENTIONS("-0.5");
  CHECK_STATUS(hlo_opt_options_set_min_gain(opts, NAN), HLO_OPT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_min_gain(opts, INFINITY), HLO_OPT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hlo_opt_options_set_min_gain(opts, 100.0), HLO_OPT_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_MENTIONS("less than 100");
  hlo_opt_options_free(opts);
}

static void test_trust_radius(const char *text, size_t len) {
  hlo_opt_options_t *opts = new_options();
  /* Radius 0: no configuration but the compiler default is in the region. */
  CHECK_STATUS(hlo_opt_options_set_trust_radius(opts, 0), HLO_OPT_OK);
  CHECK_STATUS(hlo_opt_options_set_min_gain(opts, 0.0), HLO_OPT_OK);
  int changed;
  char *explain;
  hlo_opt_module_t *m = run_layout(text, len, opts, &changed, &explain);
  CHECK(changed == 0, "radius 0 keeps the module: %s", explain ? explain : "");
  CHECK(explain != NULL && strstr(explain, "trust region (--trust-radius 0; `all` lifts it): the 1 configuration that changes at most 0 of the") != NULL,
        "the report names the radius: %s", explain ? explain : "(null)");
  hlo_opt_string_free(explain);
  hlo_opt_module_free(m);
  CHECK_STATUS(hlo_opt_options_set_trust_radius(opts, -2), HLO_OPT_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_MENTIONS("-2");
  hlo_opt_options_free(opts);
}

typedef struct {
  int calls;
  int bad_text;
  double result;   /* < 0: fail every measurement */
  char *fastest;   /* the candidate given the lowest runtime (strdup) */
  const char *slow; /* a candidate measured slowest of all (NULL: none) */
} measure_ctx;

static double measure(void *ctx, const char *candidate, size_t len) {
  measure_ctx *c = ctx;
  c->calls++;
  if (candidate == NULL || strlen(candidate) != len || strncmp(candidate, "HloModule ", 10) != 0) {
    c->bad_text++;
  } else {
    /* The candidate is a whole module the library accepts. */
    hlo_opt_module_t *m = NULL;
    if (hlo_opt_module_parse(candidate, len, &m) != HLO_OPT_OK) c->bad_text++;
    hlo_opt_module_free(m);
  }
  if (c->result < 0) return c->result;
  if (c->slow != NULL && candidate != NULL && same(candidate, c->slow)) return c->result;
  /* Each other candidate measures faster than the one before: the last is the fastest. */
  free(c->fastest);
  c->fastest = strdup(candidate);
  return c->result - (double)c->calls;
}

static void test_measure(const char *text) {
  const size_t top_k = 3;
  hlo_opt_options_t *opts = new_options();
  CHECK_STATUS(hlo_opt_options_set_top_k(opts, top_k), HLO_OPT_OK);
  /* The whole space: the model's top candidates then change the module (in
   * the trust region mlp's best-scored ones spell out layouts it has). */
  CHECK_STATUS(hlo_opt_options_set_trust_radius(opts, -1), HLO_OPT_OK);
  char *model_only = optimize(text, "layout", opts);

  /* The pass measures its top-k candidates plus, for layout, the compiler default. */
  const int most_calls = (int)top_k + 1;

  /* A callback whose measurements all fail: the model's choice stands. */
  measure_ctx failing = {0, 0, -1.0, NULL, NULL};
  CHECK_STATUS(hlo_opt_options_set_measure(opts, measure, &failing), HLO_OPT_OK);
  char *with_failing = optimize(text, "layout", opts);
  CHECK(failing.calls >= 1 && failing.calls <= most_calls, "the pass measured %d candidates, want 1..%d",
        failing.calls, most_calls);
  CHECK(failing.bad_text == 0, "%d candidates were not valid NUL-terminated modules", failing.bad_text);
  CHECK(same(model_only, with_failing), "failed measurements leave the model's choice");

  /* A working callback: each candidate a valid module; the fastest one is
   * kept; the model's own choice measures slowest. */
  measure_ctx working = {0, 0, 100.0, NULL, model_only};
  CHECK_STATUS(hlo_opt_options_set_measure(opts, measure, &working), HLO_OPT_OK);
  char *with_working = optimize(text, "layout", opts);
  CHECK(working.calls >= 2 && working.calls <= most_calls, "the pass measured %d candidates, want 2..%d",
        working.calls, most_calls);
  CHECK(working.bad_text == 0, "%d candidates were not valid NUL-terminated modules", working.bad_text);
  CHECK(same(with_working, working.fastest), "the pass keeps the candidate measured fastest");
  CHECK(!same(with_working, model_only), "measurements overrule the model (the model's best measured slowest)");
  free(working.fastest);

  /* The built-in measurer refuses a plugin that is not there, with a message. */
  CHECK_STATUS(hlo_opt_options_set_measure_pjrt(opts, "/nonexistent/pjrt_plugin.so"),
               HLO_OPT_ERROR_RUNTIME);
  CHECK_ERROR_MENTIONS("/nonexistent/pjrt_plugin.so");

  /* Clearing the callback restores the model-only run. */
  CHECK_STATUS(hlo_opt_options_set_measure(opts, NULL, NULL), HLO_OPT_OK);
  char *cleared = optimize(text, "layout", opts);
  CHECK(same(model_only, cleared), "without a callback the result is the model's choice again");

  hlo_opt_string_free(model_only);
  hlo_opt_string_free(with_failing);
  hlo_opt_string_free(with_working);
  hlo_opt_string_free(cleared);
  hlo_opt_options_free(opts);
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */

#define THREADS 8

typedef struct {
  int index;
  int run_passes;
  hlo_opt_module_t *shared;        /* same-module test: the shared handle */
  const hlo_opt_options_t *opts;   /* shared by all threads */
  const char *text;                /* different-module test: this thread's input */
  const char *expected;            /* different-module test: the single-threaded result */
} thread_arg;

/* Many threads on one module: runs and prints interleave, each sees a whole module. */
static void *same_module_thread(void *p) {
  thread_arg *a = p;
  if (a->run_passes)
    CHECK_STATUS(hlo_opt_module_run_passes(a->shared, "layout", a->opts, NULL, NULL), HLO_OPT_OK);
  char *out = print_ok(a->shared);
  char *round = out != NULL ? reprint(out) : NULL;
  CHECK(same(out, round), "thread %d printed a whole module", a->index);
  /* Errors stay on their thread while others succeed. */
  CHECK_STATUS(hlo_opt_module_run_passes(a->shared, "nope", a->opts, NULL, NULL), HLO_OPT_ERROR_UNKNOWN_PASS);
  hlo_opt_string_free(round);
  hlo_opt_string_free(out);
  return NULL;
}

/* Threads on their own modules: each gets the single-threaded result. */
static void *own_module_thread(void *p) {
  thread_arg *a = p;
  for (int round = 0; round < 2; round++) {
    char *out = a->run_passes ? optimize(a->text, "layout", a->opts) : reprint(a->text);
    CHECK(same(out, a->expected), "thread %d round %d: result differs from the single-threaded one", a->index,
          round);
    hlo_opt_string_free(out);
  }
  return NULL;
}

static void test_threads(const char *text_a, const char *text_b, int run_passes) {
  hlo_opt_options_t *opts = new_options();
  CHECK_STATUS(hlo_opt_options_set_threads(opts, 1), HLO_OPT_OK);
  pthread_t threads[THREADS];
  thread_arg args[THREADS];

  /* Same module. The runs are serialized, each deterministic, so the final
     module is THREADS sequential runs of the pass, whatever the order. */
  char *expected_final = NULL;
  {
    hlo_opt_module_t *seq = parse_ok(text_a, strlen(text_a));
    for (int i = 0; run_passes && i < THREADS; i++)
      CHECK_STATUS(hlo_opt_module_run_passes(seq, "layout", opts, NULL, NULL), HLO_OPT_OK);
    expected_final = print_ok(seq);
    hlo_opt_module_free(seq);
  }
  hlo_opt_module_t *shared = parse_ok(text_a, strlen(text_a));
  for (int i = 0; i < THREADS; i++) {
    args[i] = (thread_arg){i, run_passes, shared, opts, NULL, NULL};
    pthread_create(&threads[i], NULL, same_module_thread, &args[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  char *final = print_ok(shared);
  CHECK(same(final, expected_final), "%d concurrent runs on one module equal %d sequential runs", THREADS,
        THREADS);
  hlo_opt_string_free(final);
  hlo_opt_string_free(expected_final);
  hlo_opt_module_free(shared);

  /* Different modules. */
  char *expected_a = run_passes ? optimize(text_a, "layout", opts) : reprint(text_a);
  char *expected_b = run_passes ? optimize(text_b, "layout", opts) : reprint(text_b);
  for (int i = 0; i < THREADS; i++) {
    int use_a = i % 2 == 0;
    args[i] = (thread_arg){i, run_passes, NULL, opts, use_a ? text_a : text_b, use_a ? expected_a : expected_b};
    pthread_create(&threads[i], NULL, own_module_thread, &args[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  hlo_opt_string_free(expected_a);
  hlo_opt_string_free(expected_b);
  hlo_opt_options_free(opts);
}

/* The xla-cpu decision through the C ABI: the same choice as the pass's
 * report, a clear refusal for a jaxlib no built-in model was trained for. */
static void test_xla_cpu_decide(const char *text, size_t len) {
  hlo_opt_module_t *m = parse_ok(text, len);
  if (m == NULL) return;
  char *json = NULL;
  CHECK_STATUS(hlo_opt_module_xla_cpu_decide(m, "0.10.2", NULL, &json), HLO_OPT_OK);
  CHECK(json != NULL && strstr(json, "\"chosen\":\"") != NULL, "decision JSON names the choice: %s", json ? json : "(null)");
  if (json != NULL) {
    char chosen[64] = {0};
    const char *at = strstr(json, "\"chosen\":\"");
    if (at != NULL) sscanf(at + 10, "%63[^\"]", chosen);
    hlo_opt_options_t *opts = new_options();
    char *explain = NULL;
    int changed = -1;
    hlo_opt_module_t *m2 = parse_ok(text, len);
    if (m2 != NULL && opts != NULL) {
      CHECK_STATUS(hlo_opt_options_set_xla_version(opts, "0.10.2"), HLO_OPT_OK);
      CHECK_STATUS(hlo_opt_module_run_passes(m2, "xla-cpu", opts, &changed, &explain), HLO_OPT_OK);
      char want[96];
      snprintf(want, sizeof want, "chose %s (", chosen);
      CHECK(explain != NULL && strstr(explain, want) != NULL, "the pass's report says \"%s\": %s", want,
            explain ? explain : "(null)");
      CHECK(changed == 0, "the xla-cpu pass leaves the module unchanged");
    }
    hlo_opt_string_free(explain);
    hlo_opt_module_free(m2);
    hlo_opt_options_free(opts);
  }
  hlo_opt_string_free(json);
  json = NULL;
  CHECK_STATUS(hlo_opt_module_xla_cpu_decide(m, "0.0.1", NULL, &json), HLO_OPT_ERROR_MODEL);
  CHECK_ERROR_MENTIONS("no built-in XLA:CPU model for jaxlib 0.0.1");
  CHECK(json == NULL, "a refused decision leaves *json_out NULL");
  CHECK_STATUS(hlo_opt_module_xla_cpu_decide(m, "0.10.2", NULL, NULL), HLO_OPT_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(hlo_opt_module_xla_cpu_decide(NULL, "0.10.2", NULL, &json), HLO_OPT_ERROR_NULL_ARGUMENT);
  hlo_opt_module_free(m);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MODULE_A MODULE_B EXPECTED_VERSION\n", argv[0]);
    return 2;
  }
  const char *env = getenv("HLO_OPT_TEST_PASSES");
  int run_passes = env != NULL && strcmp(env, "1") == 0;
  const char *budget = getenv("HLO_OPT_TEST_BUDGET");
  if (budget != NULL) search_budget = (size_t)strtoul(budget, NULL, 10);
  size_t len_a = 0, len_b = 0;
  char *text_a = read_file(argv[1], &len_a);
  char *text_b = read_file(argv[2], &len_b);

  test_version(argv[3]);
  test_parse_print(text_a, len_a);
  test_parse_print(text_b, len_b);
  test_proto_round_trip(text_a, len_a);
  test_proto_round_trip(text_b, len_b);
  test_error_paths(text_a, len_a);
  test_last_error_is_thread_local();
  if (run_passes) {
    test_layout(text_a, len_a);
    test_missing_model(text_a, len_a);
    test_min_gain(text_a, len_a);
    test_trust_radius(text_a, len_a);
    test_measure(text_a);
    test_xla_cpu_decide(text_a, len_a);
  } else {
    printf("skipped: layout pass, missing model, --min-gain, measure callback (HLO_OPT_TEST_PASSES != 1: no ONNX Runtime)\n");
  }
  test_threads(text_a, text_b, run_passes);

  free(text_a);
  free(text_b);
  /* The ONNX Runtime sessions kept for reuse are released: a leak checker
   * sees none of them at exit. */
  CHECK_STATUS(hlo_opt_release_caches(), HLO_OPT_OK);
  if (failures > 0) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("all checks passed%s\n", run_passes ? "" : " (without passes)");
  return 0;
}
