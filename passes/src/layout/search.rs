//! Search over the product of the configurable nodes' candidate lists with
//! the cost model as fitness, scoring candidates in batches.
//!
//! A configuration is a *genome*: one candidate index per configurable node.
//! - exhaustive enumeration (mixed radix, node 0 most significant) when the
//!   product space fits in the budget;
//! - otherwise a batched neighbourhood sweep around the compiler default
//!   (every single-node change, then their per-node best combined), which
//!   seeds a genetic search (tournament selection, uniform crossover,
//!   per-gene mutation, elitist replacement), as XLA's autotuner seeds its
//!   search with the compiler default.
//!
//! Scores are batch-relative: the layout model attends across the
//! configurations of one `score` call (costmodel/MODEL.md), so two scores
//! are only comparable when they come from the same call. The search itself
//! compares scores from different calls (a heuristic), but the final choice
//! does not: when the search took more than one call, the best distinct
//! configurations seen (at most [`FINAL`], the compiler default first, the
//! search's best always among them) are rescored together in one call, and
//! the choice and the reported scores ([`Outcome::best_score`],
//! [`Outcome::default_score`], [`Outcome::ranked`]) all come from that call.
//!
//! Invariants: at most `budget` configurations are scored in all, counting
//! the final rescoring (a part of the budget is reserved for it; budgets
//! under 4 reserve none and skip it); the default always is scored, even
//! with a budget of 0; the same sizes, default, fitness and seed give the
//! same result (ChaCha8 RNG, no hash map iteration, ties broken by
//! `f32::total_cmp` then first-scored order, the default first).

use std::collections::HashSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::PassError;

/// Scores configurations; lower is predicted faster.
pub trait Fitness {
    fn score(&mut self, genomes: &[Vec<u16>]) -> Result<Vec<f32>, PassError>;
}

/// How the search ran.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Method {
    /// Only one configuration exists.
    Trivial,
    Exhaustive,
    Genetic,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Trivial => "trivial (one configuration)",
            Method::Exhaustive => "exhaustive",
            Method::Genetic => "genetic (seeded with the compiler default)",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Outcome {
    pub best: Vec<u16>,
    pub best_score: f32,
    pub default_score: f32,
    /// Distinct configurations scored by the search.
    pub scored: usize,
    /// Configurations rescored together at the end (0: the search took a
    /// single model call, its scores are already comparable).
    pub rescored: usize,
    pub method: Method,
    /// Size of the product space (saturating).
    pub space: u128,
    /// The best distinct configurations scored, best first (at most `keep`;
    /// scores from the final rescoring when there was one).
    pub ranked: Vec<(Vec<u16>, f32)>,
}

/// Most configurations per model call.
pub const BATCH: usize = 256;

/// Most configurations rescored together at the end of a search.
pub const FINAL: usize = 64;

/// Most node-configurations (configurations x configurable nodes) one model
/// call carries: the feature matrix of a call (18 f32 per cell) and the
/// layout head's intermediates (about 300 bytes per cell in all) grow with
/// it, so it bounds the memory of a call (about 150 MB) whatever the module.
pub const MAX_CALL_CELLS: usize = 1 << 19;

/// Configurations per model call for a module with `nodes` configurable
/// nodes: [`BATCH`], fewer when the call would exceed [`MAX_CALL_CELLS`],
/// never fewer than 2.
pub fn configs_per_call(nodes: usize) -> usize {
    (MAX_CALL_CELLS / nodes.max(1)).clamp(2, BATCH)
}

/// The part of `budget` reserved for the final rescoring.
fn final_reserve(budget: usize) -> usize {
    if budget < 4 {
        0
    } else {
        (budget / 4).clamp(2, FINAL)
    }
}

