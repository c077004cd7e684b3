//! The `layout` pass: layout assignment with the layout cost model.
//!
//! 1. featurize the module the TpuGraphs way (`costmodel::features`); the
//!    configurable nodes are exactly the featurizer's;
//! 2. build each node's candidate list ([`candidates`]), honouring the
//!    constraints (the entry root keeps its layout);
//! 3. search the product space with the model as fitness ([`search`]),
//!    inside the trust region ([`search::Region`]: at most
//!    `--trust-radius` nodes changed from the compiler default, each change
//!    on its own predicted to gain `--min-gain` or the model's resolution,
//!    this check not when measuring; `--trust-radius all` lifts all three);
//! 4. apply the best configuration when its predicted gain covers
//!    `--min-gain` (or the model's resolution, in the trust region) plus the
//!    price of its copies: slots that differ from the
//!    compiler default become decisions; [`assign`] propagates them and
//!    inserts copies;
//! 5. report (`--explain`): per node the chosen layouts and their model
//!    score alone, the copies, the chosen configuration's score against the
//!    compiler default's.
//!
//! Scores are model scores (lower = predicted faster; only their order is
//! meaningful, costmodel/MODEL.md), not runtimes. Incremental scores (a
//! model of the node-sum form, the shipped ones) are the same bits in any
//! model call; the whole head's (`--trust-radius all`, other models) may
//! depend on the call they were scored in (float rounding; a model that
//! attends across configurations): then every pair of scores the pass
//! compares or reports side by side comes from one model call ([`search`]
//! rescores its finalists together; the per-node lines are scored in one
//! call with the default and the chosen configuration).
//!
//! Invariants: the entry computation's parameter and result layouts never
//! change; the same module, model and seed give the same output; a module
//! without configurable nodes is returned unchanged.

pub mod assign;
pub mod attrs;
pub mod candidates;
pub mod dims;
pub mod search;
pub mod shapes;

use std::fmt::Write as _;
use std::time::Instant;

use costmodel::features::{featurize, Featurized};
use costmodel::graph::LAYOUT_CONFIG_DIM;
use costmodel::incremental::NodeSumScorer;
use costmodel::{ConfigBatch, CostModel, Prepared, Task};
use hlo::{InstId, Module};
use indexmap::IndexMap;

use crate::{Changed, Pass, PassContext, PassError};
use assign::Decision;
use candidates::{NodeConfig, NodeSpace};
use search::{Fitness, Outcome};

/// The layout assignment pass. Uses the model of [`crate::PassOptions::layout_model`]
/// (the embedded default when `None`) unless one is given with [`LayoutPass::with_model`].
#[derive(Default)]
pub struct LayoutPass {
    model: Option<Box<dyn CostModel>>,
}

impl LayoutPass {
    pub fn new() -> Self {
        LayoutPass { model: None }
    }
    /// A pass that scores with `model` (tests, the reference model).
    pub fn with_model(model: Box<dyn CostModel>) -> Self {
        LayoutPass { model: Some(model) }
    }
}

fn fail(message: impl Into<String>) -> PassError {
    PassError::Failed {
        pass: "layout",
        message: message.into(),
    }
}

/// Loads the layout model named by the options (`None` = the embedded
/// default ONNX model; needs the ONNX Runtime library).
pub fn load_layout_model(cx: &PassContext) -> Result<Box<dyn CostModel>, PassError> {
    let path = cx.options.layout_model.as_deref();
    let model = costmodel::onnx::load_model(path, Task::Layout, cx.options.threads)?;
    Ok(model)
}

/// Scores genomes with a cost model: one row of 18 features per node and
/// candidate, precomputed. A model of the node-sum form scores a genome
/// incrementally, from the compiler default's node sums plus the terms of
/// the nodes it changes ([`NodeSumScorer`]; the same scores up to float
/// rounding); any other model gets batches of genomes as one `ConfigBatch`.
pub struct ModelFitness<'a> {
    model: &'a dyn CostModel,
    prepared: Prepared,
    rows: Vec<Vec<[f32; LAYOUT_CONFIG_DIM]>>,
    incremental: Option<NodeSumScorer>,
    /// Model calls made.
    pub calls: usize,
}

impl<'a> ModelFitness<'a> {
    pub fn new(
        model: &'a dyn CostModel,
        f: &Featurized,
        spaces: &[NodeSpace],
    ) -> Result<Self, PassError> {
        let mut fitness = Self::whole(model, f, spaces)?;
        let default: Vec<u16> = spaces.iter().map(|s| s.default as u16).collect();
        fitness.incremental =
            NodeSumScorer::new(model, &fitness.prepared, &fitness.rows, &default)?;
        Ok(fitness)
    }

    /// A fitness that scores every genome whole, whatever the model's form
    /// (the reference the incremental scores are tested against).
    pub fn whole(
        model: &'a dyn CostModel,
        f: &Featurized,
        spaces: &[NodeSpace],
    ) -> Result<Self, PassError> {
        if model.task() != Task::Layout {
            return Err(fail(format!(
                "the model is a {} model; the layout pass needs a layout model (--layout-model)",
                model.task().name()
            )));
        }
        let prepared = model.prepare(&f.graph)?;
        let rows = spaces
            .iter()
            .map(|s| s.candidates.iter().map(NodeConfig::row).collect())
            .collect();
        Ok(ModelFitness {
            model,
            prepared,
            rows,
            incremental: None,
            calls: 0,
        })
    }

    /// Scores configurations given as raw feature rows
    /// (`configs x nodes x 18`), e.g. the measured configs of an npz file.
    pub fn score_rows(
        &mut self,
        num_configs: usize,
        feat: Vec<f32>,
    ) -> Result<Vec<f32>, PassError> {
        self.calls += 1;
        let batch = ConfigBatch {
            task: Task::Layout,
            num_configs,
            nodes_per_config: self.rows.len(),
            feat,
        };
        Ok(self.model.score(&self.prepared, &batch)?)
    }
}

