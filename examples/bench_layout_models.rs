//! Runtime on a PJRT device (XLA:CPU by default) of the layout pass's output
//! with two layout models, against the compiler-default layouts on the same
//! layouts-kept path: per module, (a) XLA's normal pipeline, (b) the
//! original with its layouts kept (the compiler default), (t) the pass's
//! output with the embedded default model (trained on TpuGraphs, TPU), (m)
//! with `--layout-model MODEL` (e.g. one trained on `hlo-cost collect` data
//! of this device). One interleaved run per module with a control (a second
//! executable of (b)); ratios are medians of per-round ratios, the spread is
//! the control's (q90 - q10) / 2 of control/(b). Results of (t) and (m) are
//! checked against (b) (f32 1e-3, 16-bit floats 2e-2).
//!
//! `bench_layout_models --layout-model MODEL [--budget S] [--device xla-cpu|pjrt:PATH] FILE...`
//! prints one markdown row per module. Needs ONNX Runtime (ORT_DYLIB_PATH)
//! and the plugin; `scripts/cpu_layout_model.sh` runs it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use passes::layout::LayoutPass;
use passes::{Pass, PassContext, PassOptions};
use pjrt::measure::{compile_programs, time_interleaved, MeasureConfig};
use pjrt::{differences, has_half_floats, inputs_for, Backend, Pipeline};

/// The pass's output with `model` (`None`: the embedded default) and
/// whether it changed the module.
fn layout_pass(m: &hlo::Module, model: Option<PathBuf>) -> Result<(hlo::Module, bool), String> {
    let mut out = m.clone();
    let mut cx = PassContext::new(PassOptions {
        budget: 2000,
        layout_model: model,
        ..Default::default()
    });
    let changed = LayoutPass::new()
        .run(&mut out, &mut cx)
        .map_err(|e| e.to_string())?;
    Ok((out, changed))
}

fn bench(path: &str, model: &Path, plugin: &Path, budget: f64) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let original = hlo::parse_module(&text).map_err(|e| e.render())?;
    let inputs = inputs_for(&original, 0).map_err(|e| e.to_string())?;
    let (t_mod, t_changed) = layout_pass(&original, None)?;
    let (m_mod, m_changed) = layout_pass(&original, Some(model.to_path_buf()))?;
    let mut b = Backend::start(plugin).map_err(|e| e.to_string())?;
    b.set_inputs(&inputs).map_err(|e| e.to_string())?;
    // 0 a, 1 b, 2 t, 3 m, 4 control (b again)
    let (kept, xla) = (Pipeline::LayoutsKept, Pipeline::Xla);
    let exes: Vec<usize> = compile_programs(
        &mut b,
        &[
            (&original, xla),
            (&original, kept),
            (&t_mod, kept),
            (&m_mod, kept),
            (&original, kept),
        ],
    )
    .map_err(|e| e.to_string())?
    .into_iter()
    .map(|(id, _)| id)
    .collect();
    let outs: Vec<_> = exes[1..4]
        .iter()
        .map(|&e| b.outputs(e).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let tol = if has_half_floats(&outs[0]) {
        2e-2
    } else {
        1e-3
    };
    let checks = differences(
        &[("tpu-model", &outs[1]), ("model", &outs[2])],
        &outs[0],
        tol,
    );
    let check = if checks.is_empty() {
        "ok".to_string()
    } else {
        checks.join("; ")
    };
    // Interleaved timing; exes[4], a second executable of (b), is the control.
    let schedule = MeasureConfig {
        budget: Duration::from_secs_f64(budget),
        min_rounds: 5,
        max_rounds: 200,
        min_unit: Duration::from_millis(5),
        seed: 0,
    };
    let t = time_interleaved(&mut b, &exes, 1, &schedule).map_err(|e| e.to_string())?;
    let ratio = |x: usize, y: usize| t.ratio(x, y);
    let spread = t.spread(4, 1);
    let ms = |i: usize| t.seconds(i) * 1e3;
    let (rounds, reps) = (t.rounds, t.reps);
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into());
    let changed = |c: bool| if c { "changed" } else { "unchanged" };
    Ok(vec![
        format!("{:.3}", ms(0)),
        format!("{:.3}", ms(1)),
        format!("{:.2}", ratio(1, 0)),
        format!("{:.2} ({})", ratio(2, 1), changed(t_changed)),
        format!("{:.2} ({})", ratio(3, 1), changed(m_changed)),
        format!("{:.2}", ratio(3, 0)),
        format!("{:.2}", ratio(4, 1)),
        format!("±{:.1}%", spread * 100.0),
        format!("{rounds}×{reps}"),
        load,
        check,
    ])
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut take = |flag: &str| -> Option<String> {
        let k = args.iter().position(|a| a == flag)?;
        if k + 1 >= args.len() {
            return None;
        }
        let v = args[k + 1].clone();
        args.drain(k..k + 2);
        Some(v)
    };
    let model = take("--layout-model").map(PathBuf::from);
    let budget: f64 = take("--budget").and_then(|v| v.parse().ok()).unwrap_or(6.0);
    let device = take("--device").unwrap_or_else(|| "xla-cpu".into());
    let (Some(model), false) = (model, args.is_empty()) else {
        eprintln!("usage: bench_layout_models --layout-model MODEL [--budget S] [--device xla-cpu|pjrt:PATH] FILE...");
        std::process::exit(2);
    };
    let plugin = match pjrt::measurer_for(&device, pjrt::MeasureConfig::default()) {
        Ok(m) => m.plugin,
        Err(e) => {
            eprintln!("bench_layout_models: {e}");
            std::process::exit(1);
        }
    };
    println!("| module | (a) XLA ms | (b) default kept ms | b/a | tpu-model/b | model/b | model/a | control/b | control spread | rounds×reps | load | results |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for path in &args {
        let name = std::path::Path::new(path)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(path);
        match bench(path, &model, &plugin, budget) {
            Ok(cells) => println!("| {name} | {} |", cells.join(" | ")),
            Err(e) => {
                let first: String = e.lines().next().unwrap_or("").chars().take(160).collect();
                println!("| {name} | skipped: {first} |||||||||||");
            }
        }
    }
}