/// A 128-bit fingerprint of a genome: the search remembers which genomes it
/// scored by fingerprint, not by copy, so that its memory does not grow with
/// budget x nodes. SipHash with fixed keys (deterministic); two genomes
/// sharing a fingerprint (probability about n^2 / 2^129 for n genomes, below
/// 1e-28 for a billion) would make the search skip the second one.
fn fingerprint(g: &[u16]) -> u128 {
    use std::hash::{Hash, Hasher};
    let half = |salt: u8| {
        #[allow(deprecated)]
        let mut h = std::hash::SipHasher::new_with_keys(0x686c_6f2d_6f70_7431, u64::from(salt));
        g.hash(&mut h);
        h.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

/// A scored genome: genome, score, scoring order (ties go to the first scored).
type Scored = (Vec<u16>, f32, usize);

struct State<'f> {
    fitness: &'f mut dyn Fitness,
    /// Fingerprints of every genome scored (only looked up, never iterated).
    seen: HashSet<u128>,
    /// Genomes scored so far.
    scored: usize,
    /// The best `top_cap` genomes scored, best first (score, then order).
    top: Vec<Scored>,
    top_cap: usize,
    budget: usize,
    /// Configurations per model call.
    batch: usize,
    /// Model calls made.
    calls: usize,
    progress: &'f mut dyn FnMut(usize),
}

impl State<'_> {
    fn left(&self) -> usize {
        self.budget.saturating_sub(self.scored)
    }
    fn seen(&self, g: &[u16]) -> bool {
        self.seen.contains(&fingerprint(g))
    }
    /// Scores the genomes not seen yet (within the budget), in calls of
    /// `batch`; returns them with their scores and scoring order.
    fn score(&mut self, genomes: Vec<Vec<u16>>) -> Result<Vec<Scored>, PassError> {
        let mut fresh: Vec<Vec<u16>> = Vec::new();
        let mut keys: HashSet<u128> = HashSet::new();
        for g in genomes {
            if fresh.len() >= self.left() {
                break;
            }
            let k = fingerprint(&g);
            if !self.seen.contains(&k) && keys.insert(k) {
                fresh.push(g);
            }
        }
        let mut out = Vec::with_capacity(fresh.len());
        for chunk in fresh.chunks(self.batch.max(1)) {
            let scores = score_checked(self.fitness, chunk)?;
            self.calls += 1;
            for (g, s) in chunk.iter().zip(scores) {
                self.seen.insert(fingerprint(g));
                let k = self.scored;
                self.scored += 1;
                self.offer(g, s, k);
                out.push((g.clone(), s, k));
            }
            (self.progress)(self.scored);
        }
        Ok(out)
    }
    /// Keeps `g` among the best `top_cap` when it belongs there.
    fn offer(&mut self, g: &[u16], s: f32, k: usize) {
        // Later genomes go after earlier ones of the same score.
        let at = self.top.partition_point(|x| x.1.total_cmp(&s).is_le());
        if at < self.top_cap {
            self.top.insert(at, (g.to_vec(), s, k));
            self.top.truncate(self.top_cap);
        }
    }
    /// The `n` best scored genomes, best first (ties: first scored); at most
    /// `top_cap`.
    fn ranked(&self, n: usize) -> Vec<(Vec<u16>, f32)> {
        self.top
            .iter()
            .take(n.max(1))
            .map(|(g, s, _)| (g.clone(), *s))
            .collect()
    }
}

/// Scores `genomes` in one call, checking the count; NaN becomes +inf.
fn score_checked(fitness: &mut dyn Fitness, genomes: &[Vec<u16>]) -> Result<Vec<f32>, PassError> {
    let scores = fitness.score(genomes)?;
    if scores.len() != genomes.len() {
        return Err(PassError::Failed {
            pass: "layout",
            message: format!(
                "the cost model returned {} scores for {} configurations",
                scores.len(),
                genomes.len()
            ),
        });
    }
    Ok(scores
        .into_iter()
        .map(|s| if s.is_nan() { f32::INFINITY } else { s })
        .collect())
}

/// Searches for the lowest-scoring genome. `sizes[j]` is the number of
/// candidates of node `j`, `default[j]` the compiler default's index.
pub fn search(
    sizes: &[usize],
    default: &[u16],
    fitness: &mut dyn Fitness,
    budget: usize,
    seed: u64,
    progress: &mut dyn FnMut(usize),
) -> Result<Outcome, PassError> {
    search_top(sizes, default, fitness, budget, seed, 1, BATCH, progress)
}