impl Fitness for ModelFitness<'_> {
    /// Incremental scores are not batch-relative: each is `score_pooled` of
    /// its own node sums, and `head_pool` is per configuration, so a
    /// configuration gets the same bits in any call
    /// (`passes/tests/layout_incremental.rs` checks it). The whole head's
    /// scores differ between calls by float rounding (costmodel
    /// `onnx_model.rs`), which can reorder near-ties: batch-relative.
    fn batch_relative(&self) -> bool {
        self.incremental.is_none()
    }
    fn score(&mut self, genomes: &[Vec<u16>]) -> Result<Vec<f32>, PassError> {
        if let Some(inc) = &self.incremental {
            self.calls += 1;
            return Ok(inc.score(self.model, genomes)?);
        }
        let n = self.rows.len();
        let mut feat = Vec::with_capacity(genomes.len() * n * LAYOUT_CONFIG_DIM);
        for g in genomes {
            for (j, &c) in g.iter().enumerate() {
                feat.extend_from_slice(&self.rows[j][c as usize]);
            }
        }
        self.score_rows(genomes.len(), feat)
    }
}

/// The decisions a genome stands for: per node, the slots that differ from
/// the node's compiler default, completed to full layouts.
pub fn decisions(m: &Module, spaces: &[NodeSpace], genome: &[u16]) -> IndexMap<InstId, Decision> {
    let mut out = IndexMap::new();
    for (s, &c) in spaces.iter().zip(genome) {
        let chosen = &s.candidates[c as usize];
        let default = &s.candidates[s.default];
        let rank_of = |i: InstId| shapes::rank(m, m.inst(i).shape);
        let complete = |p: &Option<dims::M2M>, t: InstId| -> Option<dims::M2M> {
            dims::complete_prefix(p.as_deref()?, rank_of(t)?)
        };
        let mut d = Decision::default();
        if chosen.output != default.output {
            d.output = complete(&chosen.output, s.output);
        }
        let operands = &m.inst(s.inst).operands;
        for (slot, tensor, dflt) in [
            (&chosen.input, s.input, &default.input),
            (&chosen.kernel, s.kernel, &default.kernel),
        ] {
            let Some(t) = tensor else { continue };
            if slot == dflt {
                continue;
            }
            let k = if Some(t) == s.input { 0 } else { 1 };
            if operands.get(k) != Some(&t) {
                continue;
            }
            if let Some(l) = complete(slot, t) {
                d.operands.push((k, l));
            }
        }
        if d != Decision::default() {
            out.insert(s.inst, d);
        }
    }
    out
}

/// A spinner on stderr naming the phase of long work; only when `on`
/// (stderr is a terminal), so that output to a file or a pipe stays clean.
fn phase(on: bool, message: &str) -> Option<Spinner> {
    on.then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_message(format!("layout: {message}"));
        b.enable_steady_tick(std::time::Duration::from_millis(120));
        Spinner(b)
    })
}

/// A spinner that leaves nothing behind when it ends (on every path).
struct Spinner(indicatif::ProgressBar);

