//! Report: the stages' results become the decision record
//! ([`LayoutReport`]), which goes to the context as JSON and as the
//! `--explain` text ([`super::render`]), and to the Python package as the
//! same object ([`crate::explain::Record::Layout`]).

use hlo::Module;

use super::apply::Applied;
use super::candidates::{NodeConfig, NodeSpace};
use super::decide::Verdict;
use super::explore::Searched;
use super::fitness::ModelFitness;
use super::gain::gain_pct;
use super::measure::{self, Measured};
use super::record::{self, Considered, LayoutReport, OtherNode, Ranked};
use super::render::{self, change, error_text};
use super::search::Fitness;
use super::{dims, fail};
use crate::explain;
use crate::{PassContext, PassError};

/// The model, as the report describes it.
pub(super) struct ModelFacts {
    pub name: String,
    pub device: Option<String>,
    /// `log_runtime_per_score`: predictions are runtime changes.
    pub calibration: Option<f64>,
    /// `log_runtime_resolution`: the model's error, in ln(runtime).
    pub resolution: Option<f64>,
}

impl ModelFacts {
    /// The model's error as a runtime change in percent (`1 - exp(-r)`, the
    /// smallest predicted gain it can tell from its own error).
    fn error_pct(&self) -> Option<f64> {
        match (self.calibration, self.resolution) {
            (Some(_), Some(r)) => Some((1.0 - (-r).exp()) * 100.0),
            _ => None,
        }
    }
}

/// What the stages found, for the report.
pub(super) struct Stages<'r> {
    pub spaces: &'r [NodeSpace],
    pub searched: &'r Searched,
    pub measured: Measured,
    pub verdict: Verdict,
    pub applied: &'r Applied,
    pub model: ModelFacts,
}

/// Builds the record and hands it to the context: the JSON report, the
/// `--explain` text, the notes (warnings) and the Python record.
pub(super) fn report(
    m: &Module,
    cx: &mut PassContext,
    st: Stages<'_>,
    fitness: &mut ModelFitness<'_>,
) -> Result<(), PassError> {
    let alone = alone_scores(&st, cx.options.explain, fitness)?;
    let rec = build(m, cx, &st, &alone);
    for w in &rec.warnings {
        cx.notes.push(w.clone());
    }
    render::explain(
        &rec,
        cx.options.explain,
        cx.options.explain_all,
        &mut cx.explain,
    );
    // `--explain-json` writes the record the Python package hands out.
    let rec = explain::Record::Layout(Box::new(rec));
    let json =
        serde_json::to_value(&rec).map_err(|e| fail(format!("the --explain-json report: {e}")))?;
    cx.records.push(rec);
    cx.reports.push(json);
    Ok(())
}

pub(super) fn show_prefix(p: &Option<dims::M2M>) -> String {
    match p {
        None => "default".into(),
        Some(v) => hlo::Layout::order_text(v),
    }
}

pub(super) fn show_config(c: &NodeConfig) -> String {
    use std::fmt::Write as _;
    let mut s = format!("output {}", show_prefix(&c.output));
    if c.input.is_some() || c.kernel.is_some() {
        let _ = write!(s, ", input {}", show_prefix(&c.input));
    }
    if c.kernel.is_some() {
        let _ = write!(s, ", kernel {}", show_prefix(&c.kernel));
    }
    s
}

/// The nodes considered: each change of the search's best and each change
/// the trust region reverted, in node order.
fn considered_nodes(st: &Stages<'_>) -> Vec<usize> {
    let (o, default) = (&st.searched.outcome, &st.searched.default);
    let mut considered: Vec<usize> = (0..st.spaces.len())
        .filter(|&j| o.best[j] != default[j])
        .chain(o.reverted.iter().copied())
        .collect();
    considered.sort_unstable();
    considered.dedup();
    considered
}

