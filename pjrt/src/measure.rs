//! Measured choice among layout candidates on a PJRT backend: each
//! candidate and the compiler default is legalized, compiled once with its
//! layouts kept, checked to compute the default's results, then run in
//! interleaved rounds together with a *control* (a second executable of
//! the default program). A candidate is kept only if it beats the default
//! by more than the control's spread.
//!
//! Invariants: a candidate that fails to compile, aborts XLA or computes
//! other results is never kept (it is reported); a failure of the default
//! is an error; measurement stops after `max_rounds` rounds or when the
//! time budget is spent (at least `min_rounds`), so it is bounded.
//! Timings are not deterministic; the decision rule is.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::{compare, inputs_for, legalize, Backend, Pipeline, PjrtError, Result};

/// How long and how much to measure.
#[derive(Clone, Debug)]
pub struct MeasureConfig {
    /// Wall-time budget for the timed rounds (compiles not included).
    pub budget: Duration,
    pub min_rounds: usize,
    pub max_rounds: usize,
    /// Shortest timed unit: a run repeated until one unit takes this long.
    pub min_unit: Duration,
    /// Seed of the inputs.
    pub seed: u64,
}

impl Default for MeasureConfig {
    fn default() -> Self {
        MeasureConfig {
            budget: Duration::from_secs(10),
            min_rounds: 5,
            max_rounds: 40,
            min_unit: Duration::from_millis(2),
            seed: 0,
        }
    }
}

/// The measurement of a set of candidates.
#[derive(Clone, Debug)]
pub struct Measured {
    /// Seconds per run of each candidate (`None`: not measured), in the
    /// estimator of [`Measured::ratio`]: the default's median, and for a
    /// candidate the default's median times its ratio, so that
    /// `seconds[i] / seconds[default] == ratio[i]` (a candidate's own median
    /// would not agree with its paired ratio when the machine's speed drifts).
    pub seconds: Vec<Option<f64>>,
    /// Median over rounds of each candidate's time / the default's (paired
    /// in the same round: what the decision compares).
    pub ratio: Vec<Option<f64>>,
    /// Each candidate's fastest round / the default's fastest round: the
    /// estimator least moved by other processes, which only ever add time.
    pub min_ratio: Vec<Option<f64>>,
    /// Fastest round's seconds per run of each candidate.
    pub min_seconds: Vec<Option<f64>>,
    /// Half-width of the control's ratios (10th to 90th percentile), at least 1%.
    pub spread: f64,
    /// Median ratio of the control to the default (ideally 1).
    pub control_ratio: f64,
    /// The control's fastest round / the default's (ideally 1).
    pub control_min_ratio: f64,
    pub rounds: usize,
    /// The candidate kept (the default unless one beat it beyond the spread).
    pub keep: usize,
    /// Human-readable lines: per candidate its time, ratio and fate.
    pub report: String,
}

/// The median of `v` (NaN when empty).
pub fn median(v: &[f64]) -> f64 {
    quantile(v, 0.5)
}

/// The `q`-quantile of `v`, linearly interpolated (NaN when empty).
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// Seconds per run of each executable of one interleaved measurement
/// ([`time_interleaved`]): `runs[i][r]` is executable `i` in round `r`.
#[derive(Clone, Debug)]
pub struct Timings {
    pub runs: Vec<Vec<f64>>,
    pub rounds: usize,
    /// Runs per timed unit (the unit's time / `reps` is recorded).
    pub reps: usize,
}

impl Timings {
    /// Per-round ratios of executable `x` to `y`.
    pub fn ratios(&self, x: usize, y: usize) -> Vec<f64> {
        self.runs[x]
            .iter()
            .zip(&self.runs[y])
            .map(|(a, b)| a / b)
            .collect()
    }

    /// Median over rounds of `x`'s time / `y`'s.
    pub fn ratio(&self, x: usize, y: usize) -> f64 {
        median(&self.ratios(x, y))
    }

    /// Half-width of the 10th-90th percentile range of `control`'s ratios to
    /// `base` (the same program twice: what a ratio means nothing within).
    pub fn spread(&self, control: usize, base: usize) -> f64 {
        let r = self.ratios(control, base);
        (quantile(&r, 0.9) - quantile(&r, 0.1)) / 2.0
    }

    /// Median seconds per run of executable `i`.
    pub fn seconds(&self, i: usize) -> f64 {
        median(&self.runs[i])
    }

