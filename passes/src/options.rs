//! The options of a pipeline run as a person gives them (`hlo-opt`'s flags,
//! the Python package's keyword arguments), checked and completed into
//! [`PassOptions`] in one place, and the run itself with everything it
//! reports ([`run`]). The CLI and the Python package call these; the
//! messages name the CLI's flags.

use std::path::PathBuf;

use hlo::Module;

use crate::{explain, Changed, PassContext, PassError, PassOptions};

/// Largest `--budget`: configurations a search scores (the default is
/// 10,000; 10^8 takes hours of model calls).
pub const MAX_BUDGET: usize = 100_000_000;
/// Largest `--top-k`: each kept candidate is a module to compare (and, with
/// `--measure`, to compile and time).
pub const MAX_TOP_K: usize = 1_000;
/// `--min-gain` is a percentage of the default's predicted runtime below
/// this: a gain of 100% or more would be a runtime of zero or less.
pub const MAX_MIN_GAIN: f64 = 100.0;
/// Largest numeric `--trust-radius` (nodes changed); `all` lifts the bound.
pub const MAX_TRUST_RADIUS: usize = 1_000_000;

/// What a caller asked for; `None` = the default. Checked by
/// [`Settings::pass_options`].
#[derive(Clone, Debug, Default)]
pub struct Settings {
    pub budget: Option<usize>,
    pub seed: Option<u64>,
    pub top_k: Option<usize>,
    pub threads: Option<usize>,
    pub min_gain: Option<f64>,
    /// `Some(None)`: `--trust-radius all`.
    pub trust_radius: Option<Option<usize>>,
    /// `--model`: the model of the single pass of the list.
    pub model: Option<PathBuf>,
    pub layout_model: Option<PathBuf>,
    pub tile_model: Option<PathBuf>,
    /// Whether candidates are measured (`--measure`): `top_k` defaults to 3.
    pub measuring: bool,
    pub verify_each: bool,
    /// `--explain` / `--explain=all`.
    pub explain: bool,
    pub explain_all: bool,
    /// Progress bars on stderr.
    pub progress: bool,
}

impl Settings {
    /// The pass options of a run of `list` (comma-separated pass names).
    /// Refused: a budget or top-k of 0, a negative or non-finite minimum
    /// gain, `--model` with several passes. Adjusted, with a warning for
    /// `warn`: more threads than available cores.
    pub fn pass_options(
        &self,
        list: &str,
        warn: &mut dyn FnMut(String),
    ) -> Result<PassOptions, PassError> {
        let d = PassOptions::default();
        let budget = self.budget.unwrap_or(d.budget);
        if budget == 0 || budget > MAX_BUDGET {
            return Err(PassError::Options(format!(
                "--budget {budget}: a search scores at least the compiler default; give --budget from 1 to {MAX_BUDGET}"
            )));
        }
        let top_k = self
            .top_k
            .unwrap_or(if self.measuring { 3 } else { d.top_k });
        if top_k == 0 || top_k > MAX_TOP_K {
            return Err(PassError::Options(format!(
                "--top-k {top_k}: a pass keeps at least its best candidate; give --top-k from 1 to {MAX_TOP_K}"
            )));
        }
        let min_gain = self.min_gain.unwrap_or(d.min_gain);
        if !(min_gain.is_finite() && (0.0..MAX_MIN_GAIN).contains(&min_gain)) {
            return Err(PassError::Options(format!(
                "--min-gain {min_gain}: give a percentage from 0 to less than {MAX_MIN_GAIN}"
            )));
        }
        if let Some(Some(r)) = self.trust_radius {
            if r > MAX_TRUST_RADIUS {
                return Err(PassError::Options(format!(
                    "--trust-radius {r}: give a number of nodes from 0 to {MAX_TRUST_RADIUS}, or `all`"
                )));
            }
        }
        let mut threads = self.threads.unwrap_or(d.threads);
        let cores = costmodel::onnx::max_threads();
        if threads > cores {
            warn(format!(
                "warning: --threads {threads} capped at {cores}, the available parallelism (more threads than cores only wait on each other)"
            ));
            threads = cores;
        }
        let mut o = PassOptions {
            layout_model: self.layout_model.clone(),
            tile_model: self.tile_model.clone(),
            seed: self.seed.unwrap_or(d.seed),
            budget,
            top_k,
            threads,
            verify_each: self.verify_each,
            progress: self.progress,
            explain: self.explain || self.explain_all,
            explain_all: self.explain_all,
            min_gain,
            trust_radius: self.trust_radius.unwrap_or(d.trust_radius),
            ..d
        };
        if let Some(model) = &self.model {
            match crate::split_pass_list(list).as_slice() {
                ["layout"] => o.layout_model = Some(model.clone()),
                ["tile"] => o.tile_model = Some(model.clone()),
                _ => {
                    return Err(PassError::Options(
                        "--model names the model of a single pass; with several passes use --layout-model / --tile-model"
                            .into(),
                    ))
                }
            }
        }
        Ok(o)
    }
}

