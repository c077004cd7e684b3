//! The `xla-cpu` pass: chooses which kernels XLA:CPU runs for a program
//! (YNNPACK fusions or XLA's own), with a model learned on the user's CPU.
//!
//! Two choices, each from its own model:
//! - per program, a compile option: [`features`] (the program's row) ->
//!   [`model`] (predicted runtime of each [`candidates`] entry over XLA's
//!   default) -> [`decide`] (a candidate other than the default only when
//!   its predicted gain beats the model's measured error);
//! - per op, the dots and convolutions that run on oneDNN:
//!   [`contractions`] (each distinct op's signature and row) ->
//!   [`op_model`] (predicted runtime of oneDNN over XLA's kernel) -> the
//!   same trust rule.
//!
//! Then the report (`--explain`, the [`crate::explain::XlaCpuRecord`]). The
//! module is not changed: the option is handed to XLA by the caller
//! (`hlo-opt --compile-options`, `hlo_opt.jax.compile`), and the ops by
//! signature to `hlo_opt.onednn`, which rewrites the StableHLO that jax
//! lowers.

pub mod candidates;
pub mod contractions;
pub mod features;
pub mod model;
pub mod op_model;

use hlo::Module;

use crate::explain::{Record, XlaCpuOp, XlaCpuPrediction, XlaCpuRecord};
use crate::{Changed, Pass, PassContext, PassError};
use candidates::Candidate;
use model::KernelModel;

/// What the caller says about the XLA that will compile the program.
#[derive(Clone, Debug, Default)]
pub struct XlaCpuOptions {
    /// A built-in model name or an `.onnx` path (its card beside it);
    /// `None`: the built-in model for `jaxlib`.
    pub model: Option<String>,
    /// The jaxlib version that will compile (`0.10.2`); `None`: the
    /// newest built-in model's, with a note.
    pub jaxlib: Option<String>,
    /// This machine's CPU model name; `None`: read from /proc/cpuinfo.
    pub cpu: Option<String>,
}

/// The CPU model name of this machine (`/proc/cpuinfo`), if readable: read
/// once per process (the kernel writes that file at each read, about 30 µs,
/// a twentieth of a decision).
pub fn this_cpu() -> Option<String> {
    static CPU: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    CPU.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        text.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    })
    .clone()
}

/// The model for `opts`, and the notes its use deserves. An XLA version
/// other than the model's is refused: the candidates may mean other
/// kernels there.
pub fn load_model(
    opts: &XlaCpuOptions,
) -> Result<(std::sync::Arc<KernelModel>, Vec<String>), String> {
    let mut notes = Vec::new();
    let model = match (&opts.model, &opts.jaxlib) {
        (Some(name), _) => KernelModel::load(name)?,
        (None, Some(v)) => {
            let b = KernelModel::builtin_for(v).ok_or_else(|| {
                format!(
                    "no built-in XLA:CPU model for jaxlib {v} (built in: {}); train one on this machine: \
                     bash scripts/xla_cpu_retrain (docs/xla-cpu.md)",
                    model::builtin_names()
                )
            })?;
            KernelModel::load(b.name)?
        }
        (None, None) => {
            let b = model::BUILTINS.last().ok_or("no built-in XLA:CPU model")?;
            notes.push(format!(
                "xla-cpu: no --xla-version given: using the model for jaxlib {} ({})",
                b.jaxlib, b.name
            ));
            KernelModel::load(b.name)?
        }
    };
    if let Some(v) = &opts.jaxlib {
        if !model.card.xla.ends_with(v.as_str()) {
            return Err(format!(
                "{} was trained on {}, not jaxlib {v}: its choices may name other kernels there; \
                 retrain it for this XLA (bash scripts/xla_cpu_retrain)",
                model.origin, model.card.xla
            ));
        }
    }
    let cpu = opts.cpu.clone().or_else(this_cpu);
    if let Some(cpu) = cpu {
        if cpu != model.card.cpu {
            notes.push(format!(
                "xla-cpu: warning: {} was trained on `{}`, this CPU is `{cpu}`: its predictions may not hold here; \
                 retrain it on this machine (bash scripts/xla_cpu_retrain) or measure the candidates (hlo_opt.jax.compile(..., measure=...))",
                model.origin, model.card.cpu
            ));
        }
    }
    Ok((model, notes))
}

/// The decision for one program: every candidate's prediction and the
/// chosen one.
pub fn decide(m: &Module, model: &KernelModel) -> Result<XlaCpuRecord, String> {
    let row = features::program_features(m);
    let cands = candidates::all();
    // The default's log ratio over itself is 0: only the others are run.
    let pred: Vec<f64> = std::iter::once(0.0)
        .chain(model.predict(&row, &cands[1..])?)
        .collect();
    let card = &model.card;
    let predictions: Vec<XlaCpuPrediction> = cands
        .iter()
        .zip(&pred)
        .map(|(c, &p)| {
            let (p, err) = if c.is_default() {
                (0.0, 0.0)
            } else {
                (
                    p,
                    card.error.get(&c.name()).copied().unwrap_or(f64::INFINITY),
                )
            };
            XlaCpuPrediction {
                candidate: c.name(),
                change_pct: (p.exp() - 1.0) * 100.0,
                required_gain_pct: (1.0 - (-card.margin * err).exp()) * 100.0,
                trusted: !c.is_default() && -p > card.margin * err,
            }
        })
        .collect();
    // The best predicted among the trusted ones; the default otherwise.
    let best = (0..cands.len())
        .filter(|&i| predictions[i].trusted)
        .min_by(|&a, &b| pred[a].total_cmp(&pred[b]));
    let (chosen, reason) = match best {
        Some(i) => (
            cands[i],
            format!(
                "predicted {:+.1}%, beyond the model's measured error ({:.1}% needed)",
                predictions[i].change_pct, predictions[i].required_gain_pct
            ),
        ),
        None => {
            let i = (1..cands.len())
                .min_by(|&a, &b| pred[a].total_cmp(&pred[b]))
                .unwrap_or(0);
            (
                Candidate::DEFAULT,
                format!(
                    "kept XLA's default: the best predicted, {} at {:+.1}%, does not beat the model's error ({:.1}% needed)",
                    predictions[i].candidate, predictions[i].change_pct, predictions[i].required_gain_pct
                ),
            )
        }
    };
    let (op_model, onednn) = decide_ops(m, &model.origin, &card.xla)?;
    let mut verify: Vec<String> = Vec::new();
    for name in std::iter::once(chosen.name()).chain(card.portfolio.iter().cloned()) {
        if name != Candidate::DEFAULT.name() && !verify.contains(&name) {
            verify.push(name);
        }
    }
    Ok(XlaCpuRecord {
        verify,
        op_model,
        onednn,
        model: model.origin.clone(),
        xla: card.xla.clone(),
        trained_cpu: card.cpu.clone(),
        chosen: chosen.name(),
        options: chosen.options(),
        reason,
        predictions,
    })
}

