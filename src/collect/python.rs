//! The collections that run in Python, because only Python reaches what
//! they measure with: `hlo-cost collect --ray` (the fleet driver, Ray) and
//! `hlo-cost collect --kernels` (XLA:CPU kernel choices, timed with jaxlib's
//! own CPU client). [`hand_off`] runs such a driver of the `hlo_opt`
//! package in this process's place, after checking that the Python found
//! has what it needs, and names what is missing when it does not.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A Python driver: `python -m MODULE`.
pub struct Driver<'a> {
    /// The module run (`hlo_opt.fleet`).
    pub module: &'a str,
    /// The `hlo-cost collect` flag that runs it (for messages).
    pub flag: &'a str,
    /// What it is (for messages): `the fleet driver`.
    pub what: &'a str,
    /// Each module it imports, and what to say when that one is missing.
    pub needs: &'a [(&'a str, &'a str)],
}

/// The Python that runs a driver: `$HLO_OPT_PYTHON`, else the `.venv` of
/// the current folder or an ancestor, else of the checkout this binary was
/// built from, else `python3` on the `PATH`.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("HLO_OPT_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let mut roots: Vec<PathBuf> = std::env::current_dir()
        .map(|d| d.ancestors().map(Path::to_path_buf).collect())
        .unwrap_or_default();
    roots.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    roots
        .into_iter()
        .map(|r| r.join(".venv").join("bin").join("python"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("python3"))
}

/// Runs `python -m DRIVER ARGS` in this process's place (exec; elsewhere
/// than Unix, as a child whose status it returns). A Python that does not
/// start, or lacks one of the driver's imports, is an error that names it
/// and what to install.
pub fn hand_off(driver: &Driver<'_>, args: &[String]) -> Result<i32, String> {
    let py = python();
    let imports: Vec<&str> = driver.needs.iter().map(|(m, _)| *m).collect();
    let probe = Command::new(&py)
        .args(["-c", &format!("import {}", imports.join(", "))])
        .output()
        .map_err(|e| {
            format!(
                "{} needs Python with {}: {}: {e} (set HLO_OPT_PYTHON to its python)",
                driver.flag,
                imports.join(" and "),
                py.display()
            )
        })?;
    if !probe.status.success() {
        let err = String::from_utf8_lossy(&probe.stderr);
        let missing = driver
            .needs
            .iter()
            .find(|(m, _)| err.contains(&format!("No module named '{m}'")))
            .map(|(_, say)| *say)
            .or_else(|| err.lines().last())
            .unwrap_or("it does not start");
        return Err(format!(
            "{} runs {} in {}: {missing}; set HLO_OPT_PYTHON to another python",
            driver.flag,
            driver.what,
            py.display()
        ));
    }
    let mut child = Command::new(&py);
    child.args(["-m", driver.module]).args(args);
    // The driver takes this process's place: killing it kills the driver.
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let e = child.exec();
        Err(format!("{}: {e}", py.display()))
    }
    #[cfg(not(unix))]
    {
        let status = child
            .status()
            .map_err(|e| format!("{}: {e}", py.display()))?;
        Ok(status.code().unwrap_or(1))
    }
}
