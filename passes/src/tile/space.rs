//! The tile space of one kernel and the enumeration of its tile configurations.
//!
//! A tile configuration is TpuGraphs' `TileConfig`: `kernel_bounds` (only for
//! convolutions and dots: the tile of the kernel operand, the rhs),
//! `output_bounds` (the tile of the kernel's iteration space) and
//! `input_bounds` (always empty: the compiler infers the input tile from the
//! others; the dataset leaves it empty in every sample we have).
//!
//! # The rules (inferred from the TPU autotuner's runs, `tile_kernels/*.runs.json`)
//!
//! 1. **Bounds are counts of layout tiles, major to minor.** Position `k` of a
//!    bounds list is the `k`-th dimension of the array in major-to-minor
//!    (physical) order, and its value is the tile's extent along that dimension
//!    in units of the layout's tile along it: 128 elements for the most minor
//!    dimension and 8 for the second most minor under `T(8,128)`, 1 for the
//!    untiled major dimensions. Example: `f32[32,26,26,192]{3,0,2,1:T(8,128)}`
//!    has physical order `[26, 26, 32, 192]`, i.e. `[26, 26, 4, 2]` layout tiles,
//!    and the autotuner's bounds never exceed `[26, 26, 4, 2]`.
//! 2. **The 8x128 minor tiling.** An array without a tiled layout (a CPU/GPU
//!    module) is tiled as TPU would: `(8,128)` on its two most minor dimensions,
//!    `(256)` or `(1024)` for a rank-1 array (1024 above 256 elements), as in
//!    the TPU kernels' layouts. A dimension only partly filling its last tile
//!    counts that tile whole (`1000` elements = 8 tiles of 128).
//! 3. **One choice per distinct number of steps.** For a dimension of `G`
//!    granules the candidate tile extents are `ceil(G / n)` for `n = 1..=G`:
//!    the smallest extent that covers the dimension in `n` steps. Extents that
//!    need the same number of steps as a smaller one are not distinct
//!    schedules and are never tried (e.g. for 26: 26, 13, 9, 7, 6, 5, 4, 3, 2,
//!    1). This is the divisibility rule: exact divisors are the extents without
//!    a partial last step, and the others are the ones the autotuner also tries.
//! 4. **Shared dimensions move together, in the coarsest granule.** In a
//!    convolution or dot, one iteration dimension appears in several arrays
//!    (the output feature in the output and the kernel, the contraction in the
//!    lhs and the kernel, the batch in the lhs and the output). Its granule is
//!    the least common multiple of its layout tile in each of those arrays
//!    (so 128 elements whenever it is the minor dimension of one of them), and
//!    every array's bound is derived from one choice: `min(ceil(extent_elems /
//!    unit), tiles)`. Example: output feature 1000 with the kernel
//!    `f32[4096,1000]{0,1:T(8,128)}` (unit 8) and output `f32[32,1000]{1,0}`
//!    (unit 128): kernel bounds 16, 32, 48, 64, 125 go with output bounds 1, 2,
//!    3, 4, 8. Elementwise and reduction kernels have no shared dimensions: each
//!    dimension of the iteration space is free, in its own layout tile.
//! 5. **Memory budget.** A candidate is kept when its footprint (bytes of the
//!    tiles of every array the kernel reads or writes, [`TileSpace::footprint`])
//!    fits the budget ([`DEFAULT_MEMORY_BUDGET`]: 16 MiB, a TPU v3 core's
//!    vector memory). When not even the smallest tile fits, the smallest one
//!    is kept alone so that every kernel has a choice.
//! 6. **Reshapes have one configuration**, the empty one (the dataset's
//!    reshape kernels carry empty bounds in every run).

use std::fmt;

/// Default memory budget of a tile: 16 MiB, the vector memory of a TPU v3 core.
pub const DEFAULT_MEMORY_BUDGET: u64 = 16 << 20;

