//! The wrapper every entry point runs its body in: panics are caught, errors
//! turned into a status plus the thread's last-error message.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::status::{hlo_opt_status_t, set_last_error};

/// A failed call: the status to return and the message for `hlo_opt_last_error`.
pub(crate) struct Failure {
    pub status: hlo_opt_status_t,
    pub message: String,
}

impl Failure {
    pub fn new(status: hlo_opt_status_t, message: impl Into<String>) -> Self {
        Failure {
            status,
            message: message.into(),
        }
    }

    pub fn null(argument: &str) -> Self {
        Failure::new(
            hlo_opt_status_t::HLO_OPT_ERROR_NULL_ARGUMENT,
            format!("argument `{argument}` is NULL"),
        )
    }
}

/// Runs `body`, catching panics; records the outcome in the last-error message.
///
/// Unwind safety: a body that panics halfway leaves no handle half-modified,
/// because mutations of a module are built on a copy and stored only at the
/// end (see `module.rs`), so asserting unwind safety is sound.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Failure>) -> hlo_opt_status_t {
    let outcome = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic payload".to_string());
        Err(Failure::new(
            hlo_opt_status_t::HLO_OPT_ERROR_INTERNAL,
            format!("internal error (panic): {what}"),
        ))
    });
    match outcome {
        Ok(()) => {
            set_last_error("");
            hlo_opt_status_t::HLO_OPT_OK
        }
        Err(f) => {
            set_last_error(&f.message);
            f.status
        }
    }
}

/// Borrows `ptr` as a reference, or fails with NULL_ARGUMENT naming `argument`.
///
/// # Safety
/// `ptr` must be NULL or point to a live `T`.
pub(crate) unsafe fn deref<'a, T>(ptr: *const T, argument: &str) -> Result<&'a T, Failure> {
    // SAFETY: the caller guarantees `ptr` is NULL or valid.
    unsafe { ptr.as_ref() }.ok_or_else(|| Failure::null(argument))
}

/// Fails with NULL_ARGUMENT naming `argument` when the out-pointer `out` is NULL.
pub(crate) fn check_out<T>(out: *mut T, argument: &str) -> Result<(), Failure> {
    if out.is_null() {
        Err(Failure::null(argument))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use super::*;
    use crate::status::hlo_opt_last_error;

    fn last_error() -> String {
        // SAFETY: hlo_opt_last_error never returns NULL and the string lives
        // until the next call on this thread.
        unsafe { CStr::from_ptr(hlo_opt_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_becomes_the_internal_status_with_its_message() {
        let status = guard(|| panic!("boom at the boundary"));
        assert_eq!(status, hlo_opt_status_t::HLO_OPT_ERROR_INTERNAL);
        assert!(
            last_error().contains("boom at the boundary"),
            "{}",
            last_error()
        );
    }

    #[test]
    fn success_clears_the_last_error_and_failure_sets_it() {
        guard(|| Err(Failure::null("text")));
        assert_eq!(last_error(), "argument `text` is NULL");
        assert_eq!(guard(|| Ok(())), hlo_opt_status_t::HLO_OPT_OK);
        assert_eq!(last_error(), "");
    }

    #[test]
    fn messages_with_nul_bytes_survive_as_c_strings() {
        guard(|| Err(Failure::new(hlo_opt_status_t::HLO_OPT_ERROR_PARSE, "a\0b")));
        assert_eq!(last_error(), "a b");
    }
}
