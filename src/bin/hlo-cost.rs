//! `hlo-cost`: featurize HLO modules into TpuGraphs npz files and evaluate cost
//! models on npz files of the published format.
//!
//! - `hlo-cost featurize --task layout|tile FILE.hlo -o OUT.npz [--runs RUNS.json]`
//!   writes the module's TpuGraphs features. The configurations come from a
//!   `.runs.json` (successful runs, with their measured runtimes), or else are
//!   the compiler's default layout alone (layout) or none (tile).
//! - `hlo-cost featurize --task layout RECORD.pb -o OUT.npz` (a raw TpuGraphs
//!   `ModuleTuningData`) and `--task tile RECORD.pb [--module I]` (a
//!   `TuningData`): the module and its successful runs both come from the
//!   record, as TpuGraphs made its published npz files.
//! - `hlo-cost eval [--model MODEL] NPZ...` scores every configuration of every
//!   file and reports the ranking metrics per graph and overall (files without
//!   runtimes, like the published test split, get predictions only). `MODEL`
//!   is a model file, `reference` (the hand-written
//!   [`costmodel::reference::ReferenceModel`]) or, when absent, the embedded
//!   default ONNX model of each file's task.
//! - `hlo-cost collect MODULE... --device xla-cpu|pjrt:PATH -o DIR` measures
//!   sampled layout configurations of each module on a PJRT device and writes
//!   them as published-format npz files with a manifest (`collect.rs`);
//!   resumable, its timings are measurements (not deterministic), its plan is.
//! - `hlo-cost collect --kernels MODULE.mlir... -o DIR` times every XLA:CPU
//!   kernel candidate of StableHLO modules with jaxlib's own CPU client
//!   (handed to `python -m hlo_opt.xla_cpu collect`, `collect/python.rs`).
//!
//! Output (of featurize and eval) is deterministic for the same input and model. Errors are rendered
//! for people on stderr with exit status 1 (2 for bad flags): invalid HLO as
//! `hlo-opt` renders it (`file:line:col: error: ...`, the source line and a
//! caret), anything else as `hlo-cost: error: ...`; an error in one file of
//! `eval` is reported and the other files are still evaluated.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use costmodel::incremental::score_batch;
use costmodel::metrics::{self, RankingMetrics};
use costmodel::npz::{write_npz_with, NpzGraphFile, WriteOptions};
use costmodel::reference::ReferenceModel;
use costmodel::tuning::{self, Configs, Record};
use costmodel::{CostModel, Task};
use serde_json::{json, Value};

use hlo_opt_tools::{collect, outfile};

#[path = "../gpu_tiles.rs"]
mod gpu_tiles;

/// mimalloc: the readers allocate many small strings and vectors (a
/// quarter of the StableHLO read was the system malloc and free).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What `--help` says after the commands: inputs, ONNX Runtime, exit codes.
const AFTER_HELP: &str = "\
Inputs:
  featurize --task layout  a whole module before XLA's layout assignment and
                           fusion (e.g. *.pre.hlo); its convolutions, dots and
                           reshapes are the configurable nodes
  featurize --task tile    one fused kernel after fusion: a module whose entry
                           is the kernel (e.g. testdata/tile/kernels/*.hlo)
  featurize RECORD.pb      a raw TpuGraphs autotuner record, module and
                           measured runs: ModuleTuningData (--task layout),
                           TuningData (--task tile, --module I of several)
  eval                     npz files of the published TpuGraphs format
  collect                  whole modules before layout assignment (as for
                           featurize --task layout), measured on a PJRT
                           device (XLA's CPU plugin: pip install xla-cpu-pjrt)
  collect --kernels        StableHLO modules (jax.jit(f).lower(...).as_text()),
                           every XLA:CPU kernel candidate timed with jaxlib's
                           own CPU client (a Python with jax and hlo_opt)

ONNX Runtime: `eval` with the embedded default models (or a .hlocm/.onnx
--model) runs them on ONNX Runtime 1.31.1, a shared library loaded at run
time (`bash scripts/quickstart` installs it into the checkout's .venv) and
searched as `hlo-opt --help` lists ($ORT_DYLIB_PATH first). `featurize` and
`eval --model reference` do not need it.

Exit status:
  0  success
  1  an input failed (invalid HLO as file:line:col: error: ..., a bad npz or
     model, ONNX Runtime missing, an output refused or not written); eval
     still evaluates the other files
  2  bad command line (unknown flag, bad value, missing input)";

/// Featurize HLO modules and evaluate learned cost models on TpuGraphs npz files.
#[derive(Parser, Debug)]
#[command(
    name = "hlo-cost",
    version,
    about = "Featurize HLO modules into TpuGraphs npz files and evaluate cost models on them",
    after_help = AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Write an HLO module's TpuGraphs features as a published-format npz file.
    Featurize(FeaturizeArgs),
    /// Score every configuration of npz files with a model and report ranking metrics.
    Eval(EvalArgs),
    /// Measure sampled layout configurations of modules on a device (PJRT) and write
    /// them as published-format npz files, a dataset to train a layout model on.
    Collect(CollectArgs),
    /// Convert XLA:GPU autotuning logs (every Triton GEMM candidate XLA timed)
    /// into one npz file per fusion (docs/xla-gpu.md, "The GPU tile files").
    GpuTiles(GpuTilesArgs),
    /// Build the learned XLA:GPU tile model from GPU sessions' files (their
    /// core.tar.xz: XLA's autotuning logs and the modules compiled with
    /// autotuning off) and report leave-one-program-out cross-validation.
    GpuTileModel(GpuTileModelArgs),
    /// Write, for every Triton GEMM fusion of GPU sessions, the candidates
    /// XLA's default search space holds for it (generated as XLA generates
    /// them), each with its ranker features and XLA's measured time: the
    /// data `costmodel/training/xla_gpu_ranker.py` learns from.
    GpuCandidates(GpuCandidatesArgs),
    /// Write the XLA:CPU kernel model's program features of HLO modules (one
    /// JSON object per line: file, features, and the dots and convolutions
    /// with their signatures, oneDNN eligibility and op-model rows), the rows
    /// `costmodel/training/xla_cpu_model.py` learns from.
    CpuFeatures(CpuFeaturesArgs),
}

#[derive(clap::Args, Debug)]
struct CpuFeaturesArgs {
    /// HLO modules (text or HloModuleProto), StableHLO `*.mlir` files
    /// (generic op form, read by `hlo::parse_stablehlo`), or folders: their
    /// `*.hlo` and `*.mlir` files.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Write the JSON lines here.
    #[arg(long, short = 'o', required = true)]
    out: PathBuf,
}

#[derive(clap::Args, Debug)]
struct GpuCandidatesArgs {
    /// core.tar.xz of GPU sessions (testdata/xla_gpu/session*/core.tar.xz).
    #[arg(long = "session", required = true, num_args = 1..)]
    sessions: Vec<PathBuf>,
    /// XLA's device string of the GPU (`CUDA: 9.0, Cores: 132, ...`); the
    /// default is an H100 SXM / H200 (132 SMs).
    #[arg(long)]
    gpu_device: Option<String>,
    /// Write the JSON here.
    #[arg(long, short = 'o', required = true)]
    out: PathBuf,
}

