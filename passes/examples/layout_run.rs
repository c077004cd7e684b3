//! Runs the layout pass on one HLO file with the reference model and prints
//! the `--explain` report to stderr and the module to stdout.
//!
//! `cargo run -p passes --release --example layout_run -- FILE [BUDGET] [SEED]`

use passes::layout::LayoutPass;
use passes::{Pass, PassContext, PassOptions};

/// The reference model with its order reversed: prefers layouts far from the
/// default (exercises propagation and copies). Set `LAYOUT_ANTI=1`.
struct Negated(costmodel::reference::ReferenceModel);

impl costmodel::CostModel for Negated {
    fn task(&self) -> costmodel::Task {
        self.0.task()
    }
    fn prepare(&self, g: &costmodel::Graph) -> costmodel::Result<costmodel::Prepared> {
        self.0.prepare(g)
    }
    fn score(
        &self,
        p: &costmodel::Prepared,
        c: &costmodel::ConfigBatch,
    ) -> costmodel::Result<Vec<f32>> {
        Ok(self.0.score(p, c)?.into_iter().map(|s| -s).collect())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .ok_or("usage: layout_run FILE [BUDGET] [SEED]")?;
    let budget = args
        .get(2)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(10_000);
    let seed = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(0);
    let text = std::fs::read_to_string(path)?;
    let mut m = hlo::parse_module_named(&text, path)?;
    let mut cx = PassContext::new(PassOptions {
        budget,
        seed,
        explain: true,
        progress: true,
        ..Default::default()
    });
    let reference = costmodel::reference::ReferenceModel::new(costmodel::Task::Layout);
    let mut pass = if std::env::var_os("LAYOUT_ANTI").is_some() {
        LayoutPass::with_model(Box::new(Negated(reference)))
    } else {
        LayoutPass::with_model(Box::new(reference))
    };
    let t = std::time::Instant::now();
    let changed = pass.run(&mut m, &mut cx)?;
    eprintln!("{}", cx.explain);
    eprintln!("changed: {changed}; {:.2} s", t.elapsed().as_secs_f64());
    passes::verify_module(&m)?;
    print!("{}", hlo::print_module(&m));
    Ok(())
}
