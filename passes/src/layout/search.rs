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

use std::collections::HashMap;

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

/// Configurations per model call.
pub const BATCH: usize = 256;

/// Most configurations rescored together at the end of a search.
pub const FINAL: usize = 64;

/// The part of `budget` reserved for the final rescoring.
fn final_reserve(budget: usize) -> usize {
    if budget < 4 {
        0
    } else {
        (budget / 4).clamp(2, FINAL)
    }
}

struct State<'f> {
    fitness: &'f mut dyn Fitness,
    cache: HashMap<Vec<u16>, f32>,
    /// Every scored genome in scoring order (for deterministic tie breaks).
    log: Vec<(Vec<u16>, f32)>,
    budget: usize,
    /// Model calls made.
    calls: usize,
    progress: &'f mut dyn FnMut(usize),
}

impl State<'_> {
    fn left(&self) -> usize {
        self.budget.saturating_sub(self.log.len())
    }
    /// Scores the genomes not seen yet (within the budget), in batches.
    fn score(&mut self, genomes: Vec<Vec<u16>>) -> Result<(), PassError> {
        let mut fresh: Vec<Vec<u16>> = Vec::new();
        for g in genomes {
            if fresh.len() >= self.left() {
                break;
            }
            if !self.cache.contains_key(&g) && !fresh.contains(&g) {
                fresh.push(g);
            }
        }
        for chunk in fresh.chunks(BATCH) {
            let scores = score_checked(self.fitness, chunk)?;
            self.calls += 1;
            for (g, s) in chunk.iter().zip(scores) {
                self.cache.insert(g.clone(), s);
                self.log.push((g.clone(), s));
            }
            (self.progress)(self.log.len());
        }
        Ok(())
    }
    /// The `n` best scored genomes, best first (ties: first scored).
    fn ranked(&self, n: usize) -> Vec<(Vec<u16>, f32)> {
        let mut idx: Vec<usize> = (0..self.log.len()).collect();
        idx.sort_by(|&a, &b| self.log[a].1.total_cmp(&self.log[b].1).then(a.cmp(&b)));
        idx.into_iter()
            .take(n.max(1))
            .map(|k| self.log[k].clone())
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
    search_top(sizes, default, fitness, budget, seed, 1, progress)
}

/// [`search`], also keeping the `keep` best configurations in [`Outcome::ranked`].
pub fn search_top(
    sizes: &[usize],
    default: &[u16],
    fitness: &mut dyn Fitness,
    budget: usize,
    seed: u64,
    keep: usize,
    progress: &mut dyn FnMut(usize),
) -> Result<Outcome, PassError> {
    let space = sizes
        .iter()
        .fold(1u128, |a, &s| a.saturating_mul(s.max(1) as u128));
    let budget = budget.max(1);
    let reserve = final_reserve(budget);
    let mut st = State {
        fitness,
        cache: HashMap::new(),
        log: Vec::new(),
        budget: budget - reserve,
        calls: 0,
        progress,
    };
    st.score(vec![default.to_vec()])?;
    let default_score = st.log[0].1;
    let method = if space <= 1 {
        Method::Trivial
    } else if space <= st.budget as u128 {
        exhaustive(&mut st, sizes)?;
        Method::Exhaustive
    } else {
        genetic(&mut st, sizes, default, seed)?;
        Method::Genetic
    };
    if st.calls <= 1 || reserve < 2 {
        let ranked = st.ranked(keep);
        let (best, best_score) = ranked[0].clone();
        return Ok(Outcome {
            best,
            best_score,
            default_score,
            scored: st.log.len(),
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
    for (g, _) in st.ranked(st.log.len()) {
        if finalists.len() >= reserve.min(st.log.len()) {
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
        scored: st.log.len(),
        rescored: finalists.len(),
        method,
        space,
        ranked,
    })
}

fn exhaustive(st: &mut State<'_>, sizes: &[usize]) -> Result<(), PassError> {
    let mut g = vec![0u16; sizes.len()];
    let mut pending = Vec::with_capacity(BATCH);
    loop {
        pending.push(g.clone());
        if pending.len() == BATCH {
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

fn genetic(
    st: &mut State<'_>,
    sizes: &[usize],
    default: &[u16],
    seed: u64,
) -> Result<(), PassError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let free: Vec<usize> = (0..sizes.len()).filter(|&j| sizes[j] > 1).collect();

    // 1. Neighbourhood of the default: every single-node change (as far as
    //    half the budget allows), then the per-node best changes combined.
    let mut neighbours = Vec::new();
    for &j in &free {
        for c in 0..sizes[j] as u16 {
            if c != default[j] {
                let mut g = default.to_vec();
                g[j] = c;
                neighbours.push(g);
            }
        }
    }
    if neighbours.len() <= st.left() / 2 {
        st.score(neighbours.clone())?;
        let base = st.log[0].1;
        let mut combined = default.to_vec();
        let mut half = default.to_vec();
        for &j in &free {
            let mut best: Option<(u16, f32)> = None;
            for c in 0..sizes[j] as u16 {
                if c == default[j] {
                    continue;
                }
                let mut g = default.to_vec();
                g[j] = c;
                if let Some(&s) = st.cache.get(&g) {
                    if s < base && best.is_none_or(|(_, b)| s.total_cmp(&b).is_lt()) {
                        best = Some((c, s));
                    }
                }
            }
            if let Some((c, _)) = best {
                combined[j] = c;
                if rng.gen_bool(0.5) {
                    half[j] = c;
                }
            }
        }
        st.score(vec![combined, half])?;
    }

    // 2. Genetic search.
    let pop_size = 64usize.min(st.budget / 4).max(8);
    let mut pop: Vec<(Vec<u16>, f32, usize)> = Vec::new();
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
            while (st.cache.contains_key(&g) || children.contains(&g)) && extra < 4 {
                mutate_one(&mut g, sizes, &free, &mut rng);
                extra += 1;
            }
            if !st.cache.contains_key(&g) && !children.contains(&g) {
                children.push(g);
            }
        }
        if children.is_empty() {
            stale += 1;
            continue;
        }
        stale = 0;
        let before = st.log.len();
        st.score(children)?;
        for k in before..st.log.len() {
            pop.push((st.log[k].0.clone(), st.log[k].1, k));
        }
        pop.sort_by(|x, y| x.1.total_cmp(&y.1).then(x.2.cmp(&y.2)));
        pop.truncate(pop_size);
    }
    Ok(())
}

/// The population: the best `n` scored so far.
fn refill(pop: &mut Vec<(Vec<u16>, f32, usize)>, st: &State<'_>, n: usize) {
    pop.clear();
    pop.extend(
        st.log
            .iter()
            .enumerate()
            .map(|(k, (g, s))| (g.clone(), *s, k)),
    );
    pop.sort_by(|x, y| x.1.total_cmp(&y.1).then(x.2.cmp(&y.2)));
    pop.truncate(n);
}

fn tournament(pop: &[(Vec<u16>, f32, usize)], rng: &mut ChaCha8Rng) -> usize {
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
