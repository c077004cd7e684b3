//! `hlo-cost collect`: a TpuGraphs-style layout dataset of your own modules,
//! measured on your own hardware through a PJRT plugin.
//!
//! Per module: the layout pass's own candidate space
//! (`passes::layout::candidates`) is sampled ([`sample`]): the compiler
//! default first, then near-default configurations (one to three nodes
//! changed, TpuGraphs' "default" collection) and random ones (every node
//! drawn, the "random" collection), interleaved, deduplicated; a space no
//! larger than the request is taken whole. Each configuration is applied as
//! the pass applies its choice (`decisions` + `assign`) and measured with
//! [`pjrt::PjrtMeasurer`] in chunks: the configurations of a chunk and the
//! compiler default run interleaved with a second executable of the default
//! as the same-program control; a configuration's runtime is its ratio to
//! the default within its chunk times the default's median time over all
//! chunks, so chunks measured at other loads stay comparable. The ratio is
//! [`Estimator::Median`]'s by default (median of the per-round ratios: a
//! round's executables share its load, so the ratio cancels it), or
//! [`Estimator::Min`]'s (fastest round over the default's fastest: other
//! processes only add time); a chunk records both, the estimator is chosen
//! when the npz is written, and the manifest reports each estimator's error
//! on the control (the same program twice, whose true ratio is 1), by which
//! the median was chosen (docs/cost-models.md).
//!
//! Files in the output folder, per module `STEM` (the file name without
//! `.hlo`): `STEM.collect.jsonl`, the state (a header with the sampled plan,
//! then one line per measured chunk, appended and synced), `STEM.npz`, the
//! published layout npz (node features as `hlo-cost featurize` writes them,
//! `node_config_feat` rows exactly as the layout pass scores its candidates,
//! `config_runtime` in ns), and `manifest.json` over every state file in the
//! folder (device, plugin and version, machine, load, repetitions, spread).
//!
//! Invariants: the same module, seed and settings give the same plan;
//! a run continues a folder's state only when its plan, module and device
//! are the ones recorded (an error otherwise, nothing overwritten); an
//! interrupted run loses at most the chunk it was measuring (a torn last
//! line is dropped); the npz and manifest are rewritten whole (temporary
//! file, rename) after every chunk, so they always describe the state;
//! configurations that fail to compile or compute other results are kept
//! out of the npz (recorded in the state); no input file is written.

use std::collections::HashSet;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use costmodel::features::featurize;
use costmodel::graph::LAYOUT_CONFIG_DIM;
use costmodel::npz::write_npz;
use costmodel::{ConfigBatch, Task};
use passes::layout::{assign, candidates, decisions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

use crate::outfile;

pub mod fleet;
pub mod python;

/// The first line of a state file.
const STATE_FORMAT: &str = "hlo-cost-collect-state";
const STATE_VERSION: u64 = 1;

/// How a sampled configuration came about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The compiler default (always configuration 0).
    Default,
    /// One to three nodes changed from the default.
    Near,
    /// Every node drawn uniformly.
    Random,
    /// The whole space was small enough to take.
    All,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Default => "default",
            Kind::Near => "near",
            Kind::Random => "random",
            Kind::All => "all",
        }
    }
}

/// Up to `n` distinct configurations (genomes: a candidate index per node)
/// of the product of `sizes`, `default` first. When the space has at most
/// `n` points it is enumerated (mixed radix, node 0 most significant);
/// otherwise `round((n - 1) * random_fraction)` are random and the rest near
/// the default, interleaved evenly. Deterministic in its arguments.
pub fn sample(
    sizes: &[usize],
    default: &[u16],
    n: usize,
    random_fraction: f64,
    seed: u64,
) -> Vec<(Vec<u16>, Kind)> {
    let mut out = vec![(default.to_vec(), Kind::Default)];
    if n <= 1 {
        return out;
    }
    let space = sizes
        .iter()
        .fold(1u128, |a, &s| a.saturating_mul(s.max(1) as u128));
    if space <= n as u128 {
        let total = space as usize;
        for k in 0..total {
            let mut g = vec![0u16; sizes.len()];
            let mut rest = k;
            for (j, &s) in sizes.iter().enumerate().rev() {
                let s = s.max(1);
                g[j] = (rest % s) as u16;
                rest /= s;
            }
            if g != default {
                out.push((g, Kind::All));
            }
        }
        return out;
    }
    let mutable: Vec<usize> = (0..sizes.len()).filter(|&j| sizes[j] > 1).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let want_random = ((n - 1) as f64 * random_fraction.clamp(0.0, 1.0)).round() as usize;
    let want_near = n - 1 - want_random;
    let mut seen: HashSet<Vec<u16>> = HashSet::new();
    seen.insert(default.to_vec());
    let mut draw = |kind: Kind, want: usize, rng: &mut ChaCha8Rng| -> Vec<Vec<u16>> {
        let mut got = Vec::new();
        let mut tries = 0;
        while got.len() < want && tries < 100 * want + 100 {
            tries += 1;
            let g: Vec<u16> = match kind {
                Kind::Random => sizes
                    .iter()
                    .map(|&s| rng.gen_range(0..s.max(1)) as u16)
                    .collect(),
                _ => {
                    let mut g = default.to_vec();
                    // 1, 2 or 3 nodes with probabilities 1/2, 1/4, 1/4.
                    let k = match rng.gen_range(0..4) {
                        0 | 1 => 1,
                        2 => 2,
                        _ => 3,
                    }
                    .min(mutable.len());
                    let mut pool = mutable.clone();
                    for _ in 0..k {
                        let j = pool.swap_remove(rng.gen_range(0..pool.len()));
                        let s = sizes[j];
                        // A candidate other than the default's.
                        let mut c = rng.gen_range(0..s - 1) as u16;
                        if c >= default[j] {
                            c += 1;
                        }
                        g[j] = c;
                    }
                    g
                }
            };
            if seen.insert(g.clone()) {
                got.push(g);
            }
        }
        got
    };
    let near = draw(Kind::Near, want_near, &mut rng);
    let random = draw(Kind::Random, want_random, &mut rng);
    // Interleave so that a run stopped early has both kinds in proportion.
    let (mut a, mut b) = (near.into_iter().peekable(), random.into_iter().peekable());
    let (mut taken_near, mut taken_random) = (0usize, 0usize);
    while a.peek().is_some() || b.peek().is_some() {
        let near_due = (taken_near as f64 + 0.5) / want_near.max(1) as f64
            <= (taken_random as f64 + 0.5) / want_random.max(1) as f64;
        let pick_near = match (a.peek().is_some(), b.peek().is_some()) {
            (true, false) => true,
            (false, true) => false,
            _ => near_due,
        };
        if pick_near {
            if let Some(g) = a.next() {
                out.push((g, Kind::Near));
                taken_near += 1;
            }
        } else if let Some(g) = b.next() {
            out.push((g, Kind::Random));
            taken_random += 1;
        }
    }
    out
}

