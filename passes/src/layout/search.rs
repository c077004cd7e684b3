//! Search over the product of the configurable nodes' candidate lists with
//! the cost model as fitness, scoring candidates in batches.
//!
//! A configuration is a *genome*: one candidate index per configurable node.
//! The search stays inside a *trust region* ([`Region`]): configurations
//! that change at most `radius` configurable nodes from the compiler default
//! (the neighbourhood a model's training configurations cover: TpuGraphs'
//! "default" collection and `hlo-cost collect`'s near-default samples change
//! 1-3 nodes); with a per-change check ([`Region::keeps`]) each change of
//! the chosen configuration must on its own, against the default, be a gain
//! the model can resolve; the others are reverted (no change rides along
//! with another one). How it searches:
//! - the whole region (mixed radix, node 0 most significant; within a
//!   radius, every set of at most `radius` nodes) when it fits in the
//!   budget;
//! - otherwise, with a radius, *the trust region as it is*
//!   ([`combinations`]), when every single-node change fits in the budget:
//!   every single change is scored (these are also the per-change check's
//!   scores). A configuration that survives the check consists only of
//!   changes that each gain on their own (are kept by `keeps`; without a
//!   check: score below the default), so the search goes on over the
//!   combinations of up to `radius` gaining single changes on distinct
//!   nodes: all of them when their count fits in what is left of the
//!   budget, else a genetic search over sets of gaining changes, seeded
//!   with the best singles and their greedy combinations. Its best is the
//!   best of the default and those combinations; when no single change
//!   gains, the best single change, which the check then reverts (so the
//!   report says what the best change predicted);
//! - otherwise (no radius, or more single changes than the budget: the Gemma
//!   4 2B module has 264,054) a batched neighbourhood sweep around the
//!   compiler default when the single changes fit in half the budget (then
//!   their per-node best combined), which seeds a genetic search
//!   (tournament selection, uniform crossover, per-gene mutation, elitist
//!   replacement; as XLA's autotuner seeds its search with the compiler
//!   default); with a radius every genome it makes is projected back into
//!   the region (a random `radius` of its changes kept).
//!
//! The two genetic searches run one loop and differ only in how a child is
//! bred: over the whole genome, or over sets of gaining changes.
//!
//! Scores may be batch-relative ([`Fitness::batch_relative`]): a model that
//! attends across the configurations of one call, or whose float rounding
//! depends on the call (the whole layout head: about 1e-6), gives scores
//! that are only comparable within one call. The search itself compares
//! scores from different calls (a heuristic), but then the final choice
//! does not: when the search took more than one call, the best distinct
//! configurations seen (at most [`FINAL`], the compiler default first, the
//! search's best always among them) are rescored together in one call, and
//! the choice and the reported scores ([`Outcome::best_score`],
//! [`Outcome::default_score`], [`Outcome::ranked`]) all come from that call;
//! the per-change check scores the default, the best and each change alone
//! in one call. The layout pass's incremental scores
//! ([`costmodel::incremental::NodeSumScorer`]) are not batch-relative: a
//! configuration gets the same bits in any call. Then nothing is rescored,
//! and the check takes each change's score from the search when it scored
//! that change alone (always, after the first two methods), scoring only
//! the others and what it leaves.
//!
//! Invariants: at most `budget` configurations are scored in all, counting
//! the final rescoring and the per-change check (parts of the budget are
//! reserved for them; budgets under 4 reserve none and skip the rescoring,
//! budgets under 4 x (radius + 4) skip the check unless the search left
//! enough); no configuration outside the region is scored or chosen; the
//! default always is scored, even with a budget of 0; the same sizes,
//! default, fitness and seed give the same result (ChaCha8 RNG, no hash map
//! iteration, ties broken by `f32::total_cmp` then first-scored order, the
//! default first). The search remembers 16 bytes per configuration scored
//! and, per single change scored, 24 bytes more.

use std::collections::HashSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::PassError;

/// Scores configurations; lower is predicted faster.
pub trait Fitness {
    fn score(&mut self, genomes: &[Vec<u16>]) -> Result<Vec<f32>, PassError>;
    /// Whether a score depends on the other configurations of its call
    /// (module doc): scores from different calls are then not comparable,
    /// and the search rescores its finalists, and the per-change check its
    /// changes, together in one call. `false` only for a fitness whose
    /// scores are the same bits whatever the call.
    fn batch_relative(&self) -> bool {
        true
    }
}

/// How the search ran.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Method {
    /// Only one configuration exists.
    Trivial,
    Exhaustive,
    Genetic,
    /// The trust region as it is: every single change, then the
    /// combinations of the gaining ones, all of them.
    CombinationsExhaustive,
    /// The same, the combinations searched genetically.
    CombinationsGenetic,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Trivial => "trivial (one configuration)",
            Method::Exhaustive => "exhaustive",
            Method::Genetic => "genetic (seeded with the compiler default)",
            Method::CombinationsExhaustive => {
                "trust-region (every single change, then every combination of the gaining ones)"
            }
            Method::CombinationsGenetic => {
                "trust-region (every single change, then a genetic search of the gaining ones' combinations)"
            }
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
    /// Configurations in the trust region (saturating; `space` when the
    /// region is the whole space).
    pub region: u128,
    /// The per-change check: how many changes of the search's best it
    /// checked (`None`: no check ran: none asked, nothing changed, or the
    /// budget left none for it) and which nodes it reverted.
    pub checked: Option<usize>,
    pub reverted: Vec<usize>,
    /// Configurations the per-change check scored (beyond `scored` and
    /// `rescored`; 0 when the search had scored each change alone already
    /// and the fitness is not batch-relative).
    pub check_scored: usize,
    /// The per-change check's scores, one per change it checked, in node
    /// order: (the default with that change alone, the default), comparable.
    pub checked_alone: Vec<(f32, f32)>,
    /// The best distinct configurations scored, best first (at most `keep`;
    /// scores from the final rescoring when there was one).
    pub ranked: Vec<(Vec<u16>, f32)>,
}

