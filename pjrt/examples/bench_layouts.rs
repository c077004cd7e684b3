//! The honest table: runtime on XLA:CPU (through PJRT) of, per module,
//! (a) the original under XLA's normal pipeline, (b) the original with its
//! layouts kept, (c) the layout pass's output (default model) with its
//! layouts kept, (d) the pass's output with `--measure=xla-cpu`, all from one
//! interleaved run with a control (a second executable of (a)).
//!
//! `bench_layouts [--budget SECONDS] [--measure-budget SECONDS] FILE...`
//! prints one markdown row per module (ratios are medians over rounds of
//! per-round ratios; the spread is the control's, (q90 - q10) / 2 of
//! control/(a)), and checks that (b), (c), (d) compute (a)'s results (f32
//! 1e-4; bf16, or an original that drifts between the pipelines, against (b)).
//! Needs ONNX Runtime for the default model (ORT_DYLIB_PATH) and the plugin.

use std::time::{Duration, Instant};

use pjrt::measure::{compile_programs, time_interleaved, MeasureConfig};

use passes::layout::LayoutPass;
use passes::{Pass, PassContext, PassOptions};
use pjrt::{compare, differences, has_half_floats, inputs_for, Backend, Pipeline};

fn layout_pass(m: &hlo::Module, measure: Option<f64>) -> Result<(hlo::Module, String), String> {
    let mut out = m.clone();
    let mut o = PassOptions {
        budget: 2000,
        explain: true,
        ..Default::default()
    };
    if let Some(budget) = measure {
        let config = pjrt::MeasureConfig {
            budget: Duration::from_secs_f64(budget),
            ..Default::default()
        };
        o.measurer = Some(Box::new(
            pjrt::measurer_for("xla-cpu", config).map_err(|e| e.to_string())?,
        ));
        o.top_k = 3;
    }
    let mut cx = PassContext::new(o);
    LayoutPass::new()
        .run(&mut out, &mut cx)
        .map_err(|e| e.to_string())?;
    Ok((out, cx.explain))
}

struct Row {
    name: String,
    cells: Vec<String>,
}

fn bench(path: &str, budget: f64, measure_budget: f64) -> Result<Row, String> {
    let name = std::path::Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(path)
        .to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let original = hlo::parse_module(&text).map_err(|e| e.render())?;
    let inputs = inputs_for(&original, 0).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let (c_mod, _) = layout_pass(&original, None)?;
    let pass_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let (d_mod, d_explain) = layout_pass(&original, Some(measure_budget))?;
    let measure_secs = t.elapsed().as_secs_f64();
    let decision = d_explain
        .lines()
        .find(|l| l.starts_with("layout: measured"))
        .map(|l| {
            if l.contains("kept the compiler default") {
                "default".to_string()
            } else if let Some(r) = l.split("kept the model's rank ").nth(1) {
                format!("rank {}", r.trim())
            } else {
                "?".to_string()
            }
        })
        .unwrap_or_else(|| "not measured".into());
    let plugin = pjrt::find_plugin(None).map_err(|e| e.to_string())?;
    let mut b = Backend::start(&plugin).map_err(|e| e.to_string())?;
    b.set_inputs(&inputs).map_err(|e| e.to_string())?;
    // 0 a, 1 b, 2 c, 3 d, 4 control (a again)
    let (kept, xla) = (Pipeline::LayoutsKept, Pipeline::Xla);
    let compiled = compile_programs(
        &mut b,
        &[
            (&original, xla),
            (&original, kept),
            (&c_mod, kept),
            (&d_mod, kept),
            (&original, xla),
        ],
    )
    .map_err(|e| e.to_string())?;
    let exes: Vec<usize> = compiled.iter().map(|(id, _)| *id).collect();
    let (b_rep, c_rep) = (&compiled[1].1, &compiled[2].1);
    // Correctness first.
    let outs: Vec<_> = exes[..4]
        .iter()
        .map(|&e| b.outputs(e).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let half = has_half_floats(&outs[0]);
    let tol = if half { 1e-2 } else { 1e-4 };
    let drift = half || compare(&outs[1], &outs[0], tol, tol).is_err();
    let reference = if drift { &outs[1] } else { &outs[0] };
    let checks = differences(
        &[("b", &outs[1]), ("c", &outs[2]), ("d", &outs[3])],
        reference,
        tol,
    );
    let check = if checks.is_empty() {
        format!("ok{}", if drift { " (vs b)" } else { "" })
    } else {
        checks.join("; ")
    };
    // Interleaved timing; exes[4], a second executable of (a), is the control.
    let schedule = MeasureConfig {
        budget: Duration::from_secs_f64(budget),
        min_rounds: 5,
        max_rounds: 60,
        min_unit: Duration::from_millis(5),
        seed: 0,
    };
    let t = time_interleaved(&mut b, &exes, 0, &schedule).map_err(|e| e.to_string())?;
    let ratio = |x: usize, y: usize| t.ratio(x, y);
    let spread = t.spread(4, 0);
    let a_ms = t.seconds(0) * 1e3;
    let (rounds, reps) = (t.rounds, t.reps);
    Ok(Row {
        name,
        cells: vec![
            format!("{a_ms:.3}"),
            format!("{:.2}", ratio(1, 0)),
            format!("{:.2}", ratio(2, 0)),
            format!("{:.2}", ratio(3, 0)),
            format!("{:.2}", ratio(2, 1)),
            format!("{:.2}", ratio(3, 1)),
            format!("±{:.1}%", spread * 100.0),
            format!("{rounds}×{reps}"),
            format!("{}/{}", b_rep.lines.len(), c_rep.lines.len()),
            decision,
            check,
            format!("{pass_secs:.1}/{measure_secs:.1}"),
        ],
    })
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut take = |flag: &str, default: f64| -> f64 {
        match args.iter().position(|a| a == flag) {
            Some(k) if k + 1 < args.len() => {
                let v = args[k + 1].parse().unwrap_or(default);
                args.drain(k..k + 2);
                v
            }
            _ => default,
        }
    };
    let budget = take("--budget", 6.0);
    let measure_budget = take("--measure-budget", 4.0);
    if args.is_empty() {
        eprintln!("usage: bench_layouts [--budget S] [--measure-budget S] FILE...");
        std::process::exit(2);
    }
    println!("| module | (a) XLA ms | b/a | c/a | d/a | c/b | d/b | control spread | rounds×reps | legalized b/c | --measure kept | results | pass s / measure s |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for path in &args {
        match bench(path, budget, measure_budget) {
            Ok(r) => println!("| {} | {} |", r.name, r.cells.join(" | ")),
            Err(e) => {
                let name = std::path::Path::new(path)
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or(path);
                let first = e
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(160)
                    .collect::<String>();
                println!("| {name} | skipped: {first} |||||||||||");
            }
        }
    }
}
