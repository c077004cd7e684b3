//! `hlo-opt`: parse, verify and print HLO modules.
//!
//! `hlo-opt FILE` (or `-` for stdin) parses the module, verifies it and
//! prints it to stdout, or to `-o OUT` (never onto the input file: see
//! `outfile.rs`). Errors are rendered as `file:line:col: error: message`, the
//! offending source line and a caret, and exit with status 1; a bad command
//! line exits with 2 (clap). `--help` documents both, the passes and where
//! ONNX Runtime is found.
//!
//! `--pass=layout,tile` runs passes between verify and print (`--list-passes`
//! lists them; `--explain` reports their decisions on stderr, `--explain=all`
//! for every node, `--explain-json FILE` as JSON for tools; `--budget`, `--min-gain`, `--trust-radius`,
//! `--seed`, `--model`, `--layout-model`, `--tile-model`, `--top-k`,
//! `--threads`, `--verify-each` set their options). `--measure=xla-cpu`
//! (or `--measure=pjrt:PLUGIN`) makes the layout pass measure the model's
//! `--top-k` best candidates and the compiler default on XLA:CPU through
//! PJRT and keep the fastest beyond the noise (`--measure-budget` seconds).
//!
//! The input may be HLO text or a serialized `HloModuleProto` (told apart by
//! content, whatever the file name); `--emit=proto` writes an
//! `HloModuleProto` instead of text. Proto fields hlo-opt does not model are
//! listed on stderr as warnings.
//!
//! The work is split in [`load`] -> [`transform`] -> [`emit`], so that
//! rewriting flags (`--pass=...`) only touch `Cli` and `transform`.
//!
//! # Map of the tools crate
//!
//! The crate holds the command-line tools: they parse flags, call the
//! libraries and render errors and reports for people. Its library target
//! (`src/lib.rs`: `collect`, `outfile`) is what the tools share with the
//! Python package. Each file: what it owns; what it may import.
//!
//! | file | owns | may import |
//! |---|---|---|
//! | `src/main.rs` | `hlo-opt`: flags, load -> verify -> passes -> emit, the `--explain` rendering | `outfile`; `hlo`, `passes`, `costmodel`, `pjrt` |
//! | `src/bin/hlo-cost.rs` | `hlo-cost featurize`, `eval`, `collect` | `collect`, `outfile`; `hlo`, `costmodel`, `passes`, `pjrt` |
//! | `src/collect.rs` | `hlo-cost collect`: sampling, measuring, resumable npz output | `outfile`; `hlo`, `costmodel`, `passes`, `pjrt` |
//! | `src/outfile.rs` | outputs never written onto an input, written through a renamed temporary | nothing |
//! | `src/lib.rs` | the library target: `collect` and `outfile`, for the binaries and `python/` | `collect`, `outfile` |
//! | `src/bin/hlo-opt-pjrt-worker.rs` | the PJRT worker process (all of it is `pjrt::worker`) | `pjrt` |
//!
//! No library crate imports this one.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use hlo_opt_tools::outfile;

/// mimalloc: the readers allocate many small strings and vectors (a
/// quarter of the StableHLO read was the system malloc and free).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What `--help` says after the flags: the passes, ONNX Runtime, exit codes.
const AFTER_HELP: &str = "\
Passes (--pass=a,b runs them in this order; --list-passes lists them):
  layout  Input: a module before XLA's layout assignment and fusion (e.g. *.pre.hlo).
          Chooses the minor-to-major layouts of convolutions, dots and reshapes;
          inserts copies where a consumer needs another layout.
          Flags: --budget (configurations scored), --seed, --top-k,
          --layout-model (or --model), --threads, --explain, --verify-each,
          --min-gain, --trust-radius (nodes the search may change, default 3),
          --measure and --measure-budget (time candidates on XLA:CPU).
  tile    Input: a module after fusion (e.g. *.post.hlo, TPU kernels).
          Chooses the tile sizes of each fused kernel, recorded in its
          backend_config as \"hlo_opt_tile\".
          Flags: --budget (candidates per kernel), --seed, --top-k,
          --tile-model (or --model), --threads, --explain, --verify-each.
          XLA:GPU (--tile-target=xla-gpu, or a module with Triton GEMM
          fusions): writes each \"__triton_gemm\" fusion's triton_gemm_config
          (a size heuristic for now, not a learned model) and, with
          --gpu-device, XLA's autotuning cache: --autotune-cache-dir DIR
          (XLA_FLAGS=--xla_gpu_per_fusion_autotune_cache_dir=DIR) and/or
          --autotune-results FILE[.textproto] (--xla_gpu_load_autotune_results_from);
          --autotune-key-version N (docs/xla-gpu.md).
  Without --pass, hlo-opt parses, verifies and prints the module.