/// [`search`], also keeping the `keep` best configurations in
/// [`Outcome::ranked`], scoring at most `batch` configurations per model call
/// (see [`configs_per_call`]).
///
/// Memory: the search keeps 16 bytes per configuration scored plus
/// `max(keep, FINAL + 1, population)` genomes; each model call builds the
/// features of at most `batch` configurations. Nothing it holds grows with
/// the square of the number of nodes.
#[allow(clippy::too_many_arguments)]
pub fn search_top(
    sizes: &[usize],
    default: &[u16],
    fitness: &mut dyn Fitness,
    budget: usize,
    seed: u64,
    keep: usize,
    batch: usize,
    progress: &mut dyn FnMut(usize),
) -> Result<Outcome, PassError> {
    let space = sizes
        .iter()
        .fold(1u128, |a, &s| a.saturating_mul(s.max(1) as u128));
    let budget = budget.max(1);
    let batch = batch.max(1);
    // The finalists are rescored in one call: no more of them than a call holds.
    let reserve = final_reserve(budget).min(batch);
    let reserve = if reserve < 2 { 0 } else { reserve };
    let mut st = State {
        fitness,
        seen: HashSet::new(),
        scored: 0,
        top: Vec::new(),
        top_cap: keep.max(reserve + 1).max(POPULATION),
        budget: budget - reserve,
        batch,
        calls: 0,
        progress,
    };
    let first = st.score(vec![default.to_vec()])?;
    let default_score = first.first().map_or(f32::INFINITY, |x| x.1);
    let method = if space <= 1 {
        Method::Trivial
    } else if space <= st.budget as u128 {
        exhaustive(&mut st, sizes)?;
        Method::Exhaustive
    } else {
        genetic(&mut st, sizes, default, default_score, seed)?;
        Method::Genetic
    };
    if st.calls <= 1 || reserve < 2 {
        let ranked = st.ranked(keep);
        let (best, best_score) = ranked[0].clone();
        return Ok(Outcome {
            best,
            best_score,
            default_score,
            scored: st.scored,
            rescored: 0,
            method,
            space,
            ranked,
        });
    }
    // Scores from different calls are not comparable (module doc): rescore
    // the finalists in one call and decide on that call alone. The default
    // is finalist 0, so it wins ties.
    let mut finalists: Vec<Vec<u16>> = vec![default.to_vec()];
    for (g, _) in st.ranked(st.top_cap) {
        if finalists.len() >= reserve.min(st.scored) {
            break;
        }
        if g != default {
            finalists.push(g);
        }
    }
    let scores = score_checked(st.fitness, &finalists)?;
    let mut order: Vec<usize> = (0..finalists.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(a.cmp(&b)));
    let ranked: Vec<(Vec<u16>, f32)> = order
        .iter()
        .take(keep.max(1))
        .map(|&k| (finalists[k].clone(), scores[k]))
        .collect();
    let (best, best_score) = ranked[0].clone();
    Ok(Outcome {
        best,
        best_score,
        default_score: scores[0],
        scored: st.scored,
        rescored: finalists.len(),
        method,
        space,
        ranked,
    })
}

fn exhaustive(st: &mut State<'_>, sizes: &[usize]) -> Result<(), PassError> {
    let mut g = vec![0u16; sizes.len()];
    let mut pending = Vec::with_capacity(st.batch);
    loop {
        pending.push(g.clone());
        if pending.len() == st.batch {
            st.score(std::mem::take(&mut pending))?;
        }
        // Next in mixed radix, last node least significant.
        let mut j = sizes.len();
        loop {
            if j == 0 {
                st.score(pending)?;
                return Ok(());
            }
            j -= 1;
            if (g[j] as usize) + 1 < sizes[j] {
                g[j] += 1;
                break;
            }
            g[j] = 0;
        }
    }
}

/// Largest genetic population.
const POPULATION: usize = 64;

