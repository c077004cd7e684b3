//! Output files of the command-line tools (`hlo-opt -o`, `hlo-cost featurize
//! -o`): never one of the inputs, written whole or not at all.
//!
//! Invariants:
//! - an output that is the same file as an input is refused before anything
//!   is written. "Same" is identity, not spelling: the device and inode of
//!   both (so a hard link, a symbolic link or another path to the input
//!   counts, and so does `-` when stdin is redirected from that file);
//! - an output is written to a temporary file in the output's folder, then
//!   renamed over the output: a failed write leaves an existing output as it
//!   was and no half-written file behind.

use std::path::{Path, PathBuf};

/// The (device, inode) of the file `path` names, following symbolic links;
/// `None` when it does not exist (or cannot be inspected).
#[cfg(unix)]
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn identity(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// The file an input names: `-` is stdin, which is a file when redirected
/// from one (`< FILE`).
fn input_path(input: &Path) -> PathBuf {
    if input == Path::new("-") {
        PathBuf::from("/dev/stdin")
    } else {
        input.to_path_buf()
    }
}

/// Refuses an `output` that is the same file as one of `inputs` (`what`
/// names each input in the message, e.g. "input", "--runs file").
pub fn check_not_input(output: &Path, inputs: &[(&str, &Path)]) -> Result<(), String> {
    let Some(out) = identity(output) else {
        return Ok(()); // a new file cannot be an input
    };
    for (what, input) in inputs {
        if identity(&input_path(input)).as_ref() == Some(&out) {
            return Err(format!(
                "refusing to write {}: it is the {what} {} (the same file, by device and inode); choose another output",
                output.display(),
                input.display()
            ));
        }
    }
    Ok(())
}

/// Writes `output` through `write`, which writes the file at the path it is
/// given (a temporary file next to `output`); renames it over `output` when
/// `write` succeeds, removes it otherwise.
pub fn write_via_temp(
    output: &Path,
    write: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<(), String> {
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = output
        .file_name()
        .ok_or_else(|| format!("{}: not a file name", output.display()))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".tmp-{}", std::process::id()));
    let temp = dir.join(temp_name);
    let result = write(&temp).and_then(|()| {
        std::fs::rename(&temp, output).map_err(|e| format!("{}: {e}", output.display()))
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}
