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
//!   was and no half-written file behind;
//! - an output that exists and is not a regular file (`/dev/null`, a FIFO, a
//!   terminal) is written in place: a rename would replace the device node
//!   itself (as root, `-o /dev/null` would leave a regular file there);
//! - an output that is a symbolic link is written through it: the temporary
//!   file goes beside the file it points to and replaces that file, and the
//!   link stays a link;
//! - an output that is a directory is refused;
//! - [`check_writable`] finds, before the work, an output that cannot be
//!   written (its folder missing or read-only), by the same steps.

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

/// The file [`write_via_temp`] renames over: `None` for an output written
/// in place (a device, FIFO or socket), the file itself for a regular file
/// (through symbolic links), else `output`.
fn rename_target(output: &Path) -> Result<Option<PathBuf>, String> {
    match std::fs::metadata(output) {
        Ok(m) if m.is_dir() => Err(format!("{}: is a directory", output.display())),
        Ok(m) if !m.is_file() => Ok(None),
        Ok(_) => std::fs::canonicalize(output)
            .map(Some)
            .map_err(|e| format!("{}: {e}", output.display())),
        Err(_) => Ok(Some(output.to_path_buf())),
    }
}

/// The folder a temporary file for `target` goes in.
fn folder_of(target: &Path) -> PathBuf {
    match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Checks, before any work, that [`write_via_temp`] can write `output`:
/// not a directory, its folder exists, and a file can be created there
/// (tried, then removed: permission bits do not tell, e.g. for root or on a
/// read-only mount). An existing device or FIFO (`/dev/null`) passes.
pub fn check_writable(output: &Path) -> Result<(), String> {
    let Some(target) = rename_target(output)? else {
        return Ok(());
    };
    let dir = folder_of(&target);
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(format!(
                "{}: cannot write it: {} is not a folder",
                output.display(),
                dir.display()
            ))
        }
        Err(e) => {
            return Err(format!(
                "{}: cannot write it: its folder {}: {e}",
                output.display(),
                dir.display()
            ))
        }
    }
    let probe = dir.join(format!(".hlo-opt-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!(
            "{}: cannot write it: creating a file in {}: {e}",
            output.display(),
            dir.display()
        )),
    }
}

/// Writes `output` through `write`, which writes the file at the path it is
/// given (a temporary file next to `output`); renames it over `output` when
/// `write` succeeds, removes it otherwise.
pub fn write_via_temp(
    output: &Path,
    write: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<(), String> {
    // A device, FIFO or socket is written in place, never replaced; a
    // regular file, maybe behind symbolic links, is replaced.
    let Some(target) = rename_target(output)? else {
        return write(output);
    };
    let dir = folder_of(&target);
    let name = target
        .file_name()
        .ok_or_else(|| format!("{}: not a file name", output.display()))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".tmp-{}", std::process::id()));
    let temp = dir.join(temp_name);
    let result = write(&temp).and_then(|()| {
        std::fs::rename(&temp, &target).map_err(|e| format!("{}: {e}", output.display()))
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

#[cfg(all(test, unix))]
mod tests {
    use super::write_via_temp;
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;
    use std::path::Path;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("hlo_opt_outfile_{}_{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    fn write_text(output: &Path, text: &'static str) -> Result<(), String> {
        write_via_temp(output, |p| {
            std::fs::write(p, text).map_err(|e| e.to_string())
        })
    }

    /// A FIFO stands for `/dev/null` (a device node only root can make):
    /// what is written reaches the reader, and the FIFO is still a FIFO.
    #[test]
    fn a_fifo_output_is_written_in_place_not_replaced() {
        let dir = scratch("fifo");
        let fifo = dir.join("out.fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("skipped: mkfifo is not available");
            return;
        }
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut text = String::new();
                std::fs::File::open(&fifo)
                    .and_then(|mut f| f.read_to_string(&mut text))
                    .map(|_| text)
            })
        };
        write_text(&fifo, "module\n").expect("write to the FIFO");
        // Checked first: had the FIFO been replaced before the reader
        // opened it, the reader would wait for a writer for ever.
        let kind = std::fs::symlink_metadata(&fifo)
            .expect("still there")
            .file_type();
        assert!(kind.is_fifo(), "the FIFO was replaced: {kind:?}");
        assert_eq!(reader.join().expect("reader").expect("read"), "module\n");
        assert_eq!(
            std::fs::read_dir(&dir).expect("dir").count(),
            1,
            "a temporary file was left"
        );
    }

    #[test]
    fn a_symlinked_output_is_written_through_the_link() {
        let dir = scratch("link");
        let real = dir.join("real.hlo");
        let link = dir.join("link.hlo");
        std::fs::write(&real, "old").expect("real");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        write_text(&link, "new").expect("write through the link");
        assert!(std::fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).expect("real"), "new");
    }

    #[test]
    fn a_new_or_regular_output_is_replaced_whole_and_a_directory_refused() {
        let dir = scratch("plain");
        let out = dir.join("out.hlo");
        write_text(&out, "one").expect("new file");
        write_text(&out, "two").expect("replace");
        assert_eq!(std::fs::read_to_string(&out).expect("out"), "two");
        let failed = write_via_temp(&out, |p| {
            std::fs::write(p, "half").map_err(|e| e.to_string())?;
            Err("failed".into())
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(&out).expect("out"), "two");
        assert_eq!(
            std::fs::read_dir(&dir).expect("dir").count(),
            1,
            "a temporary file was left"
        );
        let err = write_text(&dir, "x").expect_err("a directory");
        assert!(err.contains("is a directory"), "{err}");
    }
}