/// Per node, the (alone, default) scores of its change: the per-change
/// check's (comparable with the default's: from one call, or not
/// batch-relative), and with `--explain` one more call for the changes the
/// check did not score.
fn alone_scores(
    st: &Stages<'_>,
    explain: bool,
    fitness: &mut ModelFitness<'_>,
) -> Result<Vec<Option<(f32, f32)>>, PassError> {
    let (o, default) = (&st.searched.outcome, &st.searched.default);
    let considered = considered_nodes(st);
    let mut alone: Vec<Option<(f32, f32)>> = vec![None; st.spaces.len()];
    if let Some(n) = o.checked {
        // The check scored each change of the search's best in node order;
        // kept and reverted together are exactly those changes.
        if o.checked_alone.len() == n && considered.len() == n {
            for (&j, &sc) in considered.iter().zip(&o.checked_alone) {
                alone[j] = Some(sc);
            }
        }
    }
    if !explain {
        return Ok(alone);
    }
    let need: Vec<usize> = considered
        .iter()
        .copied()
        .filter(|&j| alone[j].is_none() && !o.reverted.contains(&j))
        .collect();
    for part in need.chunks(st.searched.batch.saturating_sub(2).max(1)) {
        let mut genomes: Vec<Vec<u16>> = vec![default.to_vec(), o.best.clone()];
        genomes.extend(part.iter().map(|&j| {
            let mut g = default.to_vec();
            g[j] = o.best[j];
            g
        }));
        let scores = fitness.score(&genomes)?;
        if scores.len() != genomes.len() {
            return Err(fail(format!(
                "the cost model returned {} scores for {} configurations",
                scores.len(),
                genomes.len()
            )));
        }
        for (&j, &sc) in part.iter().zip(&scores[2..]) {
            alone[j] = Some((sc, scores[0]));
        }
    }
    Ok(alone)
}

/// The number of configurations of the product space of `sizes`: exact if
/// it fits in a u128 (else `None`), and its log10 (never capped: summed
/// over the nodes).
pub(super) fn space_size(sizes: &[usize]) -> (Option<u128>, f64) {
    let log10: f64 = sizes.iter().map(|&n| (n.max(1) as f64).log10()).sum();
    let exact = sizes
        .iter()
        .try_fold(1u128, |acc, &n| acc.checked_mul(n as u128));
    (exact, log10)
}

/// The record of the stages.
fn build(
    m: &Module,
    cx: &PassContext,
    st: &Stages<'_>,
    alone: &[Option<(f32, f32)>],
) -> LayoutReport {
    let (spaces, o) = (st.spaces, &st.searched.outcome);
    let opts = &cx.options;
    let measuring = super::explore::measuring(cx);
    let sizes: Vec<usize> = spaces.iter().map(|s| s.candidates.len()).collect();
    let (space_exact, space_log10) = space_size(&sizes);
    let floor = st.searched.floor;
    let decision = decision(st);
    let result = outcome(m, st);
    LayoutReport {
        nodes: spaces.len(),
        nodes_with_choice: sizes.iter().filter(|&&n| n > 1).count(),
        space: record::Space {
            configurations: space_exact.and_then(|n| u64::try_from(n).ok()),
            log10: space_log10,
        },
        trust_region: record::TrustRegion {
            radius: opts.trust_radius,
            configurations: u64::try_from(o.region).ok(),
            log10: (o.region as f64).log10(),
            saturated: o.region == u128::MAX,
        },
        search: record::SearchInfo {
            method: o.method.name().to_string(),
            scored: o.scored,
            seconds: st.searched.secs,
            seed: opts.seed,
            rescored: o.rescored,
        },
        model: record::ModelInfo {
            name: st.model.name.clone(),
            device: st.model.device.clone(),
            runtime_calibrated: st.model.calibration.is_some(),
            error_pct: st.model.error_pct(),
            log_runtime_resolution: st.model.resolution,
            threshold_pct: (!measuring).then_some(floor.pct),
            threshold_source: (!measuring).then(|| floor.source()),
        },
        model_ranked: if measuring { ranked(m, st) } else { Vec::new() },
        considered: considered(m, st, alone),
        other_nodes: other_nodes(m, st),
        measurement: st
            .measured
            .measurement
            .as_ref()
            .map(|mm| measurement(mm, st.measured.times.as_ref())),
        warnings: warnings(st, &decision),
        decision,
        result,
    }
}

