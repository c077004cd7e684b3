//! `hlo-cost collect` taken apart for a fleet: the driver
//! (`python/hlo_opt/fleet.py`, over Ray or local processes) plans a program
//! and publishes its files ([`Program::plan`], [`Program::publish`]); a
//! machine of the fleet measures one chunk of it with its own XLA
//! ([`Program::measure`]) and says what it is ([`fingerprint`]).
//!
//! The files are the ones [`super::run_with`] writes, so a folder collected
//! by a fleet and one collected by `hlo-cost collect` are read, continued
//! and trained on alike: the state `STEM.collect.jsonl` (its chunk lines
//! carry two more keys, `device` and `node`, which [`super::read_state`]
//! ignores) and `STEM.npz`. The driver owns the state file and
//! `manifest.json`; [`hand_off`] runs that driver for `hlo-cost collect --ray`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{machine, plan_job, plugin_package, read_state, state_header, Job, Settings};

/// One program of a collection, planned.
pub struct Program {
    job: Job,
    settings: Settings,
}

impl Program {
    /// Reads, verifies, featurizes and samples the module at `path` as
    /// `hlo-cost collect` does (the same plan for the same text and
    /// settings); its files would go to `dir`.
    pub fn plan(path: &Path, dir: &Path, s: &Settings) -> Result<Program, String> {
        Ok(Program {
            job: plan_job(path, dir, s)?,
            settings: s.clone(),
        })
    }

    /// The file name's stem: `STEM.collect.jsonl`, `STEM.npz`.
    pub fn stem(&self) -> &str {
        &self.job.stem
    }

    /// Configurations in the plan, the compiler default (index 0) included.
    pub fn planned(&self) -> usize {
        self.job.plan.len()
    }

    /// The state file's first line for a collection on `device` (a device
    /// name such as `xla-cpu`, as [`fingerprint`] reports it).
    pub fn header(&self, device: &str) -> Value {
        let s = Settings {
            device: device.to_string(),
            ..self.settings.clone()
        };
        state_header(&self.job, &s)
    }

    /// Measures configurations `configs` (plan indices, not 0) in one chunk
    /// with the compiler default and its control, on `device` (`xla-cpu` or
    /// `pjrt:PATH`, found on this machine), as `hlo-cost collect` measures a
    /// chunk. Returns the chunk's state line. `Err` when the default could
    /// not be measured (the run treats the program as failed).
    pub fn measure(&self, device: &str, configs: &[usize]) -> Result<Value, String> {
        if let Some(&bad) = configs.iter().find(|&&c| c == 0 || c >= self.planned()) {
            return Err(format!(
                "configuration {bad}: not in the plan (1 to {})",
                self.planned() - 1
            ));
        }
        let config = pjrt::MeasureConfig {
            budget: Duration::from_secs_f64(self.settings.measure_budget),
            max_rounds: 1000,
            ..Default::default()
        };
        let measurer =
            pjrt::measurer_for(device, config).map_err(|e| format!("--device {device}: {e}"))?;
        super::measure_chunk(&self.job, configs, &measurer, device, Instant::now())
            .map(|c| c.to_json())
    }

    /// Writes `STEM.npz` (temporary file, rename) from the state file in
    /// the folder given to [`Program::plan`], whose header must be this
    /// plan's on `device`. Returns the program's `manifest.json` entry.
    pub fn publish(&mut self, device: &str) -> Result<Value, String> {
        let header = self.header(device);
        self.job.chunks = read_state(&self.job.state_path, &header, self.planned())?;
        if !self.job.chunks.is_empty() {
            self.job.write_npz(self.settings.estimator)?;
        }
        Ok(self.job.summary(self.settings.estimator))
    }
}

