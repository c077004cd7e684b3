/*
 * hlo_opt.h -- the C ABI of hlo-opt: parse XLA HLO text or a serialized
 * HloModuleProto, run hlo-opt's cost-model-guided passes (layout assignment,
 * tile selection) on it, print it as text or serialize it as a proto.
 *
 * Link: cargo build --release -p hlo_opt_ffi
 *       cc app.c -Iffi/include -Ltarget/release -lhlo_opt -lpthread -ldl -lm
 *
 * Conventions (every function):
 *  - Fallible functions return hlo_opt_status_t. HLO_OPT_OK is 0; any other
 *    value is an error whose message hlo_opt_last_error() returns on the same
 *    thread.
 *  - Every pointer argument is checked: NULL where a value is required gives
 *    HLO_OPT_ERROR_NULL_ARGUMENT, never a crash. Optional pointers are marked
 *    "may be NULL".
 *  - Out-pointers are set to NULL first, so on failure they hold NULL.
 *  - No panic (internal bug) crosses the boundary: it is caught and reported
 *    as HLO_OPT_ERROR_INTERNAL, its message and source location in
 *    hlo_opt_last_error(); nothing is printed on the host's stderr (the
 *    library's panic hook is silent inside its own calls and hands other
 *    panics of a Rust host to the hook installed before it); the handles
 *    stay usable.
 *  - Every string the library returns through a `char **` is owned by the
 *    caller and freed with hlo_opt_string_free() (not free()). Strings
 *    returned as `const char *` are owned by the library. Byte buffers
 *    returned through a `uint8_t **` are freed with hlo_opt_bytes_free().
 *  - Handles (hlo_opt_module_t, hlo_opt_options_t) may be used from several
 *    threads at once: each guards its state with a lock; calls on one module
 *    are serialized, calls on different modules run in parallel. Freeing a
 *    handle while another thread still uses it is undefined behaviour.
 *
 * The declarations below are checked against the library's Rust source by
 * ffi/tests/header.rs (cbindgen), so this file cannot drift from it.
 */
#ifndef HLO_OPT_H
#define HLO_OPT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Status and errors                                                         */
/* ------------------------------------------------------------------------ */

/**
 * Outcome of a call. The values are stable: they never change between
 * releases; new ones are only appended.
 */
typedef enum {
  /** Success. */
  HLO_OPT_OK = 0,
  /** A required pointer argument was NULL. */
  HLO_OPT_ERROR_NULL_ARGUMENT = 1,
  /** An argument was out of range (zero budget, empty path, non-UTF-8 pass list). */
  HLO_OPT_ERROR_INVALID_ARGUMENT = 2,
  /** The HLO text is not valid HLO (the message holds line:column). */
  HLO_OPT_ERROR_PARSE = 3,
  /** The module is not well formed (before or after a pass). */
  HLO_OPT_ERROR_VERIFY = 4,
  /** The pipeline names a pass that does not exist (see hlo_opt_list_passes), or
   *  names none, or has an empty entry ("layout,,tile"). */
  HLO_OPT_ERROR_UNKNOWN_PASS = 5,
  /** A cost model file is missing, unreadable or not a valid model. */
  HLO_OPT_ERROR_MODEL = 6,
  /** ONNX Runtime could not be loaded (set ORT_DYLIB_PATH to libonnxruntime.so). */
  HLO_OPT_ERROR_RUNTIME = 7,
  /** A pass failed on this module (the message names the pass and the reason). */
  HLO_OPT_ERROR_PASS = 8,
  /** An internal error (a bug in hlo-opt); the message says where. */
  HLO_OPT_ERROR_INTERNAL = 9,
} hlo_opt_status_t;

/**
 * The message of the most recent failed call on the calling thread, or ""
 * when the most recent status-returning call on this thread succeeded.
 * Never NULL. Owned by the library: valid until the next hlo_opt_* call on
 * the same thread; do not free it.
 */
const char *hlo_opt_last_error(void);

/** The library version, "MAJOR.MINOR.PATCH". Static: do not free it. */
const char *hlo_opt_version(void);

