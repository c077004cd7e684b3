//! XLA:GPU's Triton GEMM candidate set, generated as XLA generates it.
//!
//! XLA's autotuner does not try every tiling: for a dot fusion it builds a
//! shape-dependent search space (output tiles within register limits,
//! warps per CTA, contracting tiles within shared memory, pipeline stages,
//! TMA on Hopper) and, unless `--xla_gpu_exhaustive_tiling_search` is set,
//! keeps only the members that equal one of a per-GPU list of default
//! configs after that list is clamped to the problem ("hints"). A choice
//! made at deploy time, when no autotuning log exists, must come from the
//! same set, so this module generates it from the dot's sizes and the
//! device's limits. It is written from the behaviour documented for jax
//! 0.11.2's XLA (`TritonDotFusionSearchSpace` and its Hopper defaults) and
//! checked against every fusion XLA autotuned in the committed GPU session
//! (`passes/tests/xla_gpu_search_space.rs`): each logged candidate list is
//! the generated list, in order, less the candidates XLA could not compile
//! (the autotuner logs only what compiled).
//!
//! Not modelled: warp specialization (Blackwell only), ROCm, the fused
//! split-K "narrow dot" candidate (dots with K >= 4096 and tiny M or N when
//! the emitter's fused split-K is on), and scaled dots.

use hlo::{InstId, Module};

use super::config::TritonConfig;
use super::dot::DotProblem;

/// The limits of a GPU that the search space reads (XLA's
/// `se::DeviceDescription`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Device {
    /// CUDA compute capability.
    pub cc_major: u32,
    pub cc_minor: u32,
    /// Streaming multiprocessors.
    pub core_count: i64,
    pub registers_per_block: i64,
    pub threads_per_block: i64,
    pub threads_per_warp: i64,
    /// Shared memory one block may opt in to, bytes.
    pub shared_memory_per_block_optin: i64,
}

impl Device {
    /// H100 SXM and H200: compute capability 9.0, 132 SMs, 64 Ki registers
    /// and 227 KiB of shared memory per block, 1024 threads per block.
    pub const HOPPER_132: Device = Device {
        cc_major: 9,
        cc_minor: 0,
        core_count: 132,
        registers_per_block: 65536,
        threads_per_block: 1024,
        threads_per_warp: 32,
        shared_memory_per_block_optin: 232_448,
    };

    /// A Hopper with another SM count (H100 PCIe: 114), from the `Cores:`
    /// of XLA's device string (`CUDA: 9.0, Cores: 132, ...`).
    pub fn from_device_string(s: &str) -> Result<Device, String> {
        let field = |name: &str| -> Option<&str> {
            s.split(',')
                .map(str::trim)
                .find_map(|p| p.strip_prefix(name))
                .map(str::trim)
        };
        let cc = field("CUDA:").ok_or_else(|| format!("device `{s}`: no `CUDA: major.minor`"))?;
        let (major, minor) = cc
            .split_once('.')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
            .ok_or_else(|| format!("device `{s}`: compute capability `{cc}` is not major.minor"))?;
        let cores: i64 = field("Cores:")
            .and_then(|c| c.parse().ok())
            .filter(|&c| c > 0)
            .ok_or_else(|| format!("device `{s}`: no positive `Cores:`"))?;
        let d = Device {
            cc_major: major,
            cc_minor: minor,
            core_count: cores,
            ..Device::HOPPER_132
        };
        d.check()?;
        Ok(d)
    }

    /// Only Hopper's default list is known here.
    pub fn check(&self) -> Result<(), String> {
        if self.cc_major != 9 {
            return Err(format!(
                "compute capability {}.{}: only Hopper (9.x) has its default Triton configs here",
                self.cc_major, self.cc_minor
            ));
        }
        Ok(())
    }

    fn is_at_least_hopper(&self) -> bool {
        self.cc_major >= 9
    }
}

/// The dot of Triton GEMM fusion `id` as the search space reads it
/// ([`DotProblem::of_fusion`]): its sizes, the lhs and result element
/// widths (XLA's search space reads the lhs width, not the wider operand's)
/// and the expensive operands. A scaled dot is an error: not modelled here.
pub fn dot_problem(m: &Module, id: InstId) -> Result<DotProblem, String> {
    let p = DotProblem::of_fusion(m, id)?;
    if p.scaled {
        return Err(
            "its dot is a scaled dot, which XLA's search space is not modelled for here".into(),
        );
    }
    Ok(p)
}