ONNX Runtime: the passes' cost models run on ONNX Runtime 1.31.1, a shared
library loaded at run time (`bash scripts/quickstart` installs it into the
checkout's .venv). Searched in this order, first found wins:
  1. $ORT_DYLIB_PATH (the library file itself)
  2. next to the hlo-opt executable (or its parent folder)
  3. .venv of the current folder or an ancestor, then of the executable's ancestors
  4. .venv of the checkout hlo-opt was built from (for `cargo install --locked --path .`)
  5. $HLO_OPT_HOME/lib, else ${XDG_DATA_HOME:-~/.local/share}/hlo-opt/lib
  6. the onnxruntime package of $HLO_OPT_PYTHON, then of python3

Exit status:
  0  success
  1  the input or a run failed: invalid HLO (file:line:col: error: ...), a
     pass error, ONNX Runtime or a model file missing, an output refused or
     not written
  2  bad command line (unknown flag, bad value, missing input)";

/// What `emit` writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Emit {
    /// HLO text, as XLA prints it.
    Text,
    /// A serialized `HloModuleProto`.
    Proto,
}

/// Parse, verify and print XLA HLO modules (text or HloModuleProto); run the layout and tile passes.
#[derive(Parser, Debug)]
#[command(name = "hlo-opt", version, about, after_help = AFTER_HELP)]
struct Cli {
    /// Input HLO text or HloModuleProto file, or `-` for stdin.
    #[arg(required_unless_present = "list_passes")]
    input: Option<String>,
    /// Write the result here instead of stdout.
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Emit::Text)]
    emit: Emit,
    /// Skip the verifier (parse and print only).
    #[arg(long)]
    no_verify: bool,
    /// Run these passes in order, comma-separated (`--pass=layout,tile`); see "Passes" below.
    #[arg(long = "pass", value_name = "PASSES", value_parser = parse_passes)]
    pass: Option<String>,
    /// List the registered passes and exit.
    #[arg(long)]
    list_passes: bool,
    /// [passes] Run the verifier after every pass.
    #[arg(long)]
    verify_each: bool,
    /// [passes] Report on stderr what the passes considered and decided, and
    /// who decided (the model, the trust region, measurement); predictions are
    /// changes in percent, negative is faster, with the model's error beside
    /// them (`--explain=all`: every node, and the raw model scores).
    #[arg(long, value_name = "WHAT", num_args = 0..=1, require_equals = true,
          default_missing_value = "changed", value_parser = ["changed", "all"])]
    explain: Option<String>,
    /// [passes] Write the passes' reports as JSON to FILE (`-`: stdout, when
    /// the module goes to `-o`), for tools: per decision the candidates, the
    /// predicted changes, the model's error, the measurements, who decided.
    #[arg(long, value_name = "FILE")]
    explain_json: Option<PathBuf>,
    /// [layout, tile] Maximum number of configurations a pass's search scores
    /// (layout: in all; tile: per kernel); at least 1, default 10000.
    #[arg(long, value_parser = parse_budget)]
    budget: Option<usize>,
    /// [layout, tile] Seed of the searches (same input, model and seed: same output).
    #[arg(long)]
    seed: Option<u64>,
    /// [layout or tile] Cost model file for the single pass of `--pass` (default: the embedded model;
    /// `xla-cpu`: the built-in layout model of XLA:CPU runtimes).
    #[arg(long, value_name = "FILE")]
    model: Option<PathBuf>,
    /// [layout] Cost model file of the layout pass (default: the embedded model, trained on TPU
    /// runtimes; `xla-cpu`: the built-in model of XLA:CPU runtimes; `./xla-cpu` for a file so named).
    #[arg(long, value_name = "FILE")]
    layout_model: Option<PathBuf>,
    /// [tile] Cost model file of the tile pass (default: the embedded model).
    #[arg(long, value_name = "FILE")]
    tile_model: Option<PathBuf>,
    /// [layout, tile] How many of the best candidates to keep (and measure,
    /// where a pass can); at least 1, default 1, or 3 with `--measure`.
    #[arg(long, value_parser = parse_top_k)]
    top_k: Option<usize>,
    /// [layout] Measure candidates on a real backend and keep the fastest: `xla-cpu`
    /// (XLA's CPU PJRT plugin, `pip install xla-cpu-pjrt`) or `pjrt:PLUGIN_PATH`.
    #[arg(long, value_name = "BACKEND", value_parser = parse_measure)]
    measure: Option<String>,
    /// [layout] Seconds of interleaved timing runs for `--measure` (compiles not included).
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS", value_parser = parse_seconds)]
    measure_budget: f64,
    /// [layout, tile] ONNX Runtime intra-op threads (0 = one per available
    /// core; more than the available cores are capped, with a warning).
    #[arg(long, value_parser = parse_threads)]
    threads: Option<usize>,
    /// [layout] Smallest predicted gain (percent of the compiler default's
    /// model score) for which the layout pass changes the module; the
    /// estimated cost of the copies it would insert is added to it.
    #[arg(long, value_name = "PERCENT", value_parser = parse_min_gain)]
    min_gain: Option<f64>,
    /// [layout] Trust region of the search: at most N configurable nodes
    /// changed from the compiler default (default 3: as far as a model's
    /// near-default training configurations go), or `all`; each change must
    /// also on its own be predicted to gain --min-gain.
    #[arg(long, value_name = "N|all", value_parser = parse_radius)]
    trust_radius: Option<Radius>,
    /// [tile] Which compiler the tile pass decides for (default: auto, XLA:GPU
    /// when the module holds Triton GEMM fusions).
    #[arg(long, value_enum)]
    tile_target: Option<TileTargetArg>,
    /// [tile, xla-gpu] The GPU's device description as XLA writes it in its
    /// autotuning results (`device:` of an AutotuneResults entry), e.g.
    /// "CUDA: 9.0, Cores: 132, GPU clock: 1.98 GHz, Memory bandwidth: 3352 GB/s, L2 cache: 50 MB, DNN version: 9.8.0".
    #[arg(long, value_name = "DESCRIPTION")]
    gpu_device: Option<String>,
    /// [tile, xla-gpu] The autotuning cache key version of the XLA that reads
    /// the cache (default 36; docs/xla-gpu.md says how to read it off XLA's own results).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(0..))]
    autotune_key_version: Option<i32>,
    /// [tile, xla-gpu] Write XLA's per-fusion autotuning cache files here (needs --gpu-device).
    #[arg(long, value_name = "DIR")]
    autotune_cache_dir: Option<PathBuf>,
    /// [tile, xla-gpu] Write an AutotuneResults file here (text when it ends
    /// in .txt/.textproto/.txtpb/.pbtxt/.prototxt, else binary; needs --gpu-device).
    #[arg(long, value_name = "FILE")]
    autotune_results: Option<PathBuf>,
    /// [tile, xla-gpu] XLA's new autotuner (jax 0.11+): a logs or results file
    /// XLA wrote on the GPU (--xla_gpu_dump_autotune_logs_to), read for the
    /// device, codegen and Triton versions its cache keys hold. The module
    /// is one XLA compiled with --xla_gpu_autotune_level=0; the cache
    /// (--autotune-cache-dir) gets the learned model's choice per GEMM fusion.
    #[arg(long, value_name = "FILE")]
    autotune_env: Option<PathBuf>,
    /// [tile, xla-gpu] The learned GPU tile model with --autotune-env: a
    /// builtin name (xla-gpu-h200-ranker, the default: the ranker over
    /// XLA's generated candidates; xla-gpu-h200, kNN), a JSON file from
    /// `hlo-cost gpu-tile-model -o`, or a ranker `.onnx` file
    /// (docs/xla-gpu.md, "The ranker").
    #[arg(long, value_name = "NAME|PATH")]
    gpu_tile_model: Option<String>,
    /// [xla-cpu] The jaxlib version that will compile the module (e.g.
    /// 0.10.2): picks the built-in model trained for it; a model trained for
    /// another is refused (docs/xla-cpu.md).
    #[arg(long, value_name = "VERSION")]
    xla_version: Option<String>,
    /// [xla-cpu] The XLA:CPU kernel model: a built-in name
    /// (xla-cpu-jaxlib-0.10.2, xla-cpu-jaxlib-0.12.0.1) or an .onnx file
    /// with its card (.json) beside it, as `bash scripts/xla_cpu_retrain`
    /// writes.
    #[arg(long, value_name = "NAME|PATH")]
    xla_cpu_model: Option<String>,
    /// [xla-cpu] Write the chosen XLA compile options here, as JSON
    /// (`{"option": "value"}`; `{}` keeps XLA's default): what
    /// `jax.jit(f).lower(...).compile(compiler_options=...)` takes.
    #[arg(long, value_name = "FILE")]
    compile_options: Option<PathBuf>,
}