#[derive(clap::Args, Debug)]
struct GpuTileModelArgs {
    /// core.tar.xz of GPU sessions (testdata/xla_gpu/session*/core.tar.xz).
    #[arg(long = "session", required = true, num_args = 1..)]
    sessions: Vec<PathBuf>,
    /// Neighbour counts to cross-validate; the best (least mean top-1 slowdown) is kept.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,5,8", value_parser = parse_neighbours)]
    k: Vec<usize>,
    /// Write the model (JSON) here.
    #[arg(long, short = 'o')]
    out: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct GpuTilesArgs {
    /// GPU sessions' core.tar.xz (testdata/xla_gpu/session*/), every program converted.
    #[arg(long = "session", num_args = 1.., required_unless_present = "logs")]
    sessions: Vec<PathBuf>,
    /// AutotuningLogs files (`--xla_gpu_dump_autotune_logs_to`; text or binary;
    /// the new autotuner's text logs too).
    #[arg(long = "logs", num_args = 1.., requires = "hlo")]
    logs: Vec<PathBuf>,
    /// HLO modules holding the logged fusions (the module before XLA's
    /// autotuner or the optimized one; for the new autotuner's logs, the
    /// module compiled with autotuning off).
    #[arg(long = "hlo", num_args = 1..)]
    hlo: Vec<PathBuf>,
    /// Optimized HLO compiled with `--xla_gpu_autotune_level=0` (XLA's choice without autotuning).
    #[arg(long = "off-hlo", num_args = 1..)]
    off_hlo: Vec<PathBuf>,
    /// JSON file copied into every output (GPU, driver, jax/XLA versions).
    #[arg(long)]
    provenance: Option<PathBuf>,
    /// Program name in the output names (default: the log file's name up to its first `.`).
    #[arg(long)]
    program: Option<String>,
    /// Output folder.
    #[arg(long, short = 'o')]
    out: PathBuf,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum TaskArg {
    Layout,
    Tile,
}

impl TaskArg {
    fn task(self) -> Task {
        match self {
            TaskArg::Layout => Task::Layout,
            TaskArg::Tile => Task::Tile,
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum EvalTask {
    /// Each file's task, told by its keys.
    Auto,
    Layout,
    Tile,
}

#[derive(clap::Args, Debug)]
struct FeaturizeArgs {
    /// The TpuGraphs task: layout (configurable convolution/dot/reshape nodes) or tile (a fused kernel).
    #[arg(long, value_enum)]
    task: TaskArg,
    /// HLO text module, or a raw TpuGraphs autotuner record: a
    /// `ModuleTuningData` protobuf (--task layout) or a `TuningData` (--task
    /// tile), told from text by content; a record carries its runs.
    input: PathBuf,
    /// Output npz file.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// Configurations and runtimes from a `.runs.json` autotuner record (successful runs only).
    #[arg(long)]
    runs: Option<PathBuf>,
    /// Which module of a `TuningData` record with several (0-based).
    #[arg(long)]
    module: Option<usize>,
    /// Store the arrays uncompressed (np.savez) instead of deflated (np.savez_compressed).
    #[arg(long)]
    stored: bool,
}

#[derive(clap::Args, Debug)]
struct EvalArgs {
    /// Model file (.hlocm or .onnx), `reference` for the hand-written reference
    /// model, `xla-cpu` for the built-in layout model of XLA:CPU runtimes, or
    /// nothing for the embedded default model of each file's task.
    #[arg(long)]
    model: Option<String>,
    /// Task of the files; `auto` takes each file's task from its keys.
    #[arg(long, value_enum, default_value = "auto")]
    task: EvalTask,
    /// Machine-readable JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
    /// Also output each configuration's predicted score (lower = faster), in the file's config order.
    #[arg(long)]
    predictions: bool,
    /// Configurations scored per model call (1 to 65536).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    batch: u64,
    /// Threads per model session (0 = ONNX Runtime's default).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// npz files of the published TpuGraphs format.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct CollectArgs {
    /// HLO modules before layout assignment (e.g. *.pre.hlo); with
    /// --kernels, StableHLO modules (`jax.jit(f).lower(...).as_text()`).
    #[arg(required = true)]
    modules: Vec<PathBuf>,
    /// Where to measure: `xla-cpu` (XLA's CPU PJRT plugin; with --kernels,
    /// jaxlib's own CPU client) or `pjrt:PLUGIN_PATH`.
    #[arg(long, default_value = "xla-cpu", value_parser = parse_device)]
    device: String,
    /// Measure XLA:CPU's kernel choices (every candidate of the xla-cpu
    /// pass, docs/xla-cpu.md) of StableHLO modules with jaxlib's own CPU
    /// client, on seeded random arguments, into STEM.npz and STEM.hlo: the
    /// data `bash scripts/xla_cpu_retrain` trains on. Run by
    /// `python -m hlo_opt.xla_cpu collect` (a Python with jax and hlo_opt:
    /// $HLO_OPT_PYTHON, else the checkout's .venv); resumable.
    #[arg(long, conflicts_with_all = ["configs", "random_fraction", "chunk", "estimator", "ray"])]
    kernels: bool,
    /// With --kernels: measure each module until it holds N measurements,
    /// taken in separate passes over the modules; its labels are their
    /// geometric mean (a rerun with a larger N adds to what is there).
    #[arg(long, default_value_t = 1, requires = "kernels", value_parser = clap::value_parser!(u64).range(1..=1000))]
    collections: u64,
    /// Output folder: per module STEM.npz and STEM.collect.jsonl (the state a
    /// later run continues from), and manifest.json.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// Configurations per module, the compiler default included.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    configs: u64,
    /// Share of random configurations (every node drawn); the rest change 1-3 nodes of the default.
    #[arg(long, default_value_t = 0.5, value_parser = parse_fraction)]
    random_fraction: f64,
    /// Seed of the sampling (same seed, module and settings: same configurations).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Wall-time budget of this run (90s, 10m, 1h30m); the state is kept, a
    /// later run with the same command continues.
    #[arg(long, value_parser = collect::parse_duration)]
    budget: Option<std::time::Duration>,
    /// Configurations measured together in one interleaved run with the
    /// compiler default and its control.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=256))]
    chunk: u64,
    /// Seconds of interleaved timing rounds per chunk (compiles not included).
    #[arg(long, default_value_t = 2.0, value_parser = parse_chunk_seconds)]
    measure_budget: f64,
    /// A configuration's ratio to the compiler default within its chunk:
    /// `median` (median of per-round ratios) or `min` (its fastest round /
    /// the default's fastest round). The state records both; this picks the
    /// npz's. The median is the default: on the control (the default
    /// compiled twice) its median error was 1.7% against the minimum's 4.3%
    /// (docs/cost-models.md: 219 chunks at load 8-18).
    #[arg(long, default_value = "median", value_parser = ["min", "median"])]
    estimator: String,
    /// Collect over the Ray cluster at ADDRESS (`auto`, `HOST:PORT`), one
    /// task per chunk, by the fleet driver `python -m hlo_opt.fleet`
    /// (docs/fleet.md); `local`: the same driver with local processes.
    #[arg(long, value_name = "ADDRESS")]
    ray: Option<String>,
    /// With --ray or --kernels: let one folder hold measurements from
    /// machines whose device fingerprints differ (CPU model, plugin or XLA
    /// version).
    #[arg(long)]
    allow_mixed_devices: bool,
}

/// A `--device`: `xla-cpu` or `pjrt:PLUGIN_PATH` (whether the plugin is
/// there is the run's business, status 1).
fn parse_device(s: &str) -> Result<String, String> {
    s.parse::<pjrt::MeasureTarget>().map(|_| s.to_string())
}

fn parse_fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(format!("`{s}`: expected a number from 0 to 1")),
    }
}

/// A `--k` entry: a neighbour count from 1 to 1000.
fn parse_neighbours(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(k) if (1..=1000).contains(&k) => Ok(k),
        _ => Err(format!("`{s}`: expected a neighbour count from 1 to 1000")),
    }
}

fn parse_chunk_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=3600.0).contains(&x) => Ok(x),
        _ => Err(format!("`{s}`: expected seconds from 0 to 3600")),
    }
}

