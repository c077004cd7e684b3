//! The library half of the command-line tools, shared with the Python
//! package (`python/`, `hlo_opt.collect`): what `hlo-cost collect` does
//! ([`collect`]) and how the tools write their outputs ([`outfile`]). The
//! binaries (`src/main.rs`, `src/bin/hlo-cost.rs`) parse flags, call these
//! and the library crates, and render errors.

pub mod collect;
pub mod outfile;