/// `--tile-target`: which compiler the tile pass decides for.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum TileTargetArg {
    /// XLA:GPU when the module holds Triton GEMM fusions, else TPU-style kernels.
    Auto,
    /// TPU-style kernels ranked by the tile cost model (`hlo_opt_tile`).
    Tpu,
    /// XLA:GPU's Triton GEMM fusions (`triton_gemm_config`, autotuning cache).
    XlaGpu,
}

/// A `--pass` list: every name a registered pass, no empty entry.
fn parse_passes(s: &str) -> Result<String, String> {
    passes::parse_pass_list(s)
        .map(|_| s.to_string())
        .map_err(|e| match e {
            passes::PassError::PassList(m) => m,
            other => other.to_string(),
        })
}

fn parse_budget(s: &str) -> Result<usize, String> {
    use passes::options::MAX_BUDGET;
    match s.parse::<usize>() {
        Ok(n) if (1..=MAX_BUDGET).contains(&n) => Ok(n),
        Ok(0) => Err(format!(
            "a search scores at least the compiler default; give 1 to {MAX_BUDGET}"
        )),
        _ => Err(format!(
            "`{s}`: give a number of configurations from 1 to {MAX_BUDGET}"
        )),
    }
}

fn parse_top_k(s: &str) -> Result<usize, String> {
    use passes::options::MAX_TOP_K;
    match s.parse::<usize>() {
        Ok(n) if (1..=MAX_TOP_K).contains(&n) => Ok(n),
        Ok(0) => Err(format!(
            "a pass keeps at least its best candidate; give 1 to {MAX_TOP_K}"
        )),
        _ => Err(format!(
            "`{s}`: give a number of candidates from 1 to {MAX_TOP_K}"
        )),
    }
}

