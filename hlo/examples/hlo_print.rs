//! Development helper: parse a file and print it (`cargo run -p hlo --example hlo_print FILE`).
fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: hlo_print FILE");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    match hlo::parse_module_named(&text, &path) {
        Ok(m) => print!("{}", hlo::print_module(&m)),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
