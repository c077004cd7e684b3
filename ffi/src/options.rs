//! `hlo_opt_options_t`: the options of a pass pipeline run (model files, seed,
//! search budget, top-k, threads, verification, the layout pass's minimum
//! gain, measure callback or the built-in PJRT measurer), built by setters so
//! that adding an option never changes the ABI.
//!
//! Invariant: an options handle is only read by a run (each run copies what it
//! needs into its own `passes::PassOptions` under the lock), so one handle may
//! serve any number of concurrent runs.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use crate::guard::{deref, guard, Failure};
use crate::status::hlo_opt_status_t;

/// Measures one candidate on real hardware (model-guided autotuning).
///
/// `candidate_module_text` is the candidate module as HLO text, NUL-terminated,
/// `len` bytes long (without the NUL), valid only during the call. Returns the
/// measured runtime (any unit, lower is faster), or a negative value (or NaN)
/// when the measurement failed.
pub type hlo_opt_measure_fn = Option<
    unsafe extern "C" fn(ctx: *mut c_void, candidate_module_text: *const c_char, len: usize) -> f64,
>;

/// Options of a pipeline run (opaque; see `hlo_opt_options_new`).
pub struct hlo_opt_options_t {
    inner: Mutex<OptionsData>,
}

#[derive(Clone)]
struct OptionsData {
    layout_model: Option<PathBuf>,
    tile_model: Option<PathBuf>,
    seed: u64,
    budget: usize,
    top_k: usize,
    threads: usize,
    verify_each: bool,
    measure: Option<CMeasure>,
    /// The built-in measurer's plugin (`hlo_opt_options_set_measure_pjrt`).
    measure_pjrt: Option<PathBuf>,
    /// The layout pass's `--min-gain`, in percent.
    min_gain: f64,
    /// The layout pass's `--trust-radius` (`None`: `all`).
    trust_radius: Option<usize>,
    /// The xla-cpu pass's `--xla-version` (`hlo_opt_options_set_xla_version`).
    xla_version: Option<String>,
}

/// The host's callback plus its context pointer.
#[derive(Clone, Copy)]
struct CMeasure {
    f: unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> f64,
    ctx: *mut c_void,
}

// SAFETY: the header documents that `ctx` must be usable from whichever thread
// runs the pipeline (and from several at once when one options handle serves
// concurrent runs); within one run calls are serialized (`FnMut`).
unsafe impl Send for CMeasure {}

impl CMeasure {
    /// One measurement: `None` when the host reports failure (negative, NaN or
    /// infinite) or the text cannot be passed as a C string.
    fn measure(&self, text: &str) -> Option<f64> {
        let c = std::ffi::CString::new(text).ok()?;
        // SAFETY: `f` and `ctx` came from the host, which guarantees that `f`
        // may be called with `ctx`; the text pointer is valid for the call.
        let t = unsafe { (self.f)(self.ctx, c.as_ptr(), text.len()) };
        (t.is_finite() && t >= 0.0).then_some(t)
    }
}