/// The trust region of a search (module doc).
#[derive(Clone, Copy)]
pub struct Region<'a> {
    /// Most configurable nodes a configuration may change from the compiler
    /// default; `None`: any number (the whole product space).
    pub radius: Option<usize>,
    /// The per-change check: `keeps(alone, default)` says whether a change
    /// whose configuration (the default with that change alone) scores
    /// `alone`, against the default's `default` in the same call, is a gain
    /// the model can resolve. `None`: no check.
    pub keeps: Option<&'a dyn Fn(f32, f32) -> bool>,
}

impl Region<'_> {
    /// No trust region: the whole product space, no per-change check.
    pub const WHOLE: Region<'static> = Region {
        radius: None,
        keeps: None,
    };
}

/// Number of configurable nodes where `g` differs from `default`.
pub fn distance(g: &[u16], default: &[u16]) -> usize {
    g.iter().zip(default).filter(|(a, b)| a != b).count()
}

/// Number of configurations within `radius` changed nodes of a default
/// (saturating): the coefficients up to `x^radius` of the product of
/// `1 + (sizes[j] - 1) x` over the nodes, summed.
pub fn region_size(sizes: &[usize], radius: Option<usize>) -> u128 {
    let free = sizes.iter().filter(|&&s| s > 1).count();
    let r = radius.unwrap_or(free).min(free);
    let mut c = vec![0u128; r + 1];
    c[0] = 1;
    let mut seen = 0usize;
    for &s in sizes.iter().filter(|&&s| s > 1) {
        seen += 1;
        for k in (1..=r.min(seen)).rev() {
            c[k] = c[k].saturating_add(c[k - 1].saturating_mul(s as u128 - 1));
        }
    }
    c.iter().fold(0u128, |a, &x| a.saturating_add(x))
}

/// Moves `g` into the region: when it changes more than `radius` nodes, a
/// uniformly drawn `radius` of its changes are kept and the others reverted
/// to the default. Draws nothing from `rng` when `g` is inside already.
fn project(g: &mut [u16], default: &[u16], radius: Option<usize>, rng: &mut ChaCha8Rng) {
    let Some(r) = radius else { return };
    let mut changed: Vec<usize> = (0..g.len()).filter(|&j| g[j] != default[j]).collect();
    if changed.len() <= r {
        return;
    }
    // Partial Fisher-Yates: the first `r` are a uniform draw of the changes.
    for k in 0..r {
        let pick = rng.gen_range(k..changed.len());
        changed.swap(k, pick);
    }
    for &j in &changed[r..] {
        g[j] = default[j];
    }
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
/// What is hashed is the genome's changes from `base` (the compiler default),
/// as (node, candidate) pairs in node order: the same genomes give the same
/// list, and near the default it is a few pairs instead of every gene.
fn fingerprint(g: &[u16], base: &[u16]) -> u128 {
    use std::hash::Hasher;
    let mut h0 = sip(0);
    let mut h1 = sip(1);
    for (j, (&a, &b)) in g.iter().zip(base).enumerate() {
        if a != b {
            for h in [&mut h0, &mut h1] {
                h.write_u64(j as u64);
                h.write_u16(a);
            }
        }
    }
    for h in [&mut h0, &mut h1] {
        h.write_u64(g.len() as u64);
    }
    (u128::from(h0.finish()) << 64) | u128::from(h1.finish())
}

#[allow(deprecated)]
fn sip(salt: u8) -> std::hash::SipHasher {
    std::hash::SipHasher::new_with_keys(0x686c_6f2d_6f70_7431, u64::from(salt))
}

/// A scored genome: genome, score, scoring order (ties go to the first scored).
type Scored = (Vec<u16>, f32, usize);

/// A scored single change: node, candidate, score, scoring order.
type Single = (usize, u16, f32, usize);

/// What the per-change check may take from the search: its single changes
/// (node, candidate, score; sorted by node and candidate) and the default's
/// score.
type Known = (Vec<(usize, u16, f32)>, f32);

struct State<'f> {
    fitness: &'f mut dyn Fitness,
    /// The genome fingerprints are taken against (the compiler default).
    base: &'f [u16],
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
    /// Every single change from `base` scored so far (12 bytes + an index
    /// each; at most `budget` of them), in scoring order.
    singles: Vec<Single>,
    progress: &'f mut dyn FnMut(usize),
}

