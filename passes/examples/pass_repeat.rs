//! Runs a pass pipeline N times on one module in one process, as a compiler
//! calling the C ABI (`hlo_opt_module_run_passes`) or Python's
//! `Module.run_passes` on the same module does: each call gets fresh
//! options and a fresh clone of the module. Prints each call's wall time to
//! stderr and checks that every call printed the same module.
//!
//! `cargo run -p passes --release --example pass_repeat -- FILE [PASSES] [N]`
//!
//! The CPU a repeated call costs: `perf stat -e task-clock` of N = 1 and of
//! N = 5, the difference over 4 (docs/benchmarks.md, issue 29).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).ok_or("usage: pass_repeat FILE [PASSES] [N]")?;
    let passes = args.get(2).map_or("layout", String::as_str);
    let n: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(2);
    let text = std::fs::read_to_string(path)?;
    let module = hlo::parse_module_named(&text, path)?;
    let mut first: Option<String> = None;
    for call in 1..=n {
        let mut m = module.clone();
        let mut cx = passes::PassContext::new(passes::PassOptions::default());
        let t = std::time::Instant::now();
        passes::run_pipeline(&mut m, passes, &mut cx)?;
        let secs = t.elapsed().as_secs_f64();
        let out = hlo::print_module(&m);
        let same = first.get_or_insert_with(|| out.clone()) == &out;
        eprintln!(
            "call {call}: {:.1} ms wall; same output as call 1: {same}",
            secs * 1e3
        );
        if !same {
            return Err(format!("call {call} printed another module than call 1").into());
        }
    }
    Ok(())
}