    /// Seconds per run of executable `i` in its fastest round.
    pub fn min_seconds(&self, i: usize) -> f64 {
        self.runs[i].iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// `x`'s fastest round / `y`'s fastest round.
    pub fn min_ratio(&self, x: usize, y: usize) -> f64 {
        self.min_seconds(x) / self.min_seconds(y)
    }
}

/// Times executables `exes` in interleaved rounds: each round runs every
/// one once (a unit of `reps` runs), the order rotating by one each round
/// so none always runs first. `reps` is chosen so that a unit of
/// `exes[unit_of]` takes at least `config.min_unit`; every executable is
/// run once before the first round (warm-up). Rounds go on until
/// `config.max_rounds`, or the budget is spent and `config.min_rounds` are
/// done.
pub fn time_interleaved(
    backend: &mut Backend,
    exes: &[usize],
    unit_of: usize,
    config: &MeasureConfig,
) -> Result<Timings> {
    let Some(&unit_exe) = exes.get(unit_of) else {
        return Err(PjrtError::Input("no executable to time".into()));
    };
    let once = backend.run(unit_exe, 2)?;
    let t1 = once.iter().copied().fold(f64::INFINITY, f64::min).max(1e-7);
    let reps = ((config.min_unit.as_secs_f64() / t1).ceil() as usize).clamp(1, 1000);
    for &e in exes {
        backend.run(e, 1)?;
    }
    let mut runs: Vec<Vec<f64>> = vec![Vec::new(); exes.len()];
    let start = Instant::now();
    let mut rounds = 0;
    while rounds < config.max_rounds
        && (rounds < config.min_rounds || start.elapsed() < config.budget)
    {
        for k in 0..exes.len() {
            let i = (k + rounds) % exes.len();
            let t: f64 = backend.run(exes[i], reps)?.iter().sum::<f64>() / reps as f64;
            runs[i].push(t);
        }
        rounds += 1;
    }
    Ok(Timings { runs, rounds, reps })
}

/// A module ready for the backend: legalized, serialized.
pub fn prepare(m: &hlo::Module) -> Result<(Vec<u8>, legalize::Report)> {
    let mut m = m.clone();
    let report = legalize::legalize_xla_cpu(&mut m)?;
    Ok((crate::proto::module_proto(&m)?, report))
}

/// Compiles each of `programs` (XLA's pipeline: the module as it is;
/// layouts kept: legalized by [`prepare`]); per program its executable id
/// and its legalization report (empty for XLA's pipeline).
pub fn compile_programs(
    backend: &mut Backend,
    programs: &[(&hlo::Module, Pipeline)],
) -> Result<Vec<(usize, legalize::Report)>> {
    programs
        .iter()
        .map(|&(m, pipeline)| {
            let (proto, report) = match pipeline {
                Pipeline::Xla => (crate::proto::module_proto(m)?, legalize::Report::default()),
                Pipeline::LayoutsKept => prepare(m)?,
            };
            Ok((backend.compile(&proto, pipeline)?.id, report))
        })
        .collect()
}

/// A measurer on a PJRT plugin (XLA:CPU by default).
pub struct PjrtMeasurer {
    pub plugin: PathBuf,
    pub config: MeasureConfig,
    /// The worker executable; `None`: [`crate::find_worker`].
    pub worker: Option<PathBuf>,
}

impl PjrtMeasurer {
    pub fn new(plugin: PathBuf, config: MeasureConfig) -> Self {
        PjrtMeasurer {
            plugin,
            config,
            worker: None,
        }
    }

    fn start(&self) -> Result<Backend> {
        match &self.worker {
            Some(w) => Backend::start_with(&self.plugin, w),
            None => Backend::start(&self.plugin),
        }
    }