impl hlo_opt_options_t {
    fn with_defaults() -> Self {
        hlo_opt_options_t {
            inner: Mutex::new(OptionsData::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, OptionsData> {
        // Setters store plain values and never panic halfway, so a poisoned
        // lock still guards consistent data.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The `passes::PassOptions` of one run under these options, completed
    /// and checked by `passes::options::Settings` as the CLI's flags and the
    /// Python package's arguments are (the setters refused bad values
    /// already; a thread count above the cores is capped).
    pub(crate) fn to_pass_options(&self) -> Result<passes::PassOptions, Failure> {
        let d = self.lock().clone();
        let settings = passes::options::Settings {
            budget: Some(d.budget),
            seed: Some(d.seed),
            top_k: Some(d.top_k),
            threads: Some(d.threads),
            min_gain: Some(d.min_gain),
            trust_radius: Some(d.trust_radius),
            layout_model: d.layout_model,
            tile_model: d.tile_model,
            verify_each: d.verify_each,
            ..passes::options::Settings::default()
        };
        let mut o = settings.pass_options("", &mut |_| {}).map_err(|e| {
            Failure::new(
                hlo_opt_status_t::HLO_OPT_ERROR_INVALID_ARGUMENT,
                e.to_string(),
            )
        })?;
        o.xla_cpu.jaxlib = d.xla_version;
        if let Some(m) = d.measure {
            o.measure = Some(Box::new(move |text: &str| m.measure(text)));
        }
        if let Some(plugin) = d.measure_pjrt {
            o.measurer = Some(Box::new(pjrt::PjrtMeasurer::new(
                plugin,
                pjrt::MeasureConfig::default(),
            )));
        }
        Ok(o)
    }
}

impl Default for OptionsData {
    fn default() -> Self {
        let d = passes::PassOptions::default();
        OptionsData {
            layout_model: d.layout_model,
            tile_model: d.tile_model,
            seed: d.seed,
            budget: d.budget,
            top_k: d.top_k,
            threads: d.threads,
            // A library caller gets verified output unless it opts out.
            verify_each: true,
            measure: None,
            measure_pjrt: None,
            min_gain: d.min_gain,
            trust_radius: d.trust_radius,
            xla_version: None,
        }
    }
}

/// The body of every setter: checks the handle, then decodes the argument
/// (`value`, which may refuse it), then stores it in the field `field` selects.
///
/// # Safety
/// `options` must be NULL or a live handle from `hlo_opt_options_new`.
unsafe fn set<T>(
    options: *mut hlo_opt_options_t,
    value: impl FnOnce() -> Result<T, Failure>,
    field: impl FnOnce(&mut OptionsData) -> &mut T,
) -> hlo_opt_status_t {
    guard(|| {
        // SAFETY: forwarded from the caller.
        let o = unsafe { deref(options, "options") }?;
        let v = value()?;
        *field(&mut o.lock()) = v;
        Ok(())
    })
}

/// A count that must be positive (`budget`, `top_k`).
fn positive(value: usize, argument: &str) -> Result<usize, Failure> {
    if value == 0 {
        return Err(Failure::new(
            hlo_opt_status_t::HLO_OPT_ERROR_INVALID_ARGUMENT,
            format!("{argument} must be > 0"),
        ));
    }
    Ok(value)
}

/// A path argument: NULL = `None` (the embedded default).
///
/// # Safety
/// `path` must be NULL or a NUL-terminated string.
unsafe fn path_arg(path: *const c_char, argument: &str) -> Result<Option<PathBuf>, Failure> {
    if path.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and NUL-terminated, as the caller guarantees.
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    if bytes.is_empty() {
        return Err(Failure::new(
            hlo_opt_status_t::HLO_OPT_ERROR_INVALID_ARGUMENT,
            format!(
                "argument `{argument}` is an empty path (pass NULL for the embedded default model)"
            ),
        ));
    }
    Ok(Some(PathBuf::from(std::ffi::OsStr::from_bytes(bytes))))
}

/// Creates options with the defaults: embedded models, seed 0, the passes'
/// default budget, top-k 1, ONNX Runtime's default thread count, verification
/// after each pass, no measure callback. Free with `hlo_opt_options_free`.
///
/// # Safety
/// `out` must be NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_options_new(out: *mut *mut hlo_opt_options_t) -> hlo_opt_status_t {
    guard(|| {
        crate::guard::check_out(out, "out")?;
        let o = Box::new(hlo_opt_options_t::with_defaults());
        // SAFETY: `out` is non-NULL and valid for writes (caller's guarantee).
        unsafe { *out = Box::into_raw(o) };
        Ok(())
    })
}

/// Frees options. NULL is a no-op. Runs that already started keep their copy.
///
/// # Safety
/// `options` must be NULL or a live handle not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_options_free(options: *mut hlo_opt_options_t) {
    if !options.is_null() {
        // SAFETY: the handle came from `Box::into_raw` in `hlo_opt_options_new`.
        drop(unsafe { Box::from_raw(options) });
    }
}

/// Sets the layout cost model file (an ONNX model, see the costmodel crate's
/// MODEL.md); NULL selects the embedded default. The file is read by the run.
///
/// # Safety
/// `options` must be NULL or a live handle; `path` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_options_set_layout_model(
    options: *mut hlo_opt_options_t,
    path: *const c_char,
) -> hlo_opt_status_t {
    // SAFETY: forwarded from the caller.
    unsafe { set(options, || path_arg(path, "path"), |o| &mut o.layout_model) }
}

/// Sets the tile cost model file; NULL selects the embedded default.
///
/// # Safety
/// `options` must be NULL or a live handle; `path` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_options_set_tile_model(
    options: *mut hlo_opt_options_t,
    path: *const c_char,
) -> hlo_opt_status_t {
    // SAFETY: forwarded from the caller.
    unsafe { set(options, || path_arg(path, "path"), |o| &mut o.tile_model) }
}

