//! Ranking metrics of the TpuGraphs paper and the Kaggle "Google - Fast or
//! Slow? Predict AI Model Runtime" competition.
//!
//! Conventions: `pred` are model scores and `runtime` measured runtimes of the
//! same configurations, in the same order; for both, lower = faster. All
//! functions are deterministic: sorting uses `f64::total_cmp` with the two
//! zeros equal (as scipy and numpy compare; [`order_of`]), ties in the
//! prediction are broken by configuration index (the lower index is taken as
//! predicted faster), as the competition's `argsort` on a submission does.
//!
//! - [`kendall_tau`]: Kendall's tau-b with ties, exactly as
//!   `scipy.stats.kendalltau(pred, runtime)` (default `variant='b'`), computed
//!   in O(n log n) (Knight's algorithm). `None` where scipy returns NaN (fewer
//!   than two configurations, or all values of one side tied).
//! - [`ordered_pair_accuracy`]: the paper's OPA, the share of pairs with
//!   different runtimes whose prediction orders them the same way strictly
//!   (a tie in the prediction counts as wrong).
//! - [`top_k_slowdown`]: `min runtime of the K best-predicted / min runtime - 1`
//!   (the paper's top-K error; 0 = the best configuration is among the K).
//! - [`kaggle_tile_score`]: `2 - min runtime of the 5 best-predicted / min
//!   runtime`, i.e. `1 - top_k_slowdown(5)`, per kernel; the competition's tile
//!   score is its mean over kernels.
//! - [`kaggle_layout_score`]: the competition's layout score, Kendall tau per
//!   graph averaged over graphs.
//!
//! Non-finite inputs are refused (`None`): a NaN score has no rank.

use serde::Serialize;

/// All metrics of one graph, as `hlo-cost eval` reports them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankingMetrics {
    pub num_configs: usize,
    pub kendall_tau: Option<f64>,
    pub ordered_pair_accuracy: Option<f64>,
    pub top1_slowdown: Option<f64>,
    pub top5_slowdown: Option<f64>,
    pub top10_slowdown: Option<f64>,
    pub kaggle_tile_score: Option<f64>,
}

impl RankingMetrics {
    /// Every metric of `pred` against `runtime` (same length).
    pub fn compute(pred: &[f64], runtime: &[f64]) -> RankingMetrics {
        RankingMetrics {
            num_configs: pred.len(),
            kendall_tau: kendall_tau(pred, runtime),
            ordered_pair_accuracy: ordered_pair_accuracy(pred, runtime),
            top1_slowdown: top_k_slowdown(pred, runtime, 1),
            top5_slowdown: top_k_slowdown(pred, runtime, 5),
            top10_slowdown: top_k_slowdown(pred, runtime, 10),
            kaggle_tile_score: kaggle_tile_score(pred, runtime),
        }
    }
}

fn valid(pred: &[f64], runtime: &[f64]) -> bool {
    pred.len() == runtime.len() && pred.iter().chain(runtime).all(|v| v.is_finite())
}

/// Pair counts of two rankings (n0 = all pairs, ties in x, ties in y, joint ties,
/// discordant pairs), as Knight's algorithm computes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PairCounts {
    pairs: u64,
    ties_x: u64,
    ties_y: u64,
    ties_xy: u64,
    discordant: u64,
}

impl PairCounts {
    /// Strictly concordant pairs: ordered the same way in x and y, tied in neither.
    fn concordant(&self) -> u64 {
        self.pairs - self.ties_x - self.ties_y + self.ties_xy - self.discordant
    }
}

fn tied_pairs(run: u64) -> u64 {
    run * (run.saturating_sub(1)) / 2
}

/// The order of two finite values: `f64::total_cmp`, but `-0.0 == 0.0`
/// (a model's scores hold both; scipy and numpy take them as tied).
fn order_of(a: f64, b: f64) -> std::cmp::Ordering {
    (a + 0.0).total_cmp(&(b + 0.0))
}

