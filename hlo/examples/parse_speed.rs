//! Measures parse and print throughput of files for `bench_vs_xla.py`:
//! `parse_speed ITERATIONS FILE...` prints one line per file:
//! `<file>\t<bytes>\t<best parse seconds>\t<best print seconds>`.
//! `GRAMMAR_ONLY=1` also times the grammar alone (no IR); `GRAMMAR_ONLY=only`
//! times nothing else (for profiling the grammar).
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let iters: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    for path in args {
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{path}: {e}");
                std::process::exit(1);
            }
        };
        let mut best_parse = f64::INFINITY;
        let mut best_print = f64::INFINITY;
        let grammar_mode = std::env::var("GRAMMAR_ONLY").unwrap_or_default();
        let full_iters = if grammar_mode == "only" { 0 } else { iters };
        for _ in 0..full_iters {
            let t = Instant::now();
            let m = match hlo::parse_module_named(&text, &path) {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("{e}");
                    std::process::exit(1);
                }
            };
            best_parse = best_parse.min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            let s = hlo::print_module(&m);
            best_print = best_print.min(t.elapsed().as_secs_f64());
            std::hint::black_box(s);
        }
        if !grammar_mode.is_empty() {
            let mut best = f64::INFINITY;
            for _ in 0..iters {
                let t = Instant::now();
                std::hint::black_box(hlo::parse::grammar_only(&text));
                best = best.min(t.elapsed().as_secs_f64());
            }
            eprintln!("grammar only: {:.1} MB/s", text.len() as f64 / 1e6 / best);
        }
        println!("{path}\t{}\t{best_parse}\t{best_print}", text.len());
    }
}