/// The warnings about a pass list that runs (a name listed twice).
pub fn list_warnings(names: &[&str]) -> Vec<String> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for n in names {
        if seen.contains(n) {
            out.push(format!(
                "warning: --pass lists `{n}` more than once; it runs each time it is listed"
            ));
        }
        seen.push(*n);
    }
    out
}

/// What a pipeline run reported, whether or not it succeeded.
#[derive(Debug)]
pub struct Report {
    /// The `--explain` text (summary lines always; per-node lines with
    /// [`PassOptions::explain`]).
    pub explain: String,
    /// What must be shown even without `--explain`.
    pub notes: Vec<String>,
    /// The decisions as data.
    pub records: Vec<explain::Record>,
    /// The passes' structured reports (`--explain-json`).
    pub reports: Vec<serde_json::Value>,
}

impl Report {
    /// What the CLI prints on stderr after a run: the explain text when
    /// `explain` was asked and there is one, else the notes.
    pub fn stderr_text(&self, explain: bool) -> String {
        if explain && !self.explain.is_empty() {
            self.explain.clone()
        } else {
            self.notes.iter().map(|n| format!("{n}\n")).collect()
        }
    }
}

/// Runs the pass list `list` on `m` with `options`
/// ([`crate::run_pipeline`]): whether the module changed, and the report.
/// On an error the module is as the failing pass left it.
pub fn run(
    m: &mut Module,
    list: &str,
    options: PassOptions,
) -> (Result<Changed, PassError>, Report) {
    let mut cx = PassContext::new(options);
    let result = crate::run_pipeline(m, list, &mut cx);
    (
        result,
        Report {
            explain: cx.explain,
            notes: cx.notes,
            records: cx.records,
            reports: cx.reports,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_budget_and_top_k_and_bad_gains_are_refused_with_the_flag() {
        let mut warn = |_| {};
        for (s, flag) in [
            (
                Settings {
                    budget: Some(0),
                    ..Settings::default()
                },
                "--budget 0",
            ),
            (
                Settings {
                    top_k: Some(0),
                    ..Settings::default()
                },
                "--top-k 0",
            ),
            (
                Settings {
                    min_gain: Some(f64::NAN),
                    ..Settings::default()
                },
                "--min-gain NaN",
            ),
            (
                Settings {
                    min_gain: Some(500.0),
                    ..Settings::default()
                },
                "--min-gain 500",
            ),
            (
                Settings {
                    budget: Some(MAX_BUDGET + 1),
                    ..Settings::default()
                },
                "--budget 100000001",
            ),
            (
                Settings {
                    trust_radius: Some(Some(99_999_999_999)),
                    ..Settings::default()
                },
                "--trust-radius 99999999999",
            ),
            (
                Settings {
                    model: Some("m.hlocm".into()),
                    ..Settings::default()
                },
                "--model names",
            ),
        ] {
            let e = s
                .pass_options("layout,tile", &mut warn)
                .err()
                .expect("refused");
            assert!(e.to_string().starts_with(flag), "{e}");
        }
        let o = Settings {
            measuring: true,
            ..Settings::default()
        }
        .pass_options("layout", &mut warn)
        .expect("valid");
        assert_eq!(o.top_k, 3, "measuring keeps three candidates by default");
    }

    #[test]
    fn a_pass_listed_twice_is_warned_about_once_per_repeat() {
        assert_eq!(list_warnings(&["layout", "tile"]).len(), 0);
        assert_eq!(list_warnings(&["layout", "layout", "layout"]).len(), 2);
    }
}