/// Sets the seed of every randomized search (same input, model and seed give
/// the same output).
///
/// # Safety
/// `options` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_options_set_seed(
    options: *mut hlo_opt_options_t,
    seed: u64,
) -> hlo_opt_status_t {
    // SAFETY: forwarded from the caller.
    unsafe { set(options, || Ok(seed), |o| &mut o.seed) }
}

/// Sets the maximum number of configurations a search scores per module (> 0).
///
/// # Safety
/// `options` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_options_set_budget(
    options: *mut hlo_opt_options_t,
    budget: usize,
) -> hlo_opt_status_t {
    // SAFETY: forwarded from the caller.
    unsafe { set(options, || positive(budget, "budget"), |o| &mut o.budget) }
}

/// Sets how many of the best-scored candidates a pass records in its report
/// and, with a measure callback, measures (> 0).
///
/// # Safety
/// `options` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_options_set_top_k(
    options: *mut hlo_opt_options_t,
    top_k: usize,
) -> hlo_opt_status_t {
    // SAFETY: forwarded from the caller.
    unsafe { set(options, || positive(top_k, "top_k"), |o| &mut o.top_k) }
}

/// Sets the smallest predicted gain, in percent of the compiler default's
/// model score, for which the layout pass changes a module (`hlo-opt
/// --min-gain`; default 1, from 0 to less than 100: a gain of 100% would be
/// a runtime of zero). The estimated price of the copies a configuration
/// needs is added to it.
///
/// # Safety
/// `options` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_options_set_min_gain(
    options: *mut hlo_opt_options_t,
    min_gain_percent: f64,
) -> hlo_opt_status_t {
    let value = || {
        use passes::options::MAX_MIN_GAIN;
        if min_gain_percent.is_finite() && (0.0..MAX_MIN_GAIN).contains(&min_gain_percent) {
            Ok(min_gain_percent)
        } else {
            Err(Failure::new(
                hlo_opt_status_t::HLO_OPT_ERROR_INVALID_ARGUMENT,
                format!("min_gain_percent {min_gain_percent}: give a percentage from 0 to less than {MAX_MIN_GAIN}"),
            ))
        }
    };
    // SAFETY: forwarded from the caller.
    unsafe { set(options, value, |o| &mut o.min_gain) }
}

/// Sets the layout search's trust region (`hlo-opt --trust-radius`): at
/// most `radius` configurable nodes changed from the compiler default
/// (default 3), each change on its own predicted to gain the minimum gain;
/// -1 lifts the region (`all`). Other negative values are refused.
///
/// # Safety
/// `options` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_options_set_trust_radius(
    options: *mut hlo_opt_options_t,
    radius: i64,
) -> hlo_opt_status_t {
    let value = || match radius {
        -1 => Ok(None),
        r if r >= 0 => Ok(Some(usize::try_from(r).unwrap_or(usize::MAX))),
        r => Err(Failure::new(
            hlo_opt_status_t::HLO_OPT_ERROR_INVALID_ARGUMENT,
            format!("radius {r}: give a number of nodes (0 or more) or -1 for no trust region"),
        )),
    };
    // SAFETY: forwarded from the caller.
    unsafe { set(options, value, |o| &mut o.trust_radius) }
}