/**
 * Frees a string returned by any hlo_opt_* function through a `char **`.
 * NULL is a no-op. Freeing the same string twice is undefined behaviour.
 */
void hlo_opt_string_free(char *s);

/* ------------------------------------------------------------------------ */
/* Modules                                                                   */
/* ------------------------------------------------------------------------ */

/** A parsed, verified HLO module (opaque). Thread-safe: see the conventions. */
typedef struct hlo_opt_module_t hlo_opt_module_t;

/**
 * Parses `len` bytes of HLO text (as XLA prints it: `HloModule name, ...`
 * followed by computations) and verifies the module. `text` need not be
 * NUL-terminated; it must be UTF-8. On success `*out` holds a new module to
 * be released with hlo_opt_module_free(); on failure `*out` is NULL and the
 * status is HLO_OPT_ERROR_PARSE (with `line:col` in the message) or
 * HLO_OPT_ERROR_VERIFY.
 */
hlo_opt_status_t hlo_opt_module_parse(const char *text, size_t len, hlo_opt_module_t **out);

/**
 * Reads `len` bytes of a serialized XLA HloModuleProto (what XLA's
 * --xla_dump_hlo_as_proto writes) and verifies the module. Instruction and
 * computation ids are kept. On success `*out` holds a new module (release it
 * with hlo_opt_module_free()); on failure `*out` is NULL and the status is
 * HLO_OPT_ERROR_PARSE (malformed bytes, dangling ids, fields hlo-opt does
 * not model, named in the message) or HLO_OPT_ERROR_VERIFY.
 */
hlo_opt_status_t hlo_opt_module_parse_proto(const uint8_t *bytes,
                                            size_t len,
                                            hlo_opt_module_t **out);

/**
 * Serializes the module as an XLA HloModuleProto (what PJRT_Client_Compile
 * takes with program format "hlo"). `*bytes_out` receives a buffer of
 * `*len_out` bytes owned by the caller: free it with hlo_opt_bytes_free().
 * Fails with HLO_OPT_ERROR_INVALID_ARGUMENT when an attribute has no proto
 * field (the message names it).
 */
hlo_opt_status_t hlo_opt_module_serialize_proto(const hlo_opt_module_t *module,
                                                uint8_t **bytes_out,
                                                size_t *len_out);

/** Frees a buffer returned by hlo_opt_module_serialize_proto (with its length). NULL is a no-op. */
void hlo_opt_bytes_free(uint8_t *bytes, size_t len);

/** Frees a module. NULL is a no-op. */
void hlo_opt_module_free(hlo_opt_module_t *module);

/**
 * Prints the module as HLO text that XLA's parser reads back as the same
 * module. `*text_out` receives a NUL-terminated string owned by the caller
 * (free it with hlo_opt_string_free); `len_out` (may be NULL) receives its
 * length without the NUL.
 */
hlo_opt_status_t hlo_opt_module_print(const hlo_opt_module_t *module,
                                      char **text_out,
                                      size_t *len_out);

/* ------------------------------------------------------------------------ */
/* Options of a pass pipeline run                                            */
/* ------------------------------------------------------------------------ */

/**
 * Options of a run (opaque, built with setters so new options never change
 * the ABI). A run copies the options when it starts: changing or freeing them
 * afterwards does not affect runs in progress. One options handle may serve
 * any number of concurrent runs.
 */
typedef struct hlo_opt_options_t hlo_opt_options_t;

/**
 * Measures one candidate on real hardware (model-guided autotuning).
 *
 * `candidate_module_text` is the candidate module as HLO text, NUL-terminated,
 * `len` bytes long without the NUL, valid only during the call. Return the
 * measured runtime (any unit, lower is faster), or a negative value (or NaN)
 * when the measurement failed; the pass then ignores that candidate.
 *
 * Threading: the callback is only called from inside
 * hlo_opt_module_run_passes(), on the thread that called it, never after that
 * call returns, and never concurrently within one run. If the same `ctx` is
 * installed in options used by several runs at once (several threads), the
 * callback is called concurrently with that `ctx` and must be thread-safe.
 * It must not unwind or longjmp out (no C++ exception may escape it), and it
 * must not call hlo_opt_module_run_passes() on the module being optimized.
 */