fn genetic(
    st: &mut State<'_>,
    sizes: &[usize],
    default: &[u16],
    base: f32,
    seed: u64,
) -> Result<(), PassError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let free: Vec<usize> = (0..sizes.len()).filter(|&j| sizes[j] > 1).collect();

    // 1. Neighbourhood of the default: every single-node change (as far as
    //    half the budget allows), then the per-node best changes combined.
    //    The neighbours are built one call at a time (all of them at once
    //    would be nodes x candidates genomes of nodes genes each).
    let count = free
        .iter()
        .fold(0usize, |n, &j| n.saturating_add(sizes[j] - 1));
    if count <= st.left() / 2 {
        // Per node, the best single change scoring below the default.
        let mut best: Vec<Option<(u16, f32)>> = vec![None; sizes.len()];
        let mut pending: Vec<(usize, u16)> = Vec::with_capacity(st.batch);
        let mut flush = |st: &mut State<'_>, pending: &mut Vec<(usize, u16)>| {
            let genomes: Vec<Vec<u16>> = pending
                .iter()
                .map(|&(j, c)| {
                    let mut g = default.to_vec();
                    g[j] = c;
                    g
                })
                .collect();
            for (g, s, _) in st.score(genomes)? {
                // Single changes: the node is where the genome leaves the default.
                if let Some(j) = (0..g.len()).find(|&j| g[j] != default[j]) {
                    if s < base && best[j].is_none_or(|(_, b)| s.total_cmp(&b).is_lt()) {
                        best[j] = Some((g[j], s));
                    }
                }
            }
            pending.clear();
            Ok::<(), PassError>(())
        };
        for &j in &free {
            for c in 0..sizes[j] as u16 {
                if c != default[j] {
                    pending.push((j, c));
                    if pending.len() == st.batch {
                        flush(st, &mut pending)?;
                    }
                }
            }
        }
        flush(st, &mut pending)?;
        let mut combined = default.to_vec();
        let mut half = default.to_vec();
        for &j in &free {
            if let Some((c, _)) = best[j] {
                combined[j] = c;
                if rng.gen_bool(0.5) {
                    half[j] = c;
                }
            }
        }
        st.score(vec![combined, half])?;
    }

    // 2. Genetic search.
    let pop_size = POPULATION.min(st.budget / 4).max(8);
    let mut pop: Vec<Scored> = Vec::new();
    let mut init: Vec<Vec<u16>> = Vec::new();
    for k in 0..pop_size {
        let mut g = default.to_vec();
        if k % 2 == 0 {
            for _ in 0..1 + k % 4 {
                mutate_one(&mut g, sizes, &free, &mut rng);
            }
        } else {
            for &j in &free {
                g[j] = rng.gen_range(0..sizes[j] as u16);
            }
        }
        init.push(g);
    }
    st.score(init)?;
    refill(&mut pop, st, pop_size);
    let rate = 1.0 / free.len().max(1) as f64;
    let mut stale = 0;
    while st.left() > 0 && stale < 8 {
        let mut children: Vec<Vec<u16>> = Vec::new();
        let want = pop_size.min(st.left());
        let mut tries = 0;
        while children.len() < want && tries < want * 8 {
            tries += 1;
            let a = tournament(&pop, &mut rng);
            let b = tournament(&pop, &mut rng);
            let mut g: Vec<u16> = (0..sizes.len())
                .map(|j| {
                    if rng.gen_bool(0.5) {
                        pop[a].0[j]
                    } else {
                        pop[b].0[j]
                    }
                })
                .collect();
            for &j in &free {
                if rng.gen_bool(rate) {
                    g[j] = rng.gen_range(0..sizes[j] as u16);
                }
            }
            let mut extra = 0;
            while (st.seen(&g) || children.contains(&g)) && extra < 4 {
                mutate_one(&mut g, sizes, &free, &mut rng);
                extra += 1;
            }
            if !st.seen(&g) && !children.contains(&g) {
                children.push(g);
            }
        }
        if children.is_empty() {
            stale += 1;
            continue;
        }
        stale = 0;
        pop.extend(st.score(children)?);
        pop.sort_by(|x, y| x.1.total_cmp(&y.1).then(x.2.cmp(&y.2)));
        pop.truncate(pop_size);
    }
    Ok(())
}

/// The population: the best `n` scored so far (`n` <= [`POPULATION`] <= `top_cap`).
fn refill(pop: &mut Vec<Scored>, st: &State<'_>, n: usize) {
    pop.clear();
    pop.extend(st.top.iter().take(n).cloned());
}

fn tournament(pop: &[Scored], rng: &mut ChaCha8Rng) -> usize {
    let a = rng.gen_range(0..pop.len());
    let b = rng.gen_range(0..pop.len());
    a.min(b) // the population is sorted best first
}