/// XLA's default Triton configs for Hopper (block_m, block_n, block_k,
/// num_stages, num_warps, TMA allowed), in XLA's order: the hints the
/// default search space is filtered by.
pub const HOPPER_DEFAULTS: [(i64, i64, i64, i64, i64, bool); 25] = [
    (16, 8, 16, 1, 2, false),
    (16, 16, 128, 3, 2, false),
    (16, 32, 64, 3, 2, false),
    (64, 8, 64, 3, 2, true),
    (64, 8, 128, 3, 4, false),
    (64, 16, 256, 1, 4, false),
    (64, 32, 64, 1, 4, false),
    (64, 64, 16, 1, 2, false),
    (64, 64, 32, 1, 2, false),
    (64, 128, 64, 3, 4, true),
    (64, 128, 128, 1, 4, true),
    (128, 8, 32, 4, 4, false),
    (128, 16, 64, 4, 4, true),
    (128, 32, 64, 3, 4, false),
    (128, 64, 16, 3, 2, false),
    (128, 64, 32, 3, 2, false),
    (128, 64, 32, 3, 4, true),
    (128, 64, 128, 3, 4, true),
    (128, 128, 16, 4, 4, true),
    (128, 128, 32, 4, 4, true),
    (128, 128, 64, 3, 4, true),
    (128, 256, 64, 3, 8, false),
    (128, 256, 64, 4, 8, true),
    (128, 256, 128, 3, 8, true),
    (256, 128, 64, 4, 8, true),
];

/// Warps a scheduler may be oversubscribed with; schedulers per SM.
const MAX_WARPS_PER_SCHEDULER: i64 = 5;
const SCHEDULERS_PER_CORE: i64 = 4;
/// Warps per CTA: a warp group for wgmma, fewer when optimizing occupancy.
const MIN_WARPS_WGMMA: i64 = 4;
const MIN_WARPS_OCCUPANCY: i64 = 2;
/// Below this many output tilings the low-occupancy ones are kept.
const MIN_CONFIGS_FOR_OCCUPANCY_PRUNING: usize = 24;

fn next_pow2(x: i64) -> i64 {
    if x <= 1 {
        1
    } else {
        1i64 << (64 - (x - 1).leading_zeros())
    }
}

/// The largest power of two <= x; 1 for x <= 1.
fn prev_pow2(x: i64) -> i64 {
    if x <= 1 {
        1
    } else {
        1i64 << (63 - x.leading_zeros())
    }
}

fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

fn pow2_range(lo: i64, hi: i64) -> impl Iterator<Item = i64> {
    std::iter::successors(Some(lo), |&x| Some(x * 2)).take_while(move |&x| x <= hi)
}

/// The search space of one dot on one device (the limits it derives).
#[derive(Clone, Copy, Debug)]
struct Space {
    p: DotProblem,
    d: Device,
    /// Output tile bounds (block_m, block_n): min is a hard limit.
    min_tile: (i64, i64),
    max_tile: (i64, i64),
    min_warps: i64,
    min_k: i64,
}

impl Space {
    fn new(p: DotProblem, d: Device) -> Result<Space, String> {
        if [p.batch, p.m, p.n, p.k].iter().any(|&x| x < 1) || p.lhs_bits < 1 || p.result_bits < 1 {
            return Err(format!("dot sizes {p:?}: every size must be positive"));
        }
        let max_elems = d.registers_per_block * 32 / p.result_bits;
        let fit_other = |this: i64| prev_pow2(max_elems / this);
        let mut lhs = prev_pow2((max_elems as f64).sqrt() as i64);
        let mut rhs = fit_other(lhs);
        let (lhs_limit, rhs_limit) = (next_pow2(p.m), next_pow2(p.n));
        if lhs_limit < lhs {
            lhs = lhs_limit;
            rhs = fit_other(lhs_limit).min(rhs_limit);
        }
        if rhs_limit < rhs {
            lhs = fit_other(rhs_limit).min(lhs_limit);
            rhs = rhs_limit;
        }
        let desired_ctas =
            MAX_WARPS_PER_SCHEDULER * SCHEDULERS_PER_CORE * d.core_count / MIN_WARPS_WGMMA;
        let tiles = p.batch * ceil_div(p.m, lhs) * ceil_div(p.n, rhs);
        let for_occupancy = desired_ctas > tiles;
        let wgmma = d.is_at_least_hopper() && !for_occupancy;
        let min_tile = if wgmma { (64, 8) } else { (16, 8) };
        let min_warps = if p.lhs_bits >= 32 || !wgmma {
            MIN_WARPS_OCCUPANCY
        } else {
            MIN_WARPS_WGMMA
        };
        Ok(Space {
            p,
            d,
            min_tile,
            max_tile: (lhs.max(min_tile.0), rhs.max(min_tile.1)),
            min_warps,
            min_k: (128 / p.lhs_bits).max(16),
        })
    }