impl State<'_> {
    fn left(&self) -> usize {
        self.budget.saturating_sub(self.scored)
    }
    fn fingerprint(&self, g: &[u16]) -> u128 {
        fingerprint(g, self.base)
    }
    /// Scores the genomes not seen yet (within the budget), in calls of
    /// `batch`; returns them with their scores and scoring order.
    fn score(&mut self, genomes: Vec<Vec<u16>>) -> Result<Vec<Scored>, PassError> {
        let mut fresh: Vec<Vec<u16>> = Vec::new();
        let mut keys: HashSet<u128> = HashSet::new();
        let mut fresh_keys: Vec<u128> = Vec::new();
        for g in genomes {
            if fresh.len() >= self.left() {
                break;
            }
            let k = self.fingerprint(&g);
            if !self.seen.contains(&k) && keys.insert(k) {
                fresh.push(g);
                fresh_keys.push(k);
            }
        }
        let mut out = Vec::with_capacity(fresh.len());
        let batch = self.batch.max(1);
        for (chunk, chunk_keys) in fresh.chunks(batch).zip(fresh_keys.chunks(batch)) {
            let scores = score_checked(self.fitness, chunk)?;
            self.calls += 1;
            for ((g, s), &key) in chunk.iter().zip(scores).zip(chunk_keys) {
                self.seen.insert(key);
                let k = self.scored;
                self.scored += 1;
                self.offer(g, s, k);
                if let Some(j) = single_change(g, self.base) {
                    self.singles.push((j, g[j], s, k));
                }
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

/// The node where `g` differs from `base` when that is the only one.
fn single_change(g: &[u16], base: &[u16]) -> Option<usize> {
    let mut diff = g.iter().zip(base).enumerate().filter(|(_, (a, b))| a != b);
    let (j, _) = diff.next()?;
    diff.next().is_none().then_some(j)
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
    search_top(
        sizes,
        default,
        fitness,
        budget,
        seed,
        1,
        BATCH,
        Region::WHOLE,
        progress,
    )
}

/// [`search`], also keeping the `keep` best configurations in
/// [`Outcome::ranked`], scoring at most `batch` configurations per model call
/// (see [`configs_per_call`]), inside `region`.
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
    region: Region<'_>,
    progress: &mut dyn FnMut(usize),
) -> Result<Outcome, PassError> {
    let space = sizes
        .iter()
        .fold(1u128, |a, &s| a.saturating_mul(s.max(1) as u128));
    let budget = budget.max(1);
    let batch = batch.max(1);
    let free = sizes.iter().filter(|&&s| s > 1).count();
    // A radius that reaches every node bounds nothing.
    let radius = region.radius.filter(|&r| r < free);
    let region_configs = region_size(sizes, radius);
    let relative = fitness.batch_relative();
    // The finalists are rescored in one call (no more of them than a call
    // holds), when scores from different calls are not comparable.
    let reserve = if relative {
        final_reserve(budget).min(batch)
    } else {
        0
    };
    let reserve = if reserve < 2 { 0 } else { reserve };
    // The per-change check scores the default, the best and each of its
    // changes alone, then the configuration it leaves: radius + 4.
    let check_reserve = match (region.keeps, radius) {
        (Some(_), Some(r)) if r.saturating_add(4) <= batch => r + 4,
        _ => 0,
    };
    let check_reserve = if budget - reserve >= check_reserve.saturating_mul(4) {
        check_reserve
    } else {
        0
    };
    let mut st = State {
        fitness,
        base: default,
        seen: HashSet::new(),
        scored: 0,
        top: Vec::new(),
        top_cap: keep.max(reserve + 1).max(POPULATION),
        budget: budget - reserve - check_reserve,
        batch,
        calls: 0,
        singles: Vec::new(),
        progress,
    };
    let first = st.score(vec![default.to_vec()])?;
    let default_score = first.first().map_or(f32::INFINITY, |x| x.1);
    let singles_count = sizes
        .iter()
        .filter(|&&s| s > 1)
        .fold(0usize, |n, &s| n.saturating_add(s - 1));
    let method = if region_configs <= 1 {
        Method::Trivial
    } else if region_configs <= st.budget as u128 {
        match radius {
            None => exhaustive(&mut st, sizes)?,
            Some(r) => exhaustive_region(&mut st, sizes, default, r)?,
        }
        Method::Exhaustive
    } else if let Some(r) = radius.filter(|_| singles_count <= st.left()) {
        combinations(
            &mut st,
            sizes,
            default,
            default_score,
            seed,
            r,
            region.keeps,
        )?
    } else {
        genetic(&mut st, sizes, default, default_score, seed, radius)?;
        Method::Genetic
    };
    let mut out = if st.calls <= 1 || reserve < 2 {
        let ranked = st.ranked(keep);
        let (best, best_score) = ranked[0].clone();
        Outcome {
            best,
            best_score,
            default_score,
            scored: st.scored,
            rescored: 0,
            method,
            space,
            region: region_configs,
            checked: None,
            reverted: Vec::new(),
            check_scored: 0,
            checked_alone: Vec::new(),
            ranked,
        }
    } else {
        rescore_finalists(
            &mut st,
            default,
            reserve,
            keep,
            method,
            space,
            region_configs,
        )?
    };
    if let Some(keeps) = region.keeps {
        let left = budget.saturating_sub(out.scored + out.rescored);
        // Scores from other calls stand for the check's own only when they
        // are comparable.
        let known = if relative {
            None
        } else {
            let mut singles: Vec<(usize, u16, f32)> =
                st.singles.iter().map(|&(j, c, s, _)| (j, c, s)).collect();
            singles.sort_by_key(|a| (a.0, a.1));
            Some((singles, default_score))
        };
        check_changes(st.fitness, default, keeps, left, batch, known, &mut out)?;
    }
    Ok(out)
}

/// The trust region as it is (module doc): every single change, then the
/// combinations of up to `radius` of the gaining ones on distinct nodes:
/// all of them when they fit in the budget, else a genetic search seeded
/// with the best singles and their greedy combinations. A single change
/// gains when `keeps` keeps it against the default (without a check: when
/// it scores below the default). The search's best is the best of the
/// default and those combinations; when no single change gains, it is the
/// best single change (which the per-change check then reverts, and the
/// report shows).
fn combinations(
    st: &mut State<'_>,
    sizes: &[usize],
    default: &[u16],
    base: f32,
    seed: u64,
    radius: usize,
    keeps: Option<&dyn Fn(f32, f32) -> bool>,
) -> Result<Method, PassError> {
    // 1. Every single change, in node then candidate order, a call at a time.
    let mut pending: Vec<Vec<u16>> = Vec::with_capacity(st.batch);
    for j in (0..sizes.len()).filter(|&j| sizes[j] > 1) {
        for c in 0..sizes[j] as u16 {
            if c == default[j] {
                continue;
            }
            let mut g = default.to_vec();
            g[j] = c;
            pending.push(g);
            if pending.len() == st.batch {
                st.score(std::mem::take(&mut pending))?;
            }
        }
    }
    st.score(pending)?;
    let gains = |s: f32| match keeps {
        Some(k) => k(s, base),
        None => s < base,
    };
    // The gaining singles, best first (ties: first scored).
    let mut gaining: Vec<Single> = st.singles.iter().copied().filter(|x| gains(x.2)).collect();
    gaining.sort_by(|a, b| a.2.total_cmp(&b.2).then(a.3.cmp(&b.3)));
    if gaining.is_empty() {
        return Ok(Method::CombinationsExhaustive);
    }
    // From here on the search ranks only the default and configurations of
    // gaining changes.
    st.top.clear();
    st.offer(default, base, 0);
    for &(j, c, s, k) in &gaining {
        let mut g = default.to_vec();
        g[j] = c;
        st.offer(&g, s, k);
    }
    // Per node with a gaining change, its gaining candidates (node order).
    let mut nodes: Vec<(usize, Vec<u16>)> = Vec::new();
    let mut by_node: Vec<(usize, u16)> = gaining.iter().map(|x| (x.0, x.1)).collect();
    by_node.sort_unstable();
    for (j, c) in by_node {
        match nodes.last_mut() {
            Some((n, cs)) if *n == j => cs.push(c),
            _ => nodes.push((j, vec![c])),
        }
    }
    let per_node: Vec<usize> = nodes.iter().map(|(_, cs)| cs.len() + 1).collect();
    // The combinations not scored yet: those of 2 or more changes.
    let combos = region_size(&per_node, Some(radius)).saturating_sub(1 + gaining.len() as u128);
    if combos <= st.left() as u128 {
        score_within(st, default, &nodes, radius, 2)?;
        return Ok(Method::CombinationsExhaustive);
    }

    // 2. Genetic search over sets of gaining changes (at most `radius`, on
    //    distinct nodes), seeded with the best singles (the population) and
    //    their greedy combinations: the per-node best gaining changes in
    //    score order, the best 2, 3, ... `radius` of them.
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut greedy: Vec<Vec<u16>> = Vec::new();
    let mut g = default.to_vec();
    let mut used = 0;
    for &(j, c, _, _) in &gaining {
        if used == radius {
            break;
        }
        if g[j] == default[j] {
            g[j] = c;
            used += 1;
            if used >= 2 {
                greedy.push(g.clone());
            }
        }
    }
    st.score(greedy)?;
    let changes = Changes {
        default,
        gaining: &gaining,
        radius,
    };
    evolve(st, &mut rng, &changes)?;
    Ok(Method::CombinationsGenetic)
}

/// Scores the finalists (the default first, then the best distinct
/// configurations scored, at most `reserve`) in one call and decides on that
/// call alone: scores from different calls are not comparable (module doc).
/// The default is finalist 0, so it wins ties.
fn rescore_finalists(
    st: &mut State<'_>,
    default: &[u16],
    reserve: usize,
    keep: usize,
    method: Method,
    space: u128,
    region: u128,
) -> Result<Outcome, PassError> {
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
        region,
        checked: None,
        reverted: Vec::new(),
        check_scored: 0,
        checked_alone: Vec::new(),
        ranked,
    })
}