fn parse_min_gain(s: &str) -> Result<f64, String> {
    use passes::options::MAX_MIN_GAIN;
    match s.parse::<f64>() {
        Ok(g) if (0.0..MAX_MIN_GAIN).contains(&g) => Ok(g),
        _ => Err(format!(
            "`{s}`: give a percentage from 0 to less than {MAX_MIN_GAIN} (a gain of 100% would be a runtime of zero)"
        )),
    }
}

/// Longest `--measure-budget`: a day.
const MAX_MEASURE_SECONDS: f64 = 86_400.0;

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(t) if (0.0..=MAX_MEASURE_SECONDS).contains(&t) => Ok(t),
        _ => Err(format!(
            "`{s}`: expected a number of seconds from 0 to {MAX_MEASURE_SECONDS} (a day)"
        )),
    }
}

fn parse_threads(s: &str) -> Result<usize, String> {
    // More than the cores is capped with a warning (passes::options), as
    // the Python package does; only what is not a count is refused here.
    s.parse::<usize>()
        .map_err(|_| format!("`{s}`: give a number of threads (0 = one per available core)"))
}

/// A `--measure` backend: `xla-cpu` or `pjrt:PLUGIN_PATH` (whether the
/// plugin is there is the run's business, status 1).
fn parse_measure(s: &str) -> Result<String, String> {
    s.parse::<pjrt::MeasureTarget>().map(|_| s.to_string())
}

/// A `--trust-radius` value: a number of nodes, or `all` (no bound).
#[derive(Clone, Copy, Debug)]
struct Radius(Option<usize>);

