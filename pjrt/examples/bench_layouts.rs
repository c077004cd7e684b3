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

use passes::layout::LayoutPass;
use passes::{Pass, PassContext, PassOptions};
use pjrt::{compare, inputs_for, Backend, ElementType, Pipeline};

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

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
    let a_proto = pjrt::proto::module_proto(&original).map_err(|e| e.to_string())?;
    let (b_proto, b_rep) = pjrt::prepare(&original).map_err(|e| e.to_string())?;
    let (c_proto, c_rep) = pjrt::prepare(&c_mod).map_err(|e| e.to_string())?;
    let (d_proto, _) = pjrt::prepare(&d_mod).map_err(|e| e.to_string())?;
    let mut exes = Vec::new();
    for (proto, pipeline) in [
        (&a_proto, Pipeline::Xla),
        (&b_proto, Pipeline::LayoutsKept),
        (&c_proto, Pipeline::LayoutsKept),
        (&d_proto, Pipeline::LayoutsKept),
        (&a_proto, Pipeline::Xla),
    ] {
        exes.push(b.compile(proto, pipeline).map_err(|e| e.to_string())?.id);
    }
    // Correctness first.
    let outs: Vec<_> = exes[..4]
        .iter()
        .map(|&e| b.outputs(e).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let half = outs[0]
        .iter()
        .any(|o| matches!(o.ty, ElementType::Bf16 | ElementType::F16));
    let tol = if half { 1e-2 } else { 1e-4 };
    let drift = half || compare(&outs[1], &outs[0], tol, tol).is_err();
    let reference = if drift { &outs[1] } else { &outs[0] };
    let mut checks = Vec::new();
    for (k, label) in [(1, "b"), (2, "c"), (3, "d")] {
        if let Err(m) = compare(&outs[k], reference, tol, tol) {
            checks.push(format!("{label} DIFFERS ({m})"));
        }
    }
    let check = if checks.is_empty() {
        format!("ok{}", if drift { " (vs b)" } else { "" })
    } else {
        checks.join("; ")
    };
    // Interleaved timing.
    let once = b.run(exes[0], 2).map_err(|e| e.to_string())?;
    let t1 = once.iter().copied().fold(f64::INFINITY, f64::min).max(1e-7);
    let reps = ((0.005 / t1).ceil() as usize).clamp(1, 1000);
    for &e in &exes {
        b.run(e, 1).map_err(|e| e.to_string())?;
    }
    let mut runs: Vec<Vec<f64>> = vec![Vec::new(); exes.len()];
    let start = Instant::now();
    let mut rounds = 0;
    while rounds < 60 && (rounds < 5 || start.elapsed().as_secs_f64() < budget) {
        for k in 0..exes.len() {
            let i = (k + rounds) % exes.len();
            let t: f64 = b
                .run(exes[i], reps)
                .map_err(|e| e.to_string())?
                .iter()
                .sum::<f64>()
                / reps as f64;
            runs[i].push(t);
        }
        rounds += 1;
    }
    let ratio = |x: usize, y: usize| -> f64 {
        let mut r: Vec<f64> = runs[x].iter().zip(&runs[y]).map(|(p, q)| p / q).collect();
        median(&mut r)
    };
    let mut cr: Vec<f64> = runs[4].iter().zip(&runs[0]).map(|(p, q)| p / q).collect();
    let spread = (quantile(&mut cr, 0.9) - quantile(&mut cr, 0.1)) / 2.0;
    let a_ms = median(&mut runs[0].clone()) * 1e3;
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
