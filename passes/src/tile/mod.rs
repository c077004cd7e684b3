//! Tile selection (`--pass=tile`): for every kernel of a module after fusion,
//! enumerate its tile configurations, rank them with the tile cost model in
//! one batch, and record the best in the kernel's `backend_config`.
//!
//! - [`kernel`]: which instructions are kernels, and the tile space of each;
//! - [`space`]: the enumeration rules (divisibility, the 8x128 layout tiling,
//!   shared dimensions, the memory budget) and the default-tile heuristic;
//! - [`extract`]: a kernel as a standalone module (the TpuGraphs tile graph);
//! - [`backend`]: the recorded decision (documented JSON keys);
//! - [`runs`]: the TPU autotuner's records, for coverage and quality checks;
//! - [`xla_gpu`]: the XLA:GPU target: Triton GEMM fusions' tile
//!   configurations and XLA's persisted autotuning formats.
//!
//! A module before fusion ([`kernel::unfused_ops`]) has no kernels: the pass
//! says so and changes nothing.
//!
//! Invariants: the pass changes nothing but the `backend_config` of kernels;
//! a kernel it cannot tile (dynamic or zero-sized shape, unknown fusion kind,
//! a backend config that is not JSON, ...) is left unchanged with a warning
//! naming it; the ranking is deterministic (scores compared with
//! `f32::total_cmp`, ties broken by enumeration order).

pub mod backend;
pub mod extract;
pub mod kernel;
pub mod runs;
pub mod space;
pub mod xla_gpu;

use costmodel::features::{featurize, tile_config_row};
use costmodel::{ConfigBatch, CostModel, Task};
use hlo::{AttrValue, InstId, Module};

use crate::{Changed, Pass, PassContext, PassError};

pub use space::{TileConfig, TileSpace, DEFAULT_MEMORY_BUDGET};

/// The ranked candidates of one kernel.
#[derive(Clone, Debug)]
pub struct Selection {
    pub kernel: InstId,
    /// Candidates with their scores, best first.
    pub ranked: Vec<(TileConfig, f32)>,
    /// The compiler-default tile ([`TileSpace::default_choice`]) and its score.
    pub default: (TileConfig, f32),
    /// Candidates within the memory budget (before the per-kernel cap).
    pub within_budget: usize,
    /// Raw combinations before the memory budget.
    pub raw: u128,
}

/// Why a kernel was not tiled.
#[derive(Debug)]
pub enum KernelError {
    /// The kernel cannot be tiled: a warning, the pass goes on.
    Skip(String),
    /// The cost model failed: an error of the pass.
    Model(costmodel::CostModelError),
}

/// Options of the selection of one kernel.
#[derive(Clone, Debug)]
pub struct SelectOptions {
    /// Bytes a tile's arrays may occupy (rule 5 of [`space`]).
    pub memory_budget: u64,
    /// Seed of the sampling of very large spaces and of the candidate cap.
    pub seed: u64,
    /// Most candidates ranked per kernel (`PassOptions::budget`).
    pub max_candidates: usize,
}

impl Default for SelectOptions {
    fn default() -> Self {
        SelectOptions {
            memory_budget: DEFAULT_MEMORY_BUDGET,
            seed: 0,
            max_candidates: 10_000,
        }
    }
}

/// The tile space of kernel `id` and its candidate choices within
/// `memory_budget` (the enumeration alone, no model).
pub fn enumerate_kernel(
    m: &Module,
    id: InstId,
    memory_budget: u64,
    seed: u64,
) -> Result<(TileSpace, Vec<space::Choice>), String> {
    let space = kernel::analyze(m, id)?;
    let choices = space.enumerate(memory_budget, seed);
    Ok((space, choices))
}

/// Scores already computed in one run of the pass, keyed by everything the
/// model sees: the kernel graph's features, opcodes and edges, and the
/// configuration rows. Kernels repeated in a module (the layers of a
/// transformer) are scored once; a model is deterministic, so the scores are
/// the same as scoring again. Only looked up, never iterated.
#[derive(Default)]
pub struct ScoreCache {
    map: std::collections::HashMap<Vec<u32>, Vec<f32>>,
}