/// Footprint the default-tile heuristic aims under ([`TileSpace::default_choice`]).
pub const DEFAULT_TILE_TARGET: u64 = 2 << 20;

/// Above this many raw combinations a space is sampled rather than listed.
const EXHAUSTIVE_LIMIT: u128 = 1 << 20;

/// Random draws when a space is sampled.
const SAMPLE_DRAWS: usize = 1 << 16;

/// One tile configuration, in the TpuGraphs sense.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TileConfig {
    pub kernel_bounds: Vec<i64>,
    pub output_bounds: Vec<i64>,
    pub input_bounds: Vec<i64>,
}

impl fmt::Display for TileConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        write!(
            f,
            "kernel=[{}] output=[{}]",
            list(&self.kernel_bounds),
            list(&self.output_bounds)
        )?;
        if !self.input_bounds.is_empty() {
            write!(f, " input=[{}]", list(&self.input_bounds))?;
        }
        Ok(())
    }
}

/// `ceil(a / b)` for `a >= 0`, `b > 0`, without the overflow of `(a + b - 1) / b`
/// (0 for `a <= 0`; `b <= 0` counts as 1).
pub fn ceil_div(a: i64, b: i64) -> i64 {
    if a <= 0 {
        0
    } else {
        (a - 1) / b.max(1) + 1
    }
}

/// Largest dimension, in elements, the tile pass tiles ([`super::kernel`]
/// skips kernels with larger ones): 2^40, far above any real array, small
/// enough that a dimension's [`step_options`] (about `2 sqrt(G)` values) stay
/// a few megabytes and no size product below overflows unchecked.
pub const MAX_DIM: i64 = 1 << 40;

/// Candidate extents of a dimension of `granules` granules, in granules,
/// ascending: `ceil(granules / n)` for `n = 1..=granules` (rule 3).
pub fn step_options(granules: i64) -> Vec<i64> {
    let mut out = Vec::new();
    if granules <= 0 {
        return out;
    }
    // ceil(G/n) takes O(sqrt(G)) distinct values; walk them without visiting every n.
    let mut n = 1i64;
    while n <= granules {
        let v = ceil_div(granules, n);
        out.push(v);
        // next n whose ceil(G/n) is smaller than v
        if v == 1 {
            break;
        }
        n = ceil_div(granules, v - 1);
    }
    out.reverse();
    out.dedup();
    out
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

pub(crate) fn lcm(a: i64, b: i64) -> i64 {
    if a == 0 || b == 0 {
        a.max(b)
    } else {
        (a / gcd(a, b)).saturating_mul(b)
    }
}

/// A free dimension of the iteration space: one choice per candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Var {
    /// Extent in elements.
    pub extent: i64,
    /// Granule in elements (rule 4): extents are multiples of it (or the whole dimension).
    pub granule: i64,
}

impl Var {
    pub fn granules(&self) -> i64 {
        ceil_div(self.extent, self.granule)
    }
    /// The candidate extents, in granules, ascending; never empty (a var
    /// of no granules, which [`super::kernel`] never makes, has the one
    /// option 1).
    pub fn options(&self) -> Vec<i64> {
        step_options(self.granules().max(1))
    }
    /// Extent in elements of a choice of `count` granules.
    pub fn elems(&self, count: i64) -> i64 {
        count.saturating_mul(self.granule).min(self.extent)
    }
}

/// How one position of an array (major-to-minor) depends on the vars.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Extent {
    /// Tiled along `var`: the tile spans `var`'s choice times `stride`, plus `halo`
    /// (a convolution's input window: `(out - 1) * stride + window`).
    Var { var: usize, stride: i64, halo: i64 },
    /// Always whole.
    Full,
}

/// One dimension of an array of the kernel, in physical (major-to-minor) order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axis {
    /// Logical dimension number.
    pub dim: usize,
    /// Extent in elements.
    pub extent: i64,
    /// The layout tile along this dimension, in elements (rule 1).
    pub unit: i64,
    pub tiled_by: Extent,
}

