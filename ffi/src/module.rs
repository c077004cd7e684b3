//! `hlo_opt_module_t`: a parsed HLO module behind a mutex, and the entry
//! points that parse it (from text or a serialized `HloModuleProto`), print
//! or serialize it, free it and run passes on it.
//!
//! Invariant: the module inside a handle is always a whole, verified module. A
//! pipeline runs on a copy that replaces the original only when every pass
//! succeeded, so a failed (or panicking) run leaves the handle unchanged and a
//! poisoned mutex still guards a consistent module.

use std::ffi::{c_char, c_int, CStr};
use std::sync::{Mutex, MutexGuard};

use crate::backend;
use crate::guard::{check_out, deref, guard, opt_str, Failure};
use crate::options::hlo_opt_options_t;
use crate::status::hlo_opt_status_t;
use crate::strings::into_c_string;

/// A parsed HLO module (opaque).
pub struct hlo_opt_module_t {
    inner: Mutex<hlo::Module>,
}

impl hlo_opt_module_t {
    fn lock(&self) -> MutexGuard<'_, hlo::Module> {
        // See the module invariant: the data is consistent even after a panic.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The status of an `hlo` crate error.
fn hlo_failure(e: &hlo::Error) -> Failure {
    let status = match e {
        hlo::Error::Parse { .. } | hlo::Error::InFile { .. } => {
            hlo_opt_status_t::HLO_OPT_ERROR_PARSE
        }
        hlo::Error::Verify { .. } | hlo::Error::Module(_) => hlo_opt_status_t::HLO_OPT_ERROR_VERIFY,
    };
    Failure::new(status, e.to_string())
}

/// The status of a pass error.
fn pass_failure(e: &passes::PassError) -> Failure {
    use costmodel::CostModelError as C;
    use hlo_opt_status_t as S;
    use passes::PassError as P;
    #[allow(unreachable_patterns)]
    // new variants of the other crates' enums map to the generic status
    let status = match e {
        P::UnknownPass { .. } | P::PassList(_) => S::HLO_OPT_ERROR_UNKNOWN_PASS,
        P::Verify { .. } => S::HLO_OPT_ERROR_VERIFY,
        P::Hlo(h) => hlo_failure(h).status,
        P::CostModel(C::Model { .. } | C::Io(_)) => S::HLO_OPT_ERROR_MODEL,
        P::CostModel(C::Runtime(_)) => S::HLO_OPT_ERROR_RUNTIME,
        _ => S::HLO_OPT_ERROR_PASS,
    };
    Failure::new(status, e.to_string())
}

/// The body of both parse entry points: checks `out` and the input pointer
/// (named `argument`), reads `len` bytes with `read`, and stores the new
/// handle in `*out` (NULL on any failure).
///
/// # Safety
/// `input` must be NULL or valid for reading `len` bytes; `out` NULL or valid
/// for writing a pointer.
unsafe fn new_module(
    input: *const u8,
    len: usize,
    argument: &str,
    out: *mut *mut hlo_opt_module_t,
    read: impl FnOnce(&[u8]) -> Result<hlo::Module, Failure>,
) -> hlo_opt_status_t {
    guard(|| {
        check_out(out, "out")?;
        // SAFETY: `out` is non-NULL and writable (caller's guarantee).
        unsafe { *out = std::ptr::null_mut() };
        if input.is_null() {
            return Err(Failure::null(argument));
        }
        // SAFETY: non-NULL, and readable for `len` bytes (caller's guarantee).
        let bytes = unsafe { std::slice::from_raw_parts(input, len) };
        let handle = Box::new(hlo_opt_module_t {
            inner: Mutex::new(read(bytes)?),
        });
        // SAFETY: as above.
        unsafe { *out = Box::into_raw(handle) };
        Ok(())
    })
}

/// Parses (and verifies) `len` bytes of HLO text into a new module handle.
///
/// # Safety
/// `text` must be NULL or valid for reading `len` bytes; `out` NULL or valid
/// for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_module_parse(
    text: *const c_char,
    len: usize,
    out: *mut *mut hlo_opt_module_t,
) -> hlo_opt_status_t {
    // SAFETY: forwarded from the caller.
    unsafe {
        new_module(text.cast::<u8>(), len, "text", out, |bytes| {
            let text = hlo::source_text(bytes, "<input>").map_err(|e| hlo_failure(&e))?;
            backend::parse(text).map_err(|e| hlo_failure(&e))
        })
    }
}

/// Reads (and verifies) `len` bytes of a serialized XLA `HloModuleProto`
/// into a new module handle. A proto with fields hlo-opt does not model is
/// rejected, the message naming them.
///
/// # Safety
/// `bytes` must be NULL or valid for reading `len` bytes; `out` NULL or
/// valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_module_parse_proto(
    bytes: *const u8,
    len: usize,
    out: *mut *mut hlo_opt_module_t,
) -> hlo_opt_status_t {
    // SAFETY: forwarded from the caller.
    unsafe {
        new_module(bytes, len, "bytes", out, |data| {
            backend::parse_proto(data).map_err(|e| match e {
                // Malformed bytes or an ill-formed module (dangling ids,
                // fields hlo-opt does not model): the proto's bad text.
                hlo::Error::Module(_) => {
                    Failure::new(hlo_opt_status_t::HLO_OPT_ERROR_PARSE, e.to_string())
                }
                _ => hlo_failure(&e),
            })
        })
    }
}