impl ScoreCache {
    fn key(graph: &costmodel::Graph, rows: &[f32]) -> Vec<u32> {
        let mut k =
            Vec::with_capacity(graph.node_feat.len() + rows.len() + graph.edge_index.len() * 2 + 4);
        k.push(graph.node_opcode.len() as u32);
        k.extend(graph.node_opcode.iter().map(|&o| u32::from(o)));
        k.push(graph.edge_index.len() as u32);
        k.extend(
            graph
                .edge_index
                .iter()
                .flat_map(|e| [e[0] as u32, e[1] as u32]),
        );
        k.extend(graph.node_feat.iter().map(|x| x.to_bits()));
        k.push(rows.len() as u32);
        k.extend(rows.iter().map(|x| x.to_bits()));
        k
    }
}

/// Scores configurations of a standalone kernel module with `model`, in one batch.
pub fn score_configs(
    kernel_module: &Module,
    configs: &[TileConfig],
    model: &dyn CostModel,
) -> Result<Vec<f32>, KernelError> {
    score_configs_cached(kernel_module, configs, model, &mut ScoreCache::default())
}

/// [`score_configs`] through a cache shared by the kernels of one run.
pub fn score_configs_cached(
    kernel_module: &Module,
    configs: &[TileConfig],
    model: &dyn CostModel,
    cache: &mut ScoreCache,
) -> Result<Vec<f32>, KernelError> {
    if configs.is_empty() {
        return Ok(Vec::new());
    }
    let f = featurize(kernel_module, Task::Tile)
        .map_err(|e| KernelError::Skip(format!("cannot featurize: {e}")))?;
    let mut feat = Vec::with_capacity(configs.len() * costmodel::graph::TILE_CONFIG_DIM);
    for c in configs {
        feat.extend_from_slice(&tile_config_row(
            &c.kernel_bounds,
            &c.output_bounds,
            &c.input_bounds,
        ));
    }
    let key = ScoreCache::key(&f.graph, &feat);
    if let Some(scores) = cache.map.get(&key) {
        return Ok(scores.clone());
    }
    let prepared = model.prepare(&f.graph).map_err(KernelError::Model)?;
    let batch = ConfigBatch {
        task: Task::Tile,
        num_configs: configs.len(),
        nodes_per_config: 1,
        feat,
    };
    let scores = model.score(&prepared, &batch).map_err(KernelError::Model)?;
    if scores.len() != configs.len() {
        return Err(KernelError::Model(costmodel::CostModelError::Input(
            format!(
                "the model returned {} scores for {} configurations",
                scores.len(),
                configs.len()
            ),
        )));
    }
    cache.map.insert(key, scores.clone());
    Ok(scores)
}

/// Enumerates, caps and ranks the candidates of kernel `id`.
pub fn select_kernel(
    m: &Module,
    id: InstId,
    model: &dyn CostModel,
    opts: &SelectOptions,
) -> Result<Selection, KernelError> {
    select_kernel_cached(m, id, model, opts, &mut ScoreCache::default())
}

/// [`select_kernel`] through a cache shared by the kernels of one run.
pub fn select_kernel_cached(
    m: &Module,
    id: InstId,
    model: &dyn CostModel,
    opts: &SelectOptions,
    cache: &mut ScoreCache,
) -> Result<Selection, KernelError> {
    let (space, mut choices) =
        enumerate_kernel(m, id, opts.memory_budget, opts.seed).map_err(KernelError::Skip)?;
    let within_budget = choices.len();
    let default = space
        .default_choice(&choices, opts.memory_budget)
        .ok_or_else(|| KernelError::Skip("no candidate".into()))?;
    if choices.len() > opts.max_candidates.max(1) {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(opts.seed);
        let keep = opts.max_candidates.max(1);
        let mut picked = rand::seq::index::sample(&mut rng, choices.len(), keep).into_vec();
        let d = choices.iter().position(|c| *c == default);
        if let Some(d) = d {
            if !picked.contains(&d) {
                picked[0] = d;
            }
        }
        picked.sort_unstable();
        choices = picked.into_iter().map(|i| choices[i].clone()).collect();
    }
    let mut configs: Vec<TileConfig> = choices.iter().map(|c| space.config(c)).collect();
    // Distinct choices can give the same bounds (clamped shared dimensions): rank each once.
    let mut seen = std::collections::BTreeSet::new();
    configs.retain(|c| seen.insert(c.clone()));
    let default_config = space.config(&default);
    let kernel_module = extract::extract_kernel(m, id);
    let scores = score_configs_cached(&kernel_module, &configs, model, cache)?;
    let mut order: Vec<usize> = (0..configs.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(a.cmp(&b)));
    let default_score = configs
        .iter()
        .position(|c| *c == default_config)
        .map(|i| scores[i])
        .unwrap_or(f32::NAN);
    Ok(Selection {
        kernel: id,
        ranked: order
            .into_iter()
            .map(|i| (configs[i].clone(), scores[i]))
            .collect(),
        default: (default_config, default_score),
        within_budget,
        raw: space.raw_size(),
    })
}