    fn tiles(&self, bm: i64, bn: i64) -> i64 {
        self.p.batch * ceil_div(self.p.m, bm) * ceil_div(self.p.n, bn)
    }

    /// Contracting size whose lhs and rhs tiles fit in shared memory.
    fn k_limit_for_smem(&self, bm: i64, bn: i64) -> i64 {
        8 * self.d.shared_memory_per_block_optin / self.p.result_bits / (bm + bn)
    }

    fn max_k(&self, bm: i64, bn: i64) -> i64 {
        let m = next_pow2(self.p.k).min(prev_pow2(self.k_limit_for_smem(bm, bn)));
        m.max(self.min_k)
    }

    fn max_warps(&self, bm: i64, bn: i64) -> i64 {
        let hw = self.d.threads_per_block / self.d.threads_per_warp.max(1);
        (ceil_div(bm, 16) * ceil_div(bn, 8))
            .min(hw)
            .max(self.min_warps)
    }

    fn max_stages(&self, bm: i64, bn: i64, bk: i64) -> i64 {
        let available = ceil_div(self.p.k, bk);
        let limit = ceil_div(self.k_limit_for_smem(bm, bn), bk).max(1);
        available.min(limit).min(MAX_WARPS_PER_SCHEDULER)
    }

    /// Output tilings, square-ish where the problem allows, with whether
    /// each leaves SMs idle.
    fn output_tiles(&self) -> Vec<(i64, i64, bool)> {
        let mut out = Vec::new();
        for bm in pow2_range(self.min_tile.0, self.max_tile.0) {
            let (mut lo, mut hi) = (self.min_tile.1, self.max_tile.1);
            let overlaps = !(bm * 2 < lo || hi < bm / 2);
            if bm < self.p.m && overlaps {
                if !self.p.rhs_expensive {
                    lo = lo.max(bm / 2);
                }
                if !self.p.lhs_expensive {
                    hi = hi.min(bm * 2);
                }
            }
            for bn in pow2_range(lo, hi) {
                out.push((bm, bn, self.tiles(bm, bn) < self.d.core_count));
            }
        }
        out
    }