impl Drop for Spinner {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

fn show_prefix(p: &Option<dims::M2M>) -> String {
    match p {
        None => "default".into(),
        Some(v) => hlo::Layout::order_text(v),
    }
}

fn show_config(c: &NodeConfig) -> String {
    let mut s = format!("output {}", show_prefix(&c.output));
    if c.input.is_some() || c.kernel.is_some() {
        let _ = write!(s, ", input {}", show_prefix(&c.input));
    }
    if c.kernel.is_some() {
        let _ = write!(s, ", kernel {}", show_prefix(&c.kernel));
    }
    s
}

impl Pass for LayoutPass {
    fn name(&self) -> &'static str {
        "layout"
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, PassError> {
        let progress_on = cx.options.progress;
        let spin = phase(progress_on, "featurizing the module");
        let f = featurize(m, Task::Layout)?;
        if f.config_nodes.is_empty() {
            let _ = writeln!(
                cx.explain,
                "layout: the module has no configurable node (convolution, dot or reshape outside fusions); unchanged"
            );
            return Ok(false);
        }
        let loaded;
        let model_name = match (&self.model, &cx.options.layout_model) {
            (Some(_), _) => "the model given to the pass".to_string(),
            (None, Some(path)) => path.display().to_string(),
            (None, None) => "the embedded default model".to_string(),
        };
        let model: &dyn CostModel = match &self.model {
            Some(b) => b.as_ref(),
            None => {
                loaded = load_layout_model(cx)?;
                loaded.as_ref()
            }
        };
        if let Some(measurer) = cx.options.measurer.as_mut() {
            if let (Some(md), Some(dd)) = (model.device(), measurer.device()) {
                if md != dd {
                    let note = format!(
                        "layout: warning: the layout model was trained on {md} measurements, but --measure measures on {dd}: its ranking of the candidates may not hold there (train one for {dd}: hlo-cost collect, train.py --device {dd}, --layout-model)"
                    );
                    let _ = writeln!(cx.explain, "{note}");
                    cx.notes.push(note);
                }
            }
        }
        let spaces = candidates::spaces(m, &f.config_nodes);
        let sizes: Vec<usize> = spaces.iter().map(|s| s.candidates.len()).collect();
        let default: Vec<u16> = spaces.iter().map(|s| s.default as u16).collect();
        if let Some(b) = &spin {
            b.0.set_message("layout: running the model's encoder on the module");
        }
        // `--trust-radius all` keeps the search as it was before incremental
        // scoring, whole-head scores included: the incremental sums round
        // differently, and the unbounded genetic search follows another path
        // from the first near-tie they reorder (docs/benchmarks.md, 28 Nov).
        let mut fitness = if cx.options.trust_radius.is_none() {
            ModelFitness::whole(model, &f, &spaces)?
        } else {
            ModelFitness::new(model, &f, &spaces)?
        };
        drop(spin);

        let budget = cx.options.budget;
        let batch = search::configs_per_call(spaces.len());
        let mut bar: Option<indicatif::ProgressBar> = None;
        let search_start = Instant::now();
        let mut progress = |done: usize| {
            if !progress_on {
                return;
            }
            if bar.is_none() && search_start.elapsed().as_secs_f64() > 1.0 {
                let b = indicatif::ProgressBar::new(budget as u64);
                if let Ok(style) = indicatif::ProgressStyle::with_template(
                    "{msg} [{bar:40}] {pos}/{len} configurations scored ({elapsed})",
                ) {
                    b.set_style(style);
                }
                b.set_message("layout: searching");
                bar = Some(b);
            }
            if let Some(b) = &bar {
                b.set_position(done as u64);
            }
        };
        let measuring = cx.options.measure.is_some() || cx.options.measurer.is_some();
        let keep = if measuring {
            cx.options.top_k.max(1)
        } else {
            1
        };
        // The per-change check: a change is kept when, alone, it is
        // predicted to gain --min-gain (a gain of zero never). Measured
        // candidates stand on their measurement instead.
        let floor = Floor::of(
            cx.options.min_gain,
            model,
            cx.options.trust_radius.is_some(),
        );
        let calibration = model.log_runtime_per_score();
        let keeps = |alone: f32, base: f32| {
            let g = gain_pct(alone, base, calibration);
            g > 0.0 && g >= floor.pct
        };
        // `--trust-radius all` lifts the whole trust region, the check too.
        let region = search::Region {
            radius: cx.options.trust_radius,
            keeps: if measuring || cx.options.trust_radius.is_none() {
                None
            } else {
                Some(&keeps)
            },
        };
        let mut outcome = search::search_top(
            &sizes,
            &default,
            &mut fitness,
            budget,
            cx.options.seed,
            keep,
            batch,
            region,
            &mut progress,
        )?;
        if let Some(b) = bar.take() {
            b.finish_and_clear();
        }
        let search_secs = search_start.elapsed().as_secs_f64();

        // A measured choice stands on its measurement: no --min-gain on it.
        let mut measured = false;
        let mut measurement: Option<Measurement> = None;
        let mut measured_record: Option<crate::explain::MeasuredRecord> = None;
        if let Some(measurer) = cx.options.measurer.as_mut() {
            // Measured autotuning with a built-in measurer: the model's top
            // candidates and the compiler default, measured together.
            let mut cands: Vec<Vec<u16>> = outcome.ranked.iter().map(|(g, _)| g.clone()).collect();
            if cands.is_empty() {
                cands.push(outcome.best.clone());
            }
            let default_at = match cands.iter().position(|g| *g == default) {
                Some(k) => k,
                None => {
                    cands.push(default.clone());
                    cands.len() - 1
                }
            };
            // Configurations that give the same module are one program:
            // measured once (the default's group keeps the default).
            let mut trials = Vec::with_capacity(cands.len());
            for g in &cands {
                let mut trial = m.clone();
                let dec = decisions(&trial, &spaces, g);
                assign::assign(&mut trial, &dec)?;
                trials.push(trial);
            }
            let (trials, members) = distinct_modules(trials);
            let default_slot = members
                .iter()
                .position(|g| g.contains(&default_at))
                .unwrap_or(0);
            let same = cands.len() - trials.len();
            if trials.len() == 1 && cands.len() > 1 {
                measurement = Some(Measurement::NothingToMeasure {
                    configurations: cands.len() - 1,
                });
            }
            if trials.len() > 1 {
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
                let m_result =
                    measurer
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
                measurement = Some(Measurement::Measured {
                    text,
                    kept_default: keep_at == default_at,
                    candidates: trials.len(),
                });
                measured_record = Some(crate::explain::MeasuredRecord {
                    seconds: m_result.seconds.clone(),
                    default: default_slot,
                    kept: m_result.keep,
                    report: m_result.report.clone(),
                });
                measured = true;
                outcome.best = cands[keep_at].clone();
                outcome.best_score = outcome
                    .ranked
                    .iter()
                    .find(|(g, _)| *g == outcome.best)
                    .map_or(outcome.default_score, |(_, s)| *s);
            }
        } else if let Some(measure) = cx.options.measure.as_mut() {
            if keep > 1 {
                // Model-guided autotuning: measure the model's top candidates
                // (and the compiler default) and keep the fastest measured.
                let mut cands: Vec<Vec<u16>> =
                    outcome.ranked.iter().map(|(g, _)| g.clone()).collect();
                if !cands.contains(&default) {
                    cands.push(default.clone());
                }
                let mut best: Option<(f64, usize)> = None;
                // A module measured once, whichever configurations give it.
                let mut seen: std::collections::HashMap<String, Option<f64>> =
                    std::collections::HashMap::new();
                // The measured modules in order: (model rank, time).
                let mut times: Vec<(usize, Option<f64>)> = Vec::new();
                for (r, g) in cands.iter().enumerate() {
                    let mut trial = m.clone();
                    let dec = decisions(&trial, &spaces, g);
                    assign::assign(&mut trial, &dec)?;
                    let text = hlo::print_module(&trial);
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
                let default_rank = cands.iter().position(|g| *g == default).unwrap_or(0);
                measured_record = Some(crate::explain::MeasuredRecord {
                    seconds: times.iter().map(|&(_, t)| t).collect(),
                    default: times
                        .iter()
                        .position(|&(r, _)| r == default_rank)
                        .unwrap_or(0),
                    kept: best
                        .and_then(|(_, b)| times.iter().position(|&(r, _)| r == b))
                        .unwrap_or(0),
                    report: String::new(),
                });
                let candidates = seen.len();
                measurement = Some(match best {
                    Some((_, r)) => Measurement::Measured {
                        text,
                        kept_default: cands[r] == default,
                        candidates,
                    },
                    None => Measurement::Failed { text },
                });
                if let Some((_, r)) = best {
                    measured = true;
                    outcome.best = cands[r].clone();
                    outcome.best_score = outcome
                        .ranked
                        .iter()
                        .find(|(g, _)| *g == outcome.best)
                        .map_or(outcome.default_score, |(_, s)| *s);
                }
            }
        }
        let before: Vec<NodeLayouts> = spaces.iter().map(|s| node_layouts(m, s)).collect();
        let all_laid_out = m
            .all_instructions()
            .all(|i| m.has_all_layouts(m.inst(i).shape));

        // The best configuration is applied to a copy of the module first:
        // the copies it needs are part of its price (see [`Verdict`]).
        let mut verdict = Verdict::DefaultIsBest;
        let mut applied: Option<(Module, assign::Assignment)> = None;
        let nothing_to_measure = matches!(measurement, Some(Measurement::NothingToMeasure { .. }));
        if outcome.best != default && !nothing_to_measure {
            let mut trial = m.clone();
            let dec = decisions(&trial, &spaces, &outcome.best);
            let a = assign::assign(&mut trial, &dec)?;
            let gain = gain_pct(
                outcome.best_score,
                outcome.default_score,
                model.log_runtime_per_score(),
            );
            let copy_pct = copy_share_pct(&trial, &a.copies);
            let required = floor.pct + copy_pct;
            if measured || gain >= required {
                verdict = Verdict::Applied { gain, copy_pct };
                applied = Some((trial, a));
            } else {
                verdict = Verdict::Rejected {
                    gain,
                    copy_pct,
                    copies: a.copies.len(),
                    floor,
                };
            }
        }
        let assignment = match applied {
            Some((trial, a)) => {
                *m = trial;
                Some(a)
            }
            None if all_laid_out => None,
            // Nothing chosen, but layouts are missing: give every
            // instruction the layout propagation gives it.
            None => Some(assign::assign(m, &IndexMap::new())?),
        };
        let changed_nodes: Vec<bool> = spaces
            .iter()
            .zip(&before)
            .map(|(s, b)| node_layouts(m, s) != *b)
            .collect();
        report(
            m,
            cx,
            &Report {
                spaces: &spaces,
                outcome: &outcome,
                assignment: assignment.as_ref(),
                verdict,
                changed_nodes: &changed_nodes,
                secs: search_secs,
                default: &default,
                batch,
                floor,
                checked_alone: &outcome.checked_alone,
                measurement: measurement.as_ref(),
                measured: measured_record,
                model: ModelInfo {
                    name: model_name,
                    device: model.device(),
                    calibration,
                    resolution: model.log_runtime_resolution(),
                },
            },
            &mut fitness,
        )?;
        Ok(assignment.is_some_and(|a| a.relayouted > 0 || !a.copies.is_empty()))
    }
}

/// The layouts a configurable node has and reads: its output's and those of
/// its operands (a missing layout read as the default one).
type NodeLayouts = (Option<dims::M2M>, Vec<Option<dims::M2M>>);

fn node_layouts(m: &Module, s: &NodeSpace) -> NodeLayouts {
    let layout = |i: InstId| m.minor_to_major_or_default(m.inst(i).shape);
    (
        layout(s.inst),
        m.inst(s.inst).operands.iter().map(|&o| layout(o)).collect(),
    )
}

/// What the pass decided about the search's best configuration.
#[derive(Clone, Copy, Debug)]
enum Verdict {
    /// The compiler default scored best (or no other configuration exists).
    DefaultIsBest,
    /// Applied: its predicted gain (percent of the default's score) covered
    /// `--min-gain` plus the price of its copies (or a measurement chose it).
    Applied { gain: f64, copy_pct: f64 },
    /// Not applied: the predicted gain is below `floor + copy_pct`.
    Rejected {
        gain: f64,
        copy_pct: f64,
        copies: usize,
        floor: Floor,
    },
}

/// The smallest predicted gain, in percent, the pass acts on (a change
/// alone, or a whole configuration before its copies' price): `--min-gain`,
/// or the model's resolution when it says how far its predicted runtime
/// ratios can be trusted and that is more
/// ([`CostModel::log_runtime_resolution`]: a gain under one standard error
/// of the predicted ratio is not one the model can resolve). Part of the
/// trust region: `--trust-radius all` leaves `--min-gain` alone.
#[derive(Clone, Copy, Debug)]
struct Floor {
    pct: f64,
    min_gain: f64,
    /// `1 - exp(-resolution)` in percent, for a calibrated model that records
    /// its resolution.
    resolution_pct: Option<f64>,
}

impl Floor {
    fn of(min_gain: f64, model: &dyn CostModel, region: bool) -> Floor {
        let resolution_pct = match (
            model.log_runtime_per_score(),
            model.log_runtime_resolution(),
        ) {
            (Some(_), Some(r)) if region => Some((1.0 - (-r).exp()) * 100.0),
            _ => None,
        };
        Floor {
            pct: resolution_pct.map_or(min_gain, |r| r.max(min_gain)),
            min_gain,
            resolution_pct,
        }
    }