/// The tile selection pass. See the module docs.
pub struct TilePass {
    model: Option<Box<dyn CostModel>>,
    /// Bytes a tile's arrays may occupy (default [`DEFAULT_MEMORY_BUDGET`]).
    pub memory_budget: u64,
    warnings: Vec<String>,
}

impl Default for TilePass {
    fn default() -> Self {
        Self::new()
    }
}

impl TilePass {
    /// A pass that loads the tile model named by `PassOptions::tile_model`
    /// (the embedded default when `None`) on its first run.
    pub fn new() -> Self {
        TilePass {
            model: None,
            memory_budget: DEFAULT_MEMORY_BUDGET,
            warnings: Vec::new(),
        }
    }

    /// A pass ranking with `model`.
    pub fn with_model(model: Box<dyn CostModel>) -> Self {
        TilePass {
            model: Some(model),
            ..Self::new()
        }
    }

    /// Sets the memory budget of a tile, in bytes.
    pub fn with_memory_budget(mut self, bytes: u64) -> Self {
        self.memory_budget = bytes;
        self
    }

    /// The warnings of the last run (one per skipped kernel, naming it).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

fn fmt_score(x: f32) -> String {
    if x.is_finite() {
        format!("{x:.4}")
    } else {
        "n/a".into()
    }
}

impl Pass for TilePass {
    fn name(&self) -> &'static str {
        "tile"
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, PassError> {
        self.warnings.clear();
        if targets_xla_gpu(m, cx) {
            return self.run_xla_gpu(m, cx);
        }
        let kernels = kernel::find_kernels(m);
        if let Some(ops) = kernel::unfused_ops(m) {
            let line = format!(
                "tile: found no kernels: the module has not been through XLA's fusion pass (no fusion, and {ops} elementwise operations and broadcasts outside fusions; its {} dots, convolutions, copies and reshapes are not kernels yet); the tile pass wants a module after fusion (a .post.hlo); unchanged",
                kernels.len()
            );
            cx.explain.push_str(&line);
            cx.explain.push('\n');
            cx.notes.push(line);
            return Ok(false);
        }
        if self.model.is_none() {
            self.model = Some(load_tile_model(cx)?);
        }
        let Some(model) = self.model.as_deref() else {
            return Err(PassError::Failed {
                pass: "tile",
                message: "no tile cost model".into(),
            });
        };
        if model.task() != Task::Tile {
            return Err(PassError::Failed {
                pass: "tile",
                message: "the cost model is not a tile model".into(),
            });
        }
        let opts = SelectOptions {
            memory_budget: self.memory_budget,
            seed: cx.options.seed,
            max_candidates: cx.options.budget,
        };
        let mut cache = ScoreCache::default();
        let (mut tiled, mut off_default, mut skipped) = (0usize, 0usize, 0usize);
        for id in kernels.iter().copied() {
            match tile_kernel(m, id, model, &opts, &mut cache, cx)? {
                KernelOutcome::Tiled { off_default: off } => {
                    tiled += 1;
                    off_default += usize::from(off);
                }
                KernelOutcome::Skipped(reason) => {
                    let name = m.inst(id).name.to_string();
                    warn(&mut self.warnings, cx, &name, &reason);
                    skipped += 1;
                }
                KernelOutcome::Empty => {}
            }
        }
        cx.explain.push_str(&format!(
            "tile: {} kernel{}: {tiled} tiled ({off_default} with a tile other than the compiler default's), {skipped} skipped; scores are model scores, lower is predicted faster\n",
            kernels.len(),
            if kernels.len() == 1 { "" } else { "s" }
        ));
        Ok(tiled > 0)
    }
}

/// Whether the module is for the XLA:GPU target: asked, or (`auto`) it
/// holds Triton GEMM fusions.
fn targets_xla_gpu(m: &Module, cx: &PassContext) -> bool {
    match cx.options.tile_target {
        crate::TileTarget::XlaGpu => true,
        crate::TileTarget::Tpu => false,
        crate::TileTarget::Auto => {
            !xla_gpu::triton_gemm_fusions(m).is_empty()
                || m.computations().any(|c| {
                    m.comp(c)
                        .order
                        .iter()
                        .any(|&i| xla_gpu::autotuner::is_gemm_fusion(m, i))
                })
        }
    }
}

/// What became of one kernel.
enum KernelOutcome {
    /// Its decision was recorded; whether the tile is not the default's.
    Tiled { off_default: bool },
    /// Left unchanged, with a warning giving the reason.
    Skipped(String),
    /// No candidate to choose from.
    Empty,
}

/// Ranks one kernel's tiles, measures the best `--top-k` when a measure
/// callback is given, and records the choice in its `backend_config`.
fn tile_kernel(
    m: &mut Module,
    id: InstId,
    model: &dyn CostModel,
    opts: &SelectOptions,
    cache: &mut ScoreCache,
    cx: &mut PassContext,
) -> Result<KernelOutcome, PassError> {
    let name = m.inst(id).name.to_string();
    let raw = m.inst(id).raw_attr("backend_config").map(str::to_string);
    if let Err(e) = backend::parse_backend_config(raw.as_deref()) {
        return Ok(KernelOutcome::Skipped(e));
    }
    let sel = match select_kernel_cached(m, id, model, opts, cache) {
        Ok(s) => s,
        Err(KernelError::Skip(reason)) => return Ok(KernelOutcome::Skipped(reason)),
        Err(KernelError::Model(e)) => {
            return Err(PassError::Failed {
                pass: "tile",
                message: format!("kernel %{name}: {e}"),
            })
        }
    };
    let Some(best) = sel.ranked.first().cloned() else {
        return Ok(KernelOutcome::Empty);
    };
    let top_k = cx.options.top_k.max(1);
    let (chosen, measured_time) = match cx.options.measure.as_mut() {
        Some(measure) => measure_top_k(m, id, raw.as_deref(), &sel, top_k, best, measure),
        None => (best, None),
    };
    let decision = decision_json(&sel, &chosen, measured_time, top_k);
    match backend::merge(raw.as_deref(), decision) {
        Ok(text) => m
            .inst_mut(id)
            .set_attr("backend_config", AttrValue::Raw(text.into())),
        Err(e) => return Ok(KernelOutcome::Skipped(e)),
    }
    cx.records
        .push(crate::explain::Record::Tile(crate::explain::TileRecord {
            kernel: name.clone(),
            chosen: chosen.0.to_string(),
            score: chosen.1,
            default: sel.default.0.to_string(),
            default_score: sel.default.1,
            candidates: sel
                .ranked
                .iter()
                .take(top_k)
                .map(|(c, s)| (c.to_string(), *s))
                .collect(),
            ranked: sel.ranked.len(),
            within_budget: sel.within_budget,
            raw: u64::try_from(sel.raw).unwrap_or(u64::MAX),
            measured: measured_time,
        }));
    let measured = measured_time
        .map(|t| format!(", measured {t}"))
        .unwrap_or_default();
    cx.explain.push_str(&format!(
        "tile %{name}: {} predicted {}{measured}; default {} predicted {}; candidates: {} ranked, {} within the memory budget, {} raw\n",
        chosen.0,
        fmt_score(chosen.1),
        sel.default.0,
        fmt_score(sel.default.1),
        sel.ranked.len(),
        sel.within_budget,
        sel.raw,
    ));
    Ok(KernelOutcome::Tiled {
        off_default: chosen.0 != sel.default.0,
    })
}

/// Measures the kernel with each of its `top_k` best tiles; the fastest
/// measured (with its score) and its time, else the model's best.
fn measure_top_k(
    m: &Module,
    id: InstId,
    raw: Option<&str>,
    sel: &Selection,
    top_k: usize,
    best: (TileConfig, f32),
    measure: &mut crate::MeasureFn,
) -> ((TileConfig, f32), Option<f64>) {
    let mut chosen = best;
    let mut measured_time = None;
    for (cfg, score) in sel.ranked.iter().take(top_k) {
        let mut km = extract::extract_kernel(m, id);
        let root = km.entry_computation().root;
        if let Ok(t) = backend::merge(raw, backend::config_json(cfg, Some(*score))) {
            km.inst_mut(root)
                .set_attr("backend_config", AttrValue::Raw(t.into()));
        }
        if let Some(t) = measure(&hlo::print_module(&km)).filter(|t| t.is_finite()) {
            if measured_time.is_none_or(|best: f64| t < best) {
                measured_time = Some(t);
                chosen = (cfg.clone(), *score);
            }
        }
    }
    (chosen, measured_time)
}

/// The decision written into the kernel's `backend_config`.
fn decision_json(
    sel: &Selection,
    chosen: &(TileConfig, f32),
    measured_time: Option<f64>,
    top_k: usize,
) -> serde_json::Map<String, serde_json::Value> {
    let mut decision = backend::config_json(&chosen.0, Some(chosen.1));
    decision.insert(
        "candidates".into(),
        serde_json::Value::from(sel.ranked.len()),
    );
    if let Some(t) = measured_time.and_then(serde_json::Number::from_f64) {
        decision.insert("measured".into(), serde_json::Value::Number(t));
    }
    if top_k > 1 {
        let list = sel
            .ranked
            .iter()
            .take(top_k)
            .map(|(c, s)| serde_json::Value::Object(backend::config_json(c, Some(*s))))
            .collect();
        decision.insert("top_k".into(), serde_json::Value::Array(list));
    }
    decision
}

impl TilePass {
    /// The XLA:GPU target ([`xla_gpu`]): Triton GEMM fusions' configurations
    /// and, on request, XLA's autotuning cache.
    fn run_xla_gpu(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, PassError> {
        if cx.options.xla_gpu.autotuner_env.is_some() {
            let (_, lines) = xla_gpu::select_for_autotuner(m, &cx.options.xla_gpu, &mut cx.explain)
                .map_err(|message| PassError::Failed {
                    pass: "tile",
                    message,
                })?;
            for l in lines {
                if l.starts_with("warning") {
                    self.warnings.push(l.clone());
                } else {
                    cx.explain.push_str(&l);
                    cx.explain.push('\n');
                }
                cx.notes.push(l);
            }
            return Ok(false);
        }
        let before: Vec<Option<String>> = xla_gpu::triton_gemm_fusions(m)
            .into_iter()
            .map(|i| m.inst(i).raw_attr("backend_config").map(str::to_string))
            .collect();
        let fail = |message: String| PassError::Failed {
            pass: "tile",
            message,
        };
        let report = xla_gpu::select(m, &cx.options.xla_gpu, &mut cx.explain).map_err(fail)?;
        for w in &report.warnings {
            cx.notes.push(w.clone());
            self.warnings.push(w.clone());
        }
        for line in xla_gpu::write_outputs(&report, &cx.options.xla_gpu).map_err(fail)? {
            cx.explain.push_str(&line);
            cx.explain.push('\n');
            cx.notes.push(line);
        }
        let after: Vec<Option<String>> = xla_gpu::triton_gemm_fusions(m)
            .into_iter()
            .map(|i| m.inst(i).raw_attr("backend_config").map(str::to_string))
            .collect();
        Ok(before != after)
    }
}

fn warn(warnings: &mut Vec<String>, cx: &mut PassContext, kernel: &str, reason: &str) {
    let line = format!("warning: tile: skipped kernel %{kernel}: {reason}");
    cx.explain.push_str(&line);
    cx.explain.push('\n');
    cx.notes.push(line.clone());
    warnings.push(line);
}

/// Loads the tile model the options name.
fn load_tile_model(cx: &PassContext) -> Result<Box<dyn CostModel>, PassError> {
    Ok(costmodel::load_model(
        cx.options.tile_model.as_deref(),
        Task::Tile,
        cx.options.threads,
    )?)
}
