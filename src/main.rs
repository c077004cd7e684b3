//! `hlo-opt`: parse, verify and print HLO modules.
//!
//! `hlo-opt FILE` (or `-` for stdin) parses the module, verifies it and
//! prints it to stdout, or to `-o OUT` (never onto the input file). Errors are
//! rendered as `file:line:col: error: message`, the offending source line and a
//! caret, and exit with status 1.
//!
//! `--pass=layout,tile` runs passes between verify and print (`--list-passes`
//! lists them; `--explain` reports their decisions on stderr; `--budget`,
//! `--seed`, `--model`, `--layout-model`, `--tile-model`, `--top-k`,
//! `--threads`, `--verify-each` set their options). `--measure=xla-cpu`
//! (or `--measure=pjrt:PLUGIN`) makes the layout pass measure the model's
//! `--top-k` best candidates and the compiler default on XLA:CPU through
//! PJRT and keep the fastest beyond the noise (`--measure-budget` seconds).
//!
//! The work is split in [`load`] -> [`transform`] -> [`emit`], so that
//! rewriting flags (`--pass=...`) only touch `Cli` and `transform`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;

/// Parse, verify and print XLA HLO text modules.
#[derive(Parser, Debug)]
#[command(name = "hlo-opt", version, about)]
struct Cli {
    /// Input HLO text file, or `-` for stdin.
    #[arg(required_unless_present = "list_passes")]
    input: Option<String>,
    /// Write the result here instead of stdout.
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
    /// Skip the verifier (parse and print only).
    #[arg(long)]
    no_verify: bool,
    /// Run these passes in order, comma-separated (`--pass=layout,tile`).
    #[arg(long = "pass", value_name = "PASSES")]
    pass: Option<String>,
    /// List the registered passes and exit.
    #[arg(long)]
    list_passes: bool,
    /// Run the verifier after every pass.
    #[arg(long)]
    verify_each: bool,
    /// Report what the passes decided (per node, copies, model scores vs the compiler default) on stderr.
    #[arg(long)]
    explain: bool,
    /// Maximum number of configurations a pass's search scores.
    #[arg(long, default_value_t = 10_000)]
    budget: usize,
    /// Seed of the searches (same input, model and seed: same output).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Cost model file for the single pass of `--pass` (default: the embedded model).
    #[arg(long, value_name = "FILE")]
    model: Option<PathBuf>,
    /// Cost model file of the layout pass.
    #[arg(long, value_name = "FILE")]
    layout_model: Option<PathBuf>,
    /// Cost model file of the tile pass.
    #[arg(long, value_name = "FILE")]
    tile_model: Option<PathBuf>,
    /// How many of the best candidates to keep (and measure, where a pass
    /// can); default 1, or 3 with `--measure`.
    #[arg(long)]
    top_k: Option<usize>,
    /// Measure candidates on a real backend and keep the fastest: `xla-cpu`
    /// (XLA's CPU PJRT plugin, `pip install xla-cpu-pjrt`) or `pjrt:PLUGIN_PATH`.
    #[arg(long, value_name = "BACKEND")]
    measure: Option<String>,
    /// Seconds of interleaved timing runs for `--measure` (compiles not included).
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    measure_budget: f64,
    /// ONNX Runtime threads (0 = its default).
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

impl Cli {
    /// The input path (`-` = stdin).
    fn input(&self) -> &str {
        self.input.as_deref().unwrap_or("-")
    }

    /// The pass options the flags describe.
    fn pass_options(&self, list: &str) -> Result<passes::PassOptions, CliError> {
        let mut o = passes::PassOptions {
            layout_model: self.layout_model.clone(),
            tile_model: self.tile_model.clone(),
            seed: self.seed,
            budget: self.budget,
            top_k: self
                .top_k
                .unwrap_or(if self.measure.is_some() { 3 } else { 1 }),
            threads: self.threads,
            verify_each: self.verify_each,
            progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
            explain: self.explain,
            ..passes::PassOptions::default()
        };
        if let Some(spec) = &self.measure {
            if !(self.measure_budget.is_finite() && self.measure_budget >= 0.0) {
                return Err(CliError(format!(
                    "--measure-budget={}: expected a number of seconds",
                    self.measure_budget
                )));
            }
            let config = pjrt::MeasureConfig {
                budget: std::time::Duration::from_secs_f64(self.measure_budget.min(86_400.0)),
                ..pjrt::MeasureConfig::default()
            };
            let measurer =
                pjrt::measurer_for(spec, config).map_err(|e| CliError(format!("error: {e}")))?;
            o.measurer = Some(Box::new(measurer));
        }
        if let Some(model) = &self.model {
            match passes::split_pass_list(list).as_slice() {
                ["layout"] => o.layout_model = Some(model.clone()),
                ["tile"] => o.tile_model = Some(model.clone()),
                _ => {
                    return Err(CliError(
                        "--model names the model of a single pass; with several passes use --layout-model / --tile-model"
                            .into(),
                    ))
                }
            }
        }
        Ok(o)
    }
}

/// A failure rendered for people.
struct CliError(String);

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError(e.to_string())
    }
}

/// Reads and parses the input.
fn load(cli: &Cli) -> Result<hlo::Module, CliError> {
    let (text, name) = if cli.input() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        (s, "<stdin>".to_string())
    } else {
        let s = std::fs::read_to_string(cli.input())
            .map_err(|e| CliError(format!("{}: {e}", cli.input())))?;
        (s, cli.input().to_string())
    };
    hlo::parse_module_named(&text, &name).map_err(|e| CliError(e.render()))
}

/// Checks (and, with later flags, rewrites) the module.
fn transform(cli: &Cli, m: &mut hlo::Module) -> Result<(), CliError> {
    if !cli.no_verify {
        verify(m)?;
    }
    if let Some(list) = &cli.pass {
        let mut cx = passes::PassContext::new(cli.pass_options(list)?);
        let result = passes::run_pipeline(m, list, &mut cx);
        if cli.explain && !cx.explain.is_empty() {
            eprint!("{}", cx.explain);
        }
        result.map_err(|e| match e {
            passes::PassError::Verify { pass, source } => CliError(format!(
                "the module does not verify after pass {pass}:\n{}",
                source.render()
            )),
            passes::PassError::Hlo(source) => CliError(source.render()),
            other => CliError(format!("error: {other}")),
        })?;
    }
    Ok(())
}

fn verify(m: &hlo::Module) -> Result<(), CliError> {
    hlo::verify(m).map_err(|e| CliError(e.render()))
}

/// Prints the module to stdout or `-o`.
fn emit(cli: &Cli, m: &hlo::Module) -> Result<(), CliError> {
    let text = hlo::print_module(m);
    match &cli.output {
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
        Some(path) => {
            if cli.input() != "-" && same_file(Path::new(cli.input()), path) {
                return Err(CliError(format!(
                    "refusing to overwrite the input file {}; choose another -o",
                    path.display()
                )));
            }
            std::fs::write(path, text).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
        }
    }
    Ok(())
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

fn run(cli: &Cli) -> Result<(), CliError> {
    if cli.list_passes {
        for (name, description) in passes::list_passes() {
            println!("{name:<10} {description}");
        }
        return Ok(());
    }
    let mut m = load(cli)?;
    transform(cli, &mut m)?;
    emit(cli, &m)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError(msg)) => {
            eprintln!("{msg}");
            ExitCode::FAILURE
        }
    }
}