/// Sets ONNX Runtime's intra-op thread count (0 = ONNX Runtime's default).
///
/// # Safety
/// `options` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_options_set_threads(
    options: *mut hlo_opt_options_t,
    threads: usize,
) -> hlo_opt_status_t {
    // SAFETY: forwarded from the caller.
    unsafe { set(options, || Ok(threads), |o| &mut o.threads) }
}

/// Whether to run the verifier after each pass (non-zero = yes, the default).
///
/// # Safety
/// `options` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_options_set_verify_each(
    options: *mut hlo_opt_options_t,
    verify_each: c_int,
) -> hlo_opt_status_t {
    // SAFETY: forwarded from the caller.
    unsafe { set(options, || Ok(verify_each != 0), |o| &mut o.verify_each) }
}

/// Sets (or, with `measure` NULL, clears) the measure callback.
///
/// # Safety
/// `options` must be NULL or a live handle. `measure` must be safe to call
/// with `ctx` from the thread that calls `hlo_opt_module_run_passes`, until the
/// options are freed or the callback replaced; see the header for the rules.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_options_set_measure(
    options: *mut hlo_opt_options_t,
    measure: hlo_opt_measure_fn,
    ctx: *mut c_void,
) -> hlo_opt_status_t {
    guard(|| {
        // SAFETY: forwarded from the caller.
        let o = unsafe { deref(options, "options") }?;
        let mut d = o.lock();
        d.measure = measure.map(|f| CMeasure { f, ctx });
        if measure.is_none() {
            d.measure_pjrt = None;
        }
        Ok(())
    })
}

/// Installs the built-in measurer: candidates are compiled with their
/// layouts kept and timed through the PJRT plugin `plugin` (NULL: XLA's CPU
/// plugin, found as `hlo-opt --measure=xla-cpu` finds it).
///
/// # Safety
/// `options` must be NULL or a live handle; `plugin` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_options_set_measure_pjrt(
    options: *mut hlo_opt_options_t,
    plugin: *const c_char,
) -> hlo_opt_status_t {
    // SAFETY: forwarded from the caller.
    unsafe {
        set(
            options,
            || {
                let path = path_arg(plugin, "plugin")?;
                let found = pjrt::find_plugin(path.as_deref())
                    .and_then(|p| pjrt::find_worker().map(|_| p))
                    .map_err(|e| {
                        Failure::new(hlo_opt_status_t::HLO_OPT_ERROR_RUNTIME, e.to_string())
                    })?;
                Ok(Some(found))
            },
            |o| &mut o.measure_pjrt,
        )
    }
}

/// The options of a run given no options handle (the same as a fresh handle).
pub(crate) fn default_pass_options() -> Result<passes::PassOptions, Failure> {
    hlo_opt_options_t::with_defaults().to_pass_options()
}

/// Sets the jaxlib version whose XLA will compile the module, for the
/// xla-cpu pass (its `--xla-version`; NULL: the newest built-in model's).
///
/// # Safety
/// `options` must be NULL or a live handle; `version` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_options_set_xla_version(
    options: *mut hlo_opt_options_t,
    version: *const c_char,
) -> hlo_opt_status_t {
    // SAFETY: `version` is NULL or NUL-terminated (caller's guarantee).
    let read = || unsafe { crate::guard::opt_str(version, "version") };
    // SAFETY: forwarded from the caller.
    unsafe { set(options, read, |o| &mut o.xla_version) }
}
