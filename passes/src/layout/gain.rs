//! The predicted gain of a configuration over the compiler default, in
//! percent, and the floor a gain must reach to be acted on (`--min-gain`,
//! or the model's error in the trust region).

use costmodel::CostModel;

/// The smallest predicted gain, in percent, the pass acts on (a change
/// alone, or a whole configuration before its copies' price): `--min-gain`,
/// or the model's resolution when it says how far its predicted runtime
/// ratios can be trusted and that is more
/// ([`CostModel::log_runtime_resolution`]: a gain under one standard error
/// of the predicted ratio is not one the model can resolve). Part of the
/// trust region: `--trust-radius all` leaves `--min-gain` alone.
#[derive(Clone, Copy, Debug)]
pub struct Floor {
    pub pct: f64,
    pub min_gain: f64,
    /// `1 - exp(-resolution)` in percent, for a calibrated model that records
    /// its resolution.
    pub resolution_pct: Option<f64>,
}

impl Floor {
    pub fn of(min_gain: f64, model: &dyn CostModel, region: bool) -> Floor {
        let resolution_pct = match (
            model.log_runtime_per_score(),
            model.log_runtime_resolution(),
        ) {
            (Some(_), Some(r)) if region => Some((1.0 - (-r).exp()) * 100.0),
            _ => None,
        };
        Floor {
            pct: resolution_pct.map_or(min_gain, |r| r.max(min_gain)),
            min_gain,
            resolution_pct,
        }
    }

    /// What set the floor, for the reports.
    pub fn source(&self) -> String {
        match self.resolution_pct {
            Some(r) if r > self.min_gain => {
                format!("the model's error, above --min-gain {}%", self.min_gain)
            }
            _ => format!("--min-gain {}%", self.min_gain),
        }
    }
}

/// Predicted gain of `best` over `default` in percent (positive = predicted
/// faster; scores are lower-is-better): the predicted runtime saving when the
/// model says how scores map to runtime
/// ([`CostModel::log_runtime_per_score`], the shipped default does), else
/// the score difference in percent of the default's score.
pub fn gain_pct(best: f32, default: f32, log_runtime_per_score: Option<f64>) -> f64 {
    let (b, d) = (f64::from(best), f64::from(default));
    if !(b.is_finite() && d.is_finite()) {
        return if b < d { f64::INFINITY } else { 0.0 };
    }
    if let Some(k) = log_runtime_per_score {
        // The model says how scores map to runtime: predicted runtime ratio
        // best / default = exp((b - d) * k).
        return (1.0 - ((b - d) * k).exp()) * 100.0;
    }
    if d == 0.0 {
        return if b < d { f64::INFINITY } else { 0.0 };
    }
    (d - b) / d.abs() * 100.0
}

#[cfg(test)]
mod tests {
    use super::gain_pct;

    #[test]
    fn a_calibrated_gain_is_a_runtime_saving_wherever_the_scores_lie() {
        // 1 score unit lower at 0.1 log-runtime per unit: exp(-0.1) = 0.905.
        for (b, d) in [(-1.0, 0.0), (4.0, 5.0), (-14.0, -13.0)] {
            let g = gain_pct(b, d, Some(0.1));
            assert!((g - 9.516).abs() < 1e-2, "{b} vs {d}: {g}");
        }
        assert!((gain_pct(1.0, 0.0, Some(0.1)) + 10.517).abs() < 1e-2);
        // Uncalibrated: the score change relative to the default's score.
        assert!((gain_pct(4.0, 5.0, None) - 20.0).abs() < 1e-9);
        assert_eq!(gain_pct(f32::NAN, 1.0, Some(0.1)), 0.0);
    }
}
