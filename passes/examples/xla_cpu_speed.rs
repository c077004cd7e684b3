//! Where the xla-cpu decision's time goes, per module: the program
//! features, the program model, the dots and convolutions, the op model,
//! the whole decision and its JSON (medians of `--reps` calls).
//!
//!     cargo run --release -p passes --example xla_cpu_speed -- --jaxlib 0.12.0.1 DIR/*.mlir

use std::time::Instant;

use passes::xla_cpu::{
    candidates, contractions, decide, features, model::KernelModel, op_model::OpModel,
};

fn median_us(reps: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[reps / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut take = |flag: &str, default: &str| -> String {
        match args.iter().position(|a| a == flag) {
            Some(i) if i + 1 < args.len() => {
                let v = args.remove(i + 1);
                args.remove(i);
                v
            }
            _ => default.to_string(),
        }
    };
    let reps: usize = take("--reps", "200").parse()?;
    let jaxlib = take("--jaxlib", "0.12.0.1");
    let model = KernelModel::load(&format!("xla-cpu-jaxlib-{jaxlib}"))?;
    let ops = OpModel::builtin_for_xla(&model.card.xla)?.ok_or("no op model")?;
    println!(
        "{:32} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "module", "features", "model", "contr", "opmodel", "decide", "json"
    );
    for path in &args {
        let text = std::fs::read_to_string(path)?;
        let m = hlo::parse_stablehlo(&text)?;
        let row = features::program_features(&m);
        let cands = candidates::all();
        let found = contractions::contractions(&m);
        let eligible: Vec<&contractions::Contraction> =
            found.iter().filter(|d| d.eligible).collect();
        let record = decide(&m, &model)?;
        let r = [
            median_us(reps, || {
                std::hint::black_box(features::program_features(&m));
            }),
            median_us(reps, || drop(model.predict(&row, &cands[1..]))),
            median_us(reps, || drop(contractions::contractions(&m))),
            median_us(reps, || drop(ops.predict(&eligible))),
            median_us(reps, || drop(decide(&m, &model))),
            median_us(reps, || drop(serde_json::to_string(&record))),
        ];
        let name = std::path::Path::new(path)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("?");
        println!(
            "{name:32} {:8.1} {:8.1} {:8.1} {:8.1} {:8.1} {:8.1}",
            r[0], r[1], r[2], r[3], r[4], r[5]
        );
    }
    Ok(())
}