/// The per-change check (module doc): scores, in one call, the default, the
/// best and the default with each change of the best alone; reverts the
/// changes `keeps` refuses; when some changes stay and some go, scores what
/// is left against the default in a second call. With `known` (the single
/// changes the search scored, sorted by node and candidate, and the
/// default's score: a fitness that is not batch-relative), the changes the
/// search scored alone are not scored again, nor the default, and what is
/// left is scored alone. Runs only when its configurations fit in `left`
/// and in one call; otherwise leaves `out` as it is (`checked` stays `None`).
fn check_changes(
    fitness: &mut dyn Fitness,
    default: &[u16],
    keeps: &dyn Fn(f32, f32) -> bool,
    left: usize,
    batch: usize,
    known: Option<Known>,
    out: &mut Outcome,
) -> Result<(), PassError> {
    let changed: Vec<usize> = (0..default.len())
        .filter(|&j| out.best[j] != default[j])
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    let only = |j: usize| {
        let mut g = default.to_vec();
        g[j] = out.best[j];
        g
    };
    let (alone, d, b, scored): (Vec<f32>, f32, f32, usize) = match &known {
        Some((singles, d)) => {
            let find = |j: usize| {
                singles
                    .binary_search_by(|x| (x.0, x.1).cmp(&(j, out.best[j])))
                    .ok()
                    .map(|i| singles[i].2)
            };
            let missing: Vec<usize> = changed
                .iter()
                .copied()
                .filter(|&j| find(j).is_none())
                .collect();
            if missing.len() + 1 > left || missing.len() > batch {
                return Ok(());
            }
            let fresh = if missing.is_empty() {
                Vec::new()
            } else {
                score_checked(
                    fitness,
                    &missing.iter().map(|&j| only(j)).collect::<Vec<_>>(),
                )?
            };
            let alone = changed
                .iter()
                .map(|&j| match find(j) {
                    Some(s) => s,
                    None => fresh[missing.iter().position(|&m| m == j).unwrap_or(0)],
                })
                .collect();
            (alone, *d, out.best_score, missing.len())
        }
        None => {
            if changed.len() + 4 > left || changed.len() + 2 > batch {
                return Ok(());
            }
            let mut genomes = vec![default.to_vec(), out.best.clone()];
            genomes.extend(changed.iter().map(|&j| only(j)));
            let scores = score_checked(fitness, &genomes)?;
            (scores[2..].to_vec(), scores[0], scores[1], genomes.len())
        }
    };
    out.check_scored = scored;
    out.checked = Some(changed.len());
    out.checked_alone = alone.iter().map(|&a| (a, d)).collect();
    let mut kept = default.to_vec();
    for (&j, &a) in changed.iter().zip(&alone) {
        if keeps(a, d) {
            kept[j] = out.best[j];
        } else {
            out.reverted.push(j);
        }
    }
    let (best_score, default_score) = if out.reverted.is_empty() {
        (b, d)
    } else if kept == default {
        (d, d)
    } else if known.is_some() {
        let s = score_checked(fitness, std::slice::from_ref(&kept))?;
        out.check_scored += 1;
        (s[0], d)
    } else {
        let s = score_checked(fitness, &[default.to_vec(), kept.clone()])?;
        out.check_scored += 2;
        (s[1], s[0])
    };
    let keep = out.ranked.len().max(1);
    out.ranked.retain(|(g, _)| *g != kept);
    out.ranked.insert(0, (kept.clone(), best_score));
    out.ranked.truncate(keep);
    out.best = kept;
    out.best_score = best_score;
    out.default_score = default_score;
    Ok(())
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

/// Every configuration within `radius` changed nodes of `default`: for each
/// set of at most `radius` nodes (lexicographic), each combination of their
/// non-default candidates.
fn exhaustive_region(
    st: &mut State<'_>,
    sizes: &[usize],
    default: &[u16],
    radius: usize,
) -> Result<(), PassError> {
    let nodes: Vec<(usize, Vec<u16>)> = (0..sizes.len())
        .filter(|&j| sizes[j] > 1)
        .map(|j| {
            let other = (0..sizes[j] as u16).filter(|&c| c != default[j]).collect();
            (j, other)
        })
        .collect();
    score_within(st, default, &nodes, radius, 1)
}

/// Scores the configurations that change at least `least` and at most
/// `radius` of `nodes` from `default`, each changed node to one of its
/// candidates (`nodes`: distinct nodes in node order, each with candidates
/// other than the default's): for each set of nodes (lexicographic), each
/// combination of their candidates, in calls of `st.batch`.
fn score_within(
    st: &mut State<'_>,
    default: &[u16],
    nodes: &[(usize, Vec<u16>)],
    radius: usize,
    least: usize,
) -> Result<(), PassError> {
    /// `left`: how many more nodes may change; `need`: how many more must
    /// change before a configuration is scored.
    fn walk(
        st: &mut State<'_>,
        nodes: &[(usize, Vec<u16>)],
        g: &mut Vec<u16>,
        from: usize,
        left: usize,
        need: usize,
        pending: &mut Vec<Vec<u16>>,
    ) -> Result<(), PassError> {
        if left == 0 {
            return Ok(());
        }
        for i in from..nodes.len() {
            let (j, cs) = &nodes[i];
            let was = g[*j];
            for &c in cs {
                g[*j] = c;
                if need <= 1 {
                    pending.push(g.clone());
                    if pending.len() == st.batch {
                        st.score(std::mem::take(pending))?;
                    }
                }
                walk(
                    st,
                    nodes,
                    g,
                    i + 1,
                    left - 1,
                    need.saturating_sub(1),
                    pending,
                )?;
            }
            g[*j] = was;
        }
        Ok(())
    }
    let mut g = default.to_vec();
    let mut pending = Vec::with_capacity(st.batch);
    walk(st, nodes, &mut g, 0, radius, least, &mut pending)?;
    st.score(pending)?;
    Ok(())
}

/// Largest genetic population.
const POPULATION: usize = 64;

fn genetic(
    st: &mut State<'_>,
    sizes: &[usize],
    default: &[u16],
    base: f32,
    seed: u64,
    radius: Option<usize>,
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
        if let Some(r) = radius {
            // Inside the region: the `r` best single changes combined.
            let mut singles: Vec<(usize, u16, f32)> = free
                .iter()
                .filter_map(|&j| best[j].map(|(c, s)| (j, c, s)))
                .collect();
            singles.sort_by(|a, b| a.2.total_cmp(&b.2).then(a.0.cmp(&b.0)));
            combined = default.to_vec();
            for &(j, c, _) in singles.iter().take(r) {
                combined[j] = c;
            }
            project(&mut half, default, radius, &mut rng);
        }
        st.score(vec![combined, half])?;
    }

    // 2. Genetic search.
    let mut init: Vec<Vec<u16>> = Vec::new();
    for k in 0..population(st) {
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
        project(&mut g, default, radius, &mut rng);
        init.push(g);
    }
    st.score(init)?;
    let genes = Genes {
        sizes,
        default,
        rate: 1.0 / free.len().max(1) as f64,
        free,
        radius,
    };
    evolve(st, &mut rng, &genes)?;
    Ok(())
}