fn pair_counts(x: &[f64], y: &[f64]) -> PairCounts {
    let n = x.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| order_of(x[a], x[b]).then(order_of(y[a], y[b])));
    // Ties in x and joint ties, counted over runs of the (x, y)-sorted order.
    let (mut ties_x, mut ties_xy) = (0u64, 0u64);
    let (mut run_x, mut run_xy) = (1u64, 1u64);
    for w in order.windows(2) {
        let (a, b) = (w[0], w[1]);
        if x[a] == x[b] {
            run_x += 1;
            if y[a] == y[b] {
                run_xy += 1;
            } else {
                ties_xy += tied_pairs(run_xy);
                run_xy = 1;
            }
        } else {
            ties_x += tied_pairs(run_x);
            ties_xy += tied_pairs(run_xy);
            run_x = 1;
            run_xy = 1;
        }
    }
    if n > 0 {
        ties_x += tied_pairs(run_x);
        ties_xy += tied_pairs(run_xy);
    }
    // Discordant pairs = inversions of y in this order (merge sort; equal y are
    // not inversions).
    let mut ys: Vec<f64> = order.iter().map(|&i| y[i]).collect();
    let mut buf = vec![0.0; n];
    let discordant = merge_count(&mut ys, &mut buf);
    // ys is now sorted: ties in y.
    let mut ties_y = 0u64;
    let mut run = 1u64;
    for w in ys.windows(2) {
        if w[0] == w[1] {
            run += 1;
        } else {
            ties_y += tied_pairs(run);
            run = 1;
        }
    }
    if n > 0 {
        ties_y += tied_pairs(run);
    }
    PairCounts {
        pairs: tied_pairs(n as u64),
        ties_x,
        ties_y,
        ties_xy,
        discordant,
    }
}

/// Sorts `v` ascending and returns the number of strict inversions.
fn merge_count(v: &mut [f64], buf: &mut [f64]) -> u64 {
    let n = v.len();
    if n < 2 {
        return 0;
    }
    let mid = n / 2;
    let mut count = {
        let (l, r) = v.split_at_mut(mid);
        let (bl, br) = buf.split_at_mut(mid);
        merge_count(l, bl) + merge_count(r, br)
    };
    let (mut i, mut j, mut k) = (0, mid, 0);
    while i < mid && j < n {
        if v[j] < v[i] {
            buf[k] = v[j];
            count += (mid - i) as u64;
            j += 1;
        } else {
            buf[k] = v[i];
            i += 1;
        }
        k += 1;
    }
    buf[k..k + mid - i].copy_from_slice(&v[i..mid]);
    k += mid - i;
    buf[k..k + n - j].copy_from_slice(&v[j..n]);
    v.copy_from_slice(&buf[..n]);
    count
}

/// Kendall's tau-b between predictions and runtimes (scipy's default variant).
pub fn kendall_tau(pred: &[f64], runtime: &[f64]) -> Option<f64> {
    if !valid(pred, runtime) || pred.len() < 2 {
        return None;
    }
    let c = pair_counts(pred, runtime);
    let xtie = c.ties_x as f64;
    let ytie = c.ties_y as f64;
    let tot = c.pairs as f64;
    if xtie == tot || ytie == tot {
        return None;
    }
    let con_minus_dis = tot - xtie - ytie + c.ties_xy as f64 - 2.0 * c.discordant as f64;
    let tau = con_minus_dis / ((tot - xtie).sqrt() * (tot - ytie).sqrt());
    Some(tau.clamp(-1.0, 1.0))
}

/// Ordered pair accuracy: among pairs with different runtimes, the share the
/// prediction orders the same way (strictly). `None` when no pair has
/// different runtimes.
pub fn ordered_pair_accuracy(pred: &[f64], runtime: &[f64]) -> Option<f64> {
    if !valid(pred, runtime) {
        return None;
    }
    let c = pair_counts(pred, runtime);
    let different = c.pairs - c.ties_y;
    (different > 0).then(|| c.concordant() as f64 / different as f64)
}

/// The configuration indices sorted from predicted fastest to slowest (ties by index).
pub fn predicted_order(pred: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..pred.len()).collect();
    order.sort_by(|&a, &b| order_of(pred[a], pred[b]).then(a.cmp(&b)));
    order
}

/// `min runtime of the K best-predicted / min runtime - 1`. `None` for no
/// configurations, `k == 0`, or a non-positive best runtime.
pub fn top_k_slowdown(pred: &[f64], runtime: &[f64], k: usize) -> Option<f64> {
    if !valid(pred, runtime) || pred.is_empty() || k == 0 {
        return None;
    }
    let best = runtime.iter().copied().fold(f64::INFINITY, f64::min);
    if best <= 0.0 {
        return None;
    }
    let best_of_k = predicted_order(pred)
        .into_iter()
        .take(k)
        .map(|i| runtime[i])
        .fold(f64::INFINITY, f64::min);
    Some(best_of_k / best - 1.0)
}

