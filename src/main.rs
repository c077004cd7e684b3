//! `hlo-opt`: parse, verify and print HLO modules.
//!
//! `hlo-opt FILE` (or `-` for stdin) parses the module, verifies it and
//! prints it to stdout, or to `-o OUT` (never onto the input file). Errors are
//! rendered as `file:line:col: message`, the offending source line and a
//! caret, and exit with status 1.
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
    input: String,
    /// Write the result here instead of stdout.
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
    /// Skip the verifier (parse and print only).
    #[arg(long)]
    no_verify: bool,
}

/// A failure rendered for people.
struct CliError(String);

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError(e.to_string())
    }
}

/// Renders an `hlo::Error` with the source line and a caret under the column.
fn render(e: &hlo::Error) -> String {
    match e {
        hlo::Error::Parse {
            pos,
            message,
            snippet,
        } => {
            let caret_pad: String = snippet
                .chars()
                .take(pos.col.saturating_sub(1))
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            format!("{}: error: {}\n{}\n{}^", pos, message, snippet, caret_pad)
        }
        other => format!("error: {other}"),
    }
}

/// Reads and parses the input.
fn load(cli: &Cli) -> Result<hlo::Module, CliError> {
    let (text, name) = if cli.input == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        (s, "<stdin>".to_string())
    } else {
        let s = std::fs::read_to_string(&cli.input)
            .map_err(|e| CliError(format!("{}: {e}", cli.input)))?;
        (s, cli.input.clone())
    };
    hlo::parse_module_named(&text, &name).map_err(|e| CliError(render(&e)))
}

/// Checks (and, with later flags, rewrites) the module.
fn transform(cli: &Cli, m: &mut hlo::Module) -> Result<(), CliError> {
    if !cli.no_verify {
        verify(m)?;
    }
    Ok(())
}

fn verify(m: &hlo::Module) -> Result<(), CliError> {
    hlo::verify(m).map_err(|e| CliError(render(&e)))
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
            if cli.input != "-" && same_file(Path::new(&cli.input), path) {
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