/// Serializes a module as an XLA `HloModuleProto` into a new buffer of
/// `*len_out` bytes (free it with `hlo_opt_bytes_free`).
///
/// # Safety
/// `module` must be NULL or a live handle; `bytes_out` NULL or writable;
/// `len_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_module_serialize_proto(
    module: *const hlo_opt_module_t,
    bytes_out: *mut *mut u8,
    len_out: *mut usize,
) -> hlo_opt_status_t {
    guard(|| {
        check_out(bytes_out, "bytes_out")?;
        check_out(len_out, "len_out")?;
        // SAFETY: both non-NULL and writable (caller's guarantee).
        unsafe {
            *bytes_out = std::ptr::null_mut();
            *len_out = 0;
        }
        // SAFETY: NULL or a live handle (caller's guarantee).
        let m = unsafe { deref(module, "module") }?;
        let bytes = backend::serialize_proto(&m.lock()).map_err(|e| {
            Failure::new(
                hlo_opt_status_t::HLO_OPT_ERROR_INVALID_ARGUMENT,
                e.to_string(),
            )
        })?;
        let (ptr, len) = crate::strings::into_c_bytes(bytes);
        // SAFETY: as above.
        unsafe {
            *bytes_out = ptr;
            *len_out = len;
        }
        Ok(())
    })
}

/// Frees a module. NULL is a no-op.
///
/// # Safety
/// `module` must be NULL or a live handle not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_module_free(module: *mut hlo_opt_module_t) {
    if !module.is_null() {
        // SAFETY: the handle came from `Box::into_raw` in `hlo_opt_module_parse`
        // or `hlo_opt_module_parse_proto`.
        drop(unsafe { Box::from_raw(module) });
    }
}

/// Prints a module as HLO text into a new string (free it with
/// `hlo_opt_string_free`); stores its length in `*len_out` unless NULL.
///
/// # Safety
/// `module` must be NULL or a live handle; `text_out` NULL or writable;
/// `len_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_module_print(
    module: *const hlo_opt_module_t,
    text_out: *mut *mut c_char,
    len_out: *mut usize,
) -> hlo_opt_status_t {
    guard(|| {
        check_out(text_out, "text_out")?;
        // SAFETY: non-NULL and writable (caller's guarantee).
        unsafe { *text_out = std::ptr::null_mut() };
        // SAFETY: NULL or a live handle (caller's guarantee).
        let m = unsafe { deref(module, "module") }?;
        let text = backend::print(&m.lock());
        let (ptr, len) = into_c_string(text, "printed module")?;
        // SAFETY: both out-pointers are writable when non-NULL.
        unsafe {
            *text_out = ptr;
            if !len_out.is_null() {
                *len_out = len;
            }
        }
        Ok(())
    })
}

/// Runs a comma-separated pipeline of passes on a module.
///
/// # Safety
/// `module` must be NULL or a live handle; `passes` NULL or NUL-terminated;
/// `options` NULL (defaults) or a live handle; `changed_out` and `explain_out`
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_module_run_passes(
    module: *mut hlo_opt_module_t,
    passes: *const c_char,
    options: *const hlo_opt_options_t,
    changed_out: *mut c_int,
    explain_out: *mut *mut c_char,
) -> hlo_opt_status_t {
    guard(|| {
        // SAFETY (all derefs and writes below): pointers are NULL or valid, as
        // the caller guarantees; each is checked for NULL first.
        if !explain_out.is_null() {
            unsafe { *explain_out = std::ptr::null_mut() };
        }
        let m = unsafe { deref(module.cast_const(), "module") }?;
        if passes.is_null() {
            return Err(Failure::null("passes"));
        }
        let passes = unsafe { CStr::from_ptr(passes) }.to_str().map_err(|_| {
            Failure::new(
                hlo_opt_status_t::HLO_OPT_ERROR_INVALID_ARGUMENT,
                "pass list is not UTF-8",
            )
        })?;
        let mut pass_options = match unsafe { options.as_ref() } {
            Some(o) => o.to_pass_options()?,
            None => crate::options::default_pass_options()?,
        };
        pass_options.explain = !explain_out.is_null();
        let mut locked = m.lock();
        let mut work = locked.clone();
        let (changed, explain) =
            backend::run_pipeline(&mut work, passes, pass_options).map_err(|e| pass_failure(&e))?;
        let explain = if explain_out.is_null() {
            None
        } else {
            Some(into_c_string(explain, "explain report")?)
        };
        *locked = work;
        drop(locked);
        if !changed_out.is_null() {
            unsafe { *changed_out = c_int::from(changed) };
        }
        if let Some((ptr, _)) = explain {
            unsafe { *explain_out = ptr };
        }
        Ok(())
    })
}

