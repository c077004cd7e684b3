//! The committed GPU session the XLA:GPU tests check against
//! (`testdata/xla_gpu/session1/core.tar.xz`, H200, jax 0.11.2: per
//! program XLA's autotuning logs and results and the module compiled with
//! autotuning off), and lookups in its modules.

use std::collections::BTreeMap;
use std::path::PathBuf;

use passes::tile::xla_gpu::autotuner::{SessionFiles, SessionProgram};

/// The session's archive.
pub fn session1_path() -> PathBuf {
    super::root().join("testdata/xla_gpu/session1/core.tar.xz")
}

/// The session, unpacked.
pub fn session1() -> SessionFiles {
    SessionFiles::read(&session1_path()).expect("core.tar.xz")
}

/// The instructions of `m` by name.
pub fn by_name(m: &hlo::Module) -> BTreeMap<String, hlo::InstId> {
    m.computations()
        .flat_map(|c| m.comp(c).order.clone())
        .map(|i| (m.inst(i).name.to_string(), i))
        .collect()
}

/// Every program of the session: its logs with its module compiled with
/// autotuning off (every program has both), in name order.
pub fn programs(s: &SessionFiles) -> Vec<SessionProgram<'_>> {
    let ps = s.programs().expect("programs");
    let logs = s.files.keys().filter(|k| k.starts_with("logs/")).count();
    assert_eq!(ps.len(), logs, "a program's logs without its module");
    ps
}