typedef double (*hlo_opt_measure_fn)(void *ctx, const char *candidate_module_text, size_t len);

/**
 * Creates options with the defaults: the embedded cost models, seed 0, the
 * passes' default search budget, top-k 1, ONNX Runtime's default thread
 * count, the verifier after each pass, no measure callback. Free them with
 * hlo_opt_options_free().
 */
hlo_opt_status_t hlo_opt_options_new(hlo_opt_options_t **out);

/** Frees options. NULL is a no-op. */
void hlo_opt_options_free(hlo_opt_options_t *options);

/**
 * Sets the layout cost model (an ONNX file, see costmodel/MODEL.md). NULL
 * selects the embedded default model. The file is read when a pass needs it,
 * so a missing file is reported by hlo_opt_module_run_passes() as
 * HLO_OPT_ERROR_MODEL. An empty path is HLO_OPT_ERROR_INVALID_ARGUMENT.
 */
hlo_opt_status_t hlo_opt_options_set_layout_model(hlo_opt_options_t *options, const char *path);

/** Sets the tile cost model file, as hlo_opt_options_set_layout_model(). */
hlo_opt_status_t hlo_opt_options_set_tile_model(hlo_opt_options_t *options, const char *path);

/**
 * Sets the seed of every randomized search: the same module, models and seed
 * give the same output.
 */
hlo_opt_status_t hlo_opt_options_set_seed(hlo_opt_options_t *options, uint64_t seed);

/** Sets the maximum number of configurations a search scores per module (> 0). */
hlo_opt_status_t hlo_opt_options_set_budget(hlo_opt_options_t *options, size_t budget);

/**
 * Sets how many of the best-scored candidates a pass reports and, with a
 * measure callback, measures before keeping the fastest (> 0).
 */
hlo_opt_status_t hlo_opt_options_set_top_k(hlo_opt_options_t *options, size_t top_k);

/**
 * Sets the smallest predicted gain, in percent of the compiler default's
 * model score, for which the layout pass changes a module (hlo-opt's
 * --min-gain; the default is 1). The estimated price of the copies a
 * configuration needs is added to it. Must be from 0 to less than 100 (a
 * gain of 100% would be a runtime of zero), else HLO_OPT_ERROR_INVALID_ARGUMENT.
 */
hlo_opt_status_t hlo_opt_options_set_min_gain(hlo_opt_options_t *options, double min_gain_percent);

/**
 * Sets the layout search's trust region (hlo-opt's --trust-radius): the
 * search changes at most `radius` configurable nodes of the compiler
 * default (the default is 3), and each change it keeps must on its own be
 * predicted to gain the minimum gain. -1 lifts the region (--trust-radius
 * all); any other negative value is HLO_OPT_ERROR_INVALID_ARGUMENT.
 */
hlo_opt_status_t hlo_opt_options_set_trust_radius(hlo_opt_options_t *options, int64_t radius);

/** Sets ONNX Runtime's intra-op thread count (0 = ONNX Runtime's default). */
hlo_opt_status_t hlo_opt_options_set_threads(hlo_opt_options_t *options, size_t threads);

/** Runs the verifier after each pass when non-zero (the default is 1). */
hlo_opt_status_t hlo_opt_options_set_verify_each(hlo_opt_options_t *options, int verify_each);

/**
 * Installs a measure callback with its context pointer (see
 * hlo_opt_measure_fn for the rules), or removes it when `measure` is NULL.
 * With a callback and a top-k above 1, passes measure their top-k candidates
 * (the layout pass also the compiler's default layouts) and keep the fastest
 * measured one; candidates whose measurement failed are skipped, and when all
 * fail the pass keeps the cost model's best candidate. A NULL `measure` also
 * removes the built-in measurer (hlo_opt_options_set_measure_pjrt).
 */
hlo_opt_status_t hlo_opt_options_set_measure(hlo_opt_options_t *options,
                                             hlo_opt_measure_fn measure,
                                             void *ctx);

