//! The wrapper every entry point runs its body in: panics are caught, errors
//! turned into a status plus the thread's last-error message.
//!
//! Invariant: a panic inside a guarded body prints nothing on the host's
//! stderr. The first guarded call installs a process-wide panic hook that is
//! silent on threads currently inside a guarded body (it keeps the panic's
//! message and location for the last error instead) and hands every other
//! panic to the hook that was installed before it (the host's, or Rust's
//! default), so a Rust host's own panics are reported as before. The library
//! starts no threads of its own, so every panic of its code runs on a guarded
//! thread.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

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

thread_local! {
    /// How many guarded bodies this thread is inside (a measure callback may
    /// call back into the library).
    static GUARD_DEPTH: Cell<u32> = const { Cell::new(0) };
    /// What the quiet hook saw of the last panic on this thread: the message
    /// and where it happened.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

static QUIET_HOOK: Once = Once::new();

/// Installs the quiet panic hook once per process, chained to the hook that
/// was installed before it.
fn install_quiet_hook() {
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if GUARD_DEPTH.with(Cell::get) == 0 {
                return previous(info);
            }
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic payload".to_string());
            let at = info
                .location()
                .map(|l| format!(" (at {}:{})", l.file(), l.line()))
                .unwrap_or_default();
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{message}{at}")));
        }));
    });
}

/// Counts this thread as inside a guarded body while alive (also when the
/// body unwinds).
struct Depth;

impl Depth {
    fn enter() -> Self {
        GUARD_DEPTH.with(|d| d.set(d.get() + 1));
        Depth
    }
}

impl Drop for Depth {
    fn drop(&mut self) {
        GUARD_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Runs `body`, catching panics silently (see the module doc); records the
/// outcome in the last-error message.
///
/// Unwind safety: a body that panics halfway leaves no handle half-modified,
/// because mutations of a module are built on a copy and stored only at the
/// end (see `module.rs`), so asserting unwind safety is sound.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Failure>) -> hlo_opt_status_t {
    install_quiet_hook();
    let outcome = {
        let _depth = Depth::enter();
        catch_unwind(AssertUnwindSafe(body))
    };
    let outcome = outcome.unwrap_or_else(|payload| {
        let seen = LAST_PANIC.with(|p| p.borrow_mut().take());
        let what = seen.unwrap_or_else(|| {
            payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic payload".to_string())
        });
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

/// An optional NUL-terminated UTF-8 argument (NULL: `None`).
///
/// # Safety
/// `s` must be NULL or NUL-terminated.
pub(crate) unsafe fn opt_str(s: *const c_char, argument: &str) -> Result<Option<String>, Failure> {
    if s.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and NUL-terminated, as the caller guarantees.
    let s = unsafe { CStr::from_ptr(s) }.to_str().map_err(|_| {
        Failure::new(
            hlo_opt_status_t::HLO_OPT_ERROR_INVALID_ARGUMENT,
            format!("argument `{argument}` is not UTF-8"),
        )
    })?;
    Ok(Some(s.to_string()))
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

    /// The child half of [`a_caught_panic_prints_nothing_on_stderr`]: runs
    /// only when that test starts this test binary again for it.
    #[test]
    #[ignore = "run by a_caught_panic_prints_nothing_on_stderr in a child process"]
    fn child_panics_inside_and_outside_the_guard() {
        if std::env::var_os("HLO_OPT_GUARD_CHILD").is_none() {
            return;
        }
        // A host hook installed before the library's: panics outside guarded
        // calls must still reach it.
        std::panic::set_hook(Box::new(|_| eprintln!("host hook saw a panic")));
        let status = guard(|| panic!("boom inside the guard"));
        assert_eq!(status, hlo_opt_status_t::HLO_OPT_ERROR_INTERNAL);
        println!("last error: {}", last_error());
        let outside = std::panic::catch_unwind(|| panic!("boom outside"));
        assert!(outside.is_err());
        println!("child done");
    }

    #[test]
    fn a_caught_panic_prints_nothing_on_stderr() {
        let out = std::process::Command::new(std::env::current_exe().expect("current_exe"))
            .args([
                "guard::tests::child_panics_inside_and_outside_the_guard",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("HLO_OPT_GUARD_CHILD", "1")
            .output()
            .expect("run the child test");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(stdout.contains("child done"), "{stdout}");
        // The message (with its location) is in the last error...
        assert!(
            stdout.contains(
                "last error: internal error (panic): boom inside the guard (at ffi/src/guard.rs:"
            ),
            "{stdout}"
        );
        // ...and not on stderr; the host's hook still sees its own panic.
        assert!(!stderr.contains("boom inside"), "{stderr}");
        assert!(!stderr.contains("panicked at"), "{stderr}");
        assert_eq!(
            stderr.matches("host hook saw a panic").count(),
            1,
            "{stderr}"
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