fn parse_radius(s: &str) -> Result<Radius, String> {
    if s == "all" {
        return Ok(Radius(None));
    }
    use passes::options::MAX_TRUST_RADIUS;
    s.parse::<usize>()
        .ok()
        .filter(|n| *n <= MAX_TRUST_RADIUS)
        .map(|n| Radius(Some(n)))
        .ok_or_else(|| {
            format!("`{s}`: give a number of nodes from 0 to {MAX_TRUST_RADIUS}, or `all`")
        })
}

impl Cli {
    /// The input path (`-` = stdin).
    fn input(&self) -> &str {
        self.input.as_deref().unwrap_or("-")
    }

    /// The pass options the flags describe (checked by
    /// `passes::options::Settings`, as the Python package's are); warnings
    /// (flags adjusted) go to `warn`.
    fn pass_options(
        &self,
        list: &str,
        warn: &mut dyn FnMut(String),
    ) -> Result<passes::PassOptions, CliError> {
        let settings = passes::options::Settings {
            budget: self.budget,
            seed: self.seed,
            top_k: self.top_k,
            threads: self.threads,
            min_gain: self.min_gain,
            trust_radius: self.trust_radius.map(|r| r.0),
            model: self.model.clone(),
            layout_model: self.layout_model.clone(),
            tile_model: self.tile_model.clone(),
            measuring: self.measure.is_some(),
            verify_each: self.verify_each,
            explain: self.explain.is_some(),
            explain_all: self.explain.as_deref() == Some("all"),
            progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        };
        if (self.autotune_cache_dir.is_some() || self.autotune_results.is_some())
            && self.gpu_device.is_none()
            && self.autotune_env.is_none()
        {
            return Err(CliError(
                "error: --autotune-cache-dir and --autotune-results need --gpu-device: the device description XLA keys its cache with (docs/xla-gpu.md)"
                    .into(),
            ));
        }
        if self.tile_target == Some(TileTargetArg::Tpu)
            && (self.autotune_cache_dir.is_some() || self.autotune_results.is_some())
        {
            return Err(CliError(
                "error: --autotune-cache-dir and --autotune-results are XLA:GPU outputs; they do not go with --tile-target=tpu"
                    .into(),
            ));
        }
        let mut o = settings
            .pass_options(list, warn)
            .map_err(|e| CliError(e.to_string()))?;
        o.tile_target = match self.tile_target {
            None | Some(TileTargetArg::Auto) => passes::TileTarget::Auto,
            Some(TileTargetArg::Tpu) => passes::TileTarget::Tpu,
            Some(TileTargetArg::XlaGpu) => passes::TileTarget::XlaGpu,
        };
        o.xla_gpu = passes::tile::xla_gpu::XlaGpuOptions {
            device: self.gpu_device.clone(),
            key_version: self.autotune_key_version,
            cache_dir: self.autotune_cache_dir.clone(),
            results_file: self.autotune_results.clone(),
            autotuner_env: match &self.autotune_env {
                Some(p) => Some(
                    passes::tile::xla_gpu::autotuner::Environment::from_file(p)
                        .map_err(|e| CliError(format!("error: --autotune-env: {e}")))?,
                ),
                None => None,
            },
            model: self.gpu_tile_model.clone(),
        };
        o.xla_cpu = passes::xla_cpu::XlaCpuOptions {
            model: self.xla_cpu_model.clone(),
            jaxlib: self.xla_version.clone(),
            cpu: None,
        };
        if let Some(spec) = &self.measure {
            let measurer = pjrt::measurer_for_budget(spec, self.measure_budget)
                .map_err(|e| CliError(format!("error: {e}")))?;
            o.measurer = Some(Box::new(measurer));
        }
        Ok(o)
    }

    /// Combinations of flags clap cannot check by itself; each is a bad
    /// command line (status 2).
    fn usage_error(&self) -> Option<String> {
        if self.compile_options.is_some()
            && !self
                .pass
                .as_deref()
                .is_some_and(|l| passes::split_pass_list(l).contains(&"xla-cpu"))
        {
            return Some(
                "--compile-options writes the xla-cpu pass's choice: add --pass=xla-cpu".into(),
            );
        }
        if self.model.is_some() {
            if let Some(list) = &self.pass {
                if !matches!(
                    passes::split_pass_list(list).as_slice(),
                    ["layout"] | ["tile"]
                ) {
                    return Some(
                        "--model names the model of a single pass; with several passes use --layout-model / --tile-model"
                            .into(),
                    );
                }
            }
        }
        if self.explain_json.as_deref() == Some(Path::new("-")) && self.output.is_none() {
            return Some(
                "--explain-json - writes the report to stdout, where the module goes too; give -o OUT for the module"
                    .into(),
            );
        }
        None
    }