/// The competition's per-kernel tile score: `2 - min runtime of the top 5
/// predicted / min runtime` (1 = best configuration among the 5).
pub fn kaggle_tile_score(pred: &[f64], runtime: &[f64]) -> Option<f64> {
    top_k_slowdown(pred, runtime, 5).map(|s| 1.0 - s)
}

/// The competition's layout score: Kendall tau per graph, averaged over the
/// graphs where it is defined. `None` when it is defined for none.
pub fn kaggle_layout_score<'a>(
    graphs: impl IntoIterator<Item = (&'a [f64], &'a [f64])>,
) -> Option<f64> {
    mean(graphs.into_iter().map(|(p, r)| kendall_tau(p, r)))
}

/// Mean of the defined values (`None` when none is defined).
pub fn mean(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let (sum, n) = values
        .into_iter()
        .flatten()
        .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two zeros are one value, as scipy and numpy compare them: a tie
    /// in the prediction, broken by index.
    #[test]
    fn negative_zero_ties_with_zero() {
        let runtime = [5.0, 1.0, 2.0, 3.0];
        let signed = [-0.0, 0.0, 1.0, -0.0];
        let plain = [0.0, 0.0, 1.0, 0.0];
        assert_eq!(
            kendall_tau(&signed, &runtime),
            kendall_tau(&plain, &runtime)
        );
        assert_eq!(
            ordered_pair_accuracy(&signed, &runtime),
            ordered_pair_accuracy(&plain, &runtime)
        );
        assert_eq!(predicted_order(&[0.0, -0.0]), vec![0, 1]);
        assert_eq!(top_k_slowdown(&[0.0, -0.0], &[1.0, 2.0], 1), Some(0.0));
    }

    /// O(n^2) pair counting, the definition itself.
    fn brute(x: &[f64], y: &[f64]) -> PairCounts {
        let mut c = PairCounts {
            pairs: 0,
            ties_x: 0,
            ties_y: 0,
            ties_xy: 0,
            discordant: 0,
        };
        for i in 0..x.len() {
            for j in i + 1..x.len() {
                c.pairs += 1;
                let (tx, ty) = (x[i] == x[j], y[i] == y[j]);
                c.ties_x += u64::from(tx);
                c.ties_y += u64::from(ty);
                c.ties_xy += u64::from(tx && ty);
                if !tx && !ty && ((x[i] < x[j]) != (y[i] < y[j])) {
                    c.discordant += 1;
                }
            }
        }
        c
    }

    #[test]
    fn knight_pair_counts_equal_the_quadratic_definition() {
        // A deterministic pseudo-random sequence with many ties.
        let mut s = 12345u64;
        let mut next = |m: u64| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % m) as f64
        };
        for n in [0, 1, 2, 3, 10, 57, 200] {
            for m in [2, 5, 1000] {
                let x: Vec<f64> = (0..n).map(|_| next(m)).collect();
                let y: Vec<f64> = (0..n).map(|_| next(m)).collect();
                assert_eq!(pair_counts(&x, &y), brute(&x, &y), "n={n} m={m}");
            }
        }
    }

    #[test]
    fn slowdown_takes_prediction_ties_by_index() {
        // Configs 0 and 1 tie on prediction; 0 is taken first.
        let pred = [1.0, 1.0, 2.0];
        let runtime = [20.0, 10.0, 30.0];
        assert_eq!(top_k_slowdown(&pred, &runtime, 1), Some(1.0));
        assert_eq!(top_k_slowdown(&pred, &runtime, 2), Some(0.0));
    }

    #[test]
    fn undefined_cases_are_none() {
        assert_eq!(kendall_tau(&[1.0], &[1.0]), None);
        assert_eq!(kendall_tau(&[1.0, 1.0], &[1.0, 2.0]), None);
        assert_eq!(kendall_tau(&[1.0, f64::NAN], &[1.0, 2.0]), None);
        assert_eq!(ordered_pair_accuracy(&[1.0, 2.0], &[3.0, 3.0]), None);
        assert_eq!(top_k_slowdown(&[], &[], 5), None);
        assert_eq!(top_k_slowdown(&[1.0], &[0.0], 5), None);
        assert_eq!(kendall_tau(&[1.0, 2.0], &[1.0]), None);
    }
}