/// The model's best configurations (`--measure`), with their predictions.
fn ranked(m: &Module, st: &Stages<'_>) -> Vec<Ranked> {
    let (o, default) = (&st.searched.outcome, &st.searched.default);
    // The nodes and layouts each changes: what tells ranks apart when
    // their predictions read the same.
    let changes = |g: &[u16]| -> Vec<String> {
        g.iter()
            .zip(default)
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .filter_map(|(j, (&a, _))| {
                let c = st.spaces[j].candidates.get(a as usize)?;
                Some(format!("%{} ({})", name_of(m, st, j), show_config(c)))
            })
            .collect()
    };
    o.ranked
        .iter()
        .enumerate()
        .map(|(rank, (g, sc))| Ranked {
            rank: rank + 1,
            predicted_change_pct: -gain_pct(*sc, o.default_score, st.model.calibration),
            nodes_changed: g.iter().zip(default).filter(|(a, b)| a != b).count(),
            changes: changes(g),
            score: *sc,
        })
        .collect()
}

fn applied(st: &Stages<'_>) -> bool {
    matches!(st.verdict, Verdict::Applied { .. })
}

fn name_of(m: &Module, st: &Stages<'_>, j: usize) -> String {
    m.inst(st.spaces[j].inst).name.to_string()
}

fn considered(m: &Module, st: &Stages<'_>, alone: &[Option<(f32, f32)>]) -> Vec<Considered> {
    let o = &st.searched.outcome;
    let applied = applied(st);
    considered_nodes(st)
        .into_iter()
        .map(|j| {
            let s = &st.spaces[j];
            let is_reverted = o.reverted.contains(&j);
            Considered {
                node: name_of(m, st, j),
                choice: (!is_reverted).then(|| show_config(&s.candidates[o.best[j] as usize])),
                default: show_config(&s.candidates[s.default]),
                predicted_change_pct: alone[j].map(|(a, b)| -gain_pct(a, b, st.model.calibration)),
                score_alone: alone[j].map(|(a, _)| a),
                default_score: alone[j].map(|(_, b)| b),
                outcome: if is_reverted {
                    "reverted"
                } else if applied {
                    "applied"
                } else {
                    "not applied"
                },
                changed: applied && st.applied.changed_nodes[j],
            }
        })
        .collect()
}

fn other_nodes(m: &Module, st: &Stages<'_>) -> Vec<OtherNode> {
    let considered = considered_nodes(st);
    let applied = applied(st);
    (0..st.spaces.len())
        .filter(|j| !considered.contains(j))
        .map(|j| {
            let s = &st.spaces[j];
            OtherNode {
                node: name_of(m, st, j),
                default: show_config(&s.candidates[s.default]),
                relaid_out: applied && st.applied.changed_nodes[j],
            }
        })
        .collect()
}

fn measurement(mm: &measure::Measurement, times: Option<&measure::Times>) -> record::Measurement {
    let with_times = |r: record::Measurement| match times {
        Some(t) => record::Measurement {
            seconds: t.seconds.clone(),
            default: Some(t.default),
            kept: Some(t.kept),
            ..r
        },
        None => r,
    };
    with_times(match mm {
        measure::Measurement::Measured {
            text, candidates, ..
        } => record::Measurement {
            candidates: Some(*candidates),
            report: Some(text.clone()),
            ..Default::default()
        },
        measure::Measurement::Failed { text } => record::Measurement {
            failed: true,
            report: Some(text.clone()),
            ..Default::default()
        },
        measure::Measurement::NothingToMeasure { configurations } => record::Measurement {
            nothing_to_measure: true,
            configurations: Some(*configurations),
            ..Default::default()
        },
    })
}

