//! Prints a module after XLA:CPU legalization (`legalize FILE`), with the report on stderr.
fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: legalize FILE.hlo");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    let mut m = match hlo::parse_module(&text) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{}", e.render());
            std::process::exit(1);
        }
    };
    match pjrt::legalize::legalize_xla_cpu(&mut m) {
        Ok(r) => {
            for l in r.lines {
                eprintln!("{l}");
            }
            print!("{}", hlo::print_module(&m));
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