/// What measures on this machine for `device` (`xla-cpu`, `pjrt:PATH`):
/// the device name the state records (`xla-cpu`, `xla-cuda`), the PJRT
/// platform and API version, the plugin's path and Python package and
/// version, and the machine (CPU model, cores, hostname). Starts the plugin
/// once.
pub fn fingerprint(device: &str) -> Result<Value, String> {
    let measurer = pjrt::measurer_for(device, pjrt::MeasureConfig::default())
        .map_err(|e| format!("--device {device}: {e}"))?;
    let b =
        pjrt::Backend::start(&measurer.plugin).map_err(|e| format!("--device {device}: {e}"))?;
    let package = plugin_package(&measurer.plugin);
    Ok(json!({
        "device": pjrt::device_name(&b.platform),
        "platform": b.platform,
        "pjrt_api_version": b.api_version,
        "plugin": measurer.plugin.display().to_string(),
        "package": package.as_ref().map(|(n, _)| n),
        "package_version": package.as_ref().map(|(_, v)| v),
        "machine": machine(),
    }))
}

/// `hlo-cost collect ... --ray ADDRESS`: runs the fleet driver
/// (`python -m hlo_opt.fleet ARGS`, the same flags) in this process's
/// place ([`super::python::hand_off`]).
pub fn hand_off(args: &[String]) -> Result<i32, String> {
    super::python::hand_off(
        &super::python::Driver {
            module: "hlo_opt.fleet",
            flag: "--ray",
            what: "the fleet driver",
            needs: &[
                ("hlo_opt", "the hlo_opt package is not installed there (docs/python.md: pip install --no-build-isolation '.[ray]')"),
                ("ray", "Ray is not installed there: pip install 'hlo-opt[ray]' (or -r python/requirements.txt)"),
            ],
        },
        args,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::Estimator;
    use std::path::PathBuf;

    fn settings(seed: u64) -> Settings {
        Settings {
            device: String::new(),
            estimator: Estimator::Median,
            configs: 5,
            random_fraction: 0.5,
            seed,
            chunk: 2,
            measure_budget: 0.0,
            budget: None,
        }
    }

    /// A folder of its own, emptied.
    fn folder(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "hlo-opt-collect-fleet-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("a test folder");
        d
    }

    fn mlp(dir: &Path, seed: u64) -> Program {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/hlo/mlp.pre.hlo");
        Program::plan(&path, dir, &settings(seed)).expect("mlp.pre.hlo plans")
    }

    #[test]
    fn a_chunk_holds_plan_indices_other_than_the_default() {
        let dir = folder("indices");
        let p = mlp(&dir, 1);
        assert_eq!((p.stem(), p.planned()), ("mlp.pre", 5));
        // Refused before any device is looked for.
        for bad in [0, 5] {
            let e = p.measure("pjrt:/nonexistent.so", &[1, bad]).unwrap_err();
            assert!(
                e.starts_with(&format!("configuration {bad}: not in the plan")),
                "{e}"
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_header_names_the_device_it_is_made_for() {
        let dir = folder("header");
        let p = mlp(&dir, 1);
        let h = p.header("xla-cuda");
        assert_eq!(h["device"], "xla-cuda");
        assert_eq!(h["plan"].as_array().map(Vec::len), Some(5));
        assert_eq!(
            h["plan"],
            p.header("xla-cpu")["plan"],
            "the plan does not depend on the device"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn publishing_refuses_a_state_of_other_settings() {
        let dir = folder("publish");
        let other = mlp(&dir, 2);
        let header = other.header("xla-cpu").to_string() + "\n";
        std::fs::write(dir.join("mlp.pre.collect.jsonl"), header).expect("a state file");
        let e = mlp(&dir, 1).publish("xla-cpu").unwrap_err();
        assert!(e.contains("--seed 2 (this run: 1)"), "{e}");
        // Its own state (a header, nothing measured) publishes an empty entry.
        let mut same = mlp(&dir, 2);
        let entry = same.publish("xla-cpu").expect("its own state");
        assert_eq!(entry["in_npz"], 0);
        assert!(!dir.join("mlp.pre.npz").exists());
        let _ = std::fs::remove_dir_all(dir);
    }
}