    /// Measures `candidates` (`candidates[default]` is the compiler
    /// default) and decides which to keep.
    pub fn measure(&self, candidates: &[hlo::Module], default: usize) -> Result<Measured> {
        let n = candidates.len();
        if default >= n {
            return Err(PjrtError::Input(
                "the default is not among the candidates".into(),
            ));
        }
        let mut report = String::new();
        let mut backend = self.start()?;
        let inputs = inputs_for(&candidates[default], self.config.seed)?;
        backend.set_inputs(&inputs)?;
        let mut exes: Vec<Option<usize>> = vec![None; n];
        let mut protos: Vec<Option<Vec<u8>>> = vec![None; n];
        let mut notes: Vec<String> = vec![String::new(); n];
        let mut control = None;
        // Compile the default first (and its control): without them, nothing to compare.
        let mut order: Vec<usize> = vec![default];
        order.extend((0..n).filter(|&i| i != default));
        let mut reference = None;
        for &i in &order {
            let compiled = prepare(&candidates[i]).and_then(|(proto, _)| {
                let c = backend.compile(&proto, Pipeline::LayoutsKept)?;
                if i == default {
                    control = Some(backend.compile(&proto, Pipeline::LayoutsKept)?.id);
                }
                protos[i] = Some(proto);
                Ok(c)
            });
            let c = match compiled {
                Ok(c) => c,
                Err(e) => {
                    if i == default {
                        return Err(e);
                    }
                    notes[i] = format!("not measured: {e}");
                    if matches!(e, PjrtError::WorkerDied { .. } | PjrtError::Timeout { .. }) {
                        // The worker is gone: a new one, with what was compiled.
                        backend = self.start()?;
                        backend.set_inputs(&inputs)?;
                        for j in 0..n {
                            if let (Some(_), Some(p)) = (exes[j], &protos[j]) {
                                exes[j] = Some(backend.compile(p, Pipeline::LayoutsKept)?.id);
                            }
                        }
                        if let Some(p) = &protos[default] {
                            control = Some(backend.compile(p, Pipeline::LayoutsKept)?.id);
                        }
                    }
                    continue;
                }
            };
            let outs = backend.outputs(c.id)?;
            if i == default {
                reference = Some(outs);
            } else if let Some(r) = &reference {
                // Layouts may reorder floating-point sums: a loose tolerance,
                // looser for 16-bit floats.
                let tol = if crate::has_half_floats(r) {
                    2e-2
                } else {
                    1e-3
                };
                if let Err(mm) = compare(&outs, r, tol, tol) {
                    notes[i] = format!("rejected: computes other results ({mm})");
                    continue;
                }
            }
            exes[i] = Some(c.id);
        }
        let Some(control) = control else {
            return Err(PjrtError::Protocol("the control was not compiled".into()));
        };
        if exes[default].is_none() {
            return Err(PjrtError::Protocol("the default was not compiled".into()));
        }
        // Timed: the measured candidates (default first) and the control.
        let slots: Vec<usize> = std::iter::once(default)
            .chain((0..n).filter(|&i| i != default && exes[i].is_some()))
            .collect();
        let mut exe_ids: Vec<usize> = slots.iter().filter_map(|&i| exes[i]).collect();
        exe_ids.push(control);
        let t = time_interleaved(&mut backend, &exe_ids, 0, &self.config)?;
        let (rounds, reps) = (t.rounds, t.reps);
        let control_slot = exe_ids.len() - 1;
        let spread = t.spread(control_slot, 0).max(0.01);
        let control_ratio = t.ratio(control_slot, 0);
        let control_min_ratio = t.min_ratio(control_slot, 0);
        let mut seconds = vec![None; n];
        let mut ratio = vec![None; n];
        let mut min_seconds = vec![None; n];
        let mut min_ratio = vec![None; n];
        let default_seconds = t.seconds(0);
        for (k, &i) in slots.iter().enumerate() {
            // Slot 0 is the default: ratio 1, its own median.
            let r = if k == 0 { 1.0 } else { t.ratio(k, 0) };
            seconds[i] = Some(default_seconds * r);
            ratio[i] = Some(r);
            min_seconds[i] = Some(t.min_seconds(k));
            min_ratio[i] = Some(t.min_ratio(k, 0));
        }
        let mut keep = default;
        for i in 0..n {
            if let Some(r) = ratio[i] {
                if i != default && r < 1.0 - spread && ratio[keep].is_none_or(|k| r < k) {
                    keep = i;
                }
            }
        }
        let _ = writeln!(
            report,
            "measured on {} ({}, PJRT {}): {rounds} interleaved rounds of {reps} run(s) each; control/default {control_ratio:.3}, spread ±{:.1}%",
            backend.platform,
            self.plugin.display(),
            backend.api_version,
            spread * 100.0
        );
        let _ = writeln!(
            report,
            "  (the compiler default's time is its median run; a candidate's is that times its ratio, the median of its per-round ratios to the default)"
        );
        for i in 0..n {
            let who = if i == default {
                "compiler default".to_string()
            } else {
                format!("candidate {}", i + 1)
            };
            let fate = if i == keep { ", kept" } else { "" };
            match (seconds[i], ratio[i]) {
                (Some(s), Some(r)) => {
                    let _ = writeln!(report, "  {who}: {:.3} ms, {r:.3} x default{fate}", s * 1e3);
                }
                _ => {
                    let _ = writeln!(report, "  {who}: {}", notes[i]);
                }
            }
        }
        Ok(Measured {
            seconds,
            ratio,
            min_ratio,
            min_seconds,
            spread,
            control_ratio,
            control_min_ratio,
            rounds,
            keep,
            report,
        })
    }
}

impl passes::Measurer for PjrtMeasurer {
    fn measure(
        &mut self,
        candidates: &[hlo::Module],
        default: usize,
    ) -> std::result::Result<passes::Measurement, String> {
        let m = PjrtMeasurer::measure(self, candidates, default).map_err(|e| e.to_string())?;
        Ok(passes::Measurement {
            keep: m.keep,
            seconds: m.seconds,
            report: m.report,
        })
    }

