//! Times `hlo::parse_stablehlo` on each `NAME.mlir` given against
//! `hlo::parse_module` on its `NAME.hlo` pair (min of 5 runs, ms):
//! `cargo run --release -p hlo --example stablehlo_speed -- DIR/*.mlir`.

use std::time::Instant;

fn best(f: &mut dyn FnMut() -> bool) -> Option<f64> {
    let mut t = f64::INFINITY;
    for _ in 0..5 {
        let t0 = Instant::now();
        if !f() {
            return None;
        }
        t = t.min(t0.elapsed().as_secs_f64() * 1e3);
    }
    Some(t)
}

fn main() {
    for path in std::env::args().skip(1) {
        let (Ok(mlir), Ok(hlo)) = (
            std::fs::read_to_string(&path),
            std::fs::read_to_string(path.replace(".mlir", ".hlo")),
        ) else {
            eprintln!("{path}: cannot read it or its .hlo pair");
            continue;
        };
        let a = best(&mut || hlo::parse_stablehlo(&mlir).is_ok());
        let b = best(&mut || hlo::parse_module(&hlo).is_ok());
        println!(
            "{{\"file\": \"{path}\", \"parse_stablehlo_ms\": {}, \"parse_hlo_ms\": {}}}",
            a.unwrap_or(-1.0),
            b.unwrap_or(-1.0)
        );
    }
}