    /// What set the floor, for the reports.
    fn source(&self) -> String {
        match self.resolution_pct {
            Some(r) if r > self.min_gain => {
                format!("the model's error, above --min-gain {}%", self.min_gain)
            }
            _ => format!("--min-gain {}%", self.min_gain),
        }
    }
}

/// Predicted gain of `best` over `default` in percent (positive = predicted
/// faster; scores are lower-is-better): the predicted runtime saving when the
/// model says how scores map to runtime
/// ([`CostModel::log_runtime_per_score`], the shipped default does), else
/// the score difference in percent of the default's score.
fn gain_pct(best: f32, default: f32, log_runtime_per_score: Option<f64>) -> f64 {
    let (b, d) = (f64::from(best), f64::from(default));
    if !(b.is_finite() && d.is_finite()) {
        return if b < d { f64::INFINITY } else { 0.0 };
    }
    if let Some(k) = log_runtime_per_score {
        // The model says how scores map to runtime: predicted runtime ratio
        // best / default = exp((b - d) * k).
        return (1.0 - ((b - d) * k).exp()) * 100.0;
    }
    if d == 0.0 {
        return if b < d { f64::INFINITY } else { 0.0 };
    }
    (d - b) / d.abs() * 100.0
}

/// The price of the copies a configuration needs, in percent: the bytes the
/// copies write as a share of the bytes every scheduled instruction of the
/// module writes (copies included). A copy reads and writes its tensor once,
/// so for a module whose runtime follows the bytes it moves this is the
/// share of the runtime the copies add; the layout model does not see the
/// copies (they are not configurable nodes), so the pass charges them here.
pub fn copy_share_pct(m: &Module, copies: &[assign::CopyRecord]) -> f64 {
    if copies.is_empty() {
        return 0.0;
    }
    let fused: Vec<bool> = {
        let mut v = Vec::new();
        for c in m.computations() {
            if v.len() <= c.index() {
                v.resize(c.index() + 1, false);
            }
        }
        for i in m.all_instructions() {
            if m.inst(i).opcode == hlo::Opcode::Fusion {
                for c in m.inst(i).called_computations() {
                    if let Some(f) = v.get_mut(c.index()) {
                        *f = true;
                    }
                }
            }
        }
        v
    };
    let mut total = 0f64;
    for i in m.all_instructions() {
        let inst = m.inst(i);
        if fused.get(inst.parent.index()).copied().unwrap_or(false) {
            continue;
        }
        total += shape_bytes(m, inst.shape);
    }
    let copied: f64 = copies
        .iter()
        .map(|c| shape_bytes(m, m.inst(c.copy).shape))
        .sum();
    if total <= 0.0 {
        0.0
    } else {
        copied / total * 100.0
    }
}

/// Bytes of an array shape (tuples: the sum of their arrays), as f64 so that
/// no product overflows.
fn shape_bytes(m: &Module, s: hlo::ShapeId) -> f64 {
    match m.shape(s) {
        hlo::Shape::Array(a) => {
            let elems: f64 = a.dims.iter().map(|&d| d.max(0) as f64).product();
            elems * f64::from(a.elem.byte_size())
        }
        hlo::Shape::Tuple(e) => e.iter().map(|&x| shape_bytes(m, x)).sum(),
        _ => 0.0,
    }
}

/// What measurement said about the candidates, for the report.
enum Measurement {
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

/// The model, as the report describes it.
struct ModelInfo {
    name: String,
    device: Option<String>,
    /// `log_runtime_per_score`: predictions are runtime changes.
    calibration: Option<f64>,
    /// `log_runtime_resolution`: the model's error, in ln(runtime).
    resolution: Option<f64>,
}

impl ModelInfo {
    /// The model's error as a runtime change in percent (`1 - exp(-r)`, the
    /// smallest predicted gain it can tell from its own error).
    fn error_pct(&self) -> Option<f64> {
        match (self.calibration, self.resolution) {
            (Some(_), Some(r)) => Some((1.0 - (-r).exp()) * 100.0),
            _ => None,
        }
    }
}

/// What [`report`] reports.
struct Report<'r> {
    spaces: &'r [NodeSpace],
    outcome: &'r Outcome,
    assignment: Option<&'r assign::Assignment>,
    verdict: Verdict,
    /// Per node: whether its layouts (output, operands read) changed.
    changed_nodes: &'r [bool],
    secs: f64,
    default: &'r [u16],
    /// Configurations per model call.
    batch: usize,
    /// The smallest predicted gain acted on.
    floor: Floor,
    /// The per-change check's (alone, default) scores, in node order of the
    /// changes it checked.
    checked_alone: &'r [(f32, f32)],
    /// The measurement that chose, as data ([`crate::explain::MeasuredRecord`]).
    measured: Option<crate::explain::MeasuredRecord>,
    measurement: Option<&'r Measurement>,
    model: ModelInfo,
}

/// Who made the pass's decision.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Decider {
    Model,
    TrustRegion,
    Measurement,
}

impl Decider {
    fn name(self) -> &'static str {
        match self {
            Decider::Model => "the model",
            Decider::TrustRegion => "the trust region",
            Decider::Measurement => "measurement",
        }
    }
}