/// The names of all passes, one per line, in a new string.
///
/// # Safety
/// `out` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_list_passes(out: *mut *mut c_char) -> hlo_opt_status_t {
    guard(|| {
        check_out(out, "out")?;
        let (ptr, _) = into_c_string(backend::list_passes(), "pass list")?;
        // SAFETY: non-NULL and writable (caller's guarantee).
        unsafe { *out = ptr };
        Ok(())
    })
}

/// Releases what earlier pass runs keep in this process for reuse: the cost
/// models' ONNX Runtime sessions, the encoders' outputs and the node terms
/// (docs/cost-models.md, "Reuse within a process"). Models in use by a run
/// on another thread stay alive until it ends; a later run loads them again.
/// Modules and options stay valid.
#[no_mangle]
pub extern "C" fn hlo_opt_release_caches() -> hlo_opt_status_t {
    guard(|| {
        costmodel::onnx::clear_caches();
        passes::xla_cpu::model::clear_cache();
        passes::xla_cpu::op_model::clear_cache();
        Ok(())
    })
}

/// The xla-cpu pass's decision for a module, as JSON (the record of
/// `hlo-opt --pass=xla-cpu --explain-json`: chosen, options, reason,
/// predictions, model, xla, trained_cpu), in a new string.
///
/// # Safety
/// `module` must be NULL or a live handle; `jaxlib` and `model` NULL or
/// NUL-terminated; `json_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_module_xla_cpu_decide(
    module: *const hlo_opt_module_t,
    jaxlib: *const c_char,
    model: *const c_char,
    json_out: *mut *mut c_char,
) -> hlo_opt_status_t {
    guard(|| {
        check_out(json_out, "json_out")?;
        // SAFETY: NULL or a live handle; NULL or NUL-terminated strings (caller's guarantee).
        let m = unsafe { deref(module, "module") }?;
        let jaxlib = unsafe { opt_str(jaxlib, "jaxlib") }?;
        let model = unsafe { opt_str(model, "model") }?;
        let opts = passes::xla_cpu::XlaCpuOptions {
            model,
            jaxlib,
            cpu: None,
        };
        let fail = |e: String| {
            Failure::new(
                hlo_opt_status_t::HLO_OPT_ERROR_MODEL,
                format!("xla-cpu: {e}"),
            )
        };
        let (kernel_model, _notes) = passes::xla_cpu::load_model(&opts).map_err(fail)?;
        let record = passes::xla_cpu::decide(&m.lock(), &kernel_model).map_err(fail)?;
        let json = serde_json::to_string(&record)
            .map_err(|e| Failure::new(hlo_opt_status_t::HLO_OPT_ERROR_INTERNAL, e.to_string()))?;
        let (ptr, _) = into_c_string(json, "decision")?;
        // SAFETY: non-NULL and writable (checked above).
        unsafe { *json_out = ptr };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use costmodel::CostModelError;
    use hlo_opt_status_t as S;
    use passes::PassError;

    #[test]
    fn each_error_kind_maps_to_its_stable_status() {
        let cases = [
            (
                PassError::UnknownPass {
                    name: "x".into(),
                    known: "layout".into(),
                },
                S::HLO_OPT_ERROR_UNKNOWN_PASS,
            ),
            (
                PassError::Failed {
                    pass: "layout",
                    message: "m".into(),
                },
                S::HLO_OPT_ERROR_PASS,
            ),
            (
                PassError::CostModel(CostModelError::Model {
                    path: "p".into(),
                    message: "missing".into(),
                }),
                S::HLO_OPT_ERROR_MODEL,
            ),
            (
                PassError::CostModel(CostModelError::Runtime("no ORT".into())),
                S::HLO_OPT_ERROR_RUNTIME,
            ),
            (
                PassError::CostModel(CostModelError::Featurize("rank 9".into())),
                S::HLO_OPT_ERROR_PASS,
            ),
            (
                PassError::Hlo(hlo::Error::Module("bad".into())),
                S::HLO_OPT_ERROR_VERIFY,
            ),
        ];
        for (error, status) in cases {
            let f = pass_failure(&error);
            assert_eq!(f.status, status, "{error}");
            assert_eq!(f.message, error.to_string());
        }
    }

    #[test]
    fn status_values_are_stable() {
        // The header promises these numbers; changing one breaks every caller.
        let values = [
            (S::HLO_OPT_OK, 0),
            (S::HLO_OPT_ERROR_NULL_ARGUMENT, 1),
            (S::HLO_OPT_ERROR_INVALID_ARGUMENT, 2),
            (S::HLO_OPT_ERROR_PARSE, 3),
            (S::HLO_OPT_ERROR_VERIFY, 4),
            (S::HLO_OPT_ERROR_UNKNOWN_PASS, 5),
            (S::HLO_OPT_ERROR_MODEL, 6),
            (S::HLO_OPT_ERROR_RUNTIME, 7),
            (S::HLO_OPT_ERROR_PASS, 8),
            (S::HLO_OPT_ERROR_INTERNAL, 9),
        ];
        for (status, value) in values {
            assert_eq!(status as i32, value, "{status:?}");
        }
    }
}
