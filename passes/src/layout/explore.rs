//! Search: the product space of the nodes' candidates explored with the
//! model as fitness, inside the trust region ([`search::Region`]: at most
//! `--trust-radius` nodes changed, each change alone predicted to gain the
//! floor; `--trust-radius all` lifts both). The algorithms are [`search`]'s.

use costmodel::CostModel;

use super::candidates::NodeSpace;
use super::fitness::ModelFitness;
use super::gain::{gain_pct, Floor};
use super::progress::SearchBar;
use super::search::{self, Outcome};
use crate::{PassContext, PassError};

/// What the search found, and what it was searched with.
pub(super) struct Searched {
    pub outcome: Outcome,
    /// The compiler default's configuration.
    pub default: Vec<u16>,
    /// Seconds the search took.
    pub secs: f64,
    /// Configurations per model call.
    pub batch: usize,
    /// The smallest predicted gain acted on.
    pub floor: Floor,
}

/// Whether the candidates are measured (`--measure`, a measurer).
pub(super) fn measuring(cx: &PassContext) -> bool {
    cx.options.measure.is_some() || cx.options.measurer.is_some()
}

pub(super) fn explore(
    spaces: &[NodeSpace],
    fitness: &mut ModelFitness<'_>,
    model: &dyn CostModel,
    cx: &PassContext,
) -> Result<Searched, PassError> {
    let sizes: Vec<usize> = spaces.iter().map(|s| s.candidates.len()).collect();
    let default: Vec<u16> = spaces.iter().map(|s| s.default as u16).collect();
    let budget = cx.options.budget;
    let batch = search::configs_per_call(spaces.len());
    let mut bar = SearchBar::new(cx.options.progress, budget);
    let measuring = measuring(cx);
    let keep = if measuring {
        cx.options.top_k.max(1)
    } else {
        1
    };
    // The per-change check: a change is kept when, alone, it is
    // predicted to gain --min-gain (a gain of zero never). Measured
    // candidates stand on their measurement instead.
    let floor = Floor::of(
        cx.options.min_gain,
        model,
        cx.options.trust_radius.is_some(),
    );
    let calibration = model.log_runtime_per_score();
    let keeps = |alone: f32, base: f32| {
        let g = gain_pct(alone, base, calibration);
        g > 0.0 && g >= floor.pct
    };
    // `--trust-radius all` lifts the whole trust region, the check too.
    let region = search::Region {
        radius: cx.options.trust_radius,
        keeps: if measuring || cx.options.trust_radius.is_none() {
            None
        } else {
            Some(&keeps)
        },
    };
    let outcome = search::search_top(
        &sizes,
        &default,
        fitness,
        budget,
        cx.options.seed,
        keep,
        batch,
        region,
        &mut |done| bar.tick(done),
    )?;
    Ok(Searched {
        outcome,
        default,
        secs: bar.finish(),
        batch,
        floor,
    })
}