/// How a genetic search makes children: what [`evolve`] leaves to the
/// search that runs it. Both leave the child inside the trust region.
trait Breed {
    /// A child of parents `a` and `b`: crossover, then mutation.
    fn breed(&self, a: &[u16], b: &[u16], rng: &mut ChaCha8Rng) -> Vec<u16>;
    /// One more mutation, for a child that was scored already or is
    /// another child's twin.
    fn mutate(&self, g: &mut [u16], rng: &mut ChaCha8Rng);
}

/// The genetic population's size for the search's budget.
fn population(st: &State<'_>) -> usize {
    POPULATION.min(st.budget / 4).max(8)
}

/// The genetic loop of both genetic searches, from the best genomes scored
/// so far: tournament selection, children bred by `breed` (up to 4 more
/// mutations while a child is not new; one that stays not new is dropped),
/// elitist replacement; until the budget is spent or 8 generations in a row
/// bring nothing new.
fn evolve(st: &mut State<'_>, rng: &mut ChaCha8Rng, breed: &dyn Breed) -> Result<(), PassError> {
    let pop_size = population(st);
    // The best `pop_size` scored so far (`pop_size` <= [`POPULATION`] <= `top_cap`).
    let mut pop: Vec<Scored> = st.top.iter().take(pop_size).cloned().collect();
    let mut stale = 0;
    while st.left() > 0 && stale < 8 {
        let mut children: Vec<Vec<u16>> = Vec::new();
        // The children's fingerprints (a genome is among the children iff
        // its fingerprint is here).
        let mut child_keys: HashSet<u128> = HashSet::new();
        let want = pop_size.min(st.left());
        let mut tries = 0;
        while children.len() < want && tries < want * 8 {
            tries += 1;
            let a = tournament(&pop, rng);
            let b = tournament(&pop, rng);
            let mut g = breed.breed(&pop[a].0, &pop[b].0, rng);
            let mut extra = 0;
            let mut k = st.fingerprint(&g);
            while (st.seen.contains(&k) || child_keys.contains(&k)) && extra < 4 {
                breed.mutate(&mut g, rng);
                k = st.fingerprint(&g);
                extra += 1;
            }
            if !st.seen.contains(&k) && child_keys.insert(k) {
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

/// Children over the whole genome ([`genetic`]): uniform crossover of the
/// genes, per-gene mutation at `rate`, then projection into the region.
struct Genes<'a> {
    sizes: &'a [usize],
    default: &'a [u16],
    /// The configurable nodes (more than one candidate).
    free: Vec<usize>,
    rate: f64,
    radius: Option<usize>,
}

impl Breed for Genes<'_> {
    fn breed(&self, a: &[u16], b: &[u16], rng: &mut ChaCha8Rng) -> Vec<u16> {
        let mut g: Vec<u16> = (0..self.sizes.len())
            .map(|j| if rng.gen_bool(0.5) { a[j] } else { b[j] })
            .collect();
        for &j in &self.free {
            if rng.gen_bool(self.rate) {
                g[j] = rng.gen_range(0..self.sizes[j] as u16);
            }
        }
        project(&mut g, self.default, self.radius, rng);
        g
    }
    fn mutate(&self, g: &mut [u16], rng: &mut ChaCha8Rng) {
        mutate_one(g, self.sizes, &self.free, rng);
        project(g, self.default, self.radius, rng);
    }
}

/// Children as sets of gaining changes ([`combinations`]): each parent's
/// changes taken with probability 1/2 (a node both change takes one of the
/// two), then a mutation: a random gaining change in, or one of the child's
/// out (out always at `radius` changes).
struct Changes<'a> {
    default: &'a [u16],
    /// The gaining single changes.
    gaining: &'a [Single],
    radius: usize,
}

impl Changes<'_> {
    /// The changes of `g` from the default, in node order.
    fn of(&self, g: &[u16]) -> Vec<(usize, u16)> {
        (0..g.len())
            .filter(|&j| g[j] != self.default[j])
            .map(|j| (j, g[j]))
            .collect()
    }
}

