//! Times `hlo::stablehlo_to_hlo_text` and `hlo::parse_stablehlo` on each
//! `NAME.mlir` given against `hlo::parse_module` on its `NAME.hlo` pair
//! (min of `--reps N` runs, default 5, ms), then their totals:
//! `cargo run --release -p hlo --example stablehlo_speed -- [--reps N] DIR/*.mlir`.
//! A large `--reps` makes a loop to profile (`perf record`).

use std::time::Instant;

fn best(reps: usize, f: &mut dyn FnMut() -> bool) -> Option<f64> {
    let mut t = f64::INFINITY;
    for _ in 0..reps {
        let t0 = Instant::now();
        if !f() {
            return None;
        }
        t = t.min(t0.elapsed().as_secs_f64() * 1e3);
    }
    Some(t)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut reps = 5;
    if let Some(i) = args.iter().position(|a| a == "--reps") {
        reps = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(5);
        args.drain(i..(i + 2).min(args.len()));
    }
    let (mut bytes, mut total) = (0usize, [0.0f64; 3]);
    for path in args {
        let (Ok(mlir), Ok(hlo)) = (
            std::fs::read_to_string(&path),
            std::fs::read_to_string(path.replace(".mlir", ".hlo")),
        ) else {
            eprintln!("{path}: cannot read it or its .hlo pair");
            continue;
        };
        let t = best(reps, &mut || hlo::stablehlo_to_hlo_text(&mlir).is_ok());
        let a = best(reps, &mut || hlo::parse_stablehlo(&mlir).is_ok());
        let b = best(reps, &mut || hlo::parse_module(&hlo).is_ok());
        for (sum, x) in total.iter_mut().zip([t, a, b]) {
            *sum += x.unwrap_or(0.0);
        }
        bytes += mlir.len();
        println!(
            "{{\"file\": \"{path}\", \"bytes\": {}, \"to_hlo_text_ms\": {}, \"parse_stablehlo_ms\": {}, \"parse_hlo_ms\": {}}}",
            mlir.len(),
            t.unwrap_or(-1.0),
            a.unwrap_or(-1.0),
            b.unwrap_or(-1.0)
        );
    }
    println!(
        "{{\"total\": true, \"bytes\": {bytes}, \"to_hlo_text_ms\": {}, \"parse_stablehlo_ms\": {}, \"parse_hlo_ms\": {}, \"to_hlo_text_ns_per_byte\": {:.1}}}",
        total[0],
        total[1],
        total[2],
        total[0] * 1e6 / bytes.max(1) as f64
    );
}