/**
 * Installs the built-in measurer (takes precedence over a callback): the
 * layout pass compiles its top-k candidates and the compiler default through
 * the PJRT plugin `plugin` with their layouts kept, checks that they compute
 * the default's results, times them in interleaved rounds with a control
 * and keeps a candidate only if it beats the default beyond the control's
 * spread. NULL selects XLA's CPU plugin (pip package `xla-cpu-pjrt`), found
 * through HLO_OPT_PJRT_PLUGIN, next to the executable, a .venv, or the Python
 * of HLO_OPT_PYTHON. XLA runs in a worker process (hlo-opt-pjrt-worker, next
 * to the executable or named by HLO_OPT_PJRT_WORKER), so an XLA abort is an
 * error of the run, not of the caller's process. HLO_OPT_ERROR_RUNTIME when
 * the plugin or the worker is not found.
 */
hlo_opt_status_t hlo_opt_options_set_measure_pjrt(hlo_opt_options_t *options,
                                                  const char *plugin);

/* ------------------------------------------------------------------------ */
/* Passes                                                                    */
/* ------------------------------------------------------------------------ */

/**
 * The names of all passes, one per line, in a string owned by the caller
 * (free it with hlo_opt_string_free).
 */
hlo_opt_status_t hlo_opt_list_passes(char **out);

/**
 * Runs a pipeline of passes, named in `passes` separated by commas (e.g.
 * "layout" or "layout,tile"), on the module.
 *
 * `options` may be NULL (the defaults of hlo_opt_options_new). `changed_out`
 * (may be NULL) receives 1 when the module changed, else 0. `explain_out`
 * (may be NULL) receives the human-readable report of the run (what each pass
 * decided and why: the `--explain` output of the CLI), owned by the caller;
 * asking for it costs the passes a few extra model calls.
 *
 * The run is all-or-nothing: on failure the module is left exactly as it was.
 * Runs on the same module are serialized; runs on different modules proceed
 * in parallel.
 */
hlo_opt_status_t hlo_opt_module_run_passes(hlo_opt_module_t *module,
                                           const char *passes,
                                           const hlo_opt_options_t *options,
                                           int *changed_out,
                                           char **explain_out);

/**
 * Sets the jaxlib version whose XLA will compile the module, for the xla-cpu
 * pass (the CLI's --xla-version): it picks the built-in model trained for that
 * version; NULL: the newest built-in model's.
 */
hlo_opt_status_t hlo_opt_options_set_xla_version(hlo_opt_options_t *options, const char *version);

/**
 * The xla-cpu pass's decision for `module` (which XLA:CPU kernels to use:
 * the compile option to hand to XLA), as a JSON object in a new string
 * (free it with hlo_opt_string_free()): `chosen`, `options` (pairs of
 * option and value; none keeps XLA's default), `reason`, `predictions`,
 * `model`, `xla`, `trained_cpu`, and the per-op choice: `op_model` (left
 * out without one for this XLA) and `onednn`, each distinct dot and
 * convolution oneDNN takes (`signature`, `count`, `change_pct`,
 * `required_gain_pct`, and
 * `onednn`: whether it goes there; docs/xla-cpu.md says how a StableHLO
 * module is rewritten for it). `jaxlib` is the version of the jaxlib
 * that will compile (NULL: the newest built-in model's); `model` a
 * built-in name or an .onnx file with its card beside it (NULL: the
 * built-in for `jaxlib`). A model trained for another jaxlib is refused
 * with HLO_OPT_ERROR_MODEL. The module is not changed.
 */
hlo_opt_status_t hlo_opt_module_xla_cpu_decide(const hlo_opt_module_t *module,
                                               const char *jaxlib,
                                               const char *model,
                                               char **json_out);

/**
 * Releases what earlier pass runs keep in this process for reuse: the cost
 * models' ONNX Runtime sessions, the encoders' outputs and the node terms.
 * Models in use by a run on another thread stay alive until it ends; a later
 * run loads them again. Modules and options stay valid. Call it to get the
 * memory back, e.g. before a leak checker looks at the process.
 */
hlo_opt_status_t hlo_opt_release_caches(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* HLO_OPT_H */