    /// The flags that only matter with `--pass`, when given without it.
    fn pass_flags_without_pass(&self) -> Vec<&'static str> {
        if self.pass.is_some() {
            return Vec::new();
        }
        [
            ("--explain", self.explain.is_some()),
            ("--explain-json", self.explain_json.is_some()),
            ("--budget", self.budget.is_some()),
            ("--seed", self.seed.is_some()),
            ("--model", self.model.is_some()),
            ("--layout-model", self.layout_model.is_some()),
            ("--tile-model", self.tile_model.is_some()),
            ("--top-k", self.top_k.is_some()),
            ("--threads", self.threads.is_some()),
            ("--min-gain", self.min_gain.is_some()),
            ("--trust-radius", self.trust_radius.is_some()),
            ("--measure", self.measure.is_some()),
            ("--verify-each", self.verify_each),
            ("--tile-target", self.tile_target.is_some()),
            ("--gpu-device", self.gpu_device.is_some()),
            (
                "--autotune-key-version",
                self.autotune_key_version.is_some(),
            ),
            ("--autotune-cache-dir", self.autotune_cache_dir.is_some()),
            ("--autotune-results", self.autotune_results.is_some()),
            ("--autotune-env", self.autotune_env.is_some()),
            ("--gpu-tile-model", self.gpu_tile_model.is_some()),
        ]
        .into_iter()
        .filter(|(_, given)| *given)
        .map(|(flag, _)| flag)
        .collect()
    }
}

/// A failure rendered for people.
struct CliError(String);

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError(format!("error: {e}"))
    }
}

/// A message that names no file position, rendered as `error: ...`.
fn error(message: String) -> CliError {
    CliError(format!("error: {message}"))
}

/// Reads and parses the input (`hlo::load_bytes`: text or proto by content;
/// UTF-8 checked with the position of the first bad byte).
fn load(cli: &Cli) -> Result<hlo::Loaded, CliError> {
    let (bytes, name) = if cli.input() == "-" {
        let mut b = Vec::new();
        std::io::stdin()
            .read_to_end(&mut b)
            .map_err(|e| CliError(format!("<stdin>: error: {e}")))?;
        (b, "<stdin>".to_string())
    } else {
        let b = std::fs::read(cli.input())
            .map_err(|e| CliError(format!("{}: error: {e}", cli.input())))?;
        (b, cli.input().to_string())
    };
    let loaded = hlo::load_bytes(bytes, &name).map_err(|e| CliError(e.render()))?;
    if let Some(w) = loaded.warning() {
        eprintln!("{w}");
    }
    Ok(loaded)
}

/// Checks (and, with later flags, rewrites) the module; errors point into
/// the source text.
fn transform(cli: &Cli, src: &mut hlo::Loaded) -> Result<(), CliError> {
    if !cli.no_verify {
        src.verify().map_err(|e| CliError(e.render()))?;
    }
    let unused = cli.pass_flags_without_pass();
    if !unused.is_empty() {
        eprintln!(
            "warning: {} only {} to passes; without --pass no pass runs",
            unused.join(", "),
            if unused.len() == 1 {
                "applies"
            } else {
                "apply"
            }
        );
    }
    if let Some(list) = &cli.pass {
        let names = passes::parse_pass_list(list).map_err(|e| CliError(format!("error: {e}")))?;
        for w in passes::options::list_warnings(&names) {
            eprintln!("{w}");
        }
        let options = cli.pass_options(list, &mut |w| eprintln!("{w}"))?;
        let (result, report) = passes::options::run(&mut src.module, list, options);
        eprint!("{}", report.stderr_text(cli.explain.is_some()));
        if let (Ok(_), Some(path)) = (&result, &cli.explain_json) {
            write_explain_json(path, cli, &report.reports)?;
        }
        if let (Ok(_), Some(path)) = (&result, &cli.compile_options) {
            write_compile_options(path, cli, &report.records)?;
        }
        result.map_err(|e| CliError(pass_error_text(e, src)))?;
    }
    Ok(())
}