/// `n` with thousands separators (`39,840,000`).
fn thousands(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The number of configurations of the product space of `sizes`: exact
/// up to a trillion, else a mantissa and a power of ten (`1.83e42`, never
/// capped: the log10 is summed over the nodes); and its log10.
fn space_size(sizes: &[usize]) -> (String, Option<u128>, f64) {
    let log10: f64 = sizes.iter().map(|&n| (n.max(1) as f64).log10()).sum();
    let exact = sizes
        .iter()
        .try_fold(1u128, |acc, &n| acc.checked_mul(n as u128));
    // Exact up to a trillion; beyond, a mantissa and a power of ten.
    let text = match exact {
        Some(n) if n < 1_000_000_000_000 => thousands(n),
        _ => {
            let e = log10.floor();
            format!("{:.2}e{}", 10f64.powf(log10 - e), e as i64)
        }
    };
    (text, exact, log10)
}

/// A predicted change in percent, negative = faster (`-3.88%`).
fn change(gain: f64) -> String {
    if gain.is_infinite() {
        return "faster by an unbounded amount (a score that is not finite)".into();
    }
    format!("{:+.2}%", -gain)
}

fn report(
    m: &Module,
    cx: &mut PassContext,
    r: &Report<'_>,
    fitness: &mut ModelFitness<'_>,
) -> Result<(), PassError> {
    use serde_json::json;
    let (spaces, o, default) = (r.spaces, r.outcome, r.default);
    let opts = &cx.options;
    let calibration = r.model.calibration;
    let error = r.model.error_pct();
    let error_text = match error {
        Some(e) => format!(" ±{e:.2}%"),
        None => String::new(),
    };
    let name_of = |j: usize| m.inst(spaces[j].inst).name.clone();
    let mut lines: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();

    // What was searched.
    let free = spaces.iter().filter(|s| s.candidates.len() > 1).count();
    let sizes: Vec<usize> = spaces.iter().map(|s| s.candidates.len()).collect();
    let (space_text, space_exact, space_log10) = space_size(&sizes);
    lines.push(format!(
        "layout: {} configurable nodes, {free} with a choice of layout: {space_text} configurations",
        spaces.len()
    ));
    let region_text = if o.region == u128::MAX {
        "more than 3.40e38".to_string()
    } else if o.region < 1_000_000_000_000 {
        thousands(o.region)
    } else {
        let l = (o.region as f64).log10();
        format!("{:.2}e{}", 10f64.powf(l - l.floor()), l.floor() as i64)
    };
    lines.push(match opts.trust_radius {
        Some(k) if k < free => format!(
            "layout: trust region (--trust-radius {k}; `all` lifts it): the {region_text} {} at most {k} of the {free} nodes from the compiler default",
            if o.region == 1 {
                "configuration that changes"
            } else {
                "configurations that change"
            }
        ),
        Some(k) => format!(
            "layout: trust region (--trust-radius {k}): the whole space, {k} reaches all {free} nodes with a choice"
        ),
        None => "layout: trust region: none (--trust-radius all): the whole space".to_string(),
    });
    lines.push(format!(
        "layout: {} search scored {} configurations in {:.2} s, seed {}{}",
        o.method.name(),
        thousands(o.scored as u128),
        r.secs,
        opts.seed,
        if o.rescored > 0 {
            format!("; the best {} rescored in one model call", o.rescored)
        } else {
            String::new()
        }
    ));

    // The model, its error and the threshold: said once.
    let measuring = opts.measure.is_some() || opts.measurer.is_some();
    let unit = if calibration.is_some() {
        "predicted runtime changes"
    } else {
        "predicted changes of the model's score relative to the default's (the model gives no runtime calibration)"
    };
    let error_sentence = match (error, r.model.resolution) {
        (Some(e), Some(res)) => format!(
            "its error ±{e:.2}% (log_runtime_resolution {res:.3}, measured on its training graphs)"
        ),
        _ => "its error unknown (the model records no log_runtime_resolution)".to_string(),
    };
    let threshold = if measuring {
        "measured candidates decide, no threshold".to_string()
    } else {
        format!(
            "a change is applied when predicted faster by at least {:.2}% ({}) plus its copies' price",
            r.floor.pct,
            r.floor.source()
        )
    };
    lines.push(format!(
        "layout: model: {} ({}); {unit}, negative is faster; {error_sentence}; {threshold}",
        r.model.name,
        match &r.model.device {
            Some(d) => format!("trained on {d} runtimes"),
            None => "of no device".to_string(),
        }
    ));

    // What was considered: each change of the search's best, alone against
    // the default (the per-change check's scores, comparable with the
    // default's: from one call, or not batch-relative; one more call for
    // changes the check did not score, --explain only).
    let reverted: Vec<usize> = o.reverted.clone();
    let mut considered: Vec<usize> = (0..spaces.len())
        .filter(|&j| o.best[j] != default[j])
        .chain(reverted.iter().copied())
        .collect();
    considered.sort_unstable();
    considered.dedup();
    let mut alone: Vec<Option<(f32, f32)>> = vec![None; spaces.len()];
    if let Some(n) = o.checked {
        // The check scored each change of the search's best in node order;
        // kept and reverted together are exactly those changes.
        if r.checked_alone.len() == n && considered.len() == n {
            for (&j, &sc) in considered.iter().zip(r.checked_alone) {
                alone[j] = Some(sc);
            }
        }
    }
    let applied = matches!(r.verdict, Verdict::Applied { .. });
    let need: Vec<usize> = considered
        .iter()
        .copied()
        .filter(|&j| alone[j].is_none() && !reverted.contains(&j))
        .collect();
    // Extra model calls only for the report (--explain).
    let need = if opts.explain { need } else { Vec::new() };
    for part in need.chunks(r.batch.saturating_sub(2).max(1)) {
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
    let mut considered_json = Vec::new();
    let mut ranked_json = Vec::new();
    if measuring && !o.ranked.is_empty() {
        // The candidates measurement chose among: the model's best, with
        // their predictions (scored in one call with the default).
        let mut preds = Vec::new();
        for (rank, (g, sc)) in o.ranked.iter().enumerate() {
            let gain = gain_pct(*sc, o.default_score, calibration);
            let changed: Vec<String> = g
                .iter()
                .zip(default)
                .enumerate()
                .filter(|(_, (a, b))| a != b)
                .map(|(j, (&a, _))| {
                    format!("%{} ({})", name_of(j), show_config(&spaces[j].candidates[a as usize]))
                })
                .collect();
            let n = changed.len();
            // The nodes and layouts it changes: what tells ranks apart
            // when their predictions read the same.
            preds.push(format!(
                "rank {}: {}{error_text} ({n} nodes changed: {})",
                rank + 1,
                change(gain),
                changed.join(", ")
            ));
            ranked_json.push(json!({
                "rank": rank + 1,
                "predicted_change_pct": -gain,
                "nodes_changed": n,
                "score": sc,
            }));
        }
        lines.push(format!(
            "layout: considered for measurement: the model's {} best configurations against the compiler default: {}",
            o.ranked.len(),
            preds.join("; ")
        ));
    }
    if !considered.is_empty() {
        lines.push(format!(
            "layout: considered: the search's best configuration changes {} of the {} nodes; each change alone against the compiler default:",
            considered.len(),
            spaces.len()
        ));
    }
    for &j in &considered {
        let s = &spaces[j];
        let is_reverted = reverted.contains(&j);
        let outcome = if is_reverted {
            "reverted"
        } else if applied {
            "applied"
        } else {
            "not applied"
        };
        let choice = if is_reverted {
            None
        } else {
            Some(show_config(&s.candidates[o.best[j] as usize]))
        };
        let dflt = show_config(&s.candidates[s.default]);
        let gain = alone[j].map(|(a, b)| gain_pct(a, b, calibration));
        let mut line = format!("  %{}", name_of(j));
        if let Some(c) = &choice {
            let _ = write!(line, ": {c} (default {dflt})");
        }
        match gain {
            Some(g) => {
                let _ = write!(line, ": {}{error_text} alone", change(g));
            }
            None => line.push_str(": not scored alone"),
        }
        if is_reverted {
            let _ = write!(
                line,
                " -> reverted by the trust region's per-change check (not faster by {:.2}%)",
                r.floor.pct
            );
        } else if applied && r.changed_nodes.get(j) == Some(&false) {
            line.push_str(" -> applied (the layouts it already had)");
        } else {
            let _ = write!(line, " -> {outcome}");
        }
        if opts.explain_all {
            if let Some((a, b)) = alone[j] {
                let _ = write!(line, " [score {a:.4} alone vs {b:.4} default]");
            }
        }
        lines.push(line);
        considered_json.push(json!({
            "node": name_of(j),
            "choice": choice,
            "default": dflt,
            "predicted_change_pct": gain.map(|g| -g),
            "score_alone": alone[j].map(|(a, _)| a),
            "default_score": alone[j].map(|(_, b)| b),
            "outcome": outcome,
        }));
    }
    // Nodes relaid out by their neighbours' changes, and the unchanged ones.
    let mut hidden = 0usize;
    for (j, s) in spaces.iter().enumerate() {
        if considered.contains(&j) {
            continue;
        }
        if applied && r.changed_nodes[j] {
            lines.push(format!(
                "  %{}: its own choice is the default ({}); relaid out by the changes around it",
                name_of(j),
                show_config(&s.candidates[s.default])
            ));
        } else if opts.explain_all {
            lines.push(format!(
                "  %{}: unchanged ({})",
                name_of(j),
                show_config(&s.candidates[s.default])
            ));
        } else {
            hidden += 1;
        }
    }
    if hidden > 0 {
        lines.push(format!(
            "  ({hidden} unchanged nodes not listed; --explain=all lists every node)"
        ));
    }
    let mut copies_json = Vec::new();
    if let Some(a) = r.assignment {
        for c in &a.copies {
            let line = format!(
                "  copy %{} of %{} for %{} ({})",
                m.inst(c.copy).name,
                m.inst(c.producer).name,
                m.inst(c.consumer).name,
                m.show_shape(m.inst(c.copy).shape)
            );
            copies_json.push(json!(line.trim_start()));
            lines.push(line);
        }
    }

    // What measurement said.
    let mut measurement_json = serde_json::Value::Null;
    match r.measurement {
        Some(Measurement::Measured {
            text, candidates, ..
        }) => {
            lines.extend(text.lines().map(str::to_string));
            measurement_json =
                json!({"candidates": candidates, "model_ranked": ranked_json, "report": text});
        }
        Some(Measurement::Failed { text }) => {
            lines.extend(text.lines().map(str::to_string));
            measurement_json = json!({"failed": true, "report": text});
        }
        Some(Measurement::NothingToMeasure { configurations }) => {
            measurement_json =
                json!({"nothing_to_measure": true, "configurations": configurations});
        }
        None => {}
    }

    // The decision, and who made it.
    let required = |floor: &Floor, copy_pct: f64| floor.pct + copy_pct;
    let (decided_by, decision, predicted) = match (r.measurement, r.verdict) {
        (Some(Measurement::NothingToMeasure { configurations }), _) => (
            Decider::Model,
            format!(
                "kept the compiler default: the model's {configurations} best configurations give the compiler default's module, so there was nothing to measure"
            ),
            None,
        ),
        (Some(Measurement::Measured { kept_default, .. }), v) => {
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
            (Decider::Measurement, what, gain)
        }
        (_, Verdict::DefaultIsBest) if !reverted.is_empty() => (
            Decider::TrustRegion,
            format!(
                "kept the compiler default: none of the {} changes of the search's best is predicted faster by {:.2}% on its own",
                reverted.len(),
                r.floor.pct
            ),
            None,
        ),
        (_, Verdict::DefaultIsBest) => (
            Decider::Model,
            "kept the compiler default: no configuration the search scored is predicted faster than it".to_string(),
            None,
        ),
        (_, Verdict::Applied { gain, copy_pct }) => (
            Decider::Model,
            format!(
                "applied the search's best configuration: predicted {}{error_text} (its copies' estimated price, {copy_pct:.2}%, counted against it)",
                change(gain)
            ),
            Some(gain),
        ),
        (
            _,
            Verdict::Rejected {
                gain,
                copy_pct,
                copies,
                floor,
            },
        ) => {
            let by = if floor.resolution_pct.is_some_and(|e| e >= floor.min_gain) {
                Decider::TrustRegion
            } else {
                Decider::Model
            };
            (
                by,
                format!(
                    "kept the compiler default: the search's best is predicted {}{error_text}, short of the {:+.2}% required ({:.2}% plus {copy_pct:.2}% for the {copies} copies it needs)",
                    change(gain),
                    -required(&floor, copy_pct),
                    floor.pct
                ),
                Some(gain),
            )
        }
    };
    lines.push(format!(
        "layout: decision: {decision}; decided by {}",
        decided_by.name()
    ));
    if opts.explain_all {
        lines.push(format!(
            "layout: scores (lower is predicted faster): the search's best {:.4}, the compiler default {:.4}",
            o.best_score, o.default_score
        ));
    }

    // Outside the region where the model's error was measured.
    let changed_genes = (0..spaces.len())
        .filter(|&j| o.best[j] != default[j])
        .count();
    if applied && decided_by != Decider::Measurement {
        if changed_genes > crate::DEFAULT_TRUST_RADIUS {
            warnings.push(format!(
                "layout: warning: the applied configuration changes {changed_genes} nodes of the compiler default, but the model's error was measured on configurations that change at most {} (its training data): its prediction here is an extrapolation (such layouts ran up to 69x slower on XLA:CPU, docs/benchmarks.md); keep --trust-radius at most {} or add --measure",
                crate::DEFAULT_TRUST_RADIUS,
                crate::DEFAULT_TRUST_RADIUS
            ));
        }
        if let (Some(e), Some(g)) = (error, predicted) {
            if g < e {
                warnings.push(format!(
                    "layout: warning: the applied configuration is predicted {}, within the model's error ±{e:.2}%: the model cannot tell it from the compiler default",
                    change(g)
                ));
            }
        }
    }

    let (copies, relayouted) = r
        .assignment
        .map_or((0, 0), |a| (a.copies.len(), a.relayouted));
    let nodes_changed = r.changed_nodes.iter().filter(|&&c| c).count();
    // Nodes whose chosen candidate differs from the default one but whose
    // layouts did not change (a layout spelled out that they already had).
    let chose_same = if applied {
        (0..spaces.len())
            .filter(|&j| o.best[j] != default[j] && !r.changed_nodes[j])
            .count()
    } else {
        0
    };
    let nodes_text = if chose_same > 0 {
        format!("{nodes_changed} nodes changed ({chose_same} more chose the layouts they had)")
    } else {
        format!("{nodes_changed} nodes changed")
    };
    // The same decision as data (`passes::explain::Record`: the Python
    // package's `decisions`).
    let (rec_verdict, rec_predicted, rec_required) = match r.verdict {
        Verdict::DefaultIsBest if !o.reverted.is_empty() => ("reverted", None, None),
        Verdict::DefaultIsBest => ("default_is_best", None, None),
        Verdict::Applied { gain, copy_pct } => {
            ("applied", Some(gain), Some(r.floor.pct + copy_pct))
        }
        Verdict::Rejected {
            gain,
            copy_pct,
            floor,
            ..
        } => ("rejected", Some(gain), Some(floor.pct + copy_pct)),
    };
    let show_genome = |g: &[u16]| -> Vec<(String, String)> {
        spaces
            .iter()
            .enumerate()
            .filter(|&(j, _)| g.get(j) != default.get(j))
            .filter_map(|(j, s)| {
                let c = s.candidates.get(*g.get(j)? as usize)?;
                Some((name_of(j).to_string(), show_config(c)))
            })
            .collect()
    };
    let nodes: Vec<crate::explain::NodeDecision> = spaces
        .iter()
        .enumerate()
        .filter(|&(j, _)| opts.explain_all || alone[j].is_some() || (applied && r.changed_nodes[j]))
        .map(|(j, s)| crate::explain::NodeDecision {
            node: name_of(j).to_string(),
            chosen: show_config(&s.candidates[o.best[j] as usize]),
            default: show_config(&s.candidates[s.default]),
            changed: applied && r.changed_nodes[j],
            score_alone: alone[j].map(|(a, _)| a),
            default_score: alone[j].map(|(_, b)| b),
        })
        .collect();
    cx.records.push(crate::explain::Record::Layout(
        crate::explain::LayoutRecord {
            configurable_nodes: spaces.len(),
            method: o.method.name().to_string(),
            scored: o.scored,
            seed: opts.seed,
            default_score: o.default_score,
            best_score: o.best_score,
            verdict: rec_verdict.to_string(),
            predicted_gain_pct: rec_predicted,
            required_gain_pct: rec_required,
            copies,
            relayouted,
            candidates: o
                .ranked
                .iter()
                .map(|(g, score)| crate::explain::LayoutCandidate {
                    score: *score,
                    changes: show_genome(g),
                })
                .collect(),
            nodes,
            measured: r.measured.clone(),
        },
    ));
    lines.extend(warnings.iter().cloned());
    lines.push(format!(
        "layout: result: {nodes_text}, {copies} copies added, {relayouted} instructions relaid out"
    ));
    for w in &warnings {
        cx.notes.push(w.clone());
    }

    // Without --explain the report keeps its summary: the decision, the
    // warnings and the result (what `cx.explain` always held).
    let e = &mut cx.explain;
    for l in &lines {
        if cx.options.explain || !l.starts_with("  ") && !l.starts_with("layout: considered") {
            let _ = writeln!(e, "{l}");
        }
    }
    let by_json = match decided_by {
        Decider::Model => "model",
        Decider::TrustRegion => "trust region",
        Decider::Measurement => "measurement",
    };
    cx.reports.push(json!({
        "pass": "layout",
        "nodes": spaces.len(),
        "nodes_with_choice": free,
        "space": {
            "configurations": space_exact.map(|n| n.to_string()),
            "log10": space_log10,
        },
        "trust_region": {
            "radius": opts.trust_radius,
            "configurations": (o.region != u128::MAX).then(|| o.region.to_string()),
        },
        "search": {
            "method": o.method.name(),
            "scored": o.scored,
            "seconds": r.secs,
            "seed": opts.seed,
            "rescored": o.rescored,
        },
        "model": {
            "name": r.model.name,
            "device": r.model.device,
            "runtime_calibrated": calibration.is_some(),
            "error_pct": error,
            "threshold_pct": (!measuring).then_some(r.floor.pct),
            "threshold_source": (!measuring).then(|| r.floor.source()),
        },
        "considered": considered_json,
        "measurement": measurement_json,
        "decision": {
            "applied": applied,
            "decided_by": by_json,
            "text": decision,
            "predicted_change_pct": predicted.map(|g| -g),
            "best_score": o.best_score,
            "default_score": o.default_score,
        },
        "warnings": warnings,
        "result": {
            "nodes_changed": nodes_changed,
            "chose_same_layouts": chose_same,
            "copies_added": copies,
            "instructions_relaid_out": relayouted,
            "copies": copies_json,
        },
    }));
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::{gain_pct, measured_candidates, space_size, thousands};

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

    /// The space's size in the report: exact up to a trillion, a power of
    /// ten beyond, and never capped (the f32 and u128 maxima are not limits).
    #[test]
    fn a_space_size_is_exact_or_a_power_of_ten_never_capped() {
        assert_eq!(thousands(39_835_810), "39,835,810");
        assert_eq!(thousands(999), "999");
        assert_eq!(space_size(&[2, 64]).0, "128");
        let (text, exact, log10) = space_size(&[10; 13]);
        assert_eq!((text.as_str(), exact), ("1.00e13", Some(10u128.pow(13))));
        assert!((log10 - 13.0).abs() < 1e-9);
        // 4^200 = 2.58e120: beyond u128 (3.4e38) and f32 (3.4e38).
        let (text, exact, log10) = space_size(&[4; 200]);
        assert_eq!((text.as_str(), exact), ("2.58e120", None));
        assert!((log10 - 200.0 * 4f64.log10()).abs() < 1e-9);
    }

    #[test]
    fn a_calibrated_gain_is_a_runtime_saving_wherever_the_scores_lie() {
        // 1 score unit lower at 0.1 log-runtime per unit: exp(-0.1) = 0.905.
        for (b, d) in [(-1.0, 0.0), (4.0, 5.0), (-14.0, -13.0)] {
            let g = gain_pct(b, d, Some(0.1));
            assert!((g - 9.516).abs() < 1e-2, "{b} vs {d}: {g}");
        }
        assert!((gain_pct(1.0, 0.0, Some(0.1)) + 10.517).abs() < 1e-2);
        // Uncalibrated: the score change relative to the default's score.
        assert!((gain_pct(4.0, 5.0, None) - 20.0).abs() < 1e-9);
        assert_eq!(gain_pct(f32::NAN, 1.0, Some(0.1)), 0.0);
    }
}