    /// Starts the plugin once to ask its platform.
    fn device(&mut self) -> Option<String> {
        self.start().ok().map(|b| device_name(&b.platform))
    }
}

/// The device a plugin's platform stands for, as collections and model
/// files record it (`hlo-cost collect`, `train.py --device`): `xla-cpu` for
/// XLA's CPU plugin, `xla-PLATFORM` for another (`xla-cuda`).
pub fn device_name(platform: &str) -> String {
    format!("xla-{}", platform.trim().to_ascii_lowercase())
}

/// [`measurer_for`] with `--measure-budget` seconds of timing rounds
/// (a finite number >= 0, at most a day).
pub fn measurer_for_budget(spec: &str, seconds: f64) -> Result<PjrtMeasurer> {
    if !(seconds.is_finite() && seconds >= 0.0) {
        return Err(PjrtError::Input(format!(
            "--measure-budget={seconds}: expected a number of seconds"
        )));
    }
    let config = MeasureConfig {
        budget: Duration::from_secs_f64(seconds.min(86_400.0)),
        ..MeasureConfig::default()
    };
    measurer_for(spec, config)
}

/// What a `--measure` (hlo-opt) or `--device` (hlo-cost collect) value
/// names: XLA's CPU plugin, or a PJRT plugin file. The one parser of those
/// values; the CLIs check a command line with it before any work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MeasureTarget {
    /// `xla-cpu`: XLA's CPU plugin, found by [`crate::find_plugin`].
    XlaCpu,
    /// `pjrt:PATH`: any PJRT plugin file.
    Plugin(std::path::PathBuf),
}

impl std::str::FromStr for MeasureTarget {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.strip_prefix("pjrt:") {
            _ if s == "xla-cpu" => Ok(MeasureTarget::XlaCpu),
            Some(path) if !path.is_empty() => Ok(MeasureTarget::Plugin(path.into())),
            _ => Err(format!("`{s}`: expected `xla-cpu` or `pjrt:PLUGIN_PATH`")),
        }
    }
}

/// The measurer a `--measure` value names ([`MeasureTarget`]).
pub fn measurer_for(spec: &str, config: MeasureConfig) -> Result<PjrtMeasurer> {
    let target: MeasureTarget = spec
        .parse()
        .map_err(|e| PjrtError::Input(format!("--measure: {e}")))?;
    let plugin = match target {
        MeasureTarget::XlaCpu => crate::find_plugin(None)?,
        MeasureTarget::Plugin(path) => crate::find_plugin(Some(&path))?,
    };
    crate::find_worker()?;
    Ok(PjrtMeasurer::new(plugin, config))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three executables over four rounds: the median estimator pairs each
    /// round's times (a slow round slows all alike), the minimum estimator
    /// takes each executable's fastest round.
    #[test]
    fn median_of_round_ratios_and_ratio_of_fastest_rounds() {
        let t = Timings {
            runs: vec![
                vec![1.0, 2.0, 1.1, 4.0],
                vec![2.0, 4.0, 2.2, 8.0],
                vec![1.5, 1.0, 3.0, 2.0],
            ],
            rounds: 4,
            reps: 1,
        };
        assert!((t.ratio(1, 0) - 2.0).abs() < 1e-12);
        assert!((t.min_ratio(1, 0) - 2.0).abs() < 1e-12);
        assert!((t.min_seconds(2) - 1.0).abs() < 1e-12);
        // Ratios of executable 2 to 0 by round: 1.5, 0.5, 2.727, 0.5.
        assert!((t.ratio(2, 0) - (0.5 + 1.5) / 2.0).abs() < 1e-12);
        assert!((t.min_ratio(2, 0) - 1.0).abs() < 1e-12);
        assert!((median(&[3.0, 1.0, 2.0, 10.0]) - 2.5).abs() < 1e-12);
        assert!(median(&[]).is_nan());
    }
}
