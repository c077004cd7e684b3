//! Measure (`--measure`, a measurer): the model's top candidates and the
//! compiler default measured on hardware; the fastest measured becomes the
//! search's best. Configurations that give one program are measured once.

use hlo::Module;
use indexmap::IndexMap;

use super::apply::decisions;
use super::assign;
use super::candidates::NodeSpace;
use super::explore::Searched;
use super::progress::phase;
use super::search::Outcome;
use crate::{PassContext, PassError};

/// What measurement said about the candidates, for the report.
pub(super) enum Measurement {
    /// The model's best configurations all give the compiler default's
    /// module: there was nothing to measure.
    NothingToMeasure { configurations: usize },
    /// Measured: the report's lines (`layout: measured ...`) and the choice.
    Measured {
        text: String,
        kept_default: bool,
        candidates: usize,
    },
    /// Every measurement failed: the model decides.
    Failed { text: String },
}

/// Median seconds per run of each measured module (`None`: failed), the
/// compiler default's index and the index kept.
#[derive(Clone, Debug)]
pub(super) struct Times {
    pub seconds: Vec<Option<f64>>,
    pub default: usize,
    pub kept: usize,
}

/// The measure stage's result.
#[derive(Default)]
pub(super) struct Measured {
    pub measurement: Option<Measurement>,
    /// The measured times, for the record.
    pub times: Option<Times>,
    /// A measurement chose the search's best (no `--min-gain` on it).
    pub chose: bool,
}

impl Measured {
    pub(super) fn nothing_to_measure(&self) -> bool {
        matches!(self.measurement, Some(Measurement::NothingToMeasure { .. }))
    }
}

/// Measures the candidates when asked; sets the search's best to the
/// fastest measured.
pub(super) fn measure(
    m: &Module,
    spaces: &[NodeSpace],
    searched: &mut Searched,
    cx: &mut PassContext,
) -> Result<Measured, PassError> {
    let progress_on = cx.options.progress;
    let keep_many = cx.options.top_k.max(1) > 1;
    if let Some(measurer) = cx.options.measurer.as_mut() {
        with_measurer(m, spaces, searched, measurer.as_mut(), progress_on)
    } else if let Some(measure) = cx.options.measure.as_mut() {
        if keep_many {
            with_callback(m, spaces, searched, measure)
        } else {
            Ok(Measured::default())
        }
    } else {
        Ok(Measured::default())
    }
}

/// Sets the search's best to `g`, with its score among the ranked.
fn choose(outcome: &mut Outcome, g: &[u16]) {
    outcome.best = g.to_vec();
    outcome.best_score = outcome
        .ranked
        .iter()
        .find(|(r, _)| *r == outcome.best)
        .map_or(outcome.default_score, |(_, s)| *s);
}

/// The module each configuration gives.
fn trials(m: &Module, spaces: &[NodeSpace], cands: &[Vec<u16>]) -> Result<Vec<Module>, PassError> {
    let mut trials = Vec::with_capacity(cands.len());
    for g in cands {
        let mut trial = m.clone();
        let dec = decisions(&trial, spaces, g);
        assign::assign(&mut trial, &dec)?;
        trials.push(trial);
    }
    Ok(trials)
}

/// Measured autotuning with a built-in measurer: the model's top
/// candidates and the compiler default, measured together.
fn with_measurer(
    m: &Module,
    spaces: &[NodeSpace],
    searched: &mut Searched,
    measurer: &mut dyn crate::Measurer,
    progress_on: bool,
) -> Result<Measured, PassError> {
    let (outcome, default) = (&mut searched.outcome, &searched.default);
    let mut out = Measured::default();
    let mut cands: Vec<Vec<u16>> = outcome.ranked.iter().map(|(g, _)| g.clone()).collect();
    if cands.is_empty() {
        cands.push(outcome.best.clone());
    }
    let default_at = match cands.iter().position(|g| g == default) {
        Some(k) => k,
        None => {
            cands.push(default.clone());
            cands.len() - 1
        }
    };
    // Configurations that give the same module are one program:
    // measured once (the default's group keeps the default).
    let (trials, members) = distinct_modules(trials(m, spaces, &cands)?);
    let default_slot = members
        .iter()
        .position(|g| g.contains(&default_at))
        .unwrap_or(0);
    let same = cands.len() - trials.len();
    if trials.len() == 1 && cands.len() > 1 {
        out.measurement = Some(Measurement::NothingToMeasure {
            configurations: cands.len() - 1,
        });
    }
    if trials.len() <= 1 {
        return Ok(out);
    }
    let spin = phase(
        progress_on,
        &format!(
            "measuring {} candidates{} (interleaved rounds; compiles first)",
            trials.len(),
            measurer
                .device()
                .map_or(String::new(), |d| format!(" on {d}"))
        ),
    );
    let m_result = measurer
        .measure(&trials, default_slot)
        .map_err(|message| PassError::Failed {
            pass: "layout",
            message: format!("measuring candidates: {message}"),
        });
    drop(spin);
    let m_result = m_result?;
    let group = &members[m_result.keep.min(members.len() - 1)];
    let keep_at = if group.contains(&default_at) {
        default_at
    } else {
        group[0]
    };
    let text = format!(
        "layout: measured {} candidates ({}{}): {}\n{}",
        trials.len(),
        measured_candidates(&members, outcome.ranked.len(), default_at),
        if same > 0 {
            format!(
                "; {same} other configuration(s) gave one of these modules and were not measured again"
            )
        } else {
            String::new()
        },
        if keep_at == default_at {
            "kept the compiler default (no candidate beat it beyond the noise)".to_string()
        } else {
            format!(
                "kept the model's rank {} (measured candidate {})",
                keep_at + 1,
                m_result.keep + 1
            )
        },
        m_result.report
    );
    out.measurement = Some(Measurement::Measured {
        text,
        kept_default: keep_at == default_at,
        candidates: trials.len(),
    });
    out.times = Some(Times {
        seconds: m_result.seconds.clone(),
        default: default_slot,
        kept: m_result.keep,
    });
    out.chose = true;
    choose(outcome, &cands[keep_at]);
    Ok(out)
}

