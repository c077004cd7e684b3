//! The worker process of the PJRT backend (`pjrt::worker`): XLA compiles and
//! runs here, so that an XLA abort ends this process and not hlo-opt. Not
//! meant to be run by hand; hlo-opt starts it and talks to it over pipes.

fn main() {
    std::process::exit(pjrt::worker::main());
}