/// FNV-1a, 64 bits: the module's identity in the state (not a security hash).
fn fnv64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A wall-time budget: `90`, `90s`, `10m`, `1.5h`, `1h30m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || {
        format!("--budget {s:?}: expected a duration such as 90s, 10m, 1.5h or 1h30m (a plain number is seconds)")
    };
    let t = s.trim();
    if t.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    let mut num = String::new();
    let mut any = false;
    for ch in t.chars() {
        if ch.is_ascii_digit() || ch == '.' {
            num.push(ch);
            continue;
        }
        let unit = match ch {
            's' => 1.0,
            'm' => 60.0,
            'h' => 3600.0,
            _ => return Err(bad()),
        };
        let v: f64 = num.parse().map_err(|_| bad())?;
        total += v * unit;
        num.clear();
        any = true;
    }
    if !num.is_empty() {
        let v: f64 = num.parse().map_err(|_| bad())?;
        total += v;
        any = true;
    }
    if !any || !total.is_finite() || !(0.0..=1e9).contains(&total) {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(total))
}

/// How a chunk's timing rounds become a configuration's ratio to the
/// compiler default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Estimator {
    /// The configuration's fastest round / the default's fastest round.
    Min,
    /// The median over rounds of the configuration's time / the default's.
    Median,
}

impl Estimator {
    pub fn name(self) -> &'static str {
        match self {
            Estimator::Min => "min",
            Estimator::Median => "median",
        }
    }

    pub fn parse(s: &str) -> Result<Estimator, String> {
        match s {
            "min" => Ok(Estimator::Min),
            "median" => Ok(Estimator::Median),
            _ => Err(format!("--estimator {s:?}: expected `min` or `median`")),
        }
    }
}

/// The settings that define a plan (recorded in the state; a resumed run
/// must use the same), and how the npz is derived from the state
/// (`estimator`: may change between runs, the state holds both).
#[derive(Clone, Debug)]
pub struct Settings {
    pub device: String,
    pub estimator: Estimator,
    pub configs: usize,
    pub random_fraction: f64,
    pub seed: u64,
    pub chunk: usize,
    pub measure_budget: f64,
    pub budget: Option<Duration>,
}

/// One module's plan and what is measured of it.
struct Job {
    path: PathBuf,
    stem: String,
    module: hlo::Module,
    module_hash: u64,
    graph: costmodel::Graph,
    spaces: Vec<candidates::NodeSpace>,
    plan: Vec<(Vec<u16>, Kind)>,
    state_path: PathBuf,
    npz_path: PathBuf,
    chunks: Vec<ChunkRecord>,
}

/// One measured chunk, as a state line. The `*_min` fields are the
/// minimum estimator's ([`Estimator::Min`]); `None` in chunks collected
/// before it was recorded.
#[derive(Clone, Debug)]
struct ChunkRecord {
    configs: Vec<usize>,
    /// Median of per-round ratios to the default.
    ratio: Vec<Option<f64>>,
    ratio_min: Option<Vec<Option<f64>>>,
    notes: Vec<String>,
    default_seconds: f64,
    default_min_seconds: Option<f64>,
    spread: f64,
    control_ratio: f64,
    control_ratio_min: Option<f64>,
    rounds: usize,
    load1: Option<f64>,
    wall_seconds: f64,
}

impl ChunkRecord {
    fn to_json(&self) -> Value {
        json!({
            "configs": self.configs,
            "ratio": self.ratio,
            "ratio_min": self.ratio_min,
            "notes": self.notes,
            "default_seconds": self.default_seconds,
            "default_min_seconds": self.default_min_seconds,
            "spread": self.spread,
            "control_ratio": self.control_ratio,
            "control_ratio_min": self.control_ratio_min,
            "rounds": self.rounds,
            "load1": self.load1,
            "wall_seconds": self.wall_seconds,
        })
    }

    fn from_json(v: &Value, planned: usize) -> Option<ChunkRecord> {
        let configs: Vec<usize> = v
            .get("configs")?
            .as_array()?
            .iter()
            .map(|x| x.as_u64().map(|u| u as usize))
            .collect::<Option<_>>()?;
        if configs.iter().any(|&c| c == 0 || c >= planned) {
            return None;
        }
        let ratios = |x: &Value| -> Option<Vec<Option<f64>>> {
            x.as_array()?
                .iter()
                .map(|x| {
                    if x.is_null() {
                        Some(None)
                    } else {
                        x.as_f64().filter(|r| r.is_finite() && *r > 0.0).map(Some)
                    }
                })
                .collect()
        };
        let ratio = ratios(v.get("ratio")?)?;
        let ratio_min = match v.get("ratio_min") {
            None | Some(Value::Null) => None,
            Some(x) => Some(ratios(x).filter(|r| r.len() == configs.len())?),
        };
        let positive = |key: &str| -> Option<Option<f64>> {
            match v.get(key) {
                None | Some(Value::Null) => Some(None),
                Some(x) => x.as_f64().filter(|t| t.is_finite() && *t > 0.0).map(Some),
            }
        };
        let default_min_seconds = positive("default_min_seconds")?;
        let control_ratio_min = positive("control_ratio_min")?;
        let notes: Vec<String> = v
            .get("notes")?
            .as_array()?
            .iter()
            .map(|x| x.as_str().map(str::to_string))
            .collect::<Option<_>>()?;
        if ratio.len() != configs.len() || notes.len() != configs.len() {
            return None;
        }
        let default_seconds = v.get("default_seconds")?.as_f64()?;
        if !(default_seconds.is_finite() && default_seconds > 0.0) {
            return None;
        }
        Some(ChunkRecord {
            configs,
            ratio,
            ratio_min,
            notes,
            default_seconds,
            default_min_seconds,
            spread: v.get("spread")?.as_f64()?,
            control_ratio: v.get("control_ratio")?.as_f64()?,
            control_ratio_min,
            rounds: v.get("rounds")?.as_u64()? as usize,
            load1: v.get("load1").and_then(Value::as_f64),
            wall_seconds: v.get("wall_seconds").and_then(Value::as_f64).unwrap_or(0.0),
        })
    }
}

/// The median of `v` (`pjrt::measure::median`), `None` when empty.
fn median(v: Vec<f64>) -> Option<f64> {
    (!v.is_empty()).then(|| pjrt::measure::median(&v))
}

fn load1() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn loadavg() -> Value {
    match std::fs::read_to_string("/proc/loadavg") {
        Ok(s) => {
            let v: Vec<f64> = s
                .split_whitespace()
                .take(3)
                .filter_map(|x| x.parse().ok())
                .collect();
            json!(v)
        }
        Err(_) => Value::Null,
    }
}

fn machine() -> Value {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok();
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    });
    json!({
        "hostname": hostname,
        "cpu": cpu,
        "cores": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    })
}

/// The Python package (name, version) that installed `plugin`, from the
/// `*.dist-info/RECORD` of a site-packages folder above it.
fn plugin_package(plugin: &Path) -> Option<(String, String)> {
    for dir in plugin.ancestors().skip(1).take(4) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut infos: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "dist-info"))
            .collect();
        infos.sort();
        let rel = plugin.strip_prefix(dir).ok()?.to_string_lossy().to_string();
        for info in infos {
            let Ok(record) = std::fs::read_to_string(info.join("RECORD")) else {
                continue;
            };
            if !record
                .lines()
                .any(|l| l.split(',').next() == Some(rel.as_str()))
            {
                continue;
            }
            let meta = std::fs::read_to_string(info.join("METADATA")).ok()?;
            let field = |k: &str| {
                meta.lines()
                    .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_string()))
            };
            return Some((field("Name:")?, field("Version:")?));
        }
    }
    None
}

fn state_header(job: &Job, s: &Settings) -> Value {
    json!({
        "format": STATE_FORMAT,
        "version": STATE_VERSION,
        "module": job.path.display().to_string(),
        "module_fnv64": format!("{:016x}", job.module_hash),
        "device": s.device,
        "seed": s.seed,
        "configs": s.configs,
        "random_fraction": s.random_fraction,
        "plan": job.plan.iter().map(|(g, _)| g.clone()).collect::<Vec<_>>(),
        "kinds": job.plan.iter().map(|(_, k)| k.name()).collect::<Vec<_>>(),
    })
}

/// Reads a state file: its chunks, after checking its header agrees with
/// `header`. A torn last line (an interrupted write) is cut off.
fn read_state(path: &Path, header: &Value, planned: usize) -> Result<Vec<ChunkRecord>, String> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("{shown}: {e}"))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut chunks = Vec::new();
    let mut good_len = 0usize;
    let mut lines = text.split_inclusive('\n').peekable();
    let first = lines
        .next()
        .ok_or_else(|| format!("{shown}: empty state file; remove it to start over"))?;
    let h: Value = serde_json::from_str(first.trim_end()).map_err(|_| {
        format!("{shown}: not a collect state file (remove it, or choose another -o)")
    })?;
    if h.get("format").and_then(Value::as_str) != Some(STATE_FORMAT) {
        return Err(format!(
            "{shown}: not a collect state file (remove it, or choose another -o)"
        ));
    }
    for key in [
        "module_fnv64",
        "device",
        "seed",
        "configs",
        "random_fraction",
        "plan",
    ] {
        if h.get(key) != header.get(key) {
            let what = match key {
                "module_fnv64" => "another module (its text changed)".to_string(),
                "plan" => "another plan".to_string(),
                k => format!(
                    "--{} {} (this run: {})",
                    k.replace('_', "-"),
                    h.get(k).map_or("?".into(), Value::to_string),
                    header.get(k).map_or("?".into(), Value::to_string)
                ),
            };
            return Err(format!(
                "{shown}: this folder holds a collection made with {what}; run with the same settings to continue it, or choose another -o"
            ));
        }
    }
    good_len += first.len();
    while let Some(line) = lines.next() {
        let last = lines.peek().is_none();
        let parsed = if line.ends_with('\n') {
            serde_json::from_str::<Value>(line.trim_end())
                .ok()
                .and_then(|v| ChunkRecord::from_json(&v, planned))
        } else {
            None
        };
        match parsed {
            Some(c) => {
                chunks.push(c);
                good_len += line.len();
            }
            None if last => break, // torn by an interruption: measured again
            None => {
                return Err(format!(
                    "{shown}: line {} is not a measured chunk (the file was edited?); remove the file to start this module over",
                    chunks.len() + 2
                ))
            }
        }
    }
    if good_len < bytes.len() {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| format!("{shown}: {e}"))?;
        f.set_len(good_len as u64)
            .map_err(|e| format!("{shown}: {e}"))?;
    }
    Ok(chunks)
}

fn append_line(path: &Path, v: &Value) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut line = v.to_string();
    line.push('\n');
    f.write_all(line.as_bytes())
        .and_then(|()| f.sync_data())
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The default's seconds per run: the median over chunks of its per-chunk
/// estimate by `e` (`None` before the first chunk, or when a chunk lacks
/// `e`'s figures).
fn default_seconds(chunks: &[ChunkRecord], e: Estimator) -> Option<f64> {
    let per: Option<Vec<f64>> = chunks
        .iter()
        .map(|c| match e {
            Estimator::Median => Some(c.default_seconds),
            Estimator::Min => c.default_min_seconds,
        })
        .collect();
    median(per?)
}

/// (config index, runtime in ns) of every configuration measured well, the
/// default first: its ratio to the default by `e` times the default's
/// seconds ([`default_seconds`]); a configuration measured twice keeps its
/// first chunk's. `Err` when a chunk lacks `e`'s figures (collected before
/// they were recorded).
fn runtimes(chunks: &[ChunkRecord], e: Estimator) -> Result<Vec<(usize, i64)>, ()> {
    if chunks.is_empty() {
        return Ok(Vec::new());
    }
    let d = default_seconds(chunks, e).ok_or(())?;
    let ns = |r: f64| ((r * d * 1e9).round() as i64).max(1);
    let mut out = vec![(0usize, ns(1.0))];
    let mut per: Vec<(usize, f64)> = Vec::new();
    for c in chunks {
        let ratio = match e {
            Estimator::Median => &c.ratio,
            Estimator::Min => c.ratio_min.as_ref().ok_or(())?,
        };
        per.extend(
            c.configs
                .iter()
                .zip(ratio)
                .filter_map(|(&i, r)| r.map(|r| (i, r))),
        );
    }
    per.sort_by_key(|&(i, _)| i);
    per.dedup_by_key(|&mut (i, _)| i);
    out.extend(per.into_iter().map(|(i, r)| (i, ns(r))));
    Ok(out)
}

impl Job {
    fn measured(&self) -> HashSet<usize> {
        let mut s: HashSet<usize> = self.chunks.iter().flat_map(|c| c.configs.clone()).collect();
        if !self.chunks.is_empty() {
            s.insert(0);
        }
        s
    }

    fn todo(&self) -> Vec<usize> {
        let done = self.measured();
        (1..self.plan.len()).filter(|i| !done.contains(i)).collect()
    }

    fn default_seconds(&self, e: Estimator) -> Option<f64> {
        default_seconds(&self.chunks, e)
    }

    fn runtimes(&self, e: Estimator) -> Result<Vec<(usize, i64)>, String> {
        runtimes(&self.chunks, e).map_err(|()| {
            format!(
                "{}: chunks collected before the `{}` estimator was recorded; write the npz with --estimator median, or collect into another folder",
                self.state_path.display(),
                e.name()
            )
        })
    }

    fn write_npz(&self, e: Estimator) -> Result<usize, String> {
        let rt = self.runtimes(e)?;
        let nc = self.graph.num_config_nodes();
        let mut feat = Vec::with_capacity(rt.len() * nc * LAYOUT_CONFIG_DIM);
        for &(i, _) in &rt {
            for (s, &c) in self.spaces.iter().zip(&self.plan[i].0) {
                feat.extend_from_slice(&s.candidates[c as usize].row());
            }
        }
        let configs = ConfigBatch {
            task: Task::Layout,
            num_configs: rt.len(),
            nodes_per_config: nc,
            feat,
        };
        let runtimes: Vec<i64> = rt.iter().map(|&(_, r)| r).collect();
        outfile::write_via_temp(&self.npz_path, |temp| {
            write_npz(
                temp,
                &self.graph,
                Some(&configs),
                Some(&runtimes),
                Task::Layout,
            )
            .map_err(|e| e.to_string())
        })?;
        Ok(rt.len())
    }

    /// The module with configuration `i` applied, as the layout pass applies
    /// its choice.
    fn trial(&self, i: usize) -> Result<hlo::Module, String> {
        let mut t = self.module.clone();
        let dec = decisions(&t, &self.spaces, &self.plan[i].0);
        assign::assign(&mut t, &dec).map_err(|e| e.to_string())?;
        Ok(t)
    }

    fn summary(&self, e: Estimator) -> Value {
        let rt = self.runtimes(e).unwrap_or_default();
        // Each estimator's error on the control (true ratio 1), per chunk.
        let error = |r: f64| (r.ln()).abs();
        let control_error_median =
            median(self.chunks.iter().map(|c| error(c.control_ratio)).collect());
        let control_error_min = median(
            self.chunks
                .iter()
                .filter_map(|c| c.control_ratio_min.map(error))
                .collect(),
        );
        let failed: usize = self
            .chunks
            .iter()
            .map(|c| c.ratio.iter().filter(|r| r.is_none()).count())
            .sum();
        let spreads: Vec<f64> = self.chunks.iter().map(|c| c.spread).collect();
        let loads: Vec<f64> = self.chunks.iter().filter_map(|c| c.load1).collect();
        let count = |k: Kind| self.plan.iter().filter(|(_, x)| *x == k).count();
        json!({
            "module": self.path.display().to_string(),
            "npz": self.npz_path.file_name().map(|n| n.to_string_lossy().to_string()),
            "configurable_nodes": self.spaces.len(),
            "planned": {
                "total": self.plan.len(),
                "near": count(Kind::Near),
                "random": count(Kind::Random),
                "all": count(Kind::All),
            },
            "measured": if rt.is_empty() { 0 } else { self.measured().len() },
            "in_npz": rt.len(),
            "failed": failed,
            "chunks": self.chunks.len(),
            "rounds": self.chunks.iter().map(|c| c.rounds).sum::<usize>(),
            "estimator": e.name(),
            "default_seconds": self.default_seconds(e),
            "control_spread_median": median(spreads.clone()),
            "control_spread_max": spreads.iter().copied().fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x)))),
            "control_ratio_median": median(self.chunks.iter().map(|c| c.control_ratio).collect()),
            "control_error_median_estimator": control_error_median,
            "control_error_min_estimator": control_error_min,
            "load1_min": loads.iter().copied().fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.min(x)))),
            "load1_max": loads.iter().copied().fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x)))),
            "wall_seconds": self.chunks.iter().map(|c| c.wall_seconds).sum::<f64>() + 0.0,
        })
    }
}

/// What the device is, for the manifest.
struct DeviceInfo {
    name: String,
    plugin: PathBuf,
    platform: String,
    api_version: String,
    package: Option<(String, String)>,
}

fn write_manifest(
    dir: &Path,
    jobs: &[Job],
    s: &Settings,
    dev: &DeviceInfo,
    started: &Value,
) -> Result<(), String> {
    let mut modules: Vec<Value> = jobs.iter().map(|j| j.summary(s.estimator)).collect();
    // Modules of earlier runs into this folder (state files of other inputs).
    let mine: HashSet<PathBuf> = jobs.iter().map(|j| j.state_path.clone()).collect();
    if let Ok(entries) = std::fs::read_dir(dir) {
        let mut others: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().ends_with(".collect.jsonl") && !mine.contains(p))
            .collect();
        others.sort();
        for p in others {
            modules.push(json!({ "state": p.file_name().map(|n| n.to_string_lossy().to_string()), "note": "collected by an earlier run (not among this run's inputs)" }));
        }
    }
    let doc = json!({
        "format": "hlo-cost-collect-manifest",
        "version": 1,
        "tool": format!("hlo-cost {}", env!("CARGO_PKG_VERSION")),
        "task": "layout",
        "device": dev.name,
        "plugin": {
            "path": dev.plugin.display().to_string(),
            "platform": dev.platform,
            "pjrt_api_version": dev.api_version,
            "package": dev.package.as_ref().map(|(n, _)| n),
            "package_version": dev.package.as_ref().map(|(_, v)| v),
        },
        "machine": machine(),
        "run": started,
        "settings": {
            "seed": s.seed,
            "configs": s.configs,
            "random_fraction": s.random_fraction,
            "chunk": s.chunk,
            "measure_budget_seconds": s.measure_budget,
            "rounds": "interleaved rounds per chunk: at least 5, at most 40, until measure_budget_seconds",
            "estimator": s.estimator.name(),
            "runtime": "config_runtime = the configuration's ratio to the compiler default within its chunk x the default's median seconds over chunks, in ns; estimator min: fastest round / the default's fastest round (the default's seconds: its fastest round); median: median of per-round ratios",
            "control_error": "control_error_*_estimator: median over chunks of |ln(control / default)| by each estimator (the control is the default compiled twice: 0 is perfect)",
        },
        "modules": modules,
    });
    let path = dir.join("manifest.json");
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())? + "\n";
    outfile::write_via_temp(&path, |temp| {
        std::fs::write(temp, &text).map_err(|e| format!("{}: {e}", path.display()))
    })
}

/// Parses, featurizes and plans every module; errors name the file.
fn plan_job(path: &Path, dir: &Path, s: &Settings) -> Result<Job, String> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| format!("{name}: {e}"))?;
    let text = hlo::source_text(&bytes, &name).map_err(|e| e.render())?;
    let module = hlo::parse_module_named(text, &name).map_err(|e| e.render())?;
    hlo::verify_in_source(&module, text, &name).map_err(|e| e.render())?;
    let f = featurize(&module, Task::Layout).map_err(|e| format!("{name}: {e}"))?;
    if f.config_nodes.is_empty() {
        return Err(format!(
            "{name}: no configurable node (convolution, dot or reshape outside fusions): nothing to collect"
        ));
    }
    let spaces = candidates::spaces(&module, &f.config_nodes);
    let sizes: Vec<usize> = spaces.iter().map(|s| s.candidates.len()).collect();
    let default: Vec<u16> = spaces.iter().map(|s| s.default as u16).collect();
    let module_hash = fnv64(text.as_bytes());
    let plan = sample(
        &sizes,
        &default,
        s.configs,
        s.random_fraction,
        s.seed ^ module_hash,
    );
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "module".into());
    let stem = file.strip_suffix(".hlo").unwrap_or(&file).to_string();
    Ok(Job {
        path: path.to_path_buf(),
        state_path: dir.join(format!("{stem}.collect.jsonl")),
        npz_path: dir.join(format!("{stem}.npz")),
        stem,
        module,
        module_hash,
        graph: f.graph,
        spaces,
        plan,
        chunks: Vec::new(),
    })
}

/// What kind of failure stopped a collection (the Python package maps
/// these to its exceptions; the CLI prints the message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A setting out of its range.
    Settings,
    /// An input module that cannot be collected (unreadable, invalid, no
    /// configurable node, two inputs of one name, an input as an output).
    Input,
    /// The output folder holds a state this run cannot continue.
    State,
    /// The device: no plugin, or it does not start.
    Device,
    /// Reading or writing the output folder.
    Io,
}

/// An error of [`run_with`]: its kind and the message the CLI prints.
#[derive(Clone, Debug)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A bare message: a failure to read or write the output folder.
impl From<String> for Error {
    fn from(message: String) -> Error {
        Error::new(ErrorKind::Io, message)
    }
}

/// What a run says while it works: the CLI prints it, the Python package
/// keeps it.
#[derive(Clone, Copy, Debug)]
pub enum Message<'a> {
    /// A module failed (the run goes on with the next): `hlo-cost: error: ...`.
    ModuleFailed(&'a str),
    /// A module's line of results (stdout).
    Summary(&'a str),
    /// The budget ran out with this many configurations left to measure.
    BudgetSpent(usize),
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Per module of this run, its entry of `manifest.json`.
    pub modules: Vec<Value>,
    /// The messages of the modules that failed.
    pub failures: Vec<String>,
    /// Configurations planned but not measured (the budget ran out, or a
    /// module failed).
    pub not_measured: usize,
    /// The manifest written.
    pub manifest: PathBuf,
}

/// Runs `hlo-cost collect`. Returns the exit status: 0 when every module
/// was collected (or the budget ran out with the state saved), 1 when a
/// module failed. Progress is shown when stderr is a terminal.
pub fn run(modules: &[PathBuf], dir: &Path, s: &Settings) -> Result<bool, String> {
    let outcome = run_with(
        modules,
        dir,
        s,
        std::io::stderr().is_terminal(),
        &mut |m| match m {
            Message::ModuleFailed(e) => eprintln!("hlo-cost: error: {e}"),
            Message::Summary(line) => println!("{line}"),
            Message::BudgetSpent(left) => eprintln!(
                "hlo-cost: budget spent: {left} configurations not measured yet; run the same command again to continue"
            ),
        },
    )
    .map_err(|e| e.message)?;
    Ok(outcome.failures.is_empty())
}

/// [`run`], saying what it does through `say` (called with the progress
/// bar, if `progress`, out of the way) and returning what it did.
pub fn run_with(
    modules: &[PathBuf],
    dir: &Path,
    s: &Settings,
    progress: bool,
    say: &mut dyn FnMut(Message<'_>),
) -> Result<Outcome, Error> {
    check_settings(s, dir)?;
    let mut jobs = plan_jobs(modules, dir, s)?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (mut measurer, dev) = start_device(s)?;
    let settings = Settings {
        device: dev.name.clone(),
        ..s.clone()
    };
    let s = &settings;
    for j in &mut jobs {
        resume_state(j, s)?;
    }
    let started = json!({ "unix_time": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0), "loadavg_at_start": loadavg() });
    write_manifest(dir, &jobs, s, &dev, &started)?;

    let todo_total: usize = jobs
        .iter()
        .map(|j| j.todo().len() + usize::from(j.chunks.is_empty()))
        .sum();
    let bar = progress_bar(progress, todo_total);
    let start = Instant::now();
    let mut failures = Vec::new();
    let mut out_of_budget = false;
    let mut last_chunk = Duration::ZERO;
    for ji in 0..jobs.len() {
        let todo = jobs[ji].todo();
        let mut groups: Vec<Vec<usize>> =
            todo.chunks(s.chunk.max(1)).map(<[usize]>::to_vec).collect();
        if jobs[ji].chunks.is_empty() && groups.is_empty() {
            groups.push(Vec::new()); // the default alone: its time is the reference
        }
        let mut module_failed: Option<String> = None;
        for group in groups {
            if let Some(b) = s.budget {
                let left = b.saturating_sub(start.elapsed());
                if left.is_zero() || last_chunk > left {
                    out_of_budget = true;
                    break;
                }
                measurer.config.budget =
                    Duration::from_secs_f64(s.measure_budget).min(left.mul_f64(0.5));
            }
            let j = &jobs[ji];
            bar.set_message(format!(
                "{}: measuring {} configurations",
                j.stem,
                group.len()
            ));
            let t0 = Instant::now();
            let rec = match measure_chunk(j, &group, &measurer, &s.device, t0) {
                Ok(rec) => rec,
                Err(e) => {
                    module_failed = Some(e);
                    break;
                }
            };
            last_chunk = Duration::from_secs_f64(rec.wall_seconds);
            append_line(&j.state_path, &rec.to_json())?;
            jobs[ji].chunks.push(rec);
            jobs[ji].write_npz(s.estimator)?;
            write_manifest(dir, &jobs, s, &dev, &started)?;
            bar.inc(group.len().max(1) as u64);
        }
        let j = &jobs[ji];
        if let Some(e) = module_failed {
            bar.suspend(|| say(Message::ModuleFailed(&e)));
            failures.push(e);
        }
        if !j.chunks.is_empty() {
            let line = module_summary(j, s)?;
            bar.suspend(|| say(Message::Summary(&line)));
        }
        if out_of_budget {
            break;
        }
    }
    bar.finish_and_clear();
    write_manifest(dir, &jobs, s, &dev, &started)?;
    let not_measured: usize = jobs.iter().map(|j| j.todo().len()).sum();
    if out_of_budget {
        say(Message::BudgetSpent(not_measured));
    }
    Ok(Outcome {
        modules: jobs.iter().map(|j| j.summary(s.estimator)).collect(),
        failures,
        not_measured,
        manifest: dir.join("manifest.json"),
    })
}

/// The settings' ranges and the output folder, checked before any work.
fn check_settings(s: &Settings, dir: &Path) -> Result<(), Error> {
    let refuse = |message: String| Err(Error::new(ErrorKind::Settings, message));
    if !(1..=100_000).contains(&s.configs) {
        return refuse(format!("--configs {}: expected 1 to 100000", s.configs));
    }
    if !(1..=256).contains(&s.chunk) {
        return refuse(format!("--chunk {}: expected 1 to 256", s.chunk));
    }
    if !(s.device == "xla-cpu" || s.device.len() > "pjrt:".len() && s.device.starts_with("pjrt:")) {
        return refuse(format!(
            "--device `{}`: expected `xla-cpu` or `pjrt:PLUGIN_PATH`",
            s.device
        ));
    }
    if !(0.0..=1.0).contains(&s.random_fraction) {
        return refuse(format!(
            "--random-fraction {}: expected a number from 0 to 1",
            s.random_fraction
        ));
    }
    if !(s.measure_budget.is_finite() && s.measure_budget >= 0.0 && s.measure_budget <= 3600.0) {
        return refuse(format!(
            "--measure-budget {}: expected seconds from 0 to 3600",
            s.measure_budget
        ));
    }
    if dir.exists() && !dir.is_dir() {
        return refuse(format!("-o {}: exists and is not a folder", dir.display()));
    }
    Ok(())
}

/// Every input read and planned before anything is measured; inputs whose
/// files would collide, or that would be overwritten, are refused.
fn plan_jobs(modules: &[PathBuf], dir: &Path, s: &Settings) -> Result<Vec<Job>, Error> {
    let mut jobs = Vec::new();
    let mut errors = Vec::new();
    for p in modules {
        match plan_job(p, dir, s) {
            Ok(j) => jobs.push(j),
            Err(e) => errors.push(e),
        }
    }
    let mut stems = HashSet::new();
    for j in &jobs {
        if !stems.insert(j.stem.clone()) {
            errors.push(format!(
                "two inputs are named {}: their files in {} would collide; collect them into separate folders",
                j.stem,
                dir.display()
            ));
        }
    }
    if !errors.is_empty() {
        return Err(Error::new(ErrorKind::Input, errors.join("\n")));
    }
    let inputs: Vec<(&str, &Path)> = modules.iter().map(|p| ("input", p.as_path())).collect();
    for j in &jobs {
        for out in [&j.state_path, &j.npz_path, &dir.join("manifest.json")] {
            outfile::check_not_input(out, &inputs).map_err(|e| Error::new(ErrorKind::Input, e))?;
        }
    }
    Ok(jobs)
}

/// The device: the plugin, checked by starting it once. The budget decides
/// how long a chunk is timed, not a round count.
fn start_device(s: &Settings) -> Result<(pjrt::measure::PjrtMeasurer, DeviceInfo), Error> {
    let config = pjrt::MeasureConfig {
        budget: Duration::from_secs_f64(s.measure_budget),
        max_rounds: 1000,
        ..Default::default()
    };
    let device_error =
        |e: pjrt::PjrtError| Error::new(ErrorKind::Device, format!("--device {}: {e}", s.device));
    let measurer = pjrt::measurer_for(&s.device, config).map_err(device_error)?;
    let b = pjrt::Backend::start(&measurer.plugin).map_err(device_error)?;
    let dev = DeviceInfo {
        name: pjrt::device_name(&b.platform),
        plugin: measurer.plugin.clone(),
        platform: b.platform.clone(),
        api_version: b.api_version.clone(),
        package: plugin_package(&measurer.plugin),
    };
    Ok((measurer, dev))
}

/// Reads a job's state file (the chunks measured before), or starts it.
fn resume_state(j: &mut Job, s: &Settings) -> Result<(), Error> {
    let header = state_header(j, s);
    // A header torn by an interruption is a prefix of the one this run writes.
    let torn_header = std::fs::read(&j.state_path)
        .map(|b| !b.contains(&b'\n') && header.to_string().as_bytes().starts_with(&b))
        .unwrap_or(false);
    if j.state_path.exists() && !torn_header {
        j.chunks = read_state(&j.state_path, &header, j.plan.len())
            .map_err(|e| Error::new(ErrorKind::State, e))?;
        // A folder whose chunks predate the estimator: refused before measuring.
        j.runtimes(s.estimator)
            .map_err(|e| Error::new(ErrorKind::State, e))?;
    } else {
        // New, or interrupted while its header was written.
        let _ = std::fs::remove_file(&j.state_path);
        append_line(&j.state_path, &header)?;
    }
    Ok(())
}

fn progress_bar(progress: bool, total: usize) -> indicatif::ProgressBar {
    if !progress {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(total as u64);
    let style = indicatif::ProgressStyle::with_template(
        "{bar:30} {pos}/{len} configs {elapsed} (eta {eta}) {wide_msg}",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    b.set_style(style);
    b
}

/// Measures one chunk of a job's configurations with the compiler default
/// (started at `t0`); `Err` says why the module failed.
/// One chunk: the compiler default and the configurations of `group`,
/// measured together on `device` (also the fleet's task, `fleet.rs`).
fn measure_chunk(
    j: &Job,
    group: &[usize],
    measurer: &pjrt::measure::PjrtMeasurer,
    device: &str,
    t0: Instant,
) -> Result<ChunkRecord, String> {
    let mut trials = vec![j
        .trial(0)
        .map_err(|e| format!("{}: the compiler default: {e}", j.path.display()))?];
    let mut slot: Vec<Option<usize>> = Vec::new();
    let mut notes = vec![String::new(); group.len()];
    for (k, &i) in group.iter().enumerate() {
        match j.trial(i) {
            Ok(t) => {
                slot.push(Some(trials.len()));
                trials.push(t);
            }
            Err(e) => {
                slot.push(None);
                notes[k] = format!("layouts not applied: {e}");
            }
        }
    }
    let m = measurer.measure(&trials, 0).map_err(|e| {
        format!(
            "{}: measuring the compiler default on {device}: {e}",
            j.path.display()
        )
    })?;
    let report_lines: Vec<&str> = m.report.lines().collect();
    let mut ratio = Vec::with_capacity(group.len());
    let mut ratio_min = Vec::with_capacity(group.len());
    for (k, sl) in slot.iter().enumerate() {
        let r = sl.and_then(|t| m.ratio.get(t).copied().flatten());
        ratio_min.push(r.and(sl.and_then(|t| m.min_ratio.get(t).copied().flatten())));
        if r.is_none() && notes[k].is_empty() {
            let label = format!("candidate {}:", sl.map_or(0, |t| t + 1));
            notes[k] = report_lines
                .iter()
                .find(|l| l.trim_start().starts_with(&label))
                .map_or("not measured".to_string(), |l| {
                    l.trim_start().trim_start_matches(&label).trim().to_string()
                });
        }
        ratio.push(r);
    }
    let (Some(default_seconds), Some(default_min_seconds)) = (
        m.seconds.first().copied().flatten(),
        m.min_seconds.first().copied().flatten(),
    ) else {
        return Err(format!(
            "{}: the compiler default was not timed",
            j.path.display()
        ));
    };
    Ok(ChunkRecord {
        configs: group.to_vec(),
        ratio,
        ratio_min: Some(ratio_min),
        notes,
        default_seconds,
        default_min_seconds: Some(default_min_seconds),
        spread: m.spread,
        control_ratio: m.control_ratio,
        control_ratio_min: Some(m.control_min_ratio),
        rounds: m.rounds,
        load1: load1(),
        wall_seconds: t0.elapsed().as_secs_f64(),
    })
}

/// A job's summary line, after its npz is written.
fn module_summary(j: &Job, s: &Settings) -> Result<String, Error> {
    let n = j.write_npz(s.estimator)?;
    let sum = j.summary(s.estimator);
    Ok(format!(
        "{}: {} of {} configurations in the npz ({} failed), default {:.3} ms, control spread median ±{:.1}%, control error median {:.1}% (min estimator) / {:.1}% (median estimator)",
        j.npz_path.display(),
        n,
        j.plan.len(),
        sum["failed"],
        j.default_seconds(s.estimator).unwrap_or(0.0) * 1e3,
        sum["control_spread_median"].as_f64().unwrap_or(0.0) * 100.0,
        sum["control_error_min_estimator"].as_f64().map_or(f64::NAN, f64::exp_m1) * 100.0,
        sum["control_error_median_estimator"].as_f64().map_or(f64::NAN, f64::exp_m1) * 100.0,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_plan_and_default_first() {
        let sizes = [4, 4, 8, 2, 3];
        let default = [1, 0, 5, 1, 2];
        let a = sample(&sizes, &default, 20, 0.5, 7);
        let b = sample(&sizes, &default, 20, 0.5, 7);
        let c = sample(&sizes, &default, 20, 0.5, 8);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a[0], (default.to_vec(), Kind::Default));
        assert_eq!(a.len(), 20);
        let distinct: HashSet<&Vec<u16>> = a.iter().map(|(g, _)| g).collect();
        assert_eq!(distinct.len(), 20, "configurations are distinct");
        for (g, _) in &a {
            assert!(g.iter().zip(&sizes).all(|(&c, &s)| (c as usize) < s));
        }
    }

    #[test]
    fn near_configurations_change_one_to_three_nodes_random_ones_any() {
        let sizes = [6; 10];
        let default = [0; 10];
        let plan = sample(&sizes, &default, 41, 0.5, 1);
        let near: Vec<_> = plan.iter().filter(|(_, k)| *k == Kind::Near).collect();
        let random: Vec<_> = plan.iter().filter(|(_, k)| *k == Kind::Random).collect();
        assert_eq!((near.len(), random.len()), (20, 20));
        for (g, _) in near {
            let changed = g.iter().zip(&default).filter(|(a, b)| a != b).count();
            assert!((1..=3).contains(&changed), "{g:?}");
        }
        let far = random
            .iter()
            .filter(|(g, _)| g.iter().zip(&default).filter(|(a, b)| a != b).count() > 3)
            .count();
        assert!(
            far > 10,
            "random configurations are mostly far from the default"
        );
        // Interleaved: the first ten hold both kinds.
        let kinds: HashSet<Kind> = plan[1..11].iter().map(|(_, k)| *k).collect();
        assert!(kinds.contains(&Kind::Near) && kinds.contains(&Kind::Random));
    }

    #[test]
    fn a_small_space_is_taken_whole() {
        let plan = sample(&[2, 3], &[1, 2], 10, 0.5, 0);
        assert_eq!(plan.len(), 6);
        assert_eq!(plan[0].0, vec![1, 2]);
        assert!(plan[1..].iter().all(|(_, k)| *k == Kind::All));
    }

    /// A state line as `hlo-cost collect` writes it; `min`: with the minimum
    /// estimator's fields (absent from chunks collected before them).
    fn chunk_line(configs: &[usize], ratio: &[f64], min: Option<&[f64]>) -> Value {
        let mut v = json!({
            "configs": configs,
            "ratio": ratio,
            "notes": vec![""; configs.len()],
            "default_seconds": 0.002,
            "spread": 0.1,
            "control_ratio": 1.01,
            "rounds": 20,
        });
        if let Some(m) = min {
            v["ratio_min"] = json!(m);
            v["default_min_seconds"] = json!(0.001);
            v["control_ratio_min"] = json!(0.98);
        }
        v
    }

    /// Runtimes are the chosen estimator's ratio times the default's
    /// seconds by that estimator; chunks without the minimum's fields refuse
    /// `--estimator min` (not silently mixed) and still give the median.
    #[test]
    fn runtimes_follow_the_estimator_and_old_chunks_refuse_min() {
        let c = ChunkRecord::from_json(&chunk_line(&[1, 2], &[1.5, 0.5], Some(&[2.0, 0.25])), 3)
            .expect("a chunk line");
        let round_trip = ChunkRecord::from_json(&c.to_json(), 3).expect("its own line");
        assert_eq!(round_trip.ratio_min, c.ratio_min);
        let chunks = vec![c];
        assert_eq!(
            runtimes(&chunks, Estimator::Median),
            Ok(vec![(0, 2_000_000), (1, 3_000_000), (2, 1_000_000)])
        );
        assert_eq!(
            runtimes(&chunks, Estimator::Min),
            Ok(vec![(0, 1_000_000), (1, 2_000_000), (2, 250_000)])
        );
        let old = ChunkRecord::from_json(&chunk_line(&[1, 2], &[1.5, 0.5], None), 3)
            .expect("an old chunk line");
        assert!(old.ratio_min.is_none());
        let chunks = vec![chunks[0].clone(), old];
        assert_eq!(runtimes(&chunks, Estimator::Min), Err(()));
        assert!(runtimes(&chunks, Estimator::Median).is_ok());
        // A ratio that is not a positive number is a bad line.
        let bad = chunk_line(&[1, 2], &[1.5, 0.5], Some(&[2.0, -1.0]));
        assert!(ChunkRecord::from_json(&bad, 3).is_none());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").ok(), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m").ok(), Some(Duration::from_secs(600)));
        assert_eq!(
            parse_duration("1h30m").ok(),
            Some(Duration::from_secs(5400))
        );
        assert_eq!(parse_duration("1.5h").ok(), Some(Duration::from_secs(5400)));
        for bad in ["", "m", "10x", "-5s", "1..2s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
