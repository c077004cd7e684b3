//! Prints the HLO text `hlo::parse_stablehlo` reads a StableHLO file as:
//! `cargo run --release -p hlo --example stablehlo_to_hlo -- FILE.mlir`.

fn main() -> std::process::ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: stablehlo_to_hlo FILE.mlir");
        return std::process::ExitCode::FAILURE;
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match hlo::stablehlo_to_hlo_text(&text) {
        Ok(h) => {
            print!("{h}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}", e.render());
            std::process::ExitCode::FAILURE
        }
    }
}
