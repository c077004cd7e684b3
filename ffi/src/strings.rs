//! Strings crossing the boundary: the static version string, and heap strings
//! handed to the caller (always `CString::into_raw`, always released by
//! [`hlo_opt_string_free`], the only function that may free them).

use std::ffi::{c_char, CStr, CString};

use crate::guard::Failure;
use crate::status::hlo_opt_status_t;

static VERSION: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => panic!("version string contains a NUL"),
    };

/// The library version ("MAJOR.MINOR.PATCH"), a static string: do not free it.
#[no_mangle]
pub extern "C" fn hlo_opt_version() -> *const c_char {
    VERSION.as_ptr()
}

/// Frees a string returned by any `hlo_opt_*` function. NULL is a no-op.
///
/// # Safety
/// `s` must be NULL or a string returned by this library that was not freed yet.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_string_free(s: *mut c_char) {
    if s.is_null() {
        return;
    }
    // A panic cannot happen here (drop of a CString), so no catch_unwind.
    // SAFETY: `s` came from `CString::into_raw` (see `into_c_string`) and is
    // freed once, as the caller guarantees.
    drop(unsafe { CString::from_raw(s) });
}

/// Frees a byte buffer returned by this library (with its length). NULL is
/// a no-op.
///
/// # Safety
/// `bytes` must be NULL or a buffer returned by this library with length
/// `len`, not freed yet.
#[no_mangle]
pub unsafe extern "C" fn hlo_opt_bytes_free(bytes: *mut u8, len: usize) {
    if bytes.is_null() {
        return;
    }
    // SAFETY: `bytes` came from `Box::<[u8]>::into_raw` with this length (see
    // `into_c_bytes`) and is freed once, as the caller guarantees.
    drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(bytes, len)) });
}

/// Turns `b` into a caller-owned buffer, released by [`hlo_opt_bytes_free`].
pub(crate) fn into_c_bytes(b: Vec<u8>) -> (*mut u8, usize) {
    let len = b.len();
    let ptr = Box::into_raw(b.into_boxed_slice()).cast::<u8>();
    (ptr, len)
}

/// Turns `s` into a caller-owned C string; fails when `s` holds a NUL byte
/// (the length out-parameter could describe it, but C callers would truncate).
pub(crate) fn into_c_string(s: String, what: &str) -> Result<(*mut c_char, usize), Failure> {
    let len = s.len();
    let c = CString::new(s).map_err(|e| {
        Failure::new(
            hlo_opt_status_t::HLO_OPT_ERROR_INTERNAL,
            format!("{what} contains a NUL byte at offset {}", e.nul_position()),
        )
    })?;
    Ok((c.into_raw(), len))
}