/// The decision, who made it, and its words.
fn decision(st: &Stages<'_>) -> record::Decision {
    let o = &st.searched.outcome;
    let error_text = error_text(st.model.error_pct());
    let reverted = &o.reverted;
    let (by, text, predicted) = match (&st.measured.measurement, st.verdict) {
        (Some(measure::Measurement::NothingToMeasure { configurations }), _) => (
            "model",
            format!(
                "kept the compiler default: the model's {configurations} best configurations give the compiler default's module, so there was nothing to measure"
            ),
            None,
        ),
        (Some(measure::Measurement::Measured { kept_default, .. }), v) => {
            let what = if *kept_default {
                "kept the compiler default: no measured candidate beat it beyond the noise"
                    .to_string()
            } else {
                "applied the fastest measured candidate".to_string()
            };
            let gain = match v {
                Verdict::Applied { gain, .. } => Some(gain),
                _ => None,
            };
            ("measurement", what, gain)
        }
        (_, Verdict::DefaultIsBest) if !reverted.is_empty() => (
            "trust region",
            format!(
                "kept the compiler default: none of the {} changes of the search's best is predicted faster by {:.2}% on its own",
                reverted.len(),
                st.searched.floor.pct
            ),
            None,
        ),
        (_, Verdict::DefaultIsBest) => (
            "model",
            "kept the compiler default: no configuration the search scored is predicted faster than it".to_string(),
            None,
        ),
        (_, Verdict::Applied { gain, copy_pct }) => (
            "model",
            format!(
                "applied the search's best configuration: predicted {}{error_text} (its copies' estimated price, {copy_pct:.2}%, counted against it)",
                change(-gain)
            ),
            Some(gain),
        ),
        (_, Verdict::Rejected { gain, copy_pct, copies, floor }) => {
            let by = if floor.resolution_pct.is_some_and(|e| e >= floor.min_gain) {
                "trust region"
            } else {
                "model"
            };
            (
                by,
                format!(
                    "kept the compiler default: the search's best is predicted {}{error_text}, short of the {:+.2}% required ({:.2}% plus {copy_pct:.2}% for the {copies} copies it needs)",
                    change(-gain),
                    -(floor.pct + copy_pct),
                    floor.pct
                ),
                Some(gain),
            )
        }
    };
    record::Decision {
        applied: applied(st),
        decided_by: by,
        text,
        predicted_change_pct: predicted.map(|g| -g),
        best_score: o.best_score,
        default_score: o.default_score,
    }
}

/// Warnings: an applied configuration outside the region where the
/// model's error was measured.
fn warnings(st: &Stages<'_>, d: &record::Decision) -> Vec<String> {
    let (o, default) = (&st.searched.outcome, &st.searched.default);
    let mut warnings = Vec::new();
    if !d.applied || d.decided_by == "measurement" {
        return warnings;
    }
    let changed_genes = (0..st.spaces.len())
        .filter(|&j| o.best[j] != default[j])
        .count();
    if changed_genes > crate::DEFAULT_TRUST_RADIUS {
        warnings.push(format!(
            "layout: warning: the applied configuration changes {changed_genes} nodes of the compiler default, but the model's error was measured on configurations that change at most {} (its training data): its prediction here is an extrapolation (such layouts ran up to 69x slower on XLA:CPU, docs/benchmarks.md); keep --trust-radius at most {} or add --measure",
            crate::DEFAULT_TRUST_RADIUS,
            crate::DEFAULT_TRUST_RADIUS
        ));
    }
    if let (Some(e), Some(p)) = (st.model.error_pct(), d.predicted_change_pct) {
        if -p < e {
            warnings.push(format!(
                "layout: warning: the applied configuration is predicted {}, within the model's error ±{e:.2}%: the model cannot tell it from the compiler default",
                change(p)
            ));
        }
    }
    warnings
}

/// What changed in the module.
fn outcome(m: &Module, st: &Stages<'_>) -> record::Outcome {
    let (o, default) = (&st.searched.outcome, &st.searched.default);
    let changed = &st.applied.changed_nodes;
    let a = st.applied.assignment.as_ref();
    // Nodes whose chosen candidate differs from the default one but whose
    // layouts did not change (a layout spelled out that they already had).
    let chose_same = if applied(st) {
        (0..st.spaces.len())
            .filter(|&j| o.best[j] != default[j] && !changed[j])
            .count()
    } else {
        0
    };
    let copies = a.map_or(Vec::new(), |a| {
        a.copies
            .iter()
            .map(|c| {
                format!(
                    "copy %{} of %{} for %{} ({})",
                    m.inst(c.copy).name,
                    m.inst(c.producer).name,
                    m.inst(c.consumer).name,
                    m.show_shape(m.inst(c.copy).shape)
                )
            })
            .collect()
    });
    record::Outcome {
        nodes_changed: changed.iter().filter(|&&c| c).count(),
        chose_same_layouts: chose_same,
        copies_added: copies.len(),
        instructions_relaid_out: a.map_or(0, |a| a.relayouted),
        copies,
    }
}