impl Breed for Changes<'_> {
    fn breed(&self, a: &[u16], b: &[u16], rng: &mut ChaCha8Rng) -> Vec<u16> {
        let mut g = self.default.to_vec();
        for (j, c) in self.of(a).into_iter().chain(self.of(b)) {
            if rng.gen_bool(0.5) {
                g[j] = c;
            }
        }
        self.mutate(&mut g, rng);
        g
    }
    fn mutate(&self, g: &mut [u16], rng: &mut ChaCha8Rng) {
        let changed = distance(g, self.default);
        if changed > 0 && (changed >= self.radius || rng.gen_bool(0.25)) {
            let out = self.of(g);
            let (j, _) = out[rng.gen_range(0..out.len())];
            g[j] = self.default[j];
        } else {
            let (j, c, _, _) = self.gaining[rng.gen_range(0..self.gaining.len())];
            g[j] = c;
        }
        project(g, self.default, Some(self.radius), rng);
    }
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

    /// Records the farthest any scored genome lies from `default`.
    struct Farthest {
        inner: Additive,
        default: Vec<u16>,
        farthest: usize,
        configs: usize,
    }
    impl Fitness for Farthest {
        fn score(&mut self, genomes: &[Vec<u16>]) -> Result<Vec<f32>, PassError> {
            self.configs += genomes.len();
            for g in genomes {
                self.farthest = self.farthest.max(distance(g, &self.default));
            }
            self.inner.score(genomes)
        }
    }

    fn farthest(sizes: &[usize], default: &[u16]) -> Farthest {
        Farthest {
            inner: additive(sizes),
            default: default.to_vec(),
            farthest: 0,
            configs: 0,
        }
    }

    fn within(radius: usize) -> Region<'static> {
        Region {
            radius: Some(radius),
            keeps: None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        sizes: &[usize],
        default: &[u16],
        f: &mut dyn Fitness,
        budget: usize,
        region: Region<'_>,
    ) -> Outcome {
        search_top(sizes, default, f, budget, 3, 1, BATCH, region, &mut |_| {}).expect("search")
    }

    #[test]
    fn no_configuration_outside_the_radius_is_scored_or_chosen() {
        let sizes = vec![8; 40];
        let default = vec![0u16; 40];
        // 280 single changes: searched as they are within 3,000, the
        // projected genetic search within 200.
        for (radius, budget, method) in [
            (2, 3000, Method::CombinationsGenetic),
            (3, 3000, Method::CombinationsGenetic),
            (5, 3000, Method::CombinationsGenetic),
            (2, 200, Method::Genetic),
            (3, 200, Method::Genetic),
            (5, 200, Method::Genetic),
        ] {
            let mut f = farthest(&sizes, &default);
            let out = run(&sizes, &default, &mut f, budget, within(radius));
            assert_eq!(out.method, method, "radius {radius}, budget {budget}");
            assert!(
                f.farthest <= radius,
                "radius {radius}: scored one {} away",
                f.farthest
            );
            assert!(distance(&out.best, &default) <= radius);
            assert!(out.best_score < out.default_score);
            assert_eq!(out.region, region_size(&sizes, Some(radius)));
        }
        // Without the region the same search goes far (what the bound stops).
        let mut f = farthest(&sizes, &default);
        let out = run(&sizes, &default, &mut f, 3000, Region::WHOLE);
        assert!(f.farthest > 5 && distance(&out.best, &default) > 5);
        assert_eq!(out.region, out.space);
    }

    #[test]
    fn region_size_counts_the_configurations_within_the_radius() {
        let sizes = [2, 3, 1, 4, 2];
        let default = [1u16, 0, 0, 3, 0];
        let all: Vec<Vec<u16>> = (0..sizes.iter().product::<usize>())
            .map(|mut k| {
                sizes
                    .iter()
                    .map(|&s| {
                        let c = (k % s) as u16;
                        k /= s;
                        c
                    })
                    .collect()
            })
            .collect();
        for r in 0..6 {
            let brute = all.iter().filter(|g| distance(g, &default) <= r).count() as u128;
            assert_eq!(region_size(&sizes, Some(r)), brute, "radius {r}");
        }
        assert_eq!(region_size(&sizes, None), 48);
        assert_eq!(region_size(&vec![1000; 64], Some(20)), u128::MAX);
    }

    #[test]
    fn a_region_within_the_budget_is_searched_whole() {
        let sizes = vec![3; 10];
        let default = vec![1u16; 10];
        let mut f = farthest(&sizes, &default);
        let out = run(&sizes, &default, &mut f, 1000, within(2));
        // 1 + 10 x 2 + 45 x 4 configurations.
        assert_eq!(
            (out.method, out.region, out.scored),
            (Method::Exhaustive, 201, 201)
        );
        assert!(f.farthest <= 2);
        // The optimum of the additive fitness within two changes: the two
        // largest single-node gains.
        let mut gains: Vec<f32> = (0..10)
            .map(|j| {
                let w = &f.inner.weights[j];
                w[1] - w.iter().copied().fold(f32::INFINITY, f32::min)
            })
            .collect();
        gains.sort_by(|a, b| b.total_cmp(a));
        let base: f32 = (0..10).map(|j| f.inner.weights[j][1]).sum();
        assert_eq!(out.best_score, base - gains[0] - gains[1]);
    }

    #[test]
    fn the_per_change_check_reverts_a_change_that_gains_too_little_alone() {
        // Node 0's change gains 10, node 1's 0.5 (under the 1 required),
        // node 2's loses 5: the search's best changes nodes 0 and 1.
        let mut f = Additive {
            weights: vec![vec![10.0, 0.0], vec![1.0, 0.5], vec![0.0, 5.0]],
            calls: 0,
            max_batch: 0,
        };
        let keeps = |alone: f32, base: f32| base - alone >= 1.0;
        let region = Region {
            radius: Some(2),
            keeps: Some(&keeps),
        };
        let plain = run(&[2, 2, 2], &[0, 0, 0], &mut f, 100, within(2));
        assert_eq!(plain.best, vec![1, 1, 0]);
        let out = run(&[2, 2, 2], &[0, 0, 0], &mut f, 100, region);
        assert_eq!(out.best, vec![1, 0, 0]);
        assert_eq!((out.checked, out.reverted.clone()), (Some(2), vec![1]));
        assert_eq!((out.best_score, out.default_score), (1.0, 11.0));
        assert_eq!(out.ranked[0], (out.best.clone(), out.best_score));
        // A check that keeps nothing leaves the default.
        let never = |_: f32, _: f32| false;
        let out = run(
            &[2, 2, 2],
            &[0, 0, 0],
            &mut f,
            100,
            Region {
                radius: Some(2),
                keeps: Some(&never),
            },
        );
        assert_eq!(
            (out.best, out.best_score),
            (vec![0, 0, 0], out.default_score)
        );
    }

    #[test]
    fn the_budget_covers_the_region_search_the_rescoring_and_the_check() {
        let sizes = vec![6; 30];
        let default = vec![0u16; 30];
        let keeps = |alone: f32, base: f32| alone < base;
        for budget in [1, 5, 30, 77, 400] {
            let mut f = farthest(&sizes, &default);
            let region = Region {
                radius: Some(3),
                keeps: Some(&keeps),
            };
            let out = run(&sizes, &default, &mut f, budget, region);
            assert!(f.configs <= budget, "budget {budget}: scored {}", f.configs);
            assert_eq!(f.configs, out.scored + out.rescored + out.check_scored);
            assert!(f.farthest <= 3);
        }
    }

    /// A fitness that is not batch-relative (its scores are the same bits in
    /// any call): [`Additive`] plus a synergy, `-synergy` when nodes 0 and 1
    /// both change (so that a change gaining little alone rides along with
    /// another one in the region's best), counting configurations.
    struct Exact {
        inner: Additive,
        synergy: f32,
        default: Vec<u16>,
        farthest: usize,
        configs: usize,
    }
    impl Exact {
        fn of(&self, g: &[u16]) -> f32 {
            let both = g[0] != self.default[0] && g[1] != self.default[1];
            let s: f32 = g
                .iter()
                .enumerate()
                .map(|(j, &c)| self.inner.weights[j][c as usize])
                .sum();
            if both {
                s - self.synergy
            } else {
                s
            }
        }
    }
    impl Fitness for Exact {
        fn score(&mut self, genomes: &[Vec<u16>]) -> Result<Vec<f32>, PassError> {
            self.configs += genomes.len();
            for g in genomes {
                self.farthest = self.farthest.max(distance(g, &self.default));
            }
            Ok(genomes.iter().map(|g| self.of(g)).collect())
        }
        fn batch_relative(&self) -> bool {
            false
        }
    }

    /// Every configuration within `radius` of `default` (brute force).
    fn all_within(sizes: &[usize], default: &[u16], radius: usize) -> Vec<Vec<u16>> {
        let mut out = vec![default.to_vec()];
        let mut frontier = vec![default.to_vec()];
        for _ in 0..radius {
            let mut next = Vec::new();
            for g in &frontier {
                let last = (0..g.len()).rev().find(|&j| g[j] != default[j]);
                for j in last.map_or(0, |l| l + 1)..g.len() {
                    for c in 0..sizes[j] as u16 {
                        if c != default[j] {
                            let mut h = g.clone();
                            h[j] = c;
                            next.push(h);
                        }
                    }
                }
            }
            out.extend(next.iter().cloned());
            frontier = next;
        }
        out
    }

    #[test]
    fn the_trust_region_search_finds_the_best_configuration_of_gaining_changes() {
        // 12 nodes of 6 candidates: 60 single changes; the region of radius
        // 3 (1 + 60 + 1,650 + 27,500 configurations) is beyond the budgets.
        let sizes = vec![6; 12];
        let default = vec![2u16; 12];
        // A gain of 3 is kept; so, with `band`, only up to 6: then the best
        // single changes (gaining up to 10) score below every combination
        // of kept ones, and must not be chosen.
        let plain = |alone: f32, base: f32| base - alone >= 3.0;
        let band = |alone: f32, base: f32| (3.0..6.0).contains(&(base - alone));
        let mut genetic = 0;
        for (budget, synergy, name, keeps) in [
            (400, 0.0, "gain 3", &plain as &dyn Fn(f32, f32) -> bool),
            (400, 20.0, "gain 3", &plain),
            (2000, 20.0, "gain 3", &plain),
            (80, 20.0, "gain 3", &plain),
            (400, 0.0, "gain 3 to 6", &band),
            (80, 0.0, "gain 3 to 6", &band),
        ] {
            let mut f = Exact {
                inner: additive(&sizes),
                synergy,
                default: default.clone(),
                farthest: 0,
                configs: 0,
            };
            let region = Region {
                radius: Some(3),
                keeps: Some(keeps),
            };
            let out = run(&sizes, &default, &mut f, budget, region);
            let what = format!("budget {budget}, synergy {synergy}, kept: {name}");
            assert!(
                matches!(
                    out.method,
                    Method::CombinationsExhaustive | Method::CombinationsGenetic
                ),
                "{what}: {:?}",
                out.method
            );
            genetic += usize::from(out.method == Method::CombinationsGenetic);
            assert!(f.configs <= budget, "{what}: scored {}", f.configs);
            assert_eq!(f.configs, out.scored + out.rescored + out.check_scored);
            assert!(f.farthest <= 3);
            // Nothing rescored, nothing reverted, the check scored nothing:
            // the single changes' scores were the check's.
            assert_eq!((out.rescored, out.check_scored), (0, 0), "{what}");
            assert!(out.reverted.is_empty(), "{what}");
            assert_eq!(out.checked, Some(distance(&out.best, &default)));
            // The brute-force optimum over the configurations whose every
            // change is kept on its own.
            let base = f.of(&default);
            let alone = |j: usize, c: u16| {
                let mut g = default.clone();
                g[j] = c;
                f.of(&g)
            };
            let best = all_within(&sizes, &default, 3)
                .iter()
                .filter(|g| (0..12).all(|j| g[j] == default[j] || keeps(alone(j, g[j]), base)))
                .map(|g| f.of(g))
                .fold(f32::INFINITY, f32::min);
            assert_eq!(out.best_score, best, "{what}");
            assert_eq!(out.best_score, f.of(&out.best));
            assert!(out.best_score < out.default_score);
        }
        assert!(genetic >= 1, "a genetic search of the combinations ran");
    }

    #[test]
    fn with_no_gaining_change_the_best_single_change_is_reverted() {
        let sizes = vec![6; 12];
        let default = vec![2u16; 12];
        let never = |_: f32, _: f32| false;
        let mut f = Exact {
            inner: additive(&sizes),
            synergy: 0.0,
            default: default.clone(),
            farthest: 0,
            configs: 0,
        };
        let region = Region {
            radius: Some(3),
            keeps: Some(&never),
        };
        let out = run(&sizes, &default, &mut f, 400, region);
        assert_eq!(out.method, Method::CombinationsExhaustive);
        // The default and its 60 single changes, nothing more.
        assert_eq!((out.scored, f.configs), (61, 61));
        assert_eq!(out.best, default);
        assert_eq!(out.best_score, out.default_score);
        assert_eq!((out.checked, out.reverted.len()), (Some(1), 1));
        let j = out.reverted[0];
        let (alone, base) = out.checked_alone[0];
        assert!(alone < base, "the reverted change scored below the default");
        // It was the best single change.
        for k in 0..12 {
            for c in 0..6 {
                let mut g = default.clone();
                g[k] = c;
                assert!(f.of(&g) >= alone, "node {k} candidate {c} beats node {j}'s");
            }
        }
    }
}
