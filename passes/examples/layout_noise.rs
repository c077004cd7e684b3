//! Measures the layout model's batch noise: how much a configuration's score,
//! and its predicted gain over the compiler default, move with the other
//! configurations of the model call (the layout head attends across the
//! batch, costmodel/MODEL.md). The default of `--min-gain`
//! (`passes::DEFAULT_MIN_GAIN`) must stay above the gain noise this prints;
//! docs/passes.md, "What the passes promise", quotes its figures.
//!
//! `cargo run -p passes --release --example layout_noise -- FILE [ROUNDS] [BATCH]`
//! (the embedded ONNX model; needs ONNX Runtime).
//!
//! Each round scores, in one call, the compiler default, a fixed
//! configuration `X` (the default with every tenth node on another
//! candidate) and `BATCH - 2` random configurations (each node off its
//! default with probability 1/2), fresh per round.

use costmodel::features::featurize;
use costmodel::Task;
use passes::layout::candidates;
use passes::layout::search::Fitness;
use passes::layout::ModelFitness;
use rand::{Rng, SeedableRng};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .ok_or("usage: layout_noise FILE [ROUNDS] [BATCH]")?;
    let rounds: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(20);
    let batch: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(64);
    let text = std::fs::read_to_string(path)?;
    let m = hlo::parse_module_named(&text, path)?;
    let f = featurize(&m, Task::Layout)?;
    let spaces = candidates::spaces(&m, &f.config_nodes);
    let model = costmodel::onnx::load_model(None, Task::Layout, 1)?;
    let mut fitness = ModelFitness::new(model.as_ref(), &f, &spaces)?;
    let default: Vec<u16> = spaces.iter().map(|s| s.default as u16).collect();
    let mut x = default.clone();
    for (j, s) in spaces.iter().enumerate() {
        if j % 10 == 0 && s.candidates.len() > 1 {
            x[j] = ((s.default + 1) % s.candidates.len()) as u16;
        }
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let (mut d_scores, mut gains) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let mut genomes = vec![default.clone(), x.clone()];
        while genomes.len() < batch.max(2) {
            let g: Vec<u16> = spaces
                .iter()
                .enumerate()
                .map(|(j, s)| {
                    if s.candidates.len() > 1 && rng.gen_bool(0.5) {
                        rng.gen_range(0..s.candidates.len() as u16)
                    } else {
                        default[j]
                    }
                })
                .collect();
            genomes.push(g);
        }
        let s = fitness.score(&genomes)?;
        d_scores.push(f64::from(s[0]));
        gains.push((f64::from(s[0]) - f64::from(s[1])) / f64::from(s[0]).abs() * 100.0);
    }
    let spread = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    };
    let (lo, hi) = spread(&d_scores);
    let mean = d_scores.iter().sum::<f64>() / d_scores.len() as f64;
    let (glo, ghi) = spread(&gains);
    println!(
        "{path}: {} configurable nodes, {rounds} calls of {batch} configurations",
        spaces.len()
    );
    println!(
        "  default's score: {lo:.4} .. {hi:.4} (spread {:.3}% of its mean)",
        (hi - lo) / mean.abs() * 100.0
    );
    println!(
        "  predicted gain of X over the default, same call: {glo:+.3}% .. {ghi:+.3}% (spread {:.3} points)",
        ghi - glo
    );
    Ok(())
}
