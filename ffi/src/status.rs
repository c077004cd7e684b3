//! The status enum returned by every fallible entry point, and the
//! thread-local last-error message. Status values are part of the ABI: never
//! renumber one, only append.

use std::cell::RefCell;
use std::ffi::{c_char, CString};

/// Outcome of a call. Values are stable across releases.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum hlo_opt_status_t {
    HLO_OPT_OK = 0,
    HLO_OPT_ERROR_NULL_ARGUMENT = 1,
    HLO_OPT_ERROR_INVALID_ARGUMENT = 2,
    HLO_OPT_ERROR_PARSE = 3,
    HLO_OPT_ERROR_VERIFY = 4,
    HLO_OPT_ERROR_UNKNOWN_PASS = 5,
    HLO_OPT_ERROR_MODEL = 6,
    HLO_OPT_ERROR_RUNTIME = 7,
    HLO_OPT_ERROR_PASS = 8,
    HLO_OPT_ERROR_INTERNAL = 9,
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Replaces this thread's last-error message (interior NULs become spaces).
pub(crate) fn set_last_error(message: &str) {
    let bytes: Vec<u8> = message
        .bytes()
        .map(|b| if b == 0 { b' ' } else { b })
        .collect();
    let message = CString::new(bytes).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = message);
}

/// The message of the most recent failed call on the calling thread, or ""
/// when the most recent status-returning call on this thread succeeded.
///
/// Never NULL. The pointer stays valid until the next `hlo_opt_*` call on the
/// same thread; do not free it.
#[no_mangle]
pub extern "C" fn hlo_opt_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}