fn mutate_one(g: &mut [u16], sizes: &[usize], free: &[usize], rng: &mut ChaCha8Rng) {
    if free.is_empty() {
        return;
    }
    let j = free[rng.gen_range(0..free.len())];
    let n = sizes[j] as u16;
    let step = rng.gen_range(1..n);
    g[j] = (g[j] + step) % n;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An additive fitness with a known optimum, counting calls.
    struct Additive {
        weights: Vec<Vec<f32>>,
        calls: usize,
        max_batch: usize,
    }
    impl Fitness for Additive {
        fn score(&mut self, genomes: &[Vec<u16>]) -> Result<Vec<f32>, PassError> {
            self.calls += 1;
            self.max_batch = self.max_batch.max(genomes.len());
            Ok(genomes
                .iter()
                .map(|g| {
                    g.iter()
                        .enumerate()
                        .map(|(j, &c)| self.weights[j][c as usize])
                        .sum()
                })
                .collect())
        }
    }

    fn additive(sizes: &[usize]) -> Additive {
        let weights = sizes
            .iter()
            .enumerate()
            .map(|(j, &n)| (0..n).map(|c| ((j * 7 + c * 13) % 11) as f32).collect())
            .collect();
        Additive {
            weights,
            calls: 0,
            max_batch: 0,
        }
    }

    fn optimum(f: &Additive) -> f32 {
        f.weights
            .iter()
            .map(|w| w.iter().copied().fold(f32::INFINITY, f32::min))
            .sum()
    }

    #[test]
    fn small_spaces_are_searched_exhaustively() {
        let sizes = [2, 3, 4];
        let mut f = additive(&sizes);
        let out = search(&sizes, &[0, 0, 0], &mut f, 100, 0, &mut |_| {}).expect("search");
        assert_eq!(out.method, Method::Exhaustive);
        assert_eq!(out.scored, 24);
        assert_eq!(out.best_score, optimum(&f));
    }

    #[test]
    fn budget_bounds_scored_configurations() {
        let sizes = vec![8; 40];
        let mut f = additive(&sizes);
        let out = search(&sizes, &[0; 40], &mut f, 500, 1, &mut |_| {}).expect("search");
        assert_eq!(out.method, Method::Genetic);
        assert!(out.scored <= 500, "scored {}", out.scored);
        assert!(f.max_batch <= BATCH);
        assert!(out.best_score <= out.default_score);
    }

    #[test]
    fn genetic_search_finds_the_optimum_of_an_additive_model() {
        let sizes = vec![8; 53];
        let mut f = additive(&sizes);
        let out = search(&sizes, &[0; 53], &mut f, 10_000, 7, &mut |_| {}).expect("search");
        assert_eq!(out.best_score, optimum(&f));
    }

    #[test]
    fn same_seed_same_result_different_seed_may_differ() {
        let sizes = vec![5; 30];
        let run = |seed| {
            let mut f = additive(&sizes);
            // A budget too small for the sweep: pure genetic search.
            search(&sizes, &[0; 30], &mut f, 100, seed, &mut |_| {}).expect("search")
        };
        let (a, b) = (run(3), run(3));
        assert_eq!(a.best, b.best);
        assert_eq!(a.scored, b.scored);
    }

    /// The additive fitness plus an offset that depends on the call: each
    /// call's scores are shifted by `-1000 / batch size`, as a model with
    /// attention across the batch shifts scores between calls.
    struct BatchRelative {
        inner: Additive,
        configs: usize,
    }
    impl Fitness for BatchRelative {
        fn score(&mut self, genomes: &[Vec<u16>]) -> Result<Vec<f32>, PassError> {
            self.configs += genomes.len();
            let shift = -1000.0 / genomes.len().max(1) as f32;
            let s = self.inner.score(genomes)?;
            Ok(s.into_iter().map(|x| x + shift).collect())
        }
    }

    #[test]
    fn the_choice_and_both_reported_scores_come_from_one_final_call() {
        let sizes = vec![6; 12];
        let default = vec![0u16; 12];
        let mut f = BatchRelative {
            inner: additive(&sizes),
            configs: 0,
        };
        let out = search(&sizes, &default, &mut f, 400, 5, &mut |_| {}).expect("search");
        // The default, scored alone first, looks 1000 better than anything
        // else; only a common final call shows that it is not the best.
        assert!(out.rescored >= 2 && out.rescored <= FINAL);
        assert!(f.configs <= 400, "scored {} configurations", f.configs);
        let mut plain = additive(&sizes);
        let truth = plain
            .score(&[default.clone(), out.best.clone()])
            .expect("scores");
        assert!(truth[1] < truth[0], "the final choice beats the default");
        assert_eq!(out.best_score - out.default_score, truth[1] - truth[0]);
        assert_eq!(out.ranked[0], (out.best.clone(), out.best_score));
    }

    #[test]
    fn zero_budget_still_scores_the_default() {
        let sizes = [4, 4];
        let mut f = additive(&sizes);
        let out = search(&sizes, &[1, 2], &mut f, 0, 0, &mut |_| {}).expect("search");
        assert_eq!(out.scored, 1);
        assert_eq!(out.best, vec![1, 2]);
    }
}