/// A failure rendered for people.
#[derive(Debug)]
struct CliError(String);

impl From<costmodel::CostModelError> for CliError {
    fn from(e: costmodel::CostModelError) -> Self {
        CliError(e.to_string())
    }
}

/// A failure of a command: an HLO error is printed as [`hlo::Error::render`]
/// renders it (`file:line:col: error: ...`, the source line and a caret, as
/// `hlo-opt` prints it); anything else as `hlo-cost: error: MESSAGE`.
#[derive(Debug)]
enum Failure {
    Hlo(hlo::Error),
    Cli(CliError),
}

impl From<CliError> for Failure {
    fn from(e: CliError) -> Self {
        Failure::Cli(e)
    }
}

impl From<costmodel::CostModelError> for Failure {
    fn from(e: costmodel::CostModelError) -> Self {
        Failure::Cli(e.into())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Featurize(args) => featurize(&args),
        Command::Eval(args) => eval(&args).map_err(Failure::Cli),
        Command::Collect(args) => collect_cmd(&args).map_err(Failure::Cli),
        Command::GpuTiles(args) => gpu_tiles_cmd(&args).map_err(Failure::Cli),
        Command::GpuTileModel(args) => gpu_tile_model_cmd(&args).map_err(Failure::Cli),
        Command::GpuCandidates(args) => gpu_candidates_cmd(&args).map_err(Failure::Cli),
        Command::CpuFeatures(args) => cpu_features_cmd(&args),
    };
    match result {
        Ok(code) => code,
        Err(Failure::Hlo(e)) => {
            eprintln!("{}", e.render());
            ExitCode::FAILURE
        }
        Err(Failure::Cli(CliError(message))) => {
            eprintln!("hlo-cost: error: {message}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------------------
// collect

fn gpu_tile_model_cmd(args: &GpuTileModelArgs) -> Result<ExitCode, CliError> {
    use passes::tile::xla_gpu::model;
    let mut records = Vec::new();
    let mut provenance = Vec::new();
    for s in &args.sessions {
        let (r, p) = model::session_records(s).map_err(|e| CliError(format!("error: {e}")))?;
        records.extend(r);
        provenance.push(p);
    }
    let programs: std::collections::BTreeSet<&str> =
        records.iter().map(|r| r.program.as_str()).collect();
    println!(
        "{} Triton GEMM fusions of {} programs; leave-one-program-out, each fusion's choice against its best measured Triton config:\n",
        records.len(),
        programs.len()
    );
    if args.k.is_empty() || args.k.contains(&0) {
        return Err(CliError("--k: give neighbour counts of at least 1".into()));
    }
    let mut best: Option<(f64, usize)> = None;
    for &k in &args.k {
        let rows = model::lopo(&records, k);
        println!("k = {k}\n{}", model::lopo_table(&rows));
        let score = rows[0].mean_top1_slowdown;
        if best.is_none_or(|(b, _)| score < b) {
            best = Some((score, k));
        }
    }
    let k = best.map_or(1, |b| b.1);
    println!("chosen: k = {k}");
    if let Some(out) = &args.out {
        let m = model::TileModel {
            kind: "xla-gpu-tile-knn".into(),
            provenance: provenance.join("; "),
            k,
            records,
        };
        let text = serde_json::to_string(&m).map_err(|e| CliError(e.to_string()))?;
        std::fs::write(out, text + "\n")
            .map_err(|e| CliError(format!("{}: {e}", out.display())))?;
        println!("wrote {}", out.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn gpu_candidates_cmd(args: &GpuCandidatesArgs) -> Result<ExitCode, CliError> {
    use passes::tile::xla_gpu::{candidates, search_space::Device};
    let device = match &args.gpu_device {
        Some(s) => {
            Device::from_device_string(s).map_err(|e| CliError(format!("--gpu-device: {e}")))?
        }
        None => Device::HOPPER_132,
    };
    let file = candidates::session_file(&args.sessions, &device).map_err(CliError)?;
    let n: usize = file.fusions.iter().map(|f| f.candidates.len()).sum();
    let measured: usize = file
        .fusions
        .iter()
        .flat_map(|f| &f.candidates)
        .filter(|c| c.nanos.is_some())
        .count();
    let text = serde_json::to_string(&file).map_err(|e| CliError(e.to_string()))?;
    std::fs::write(&args.out, text + "\n")
        .map_err(|e| CliError(format!("{}: {e}", args.out.display())))?;
    eprintln!(
        "gpu-candidates: {} fusions, {n} candidates ({measured} measured by XLA); wrote {}",
        file.fusions.len(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn cpu_features_cmd(args: &CpuFeaturesArgs) -> Result<ExitCode, Failure> {
    use passes::xla_cpu::features::{program_features, FEATURE_NAMES};
    let mut files = Vec::new();
    for p in &args.inputs {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| CliError(format!("{}: {e}", p.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "hlo" || x == "mlir"))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    let mut text = String::new();
    for f in &files {
        let bytes = std::fs::read(f).map_err(|e| CliError(format!("{}: {e}", f.display())))?;
        let module = if f.extension().is_some_and(|x| x == "mlir") {
            let text =
                String::from_utf8(bytes).map_err(|e| CliError(format!("{}: {e}", f.display())))?;
            hlo::parse_stablehlo(&text).map_err(Failure::Hlo)?
        } else {
            hlo::load_bytes(bytes, &f.display().to_string())
                .map_err(Failure::Hlo)?
                .module
        };
        let row = program_features(&module);
        let ops: Vec<_> = passes::xla_cpu::contractions::contractions(&module)
            .into_iter()
            .map(|d| {
                serde_json::json!({ "signature": d.signature, "eligible": d.eligible,
                                    "count": d.count, "features": d.features.to_vec() })
            })
            .collect();
        let line = serde_json::json!({ "file": f.display().to_string(), "features": row.to_vec(), "ops": ops });
        text += &line.to_string();
        text.push('\n');
    }
    hlo_opt_tools::outfile::write_via_temp(&args.out, |p| {
        std::fs::write(p, &text).map_err(|e| format!("{}: {e}", p.display()))
    })
    .map_err(CliError)?;
    eprintln!(
        "cpu-features: {} modules, {} features each; wrote {}",
        files.len(),
        FEATURE_NAMES.len(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn gpu_tiles_cmd(args: &GpuTilesArgs) -> Result<ExitCode, CliError> {
    let inputs = gpu_tiles::Inputs {
        sessions: &args.sessions,
        logs: &args.logs,
        modules: &args.hlo,
        off_modules: &args.off_hlo,
        provenance: args.provenance.as_deref(),
        program: args.program.as_deref(),
        device: None,
        out: &args.out,
    };
    let (written, lines) =
        gpu_tiles::convert(&inputs).map_err(|e| CliError(format!("error: {e}")))?;
    for l in &lines {
        eprintln!("{l}");
    }
    eprintln!(
        "gpu-tiles: wrote {written} file{}",
        if written == 1 { "" } else { "s" }
    );
    Ok(if written == 0 {
        eprintln!("error: no fusion of the logs was found in the modules");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn collect_cmd(args: &CollectArgs) -> Result<ExitCode, CliError> {
    if let Some(address) = &args.ray {
        return collect_fleet(args, address);
    }
    if args.kernels {
        return collect_kernels(args);
    }
    if args.allow_mixed_devices {
        return Err(CliError(
            "--allow-mixed-devices applies to --ray and --kernels collections only".into(),
        ));
    }
    let budget = args.budget;
    let settings = collect::Settings {
        device: args.device.clone(),
        estimator: collect::Estimator::parse(&args.estimator).map_err(CliError)?,
        configs: args.configs as usize,
        random_fraction: args.random_fraction,
        seed: args.seed,
        chunk: args.chunk as usize,
        measure_budget: args.measure_budget,
        budget,
    };
    let ok = collect::run(&args.modules, &args.output, &settings).map_err(CliError)?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `collect --kernels`: the modules, seed and budgets handed to
/// `python -m hlo_opt.xla_cpu collect OUT --modules ...`, which times every
/// XLA:CPU kernel candidate with jaxlib's own CPU client.
fn collect_kernels(args: &CollectArgs) -> Result<ExitCode, CliError> {
    if args.device != "xla-cpu" {
        return Err(CliError(format!(
            "--kernels measures with jaxlib's own CPU client (--device xla-cpu), not `{}`",
            args.device
        )));
    }
    let mut argv = vec![
        "collect".to_string(),
        args.output.display().to_string(),
        "--seed".into(),
        args.seed.to_string(),
        "--budget-s".into(),
        args.measure_budget.to_string(),
    ];
    if let Some(b) = args.budget {
        argv.extend(["--budget".into(), b.as_secs_f64().to_string()]);
    }
    if args.allow_mixed_devices {
        argv.push("--allow-mixed-devices".into());
    }
    if args.collections > 1 {
        argv.extend(["--collections".into(), args.collections.to_string()]);
    }
    argv.push("--modules".into());
    argv.extend(args.modules.iter().map(|m| m.display().to_string()));
    let driver = collect::python::Driver {
        module: "hlo_opt.xla_cpu",
        flag: "--kernels",
        what: "the XLA:CPU kernel collection",
        needs: &[
            ("jax", "jax is not installed there (pip install jax==0.10.2, or the jaxlib the model is for)"),
            ("hlo_opt", "the hlo_opt package is not installed there (docs/python.md)"),
        ],
    };
    let code = collect::python::hand_off(&driver, &argv).map_err(CliError)?;
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// `collect --ray`: the same flags, handed to the fleet driver (Python).
fn collect_fleet(args: &CollectArgs, address: &str) -> Result<ExitCode, CliError> {
    let mut argv: Vec<String> = args
        .modules
        .iter()
        .map(|m| m.display().to_string())
        .collect();
    let flag = |name: &str, value: String| [format!("--{name}"), value];
    argv.extend(flag("output", args.output.display().to_string()));
    argv.extend(flag("ray", address.to_string()));
    argv.extend(flag("device", args.device.clone()));
    argv.extend(flag("configs", args.configs.to_string()));
    argv.extend(flag("random-fraction", args.random_fraction.to_string()));
    argv.extend(flag("seed", args.seed.to_string()));
    argv.extend(flag("chunk", args.chunk.to_string()));
    argv.extend(flag("measure-budget", args.measure_budget.to_string()));
    argv.extend(flag("estimator", args.estimator.clone()));
    if let Some(b) = args.budget {
        argv.extend(flag("budget", b.as_secs_f64().to_string()));
    }
    if args.allow_mixed_devices {
        argv.push("--allow-mixed-devices".into());
    }
    let code = collect::fleet::hand_off(&argv).map_err(CliError)?;
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

// ---------------------------------------------------------------------------
// featurize

fn featurize(args: &FeaturizeArgs) -> Result<ExitCode, Failure> {
    let task = args.task.task();
    let name = args.input.display().to_string();
    let mut inputs = vec![("input", args.input.as_path())];
    if let Some(runs) = &args.runs {
        inputs.push(("--runs file", runs.as_path()));
    }
    outfile::check_not_input(&args.output, &inputs).map_err(CliError)?;
    outfile::check_writable(&args.output).map_err(CliError)?;
    let bytes = std::fs::read(&args.input).map_err(|e| CliError(format!("{name}: {e}")))?;
    let (module, record) = if is_hlo_text(&bytes) {
        if args.module.is_some() {
            return Err(CliError(format!(
                "{name}: --module selects a module of a TuningData record; this is HLO text"
            ))
            .into());
        }
        let text = hlo::source_text(&bytes, &name).map_err(Failure::Hlo)?;
        let module = hlo::parse_module_named(text, &name).map_err(Failure::Hlo)?;
        let record = match &args.runs {
            Some(runs) => Some(runs_json(runs)?),
            None => None,
        };
        (module, record)
    } else {
        if let Some(runs) = &args.runs {
            return Err(CliError(format!(
                "{name}: a raw autotuner record carries its runs; --runs {} is for HLO text input",
                runs.display()
            ))
            .into());
        }
        let (module, record) = read_record(&bytes, &name, task, args.module)?;
        (module, Some(record))
    };
    if task == Task::Tile {
        passes::tile::kernel::check_single_kernel(&module)
            .map_err(|e| CliError(format!("{name}: {e}")))?;
    }
    let f = costmodel::features::featurize(&module, task)
        .map_err(|e| CliError(format!("{name}: {e}")))?;
    let graph = &f.graph;
    let configs = match &record {
        Some(r) => r
            .configs(task, &graph.node_config_ids)
            .map_err(|e| CliError(format!("{name}: {e}")))?,
        None => Configs::compiler_default(graph, task),
    };
    if configs.batch.num_configs == 0 {
        eprintln!(
            "hlo-cost: warning: {name}: no configurations (--task tile takes them from --runs or a TuningData record); the npz holds the graph alone"
        );
    }
    let options = WriteOptions {
        stored: args.stored,
        runtime_normalizers: configs.normalizers.as_deref(),
    };
    outfile::write_via_temp(&args.output, |temp| {
        write_npz_with(
            temp,
            graph,
            Some(&configs.batch),
            Some(&configs.runtimes),
            task,
            &options,
        )
        .map_err(|e| {
            let shown = args.output.display().to_string();
            e.to_string().replace(&temp.display().to_string(), &shown)
        })
    })
    .map_err(CliError)?;
    println!(
        "{}: {} task, {} nodes, {} edges, {} configurable nodes, {} configurations",
        args.output.display(),
        task.name(),
        graph.num_nodes(),
        graph.edge_index.len(),
        graph.num_config_nodes(),
        configs.batch.num_configs
    );
    Ok(ExitCode::SUCCESS)
}

/// Whether `bytes` are HLO text (they start, after white space and
/// comments, with `HloModule`) rather than a protobuf record.
fn is_hlo_text(bytes: &[u8]) -> bool {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace());
    start.is_some_and(|p| {
        let t = &bytes[p..];
        t.starts_with(b"HloModule") || t.starts_with(b"//") || t.starts_with(b"/*")
    })
}

/// The runs of a `.runs.json` autotuner record.
fn runs_json(path: &Path) -> Result<Record, CliError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| CliError(format!("{name}: {e}")))?;
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| CliError(format!("{name}: not JSON: {e}")))?;
    Record::from_json(&doc).map_err(|e| CliError(format!("{name}: {e}")))
}

/// The module and runs of a raw TpuGraphs record: a `ModuleTuningData`
/// (layout) or one module of a `TuningData` (tile; `--module` picks one of
/// several). Fields of the module proto hlo-opt does not model are named in
/// a warning (features do not depend on them).
fn read_record(
    bytes: &[u8],
    name: &str,
    task: Task,
    pick: Option<usize>,
) -> Result<(hlo::Module, Record), Failure> {
    let cli = |e: costmodel::CostModelError| CliError(format!("{name}: {e}"));
    let data = match task {
        Task::Layout => {
            if pick.is_some() {
                return Err(CliError(format!("{name}: --module selects a module of a TuningData record (--task tile); a ModuleTuningData holds one")).into());
            }
            tuning::decode_module_tuning_data(bytes).map_err(cli)?
        }
        Task::Tile => {
            let mut all = tuning::decode_tuning_data(bytes).map_err(cli)?.modules;
            let n = all.len();
            let index = match (pick, n) {
                (Some(i), _) if i < n => i,
                (None, 1) => 0,
                (Some(i), _) => {
                    return Err(CliError(format!(
                        "{name}: --module {i}: the TuningData record holds {n} modules (0..{n})"
                    ))
                    .into())
                }
                (None, _) => {
                    return Err(CliError(format!(
                        "{name}: the TuningData record holds {n} modules; pick one with --module INDEX (0..{n})"
                    ))
                    .into())
                }
            };
            all.swap_remove(index)
        }
    };
    // TpuGraphs' node indices count instructions in the proto's order.
    let (module, report) = hlo::proto::from_bytes_lossy_as_listed(&data.module)
        .map_err(|e| CliError(format!("{name}: its module: {e}")))?;
    if !report.ignored.is_empty() {
        eprintln!(
            "hlo-cost: warning: {name}: its module holds fields hlo-opt does not model (features do not use them): {}",
            report.summary()
        );
    }
    let record = Record::from_proto(&data).map_err(cli)?;
    Ok((module, record))
}

// ---------------------------------------------------------------------------
// eval

/// The model choice, with models loaded once per task on first use. A model
/// that fails to load is reported once (for the first file that needs it);
/// later files of that task get a short reference to that error.
struct Models {
    spec: Option<String>,
    threads: usize,
    layout: Option<Result<Box<dyn CostModel>, String>>,
    tile: Option<Result<Box<dyn CostModel>, String>>,
}

impl Models {
    fn describe(&self) -> String {
        match self.spec.as_deref() {
            None => "default (embedded ONNX model)".to_string(),
            Some("reference") => "reference (hand-written heuristic)".to_string(),
            Some(p) => p.to_string(),
        }
    }

    fn load(&self, task: Task) -> Result<Box<dyn CostModel>, String> {
        let model: Box<dyn CostModel> = match self.spec.as_deref() {
            Some("reference") => Box::new(ReferenceModel::new(task)),
            Some(path) => costmodel::load_model(Some(Path::new(path)), task, self.threads)
                .map_err(|e| e.to_string())?,
            None => costmodel::load_model(None, task, self.threads).map_err(|e| e.to_string())?,
        };
        if model.task() != task {
            return Err(format!(
                "model {} is for the {} task, not {}",
                self.describe(),
                model.task().name(),
                task.name()
            ));
        }
        Ok(model)
    }

    fn get(&mut self, task: Task) -> Result<&dyn CostModel, CliError> {
        let loaded = match task {
            Task::Layout => self.layout.is_some(),
            Task::Tile => self.tile.is_some(),
        };
        let first = !loaded;
        if first {
            let model = self.load(task);
            match task {
                Task::Layout => self.layout = Some(model),
                Task::Tile => self.tile = Some(model),
            }
        }
        let slot = match task {
            Task::Layout => &self.layout,
            Task::Tile => &self.tile,
        };
        match slot {
            Some(Ok(model)) => Ok(model.as_ref()),
            Some(Err(e)) if first => Err(CliError(e.clone())),
            Some(Err(_)) => Err(CliError(format!(
                "no {} model (its loading failed, see above)",
                task.name()
            ))),
            None => Err(CliError("model slot empty".into())),
        }
    }
}

/// What eval found for one file.
struct FileReport {
    path: String,
    task: Task,
    num_nodes: usize,
    num_config_nodes: usize,
    predictions: Vec<f32>,
    /// `None` for files without runtimes.
    metrics: Option<RankingMetrics>,
}

fn eval_file(
    path: &Path,
    args: &EvalArgs,
    models: &mut Models,
    progress: &indicatif::ProgressBar,
) -> Result<FileReport, CliError> {
    let file = NpzGraphFile::open(path)?;
    let task = file.task();
    match args.task {
        EvalTask::Layout if task != Task::Layout => {
            return Err(CliError(format!(
                "{}: a {} file, but --task layout",
                path.display(),
                task.name()
            )))
        }
        EvalTask::Tile if task != Task::Tile => {
            return Err(CliError(format!(
                "{}: a {} file, but --task tile",
                path.display(),
                task.name()
            )))
        }
        _ => {}
    }
    let in_file = |e: costmodel::CostModelError| CliError(format!("{}: {e}", path.display()));
    let model = models
        .get(task)
        .map_err(|CliError(m)| CliError(format!("{}: {m}", path.display())))?;
    let prepared = model.prepare(file.graph()).map_err(in_file)?;
    let total = file.num_configs();
    let mut predictions = Vec::with_capacity(total);
    let batch = usize::try_from(args.batch).unwrap_or(usize::MAX);
    for configs in file.config_batches(batch)? {
        let configs = configs?;
        let scores = score_batch(model, &prepared, &configs).map_err(in_file)?;
        if scores.len() != configs.num_configs {
            return Err(CliError(format!(
                "{}: the model returned {} scores for {} configurations",
                path.display(),
                scores.len(),
                configs.num_configs
            )));
        }
        if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
            return Err(CliError(format!(
                "{}: the model returned a non-finite score for configuration {}",
                path.display(),
                predictions.len() + i
            )));
        }
        predictions.extend(scores);
        progress.set_message(format!(
            "{}: {}/{total} configs",
            short_name(path),
            predictions.len()
        ));
    }
    let metrics = file.has_runtimes().then(|| {
        let pred: Vec<f64> = predictions.iter().map(|&p| f64::from(p)).collect();
        RankingMetrics::compute(&pred, &file.normalized_runtimes())
    });
    Ok(FileReport {
        path: path.display().to_string(),
        task,
        num_nodes: file.graph().num_nodes(),
        num_config_nodes: file.graph().num_config_nodes(),
        predictions,
        metrics,
    })
}

fn short_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().to_string(),
    )
}

/// Means over the graphs of one task that have runtimes.
struct Overall {
    graphs: usize,
    kendall_tau: Option<f64>,
    ordered_pair_accuracy: Option<f64>,
    top1_slowdown: Option<f64>,
    top5_slowdown: Option<f64>,
    top10_slowdown: Option<f64>,
    kaggle_tile_score: Option<f64>,
}

fn overall(reports: &[&FileReport]) -> Overall {
    let ms: Vec<&RankingMetrics> = reports.iter().filter_map(|r| r.metrics.as_ref()).collect();
    let m = |f: fn(&RankingMetrics) -> Option<f64>| metrics::mean(ms.iter().map(|x| f(x)));
    Overall {
        graphs: ms.len(),
        kendall_tau: m(|x| x.kendall_tau),
        ordered_pair_accuracy: m(|x| x.ordered_pair_accuracy),
        top1_slowdown: m(|x| x.top1_slowdown),
        top5_slowdown: m(|x| x.top5_slowdown),
        top10_slowdown: m(|x| x.top10_slowdown),
        kaggle_tile_score: m(|x| x.kaggle_tile_score),
    }
}

fn eval(args: &EvalArgs) -> Result<ExitCode, CliError> {
    let mut models = Models {
        spec: args.model.clone(),
        threads: args.threads,
        layout: None,
        tile: None,
    };
    let progress = if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(args.files.len() as u64);
        let style = indicatif::ProgressStyle::with_template(
            "{bar:30} {pos}/{len} files {elapsed} {wide_msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
        bar.set_style(style);
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut results: Vec<Result<FileReport, CliError>> = Vec::with_capacity(args.files.len());
    for path in &args.files {
        let r = eval_file(path, args, &mut models, &progress);
        if let Err(CliError(m)) = &r {
            progress.suspend(|| eprintln!("hlo-cost: error: {m}"));
        }
        results.push(r);
        progress.inc(1);
    }
    progress.finish_and_clear();
    let failed = results.iter().filter(|r| r.is_err()).count();
    let ok: Vec<&FileReport> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    let mut by_task: BTreeMap<&str, Vec<&FileReport>> = BTreeMap::new();
    for r in &ok {
        by_task.entry(r.task.name()).or_default().push(r);
    }

    let mut out = std::io::stdout().lock();
    let written = if args.json {
        let files: Vec<Value> = args
            .files
            .iter()
            .zip(&results)
            .map(|(path, r)| match r {
                Ok(r) => {
                    let mut v = json!({
                        "path": r.path,
                        "task": r.task.name(),
                        "num_nodes": r.num_nodes,
                        "num_config_nodes": r.num_config_nodes,
                        "num_configs": r.predictions.len(),
                        "has_runtimes": r.metrics.is_some(),
                        "metrics": r.metrics,
                    });
                    if args.predictions {
                        v["predictions"] = json!(r.predictions);
                    }
                    v
                }
                Err(CliError(m)) => json!({ "path": path.display().to_string(), "error": m }),
            })
            .collect();
        let mut overall_json = serde_json::Map::new();
        for (task, reports) in &by_task {
            let o = overall(reports);
            let mut v = json!({
                "graphs": reports.len(),
                "graphs_with_runtimes": o.graphs,
                "mean_kendall_tau": o.kendall_tau,
                "mean_ordered_pair_accuracy": o.ordered_pair_accuracy,
                "mean_top1_slowdown": o.top1_slowdown,
                "mean_top5_slowdown": o.top5_slowdown,
                "mean_top10_slowdown": o.top10_slowdown,
            });
            match *task {
                "layout" => v["kaggle_layout_score"] = json!(o.kendall_tau),
                _ => v["kaggle_tile_score"] = json!(o.kaggle_tile_score),
            }
            overall_json.insert((*task).to_string(), v);
        }
        let doc = json!({
            "model": models.describe(),
            "files": files,
            "overall": overall_json,
            "errors": failed,
        });
        serde_json::to_writer_pretty(&mut out, &doc)
            .map_err(std::io::Error::other)
            .and_then(|()| writeln!(out))
    } else {
        write_table(&mut out, args, &models, &results, &by_task)
    };
    // A closed pipe (`| head`) is not an error worth reporting.
    if let Err(e) = written {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(CliError(format!("cannot write output: {e}")));
        }
    }
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn fmt_opt(v: Option<f64>, width: usize, prec: usize) -> String {
    match v {
        Some(x) => format!("{x:>width$.prec$}"),
        None => format!("{:>width$}", "-"),
    }
}

fn write_table(
    out: &mut impl Write,
    args: &EvalArgs,
    models: &Models,
    results: &[Result<FileReport, CliError>],
    by_task: &BTreeMap<&str, Vec<&FileReport>>,
) -> std::io::Result<()> {
    writeln!(out, "model: {}", models.describe())?;
    let width = args
        .files
        .iter()
        .map(|p| short_name(p).len())
        .max()
        .unwrap_or(4)
        .clamp(4, 64);
    writeln!(
        out,
        "{:<width$}  {:<6} {:>7} {:>7} {:>8} {:>6} {:>7} {:>7} {:>7}",
        "file", "task", "nodes", "configs", "kendall", "opa", "top1", "top5", "top10"
    )?;
    for (path, r) in args.files.iter().zip(results) {
        let name = short_name(path);
        match r {
            Err(_) => writeln!(out, "{name:<width$}  error (see above)")?,
            Ok(r) => match &r.metrics {
                Some(m) => writeln!(
                    out,
                    "{name:<width$}  {:<6} {:>7} {:>7} {} {} {} {} {}",
                    r.task.name(),
                    r.num_nodes,
                    r.predictions.len(),
                    fmt_opt(m.kendall_tau, 8, 4),
                    fmt_opt(m.ordered_pair_accuracy, 6, 3),
                    fmt_opt(m.top1_slowdown, 7, 4),
                    fmt_opt(m.top5_slowdown, 7, 4),
                    fmt_opt(m.top10_slowdown, 7, 4),
                )?,
                None => writeln!(
                    out,
                    "{name:<width$}  {:<6} {:>7} {:>7}  no runtimes: predictions only",
                    r.task.name(),
                    r.num_nodes,
                    r.predictions.len()
                )?,
            },
        }
    }
    for (task, reports) in by_task {
        let o = overall(reports);
        if o.graphs == 0 {
            writeln!(
                out,
                "overall {task}: {} graphs, none with runtimes",
                reports.len()
            )?;
            continue;
        }
        let score = match *task {
            "layout" => format!(
                "kaggle layout score (mean Kendall tau) {}",
                fmt_opt(o.kendall_tau, 0, 4)
            ),
            _ => format!(
                "kaggle tile score (mean 2 - top-5 ratio) {}",
                fmt_opt(o.kaggle_tile_score, 0, 4)
            ),
        };
        writeln!(
            out,
            "overall {task} ({} of {} graphs with runtimes): {score}; mean OPA {}; mean top-1/5/10 slowdown {} / {} / {}",
            o.graphs,
            reports.len(),
            fmt_opt(o.ordered_pair_accuracy, 0, 3),
            fmt_opt(o.top1_slowdown, 0, 4),
            fmt_opt(o.top5_slowdown, 0, 4),
            fmt_opt(o.top10_slowdown, 0, 4),
        )?;
    }
    if args.predictions {
        for r in results.iter().flatten() {
            writeln!(
                out,
                "\npredictions for {} (config index, score; lower = faster):",
                r.path
            )?;
            for (i, p) in r.predictions.iter().enumerate() {
                writeln!(out, "{i:>6} {p}")?;
            }
        }
    }
    Ok(())
}