    fn generate(&self, exhaustive: bool) -> Vec<TritonConfig> {
        let mut tiles = self.output_tiles();
        if !exhaustive && tiles.len() >= MIN_CONFIGS_FOR_OCCUPANCY_PRUNING {
            tiles.retain(|t| !t.2);
            if tiles.is_empty() {
                tiles.push((self.min_tile.0, self.min_tile.1, true));
            }
        }
        let mut out = Vec::new();
        for (bm, bn, _) in tiles {
            for warps in pow2_range(self.min_warps, self.max_warps(bm, bn)) {
                for bk in pow2_range(self.min_k, self.max_k(bm, bn)) {
                    for stages in 1..=self.max_stages(bm, bn, bk) {
                        let c = config(bm, bn, bk, stages, warps, false);
                        out.push(c);
                        if self.d.is_at_least_hopper() && (exhaustive || tma_recommended(&c)) {
                            out.push(TritonConfig {
                                is_tma_allowed: true,
                                ..c
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// The default list clamped to this problem (XLA's hint filter).
    fn hints(&self) -> Vec<TritonConfig> {
        HOPPER_DEFAULTS
            .iter()
            .map(|&(bm, bn, bk, s, w, tma)| {
                let bm = bm.clamp(self.min_tile.0, self.max_tile.0);
                let bn = bn.clamp(self.min_tile.1, self.max_tile.1);
                let bk = bk.clamp(self.min_k, self.max_k(bm, bn).max(self.min_k));
                config(bm, bn, bk, s, w, tma)
            })
            .collect()
    }
}

fn config(bm: i64, bn: i64, bk: i64, stages: i64, warps: i64, tma: bool) -> TritonConfig {
    // As XLA logs them: split_k unset, one CTA, group size 1.
    TritonConfig {
        block_m: bm,
        block_n: bn,
        block_k: bk,
        split_k: 0,
        num_stages: stages,
        num_warps: warps,
        num_ctas: 1,
        is_tma_allowed: tma,
        is_warp_specialization_allowed: false,
        waves_per_eu: 0,
        group_size: 1,
    }
}

/// XLA's rule for offering a TMA variant of a config.
fn tma_recommended(c: &TritonConfig) -> bool {
    c.num_warps <= 8
        && matches!(c.num_stages, 1 | 3 | 4)
        && c.block_m <= 256
        && c.block_n <= 256
        && c.block_k <= 256
}

/// The Triton candidates XLA generates for `p` on `d`, in XLA's order: the
/// default search space, or the whole tiling space with `exhaustive`
/// (`--xla_gpu_exhaustive_tiling_search=true`).
pub fn candidates(
    p: &DotProblem,
    d: &Device,
    exhaustive: bool,
) -> Result<Vec<TritonConfig>, String> {
    d.check()?;
    let s = Space::new(*p, *d)?;
    let all = s.generate(exhaustive);
    if exhaustive {
        return Ok(all);
    }
    let hints = s.hints();
    let kept: Vec<TritonConfig> = all.into_iter().filter(|c| hints.contains(c)).collect();
    // XLA falls back to the hints themselves when none survives.
    Ok(if kept.is_empty() { hints } else { kept })
}

/// The columns of [`features`]: what a learned ranker sees of one
/// candidate of one dot (training and the pass compute them here, once).
pub const FEATURE_NAMES: [&str; 24] = [
    "log2_batch",
    "log2_m",
    "log2_n",
    "log2_k",
    "operand_bits",
    "result_bits",
    "log2_block_m",
    "log2_block_n",
    "log2_block_k",
    "num_stages",
    "log2_num_warps",
    "tma",
    "log2_tiles",
    "waves",
    "wave_efficiency",
    "log2_k_iterations",
    "m_fill",
    "n_fill",
    "k_fill",
    "log2_outputs_per_warp",
    "smem_fraction",
    "lhs_expensive",
    "rhs_expensive",
    "log2_macs_per_tile",
];

/// Features of candidate `c` for dot `p` on `d` ([`FEATURE_NAMES`]): the
/// problem's sizes, the tile, and what they make together: output tiles
/// and waves over the SMs (and how full the last wave is), iterations over
/// K, the fraction of each tile that is real data (padding), accumulator
/// elements per warp, and operand tiles of all stages over the shared
/// memory a block may use.
pub fn features(p: &DotProblem, d: &Device, c: &TritonConfig) -> [f64; 24] {
    let l = |x: i64| (x.max(1) as f64).log2();
    let (bm, bn, bk) = (c.block_m.max(1), c.block_n.max(1), c.block_k.max(1));
    let (tm, tn) = (ceil_div(p.m, bm), ceil_div(p.n, bn));
    let tiles = p.batch * tm * tn;
    let cores = d.core_count.max(1);
    let waves = tiles as f64 / cores as f64;
    let efficiency = tiles as f64 / (ceil_div(tiles, cores) * cores) as f64;
    let k_iters = ceil_div(p.k, bk);
    let smem = ((bm + bn) * bk * p.lhs_bits / 8 * c.num_stages.max(1)) as f64
        / d.shared_memory_per_block_optin.max(1) as f64;
    [
        l(p.batch),
        l(p.m),
        l(p.n),
        l(p.k),
        p.lhs_bits as f64,
        p.result_bits as f64,
        l(bm),
        l(bn),
        l(bk),
        c.num_stages as f64,
        l(c.num_warps),
        f64::from(u8::from(c.is_tma_allowed)),
        l(tiles),
        waves,
        efficiency,
        l(k_iters),
        p.m as f64 / (tm * bm) as f64,
        p.n as f64 / (tn * bn) as f64,
        p.k as f64 / (k_iters * bk) as f64,
        l(bm * bn / c.num_warps.max(1)),
        smem,
        f64::from(u8::from(p.lhs_expensive)),
        f64::from(u8::from(p.rhs_expensive)),
        l(p.m.min(bm) * p.n.min(bn)) + l(p.k),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(batch: i64, m: i64, n: i64, k: i64, bits: i64, out: i64) -> DotProblem {
        DotProblem {
            batch,
            m,
            n,
            k,
            lhs_bits: bits,
            rhs_bits: bits,
            result_bits: out,
            lhs_expensive: false,
            rhs_expensive: false,
            scaled: false,
        }
    }

    fn short(c: &TritonConfig) -> (i64, i64, i64, i64, i64, bool) {
        (
            c.block_m,
            c.block_n,
            c.block_k,
            c.num_stages,
            c.num_warps,
            c.is_tma_allowed,
        )
    }

    #[test]
    fn powers_of_two() {
        assert_eq!(
            (next_pow2(0), next_pow2(1), next_pow2(5), next_pow2(8)),
            (1, 1, 8, 8)
        );
        assert_eq!(
            (prev_pow2(0), prev_pow2(1), prev_pow2(5), prev_pow2(8)),
            (1, 1, 4, 8)
        );
    }

    /// A small batched GEMM optimizes for occupancy: 16x8 tiles and two
    /// warps are allowed, and the smallest default comes first (what XLA
    /// takes with autotuning off).
    #[test]
    fn small_problem_starts_with_the_smallest_tile() {
        let c = candidates(
            &problem(16, 256, 32, 64, 16, 32),
            &Device::HOPPER_132,
            false,
        )
        .expect("candidates");
        assert_eq!(short(&c[0]), (16, 8, 16, 1, 2, false));
        assert!(c.iter().all(|c| c.block_n <= 32 && c.block_k <= 64));
    }

    /// A GEMM with many output tiles (8 x 8192 x 8192: 4096 tiles of
    /// 256x256, more than the 660 CTAs wanted on 132 SMs) wants wgmma:
    /// tiles from 64 rows, four warps at least.
    #[test]
    fn large_problem_uses_warp_groups() {
        let c = candidates(
            &problem(8, 8192, 8192, 4096, 16, 16),
            &Device::HOPPER_132,
            false,
        )
        .expect("candidates");
        assert!(
            c.iter().all(|c| c.block_m >= 64 && c.num_warps >= 4),
            "{c:?}"
        );
        assert!(!c.is_empty());
    }

    /// 1024^3 in 128x128x64 tiles: 64 tiles on 132 SMs (one partial wave),
    /// 16 steps over K, no padding; 100x700x80 pads M and N.
    #[test]
    fn features_of_a_tiling() {
        let d = Device::HOPPER_132;
        let f = features(
            &problem(1, 1024, 1024, 1024, 16, 16),
            &d,
            &config(128, 128, 64, 3, 4, true),
        );
        let at = |name: &str| {
            FEATURE_NAMES
                .iter()
                .position(|n| *n == name)
                .expect("column")
        };
        assert_eq!(f[at("log2_tiles")], 6.0);
        assert_eq!(f[at("waves")], 64.0 / 132.0);
        assert_eq!(f[at("wave_efficiency")], 64.0 / 132.0);
        assert_eq!(f[at("log2_k_iterations")], 4.0);
        assert_eq!(
            (f[at("m_fill")], f[at("n_fill")], f[at("k_fill")]),
            (1.0, 1.0, 1.0)
        );
        assert_eq!(f[at("tma")], 1.0);
        assert_eq!(
            f[at("smem_fraction")],
            (256 * 64 * 2 * 3) as f64 / 232_448.0
        );
        let g = features(
            &problem(4, 100, 700, 80, 16, 32),
            &d,
            &config(64, 64, 32, 1, 2, false),
        );
        assert_eq!(g[at("m_fill")], 100.0 / 128.0);
        assert_eq!(g[at("n_fill")], 700.0 / 704.0);
        assert_eq!(g[at("k_fill")], 80.0 / 96.0);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(candidates(&problem(1, 0, 8, 8, 16, 16), &Device::HOPPER_132, false).is_err());
        let ampere = Device {
            cc_major: 8,
            ..Device::HOPPER_132
        };
        assert!(candidates(&problem(1, 64, 64, 64, 16, 16), &ampere, false).is_err());
        assert!(Device::from_device_string("CUDA: 9.0, Cores: x").is_err());
        let d = Device::from_device_string(
            "CUDA: 9.0, Cores: 114, GPU clock: 1.75 GHz, Memory bandwidth: 2039 GB/s",
        )
        .expect("device");
        assert_eq!(d.core_count, 114);
    }
}
