//! The `layout` pass: layout assignment with the layout cost model.
//!
//! 1. featurize the module the TpuGraphs way (`costmodel::features`); the
//!    configurable nodes are exactly the featurizer's;
//! 2. build each node's candidate list ([`candidates`]), honouring the
//!    constraints (the entry root keeps its layout);
//! 3. search the product space with the model as fitness ([`search`]);
//! 4. apply the best configuration: slots that differ from the compiler
//!    default become decisions; [`assign`] propagates them and inserts copies;
//! 5. report (`--explain`): per node the chosen layouts and their model
//!    score alone, the copies, the chosen configuration's score against the
//!    compiler default's.
//!
//! Scores are model scores (lower = predicted faster; only their order is
//! meaningful, costmodel/MODEL.md), not runtimes, and they are relative to
//! the batch they were scored in (the layout model attends across the
//! configurations of one call): every pair of scores the pass compares or
//! reports side by side comes from one model call ([`search`] rescores its
//! finalists together; the per-node lines are scored in one call with the
//! default and the chosen configuration).
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
/// candidate, precomputed; batches of genomes become one `ConfigBatch`.
pub struct ModelFitness<'a> {
    model: &'a dyn CostModel,
    prepared: Prepared,
    rows: Vec<Vec<[f32; LAYOUT_CONFIG_DIM]>>,
    /// Model calls made.
    pub calls: usize,
}