/// Model-guided autotuning with a callback: measure the model's top
/// candidates (and the compiler default) and keep the fastest measured.
fn with_callback(
    m: &Module,
    spaces: &[NodeSpace],
    searched: &mut Searched,
    measure: &mut crate::MeasureFn,
) -> Result<Measured, PassError> {
    let (outcome, default) = (&mut searched.outcome, &searched.default);
    let mut cands: Vec<Vec<u16>> = outcome.ranked.iter().map(|(g, _)| g.clone()).collect();
    if !cands.contains(default) {
        cands.push(default.clone());
    }
    let mut best: Option<(f64, usize)> = None;
    // A module measured once, whichever configurations give it.
    let mut seen: std::collections::HashMap<String, Option<f64>> = std::collections::HashMap::new();
    // The measured modules in order: (model rank, time).
    let mut times: Vec<(usize, Option<f64>)> = Vec::new();
    for (r, trial) in trials(m, spaces, &cands)?.iter().enumerate() {
        let text = hlo::print_module(trial);
        if seen.contains_key(&text) {
            continue; // its first configuration stands for it
        }
        let t = measure(&text).filter(|t| t.is_finite());
        seen.insert(text, t);
        times.push((r, t));
        if let Some(t) = t {
            if best.is_none_or(|(b, _)| t < b) {
                best = Some((t, r));
            }
        }
    }
    let text = format!(
        "layout: measured {} candidates{}: {}\n",
        seen.len(),
        if seen.len() < cands.len() {
            format!(
                " ({} other configuration(s) gave one of these modules and were not measured again)",
                cands.len() - seen.len()
            )
        } else {
            String::new()
        },
        match best {
            Some((t, r)) => format!("kept the model's rank {} (measured {t})", r + 1),
            None => "no measurement succeeded; the model decides".to_string(),
        }
    );
    let default_rank = cands.iter().position(|g| g == default).unwrap_or(0);
    let measured_times = Times {
        seconds: times.iter().map(|&(_, t)| t).collect(),
        default: times
            .iter()
            .position(|&(r, _)| r == default_rank)
            .unwrap_or(0),
        kept: best
            .and_then(|(_, b)| times.iter().position(|&(r, _)| r == b))
            .unwrap_or(0),
    };
    let candidates = seen.len();
    let measurement = match best {
        Some((_, r)) => Measurement::Measured {
            text,
            kept_default: cands[r] == *default,
            candidates,
        },
        None => Measurement::Failed { text },
    };
    if let Some((_, r)) = best {
        choose(outcome, &cands[r]);
    }
    Ok(Measured {
        measurement: Some(measurement),
        times: Some(measured_times),
        chose: best.is_some(),
    })
}

/// `modules` grouped by their printed text, in first-seen order: the
/// distinct modules, and per distinct module the indices of `modules` that
/// print as it (configurations that give one program are measured once).
fn distinct_modules(modules: Vec<Module>) -> (Vec<Module>, Vec<Vec<usize>>) {
    let mut slot_of: IndexMap<String, usize> = IndexMap::new();
    let mut out: Vec<Module> = Vec::new();
    let mut members: Vec<Vec<usize>> = Vec::new();
    for (k, t) in modules.into_iter().enumerate() {
        let text = hlo::print_module(&t);
        match slot_of.get(&text) {
            Some(&slot) => members[slot].push(k),
            None => {
                slot_of.insert(text, out.len());
                members.push(vec![k]);
                out.push(t);
            }
        }
    }
    (out, members)
}

/// What each measured candidate is, in the order the measurement numbers
/// them: `candidate 1 = the model's rank 1; ...; 4 = the compiler default`.
/// `members[k]`: the configurations (indices into the model's ranking, or
/// `default_at` past it) that gave candidate `k + 1`'s module.
fn measured_candidates(members: &[Vec<usize>], ranked: usize, default_at: usize) -> String {
    let who: Vec<String> = members
        .iter()
        .enumerate()
        .map(|(k, group)| {
            let ranks: Vec<String> = group
                .iter()
                .filter(|&&c| c < ranked)
                .map(|&c| (c + 1).to_string())
                .collect();
            let rank_text = format!(
                "the model's rank{} {}",
                if ranks.len() > 1 { "s" } else { "" },
                ranks.join(", ")
            );
            let what = match (group.contains(&default_at), ranks.is_empty()) {
                (true, true) => "the compiler default".to_string(),
                (true, false) => format!("the compiler default ({rank_text})"),
                (false, _) => rank_text,
            };
            format!("{} = {what}", k + 1)
        })
        .collect();
    format!("candidate {}", who.join("; "))
}

#[cfg(test)]
mod measured_tests {
    use super::measured_candidates;

    /// The measured line says what each candidate is: the model's ranks by
    /// number, the compiler default by name (also when the model ranked it).
    #[test]
    fn measured_candidates_are_named_by_rank_and_the_default_by_name() {
        assert_eq!(
            measured_candidates(&[vec![0], vec![1, 2], vec![3]], 3, 3),
            "candidate 1 = the model's rank 1; 2 = the model's ranks 2, 3; 3 = the compiler default"
        );
        assert_eq!(
            measured_candidates(&[vec![0], vec![1]], 2, 1),
            "candidate 1 = the model's rank 1; 2 = the compiler default (the model's rank 2)"
        );
    }
}