/// A pass error for people; a verifier error is placed in the source.
fn pass_error_text(e: passes::PassError, src: &hlo::Loaded) -> String {
    match e {
        passes::PassError::Verify { pass, source } => format!(
            "the module does not verify after pass {pass}:\n{}",
            source.locate(&src.text, &src.name).render()
        ),
        passes::PassError::Hlo(source) => source.render(),
        other => format!("error: {other}"),
    }
}

/// Writes the passes' structured reports (`--explain-json FILE`, `-` for
/// stdout) as one JSON document: `{"passes": [...]}`.
fn write_explain_json(
    path: &Path,
    cli: &Cli,
    reports: &[serde_json::Value],
) -> Result<(), CliError> {
    let doc = serde_json::json!({ "passes": reports });
    let mut text =
        serde_json::to_string_pretty(&doc).map_err(|e| error(format!("--explain-json: {e}")))?;
    text.push('\n');
    if path == Path::new("-") {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        return Ok(out.flush()?);
    }
    outfile::check_not_input(path, &[("input", Path::new(cli.input()))]).map_err(error)?;
    outfile::write_via_temp(path, |temp| {
        std::fs::write(temp, &text).map_err(|e| format!("{}: {e}", path.display()))
    })
    .map_err(error)
}

/// Writes the xla-cpu pass's chosen compile options (`--compile-options`)
/// as one JSON object; an error when no xla-cpu pass ran.
fn write_compile_options(
    path: &Path,
    cli: &Cli,
    records: &[passes::explain::Record],
) -> Result<(), CliError> {
    let options = records
        .iter()
        .find_map(|r| match r {
            passes::explain::Record::XlaCpu(x) => Some(&x.options),
            _ => None,
        })
        .ok_or_else(|| {
            error("--compile-options: no xla-cpu pass ran (add --pass=xla-cpu)".to_string())
        })?;
    let map: serde_json::Map<String, serde_json::Value> = options
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    let text = serde_json::to_string_pretty(&map).map_err(|e| error(e.to_string()))? + "\n";
    outfile::check_not_input(path, &[("input", Path::new(cli.input()))]).map_err(error)?;
    outfile::write_via_temp(path, |temp| {
        std::fs::write(temp, &text).map_err(|e| format!("{}: {e}", path.display()))
    })
    .map_err(error)
}

/// Prints the module (text or proto) to stdout or `-o`.
fn emit(cli: &Cli, m: &hlo::Module) -> Result<(), CliError> {
    let text = match cli.emit {
        Emit::Text => hlo::print_module(m).into_bytes(),
        Emit::Proto => hlo::proto::to_bytes(m).map_err(|e| CliError(format!("error: {e}")))?,
    };
    match &cli.output {
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(&text)?;
            out.flush()?;
        }
        Some(path) => {
            outfile::check_not_input(path, &[("input", Path::new(cli.input()))]).map_err(error)?;
            outfile::write_via_temp(path, |temp| {
                std::fs::write(temp, &text).map_err(|e| format!("{}: {e}", path.display()))
            })
            .map_err(error)?;
        }
    }
    Ok(())
}

fn run(cli: &Cli) -> Result<(), CliError> {
    if cli.list_passes {
        for (name, description) in passes::list_passes() {
            println!("{name:<10} {description}");
        }
        return Ok(());
    }
    // Before any work: an output that is the input, or that cannot be
    // written (a missing or read-only folder), is refused at once.
    if let Some(path) = &cli.output {
        outfile::check_not_input(path, &[("input", Path::new(cli.input()))]).map_err(error)?;
    }
    let outputs = [
        ("-o", cli.output.as_deref()),
        ("--explain-json", cli.explain_json.as_deref()),
        ("--compile-options", cli.compile_options.as_deref()),
    ];
    for (flag, path) in outputs {
        if let Some(path) = path.filter(|p| *p != Path::new("-")) {
            outfile::check_writable(path).map_err(|e| error(format!("{flag} {e}")))?;
        }
    }
    let mut src = load(cli)?;
    transform(cli, &mut src)?;
    emit(cli, &src.module)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(message) = cli.usage_error() {
        // clap's rendering and status (2) for a bad command line.
        Cli::command()
            .error(clap::error::ErrorKind::ArgumentConflict, message)
            .exit();
    }
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError(msg)) => {
            eprintln!("{msg}");
            ExitCode::FAILURE
        }
    }
}