impl Axis {
    pub fn tiles(&self) -> i64 {
        ceil_div(self.extent, self.unit)
    }
    pub fn padded(&self) -> i64 {
        self.tiles().saturating_mul(self.unit)
    }
}

/// An array of the kernel that occupies memory while a tile runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayUse {
    pub name: String,
    /// Bytes per element.
    pub elem_bytes: u64,
    pub axes: Vec<Axis>,
    /// `false`: the array is not tiled along the vars (a broadcast operand, a
    /// reduction's result, an operand of another shape); it counts in
    /// proportion to the share of the iteration space one tile covers.
    pub tiled: bool,
}

impl ArrayUse {
    pub fn padded_bytes(&self) -> u64 {
        self.axes.iter().fold(self.elem_bytes, |acc, a| {
            acc.saturating_mul(a.padded().max(0) as u64)
        })
    }
}

/// The tile space of one kernel: its vars and how the two bounds lists and the
/// arrays in memory derive from a choice of the vars.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileSpace {
    pub vars: Vec<Var>,
    /// Kernel operand axes (major to minor); empty for non-convolutions.
    pub kernel: Vec<Axis>,
    /// Iteration-space axes (major to minor): the output bounds.
    pub output: Vec<Axis>,
    /// Arrays whose tiles must fit in memory together.
    pub arrays: Vec<ArrayUse>,
    /// The kernel reduces (its default tile keeps one step, see [`TileSpace::default_choice`]).
    pub reduction: bool,
    /// The kernel has no tile choice (a reshape): one empty configuration.
    pub untiled: bool,
}

/// A choice of granule counts, one per var.
pub type Choice = Vec<i64>;

impl TileSpace {
    /// The single-configuration space of a kernel without tile choices.
    pub fn untiled() -> Self {
        TileSpace {
            vars: Vec::new(),
            kernel: Vec::new(),
            output: Vec::new(),
            arrays: Vec::new(),
            reduction: false,
            untiled: true,
        }
    }

    fn bound(&self, axis: &Axis, choice: &[i64]) -> i64 {
        match axis.tiled_by {
            Extent::Var { var, stride, halo } => {
                let v = &self.vars[var];
                let count = choice.get(var).copied().unwrap_or(1);
                let elems = (v.elems(count) - 1)
                    .saturating_mul(stride)
                    .saturating_add(1)
                    .saturating_add(halo);
                ceil_div(elems, axis.unit).clamp(1, axis.tiles().max(1))
            }
            Extent::Full => axis.tiles().max(1),
        }
    }

    /// The configuration of a choice.
    pub fn config(&self, choice: &[i64]) -> TileConfig {
        if self.untiled {
            return TileConfig::default();
        }
        TileConfig {
            kernel_bounds: self.kernel.iter().map(|a| self.bound(a, choice)).collect(),
            output_bounds: self.output.iter().map(|a| self.bound(a, choice)).collect(),
            input_bounds: Vec::new(),
        }
    }

    /// Fraction of the iteration space one tile covers.
    fn coverage(&self, choice: &[i64]) -> f64 {
        self.vars
            .iter()
            .zip(choice)
            .map(|(v, &c)| v.elems(c) as f64 / v.extent.max(1) as f64)
            .product()
    }

    /// Bytes of memory the tiles of a choice occupy: every tiled array's tile
    /// (padded to whole layout tiles), plus every untiled array in proportion
    /// to the share of the iteration space the tile covers.
    pub fn footprint(&self, choice: &[i64]) -> u64 {
        let share = self.coverage(choice);
        let mut total = 0u64;
        for a in &self.arrays {
            let bytes = if a.tiled {
                a.axes.iter().fold(a.elem_bytes, |acc, ax| {
                    let tiles = self.bound(ax, choice) as u64;
                    acc.saturating_mul(tiles.saturating_mul(ax.unit as u64))
                })
            } else {
                (a.padded_bytes() as f64 * share).ceil() as u64
            };
            total = total.saturating_add(bytes);
        }
        total
    }