/// The per-op choice: each distinct dot or convolution oneDNN takes goes
/// there when the op model's predicted gain beats its error times its
/// margin. No op model for this XLA: none goes.
fn decide_ops(
    m: &Module,
    origin: &str,
    xla: &str,
) -> Result<(Option<String>, Vec<XlaCpuOp>), String> {
    let Some(model) = op_model::OpModel::for_program_model(origin, xla)? else {
        return Ok((None, Vec::new()));
    };
    let found = contractions::contractions(m);
    let eligible: Vec<&contractions::Contraction> = found.iter().filter(|d| d.eligible).collect();
    let pred = model.predict(&eligible)?;
    let (err, margin) = (model.card.error, model.card.margin);
    let choices = eligible
        .iter()
        .zip(pred)
        .map(|(d, p)| {
            let unseen_form = !model.card.knows(&d.signature);
            XlaCpuOp {
                signature: d.signature.clone(),
                count: d.count,
                change_pct: (p.exp() - 1.0) * 100.0,
                required_gain_pct: (1.0 - (-margin * err).exp()) * 100.0,
                onednn: -p > margin * err && !unseen_form,
                unseen_form,
            }
        })
        .collect();
    Ok((Some(model.origin.clone()), choices))
}

/// The pass (`--pass=xla-cpu`).
#[derive(Default)]
pub struct XlaCpuPass;

impl Pass for XlaCpuPass {
    fn name(&self) -> &'static str {
        "xla-cpu"
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, PassError> {
        let failed = |message: String| PassError::Failed {
            pass: "xla-cpu",
            message,
        };
        let (model, notes) = load_model(&cx.options.xla_cpu).map_err(failed)?;
        let record = decide(m, &model).map_err(failed)?;
        for n in notes {
            cx.explain.push_str(&n);
            cx.explain.push('\n');
            cx.notes.push(n);
        }
        cx.explain
            .push_str(&report(&record, cx.options.explain_all));
        cx.reports
            .push(serde_json::json!({ "pass": "xla-cpu", "decision": &record }));
        cx.records.push(Record::XlaCpu(record));
        Ok(false)
    }
}

/// The `--explain` text of a decision: the choice and why, then each
/// candidate's prediction (all of them with `all`, else the three best).
pub fn report(r: &XlaCpuRecord, all: bool) -> String {
    let mut s = format!(
        "xla-cpu: model {} ({}, trained on {})\n",
        r.model, r.xla, r.trained_cpu
    );
    let opts = if r.options.is_empty() {
        "no compile option".to_string()
    } else {
        r.options
            .iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect::<Vec<_>>()
            .join(" ")
    };
    s += &format!("xla-cpu: chose {} ({opts}): {}\n", r.chosen, r.reason);
    let mut order: Vec<&XlaCpuPrediction> = r
        .predictions
        .iter()
        .filter(|p| p.candidate != "default")
        .collect();
    order.sort_by(|a, b| a.change_pct.total_cmp(&b.change_pct));
    // The three best predicted (all with `all`), and the chosen one.
    for (k, p) in order.iter().enumerate() {
        if !(all || k < 3 || p.candidate == r.chosen) {
            continue;
        }
        s += &format!(
            "  {:<24} predicted {:+6.1}%  needs {:>5.1}% gain  {}\n",
            p.candidate,
            p.change_pct,
            p.required_gain_pct,
            if p.trusted {
                "trusted"
            } else {
                "within the error"
            }
        );
    }
    if !r.verify.is_empty() {
        s += &format!(
            "xla-cpu: to time against the default where it can run: {}\n",
            r.verify.join(", ")
        );
    }
    if let Some(dm) = &r.op_model {
        let sent = r.onednn.iter().filter(|d| d.onednn).count();
        s += &format!(
            "xla-cpu: per-op model {dm}: {sent} of {} distinct dots and convolutions to oneDNN\n",
            r.onednn.len()
        );
        for d in &r.onednn {
            if !(all || d.onednn) {
                continue;
            }
            s += &format!(
                "  {:<48} x{:<2} predicted {:+6.1}%  needs {:>5.1}% gain  {}\n",
                d.signature,
                d.count,
                d.change_pct,
                d.required_gain_pct,
                match (d.onednn, d.unseen_form) {
                    (true, _) => "oneDNN",
                    (false, false) => "XLA's kernel",
                    (false, true) => "XLA's kernel (a form the op model has not seen)",
                }
            );
        }
    }
    s
}