impl<'a> ModelFitness<'a> {
    pub fn new(
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
    fn score(&mut self, genomes: &[Vec<u16>]) -> Result<Vec<f32>, PassError> {
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

fn show_prefix(p: &Option<dims::M2M>) -> String {
    match p {
        None => "default".into(),
        Some(v) => format!(
            "{{{}}}",
            v.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
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
        let f = featurize(m, Task::Layout)?;
        if f.config_nodes.is_empty() {
            let _ = writeln!(
                cx.explain,
                "layout: the module has no configurable node (convolution, dot or reshape outside fusions); unchanged"
            );
            return Ok(false);
        }
        let loaded;
        let model: &dyn CostModel = match &self.model {
            Some(b) => b.as_ref(),
            None => {
                loaded = load_layout_model(cx)?;
                loaded.as_ref()
            }
        };
        let spaces = candidates::spaces(m, &f.config_nodes);
        let sizes: Vec<usize> = spaces.iter().map(|s| s.candidates.len()).collect();
        let default: Vec<u16> = spaces.iter().map(|s| s.default as u16).collect();
        let mut fitness = ModelFitness::new(model, &f, &spaces)?;

        let budget = cx.options.budget;
        let progress_on = cx.options.progress;
        let mut bar: Option<indicatif::ProgressBar> = None;
        let search_start = Instant::now();
        let mut progress = |done: usize| {
            if !progress_on {
                return;
            }
            if bar.is_none() && search_start.elapsed().as_secs_f64() > 1.0 {
                let b = indicatif::ProgressBar::new(budget as u64);
                b.set_message("layout search");
                bar = Some(b);
            }
            if let Some(b) = &bar {
                b.set_position(done as u64);
            }
        };
        let keep = if cx.options.measure.is_some() || cx.options.measurer.is_some() {
            cx.options.top_k.max(1)
        } else {
            1
        };
        let mut outcome = search::search_top(
            &sizes,
            &default,
            &mut fitness,
            budget,
            cx.options.seed,
            keep,
            &mut progress,
        )?;
        if let Some(b) = bar.take() {
            b.finish_and_clear();
        }
        let search_secs = search_start.elapsed().as_secs_f64();

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
            if cands.len() > 1 {
                let mut trials = Vec::with_capacity(cands.len());
                for g in &cands {
                    let mut trial = m.clone();
                    let dec = decisions(&trial, &spaces, g);
                    assign::assign(&mut trial, &dec)?;
                    trials.push(trial);
                }
                let measured =
                    measurer
                        .measure(&trials, default_at)
                        .map_err(|message| PassError::Failed {
                            pass: "layout",
                            message: format!("measuring candidates: {message}"),
                        })?;
                let keep_at = measured.keep.min(cands.len() - 1);
                let _ = write!(
                    cx.explain,
                    "layout: measured {} candidates (the model's best and the compiler default, candidate {}): {}\n{}",
                    cands.len(),
                    default_at + 1,
                    if keep_at == default_at {
                        "kept the compiler default (no candidate beat it beyond the noise)".to_string()
                    } else {
                        format!("kept the model's rank {}", keep_at + 1)
                    },
                    measured.report
                );
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
                for (r, g) in cands.iter().enumerate() {
                    let mut trial = m.clone();
                    let dec = decisions(&trial, &spaces, g);
                    assign::assign(&mut trial, &dec)?;
                    if let Some(t) = measure(&hlo::print_module(&trial)).filter(|t| t.is_finite()) {
                        if best.is_none_or(|(b, _)| t < b) {
                            best = Some((t, r));
                        }
                    }
                }
                let _ = writeln!(
                    cx.explain,
                    "layout: measured {} candidates: {}",
                    cands.len(),
                    match best {
                        Some((t, r)) => format!("kept the model's rank {} (measured {t})", r + 1),
                        None => "no measurement succeeded; kept the model's best".to_string(),
                    }
                );
                if let Some((_, r)) = best {
                    outcome.best = cands[r].clone();
                    outcome.best_score = outcome
                        .ranked
                        .iter()
                        .find(|(g, _)| *g == outcome.best)
                        .map_or(outcome.default_score, |(_, s)| *s);
                }
            }
        }
        let all_laid_out = m
            .all_instructions()
            .all(|i| shapes::is_filled(m, m.inst(i).shape));
        if outcome.best == default && all_laid_out {
            report(
                m,
                cx,
                &spaces,
                &outcome,
                None,
                search_secs,
                &mut fitness,
                &default,
            )?;
            return Ok(false);
        }
        let dec = decisions(m, &spaces, &outcome.best);
        let assignment = assign::assign(m, &dec)?;
        report(
            m,
            cx,
            &spaces,
            &outcome,
            Some(&assignment),
            search_secs,
            &mut fitness,
            &default,
        )?;
        Ok(!dec.is_empty() || assignment.relayouted > 0 || !assignment.copies.is_empty())
    }
}

#[allow(clippy::too_many_arguments)]
fn report(
    m: &Module,
    cx: &mut PassContext,
    spaces: &[NodeSpace],
    o: &Outcome,
    assignment: Option<&assign::Assignment>,
    secs: f64,
    fitness: &mut ModelFitness<'_>,
    default: &[u16],
) -> Result<(), PassError> {
    let e = &mut cx.explain;
    let space = if o.space == u128::MAX {
        "more than 3.4e38".to_string()
    } else {
        format!("{:.3e}", o.space as f64)
    };
    let _ = writeln!(
        e,
        "layout: {} configurable nodes, {} configurations; {} search scored {} in {:.2} s ({:.0}/s), seed {}{}",
        spaces.len(),
        space,
        o.method.name(),
        o.scored,
        secs,
        o.scored as f64 / secs.max(1e-9),
        cx.options.seed,
        if o.rescored > 0 {
            format!("; the best {} rescored in one batch", o.rescored)
        } else {
            String::new()
        }
    );
    if cx.options.explain {
        // Marginal effect of each changed node: the default with only that
        // node changed, scored in one call together with the default (and
        // the chosen configuration, so that the batch resembles the final
        // one); extra to the budget (only with --explain).
        let changed: Vec<usize> = (0..spaces.len())
            .filter(|&j| o.best[j] != default[j])
            .collect();
        let mut marginal = vec![None; spaces.len()];
        let mut base = o.default_score;
        if !changed.is_empty() {
            let mut genomes: Vec<Vec<u16>> = vec![default.to_vec(), o.best.clone()];
            genomes.extend(changed.iter().map(|&j| {
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
            base = scores[0];
            for (&j, &s) in changed.iter().zip(&scores[2..]) {
                marginal[j] = Some(s);
            }
        }
        for (j, s) in spaces.iter().enumerate() {
            let name = &m.inst(s.inst).name;
            let chosen = &s.candidates[o.best[j] as usize];
            match marginal[j] {
                Some(ms) => {
                    let _ = writeln!(
                        e,
                        "  %{name}: {} (default {}); score {:.4} alone vs {:.4} default ({:+.2}%)",
                        show_config(chosen),
                        show_config(&s.candidates[s.default]),
                        ms,
                        base,
                        pct(ms, base)
                    );
                }
                None => {
                    let _ = writeln!(e, "  %{name}: compiler default ({})", show_config(chosen));
                }
            }
        }
        if let Some(a) = assignment {
            for c in &a.copies {
                let _ = writeln!(
                    e,
                    "  copy %{} of %{} for %{} ({})",
                    m.inst(c.copy).name,
                    m.inst(c.producer).name,
                    m.inst(c.consumer).name,
                    shapes::show(m, m.inst(c.copy).shape)
                );
            }
        }
    }
    let (copies, relayouted) = assignment.map_or((0, 0), |a| (a.copies.len(), a.relayouted));
    // Scores are ranking scores, not runtimes: report the relative change of
    // the score, never a ratio read as a speedup.
    let _ = writeln!(
        e,
        "layout: model score {:.4} vs {:.4} for the compiler default ({:+.2}%; lower is predicted faster); {} nodes changed, {copies} copies added, {relayouted} instructions relaid out",
        o.best_score,
        o.default_score,
        pct(o.best_score, o.default_score),
        o.best.iter().zip(default).filter(|(a, b)| a != b).count()
    );
    Ok(())
}

fn pct(x: f32, base: f32) -> f64 {
    if base == 0.0 {
        0.0
    } else {
        (f64::from(x) - f64::from(base)) / f64::from(base).abs() * 100.0
    }
}