    /// Number of raw combinations of the vars (before the memory budget).
    pub fn raw_size(&self) -> u128 {
        self.vars.iter().fold(1u128, |acc, v| {
            acc.saturating_mul(v.options().len() as u128)
        })
    }

    /// Every choice within `budget` bytes, in lexicographic order of the vars'
    /// options (var 0 outermost, each ascending). Never empty: when nothing
    /// fits, the smallest-footprint choice alone (rule 5). Spaces above
    /// `EXHAUSTIVE_LIMIT` raw combinations are sampled with `seed`
    /// (`SAMPLE_DRAWS` draws plus the smallest and the largest choice,
    /// deduplicated, sorted).
    pub fn enumerate(&self, budget: u64, seed: u64) -> Vec<Choice> {
        if self.untiled || self.vars.is_empty() {
            return vec![Vec::new()];
        }
        let opts: Vec<Vec<i64>> = self.vars.iter().map(Var::options).collect();
        let mut all: Vec<Choice> = Vec::new();
        if self.raw_size() <= EXHAUSTIVE_LIMIT {
            let mut idx = vec![0usize; opts.len()];
            'odometer: loop {
                all.push(idx.iter().zip(&opts).map(|(&i, o)| o[i]).collect());
                for k in (0..opts.len()).rev() {
                    idx[k] += 1;
                    if idx[k] < opts[k].len() {
                        continue 'odometer;
                    }
                    idx[k] = 0;
                }
                break;
            }
        } else {
            use rand::{Rng, SeedableRng};
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut set = std::collections::BTreeSet::new();
            for _ in 0..SAMPLE_DRAWS {
                let c: Choice = opts.iter().map(|o| o[rng.gen_range(0..o.len())]).collect();
                set.insert(c);
            }
            set.insert(opts.iter().map(|o| o[o.len() - 1]).collect());
            set.insert(opts.iter().map(|o| o[0]).collect());
            all = set.into_iter().collect();
        }
        let fits: Vec<Choice> = all
            .iter()
            .filter(|c| self.footprint(c) <= budget)
            .cloned()
            .collect();
        if !fits.is_empty() {
            return fits;
        }
        let smallest = all.into_iter().min_by_key(|c| self.footprint(c));
        smallest.into_iter().collect()
    }

    /// The compiler-default tile, by a heuristic that reproduces the TPU
    /// compiler's default on the sample kernels:
    /// - start from the whole iteration space, except that a convolution's
    ///   output feature (the var shared by the kernel and the output) is one
    ///   granule (one 128-wide pass of the matrix unit);
    /// - shrink the most major splittable output dimension, one option at a
    ///   time, while the footprint exceeds the target (then the next most
    ///   major, and so on). The target is [`DEFAULT_TILE_TARGET`] (2 MiB),
    ///   except for convolutions and dots, which keep their batch and
    ///   contraction whole as long as they fit `memory_budget` (the kernel
    ///   tile stays resident in the matrix unit's memory: XLA's defaults keep
    ///   the whole batch even when that is several MiB);
    /// - a kernel that is not a reduction and would run in a single step has
    ///   its most major splittable output dimension halved, so that loading and
    ///   computing overlap.
    ///
    /// The result is a member of `candidates` (the nearest by footprint if the
    /// heuristic's tile was filtered out); `None` only for an empty list.
    pub fn default_choice(&self, candidates: &[Choice], memory_budget: u64) -> Option<Choice> {
        if self.untiled || self.vars.is_empty() {
            return candidates.first().cloned();
        }
        let opts: Vec<Vec<i64>> = self.vars.iter().map(Var::options).collect();
        if opts.iter().any(Vec::is_empty) {
            return candidates.first().cloned();
        }
        // option index per var, starting at the largest
        let mut at: Vec<usize> = opts.iter().map(|o| o.len() - 1).collect();
        let shared: Vec<bool> = (0..self.vars.len())
            .map(|v| {
                let in_kernel = self
                    .kernel
                    .iter()
                    .any(|a| matches!(a.tiled_by, Extent::Var { var, .. } if var == v));
                let in_output = self
                    .output
                    .iter()
                    .any(|a| matches!(a.tiled_by, Extent::Var { var, .. } if var == v));
                in_kernel && in_output
            })
            .collect();
        for (v, s) in shared.iter().enumerate() {
            if *s {
                at[v] = 0;
            }
        }
        // output vars, most major first
        let mut order: Vec<usize> = Vec::new();
        for a in &self.output {
            if let Extent::Var { var, .. } = a.tiled_by {
                if !order.contains(&var) && !shared[var] {
                    order.push(var);
                }
            }
        }
        let choice_of =
            |at: &[usize]| -> Choice { at.iter().zip(&opts).map(|(&i, o)| o[i]).collect() };
        let target = if shared.iter().any(|&s| s) {
            memory_budget
        } else {
            DEFAULT_TILE_TARGET.min(memory_budget)
        };
        for &v in &order {
            while self.footprint(&choice_of(&at)) > target && at[v] > 0 {
                at[v] -= 1;
            }
        }
        if !self.reduction {
            let steps: i64 = self
                .vars
                .iter()
                .zip(choice_of(&at))
                .map(|(var, c)| ceil_div(var.granules(), c))
                .fold(1, i64::saturating_mul);
            if steps == 1 {
                if let Some(&v) = order.iter().find(|&&v| self.vars[v].granules() > 1) {
                    let half = ceil_div(self.vars[v].granules(), 2);
                    if let Some(i) = opts[v].iter().position(|&o| o == half) {
                        at[v] = i;
                    }
                }
            }
        }
        let want = choice_of(&at);
        if candidates.contains(&want) {
            return Some(want);
        }
        let target = self.footprint(&want);
        candidates
            .iter()
            .min_by_key(|c| self.footprint(c).abs_diff(target))
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule3_one_extent_per_number_of_steps() {
        assert_eq!(step_options(26), vec![1, 2, 3, 4, 5, 6, 7, 9, 13, 26]);
        assert_eq!(step_options(4), vec![1, 2, 4]);
        assert_eq!(step_options(8), vec![1, 2, 3, 4, 8]);
        assert_eq!(step_options(1), vec![1]);
        assert!(step_options(0).is_empty());
        // brute force agreement
        for g in 1..300i64 {
            let mut want: Vec<i64> = (1..=g).map(|n| (g + n - 1) / n).collect();
            want.sort();
            want.dedup();
            assert_eq!(step_options(g), want, "G = {g}");
        }
    }

    fn axis(dim: usize, extent: i64, unit: i64, var: usize) -> Axis {
        Axis {
            dim,
            extent,
            unit,
            tiled_by: Extent::Var {
                var,
                stride: 1,
                halo: 0,
            },
        }
    }

    #[test]
    fn rule4_shared_dimension_bounds_move_together() {
        // kernel_04: output feature 1000 shared by the kernel (unit 8) and the output (unit 128)
        let space = TileSpace {
            vars: vec![Var {
                extent: 1000,
                granule: 128,
            }],
            kernel: vec![axis(1, 1000, 8, 0)],
            output: vec![axis(1, 1000, 128, 0)],
            arrays: vec![],
            reduction: false,
            untiled: false,
        };
        let pairs: Vec<(i64, i64)> = space
            .enumerate(u64::MAX, 0)
            .iter()
            .map(|c| {
                let t = space.config(c);
                (t.kernel_bounds[0], t.output_bounds[0])
            })
            .collect();
        assert_eq!(pairs, vec![(16, 1), (32, 2), (48, 3), (64, 4), (125, 8)]);
    }

    #[test]
    fn rule5_memory_budget_filters_and_never_empties() {
        let space = TileSpace {
            vars: vec![
                Var {
                    extent: 64,
                    granule: 8,
                },
                Var {
                    extent: 256,
                    granule: 128,
                },
            ],
            kernel: vec![],
            output: vec![axis(0, 64, 8, 0), axis(1, 256, 128, 1)],
            arrays: vec![ArrayUse {
                name: "out".into(),
                elem_bytes: 4,
                axes: vec![axis(0, 64, 8, 0), axis(1, 256, 128, 1)],
                tiled: true,
            }],
            reduction: false,
            untiled: false,
        };
        let all = space.enumerate(u64::MAX, 0);
        assert_eq!(all.len(), 5 * 2);
        // one 8x128 f32 tile is 4 KiB
        assert_eq!(space.footprint(&[1, 1]), 4096);
        assert_eq!(space.footprint(&[8, 2]), 64 * 256 * 4);
        let small = space.enumerate(8192, 0);
        assert!(small.iter().all(|c| space.footprint(c) <= 8192));
        assert_eq!(small.len(), 3); // [1,1], [1,2], [2,1]
        let none_fit = space.enumerate(100, 0);
        assert_eq!(none_fit, vec![vec![1, 1]]);
    }

    #[test]
    fn halo_and_stride_widen_an_input_tile() {
        let space = TileSpace {
            vars: vec![Var {
                extent: 14,
                granule: 1,
            }],
            kernel: vec![],
            output: vec![axis(0, 14, 1, 0)],
            arrays: vec![ArrayUse {
                name: "lhs".into(),
                elem_bytes: 1,
                axes: vec![Axis {
                    dim: 0,
                    extent: 25,
                    unit: 1,
                    tiled_by: Extent::Var {
                        var: 0,
                        stride: 2,
                        halo: 2,
                    },
                }],
                tiled: true,
            }],
            reduction: false,
            untiled: false,
        };
        // 7 outputs at stride 2 with a 3-wide window read (7-1)*2+3 = 15 inputs
        assert_eq!(space.footprint(&[7]), 15);
        // 14 outputs would read 29: clamped to the whole input
        assert_eq!(space.footprint(&[14]), 25);
    }

    #[test]
    fn lexicographic_enumeration_is_complete() {
        let space = TileSpace {
            vars: vec![
                Var {
                    extent: 3,
                    granule: 1,
                },
                Var {
                    extent: 2,
                    granule: 1,
                },
            ],
            kernel: vec![],
            output: vec![axis(0, 3, 1, 0), axis(1, 2, 1, 1)],
            arrays: vec![],
            reduction: false,
            untiled: false,
        };
        assert_eq!(
            space.enumerate(u64::MAX, 0),
            vec![
                vec![1, 1],
                vec![1, 2],
                vec![2, 1],
                vec![2, 2],
                vec![3, 1],
                vec![3, 2]
            ]
        );
    }

    #[test]
    fn huge_spaces_are_sampled_deterministically() {
        let vars: Vec<Var> = (0..6)
            .map(|_| Var {
                extent: 4096,
                granule: 1,
            })
            .collect();
        let output = (0..6).map(|d| axis(d, 4096, 1, d)).collect();
        let space = TileSpace {
            vars,
            kernel: vec![],
            output,
            arrays: vec![],
            reduction: false,
            untiled: false,
        };
        assert!(space.raw_size() > EXHAUSTIVE_LIMIT);
        let a = space.enumerate(u64::MAX, 7);
        assert!(a.len() <= SAMPLE_DRAWS + 2 && a.len() > SAMPLE_DRAWS / 2);
        assert_eq!(a, space.enumerate(u64::MAX, 7));
        assert!(a.contains(&vec![1; 6]) && a.contains(&vec![4096; 6]));
        assert!(a.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
    }
}
