//! XLA:GPU's new autotuner keys, checked against XLA's own: every
//! fusion XLA autotuned in the committed GPU session
//! (`testdata/xla_gpu/session1/core.tar.xz`: its autotuning logs, with each
//! instruction's `hlo_fingerprint`, and the optimized module of each
//! program compiled with autotuning off) gets the same fingerprint from
//! hlo-opt, read from the module compiled with autotuning off: what a user
//! runs hlo-opt on to make a cache. (Autotuned cuDNN convolutions are
//! custom calls, not fusions: not hlo-opt's decision, counted apart. The
//! module compiled *with* autotuning is not a source of keys: a fusion XLA
//! gave to cuBLAS is gone from it, and split-K reductions change.)

mod common;

use common::xla_gpu::{by_name, programs, session1, session1_path};
use passes::tile::xla_gpu::autotuner;

#[test]
fn fingerprints_equal_xla_on_every_autotuned_fusion() {
    let session = session1();
    let mut checked = 0;
    let mut not_fusions = 0;
    let mut failures = Vec::new();
    for p in programs(&session) {
        let prog = p.program;
        let (_, profiles) = autotuner::read_profiles(p.logs).expect("logs");
        let m = &p.module;
        let names = by_name(m);
        for p in &profiles {
            let Some(&id) = names.get(&p.name) else {
                failures.push(format!("{prog}.off: no instruction {}", p.name));
                continue;
            };
            if m.inst(id).opcode != hlo::Opcode::Fusion {
                not_fusions += 1;
                continue;
            }
            let got = autotuner::fusion_fingerprint(m, id)
                .expect("test step")
                .map(|x| x.0);
            checked += 1;
            if got.as_deref() != Some(p.hlo_fingerprint.as_str()) {
                failures.push(format!(
                    "{prog}.off: {} {:?} != XLA {}",
                    p.name, got, p.hlo_fingerprint
                ));
            }
        }
    }
    for f in failures.iter().take(40) {
        eprintln!("{f}");
    }
    eprintln!(
        "checked {checked} fusions, failed {}; {not_fusions} autotuned non-fusions left out",
        failures.len()
    );
    assert!(checked >= 150, "checked only {checked}");
    assert!(
        not_fusions <= 4,
        "{not_fusions} autotuned instructions are not fusions"
    );
    assert!(
        failures.is_empty(),
        "{} of {checked} differ",
        failures.len()
    );
}

/// The keys also equal those of XLA's own results file of each program
/// (`--xla_gpu_dump_autotune_results_to`: the entries XLA would load), and
/// the environment read from it names the same device and codegen version.
#[test]
fn fingerprints_are_in_xla_results_files() {
    let session = session1();
    let mut checked = 0;
    for p in programs(&session) {
        let prog = p.program;
        let Some(bytes) = session.files.get(&format!("results/{prog}.textproto")) else {
            continue;
        };
        let results = std::str::from_utf8(bytes).expect("utf-8");
        let env = autotuner::Environment::from_text(results).expect("environment");
        let (log_env, _) = autotuner::read_profiles(p.logs).expect("logs");
        assert_eq!(
            (&env.device, &env.codegen_version),
            (&log_env.device, &log_env.codegen_version)
        );
        let m = &p.module;
        for c in m.computations() {
            for &i in &m.comp(c).order {
                if !autotuner::is_gemm_fusion(m, i) {
                    continue;
                }
                let (fp, _) = autotuner::fusion_fingerprint(m, i)
                    .expect("fingerprint")
                    .expect("a fusion");
                assert!(
                    results.contains(&format!("hlo_fingerprint: \"{fp}\"")),
                    "{prog}: %{} key {fp} is not in XLA's results",
                    m.inst(i).name
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 98, "checked {checked}");
}

/// Damaged inputs give errors, not panics: a truncated or garbage session
/// archive, logs cut anywhere, an environment without XLA's keys, a model
/// file of another kind.
#[test]
fn damaged_inputs_are_errors() {
    use passes::tile::xla_gpu::model::TileModel;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("xla_gpu_damaged");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("tmp");
    let good = std::fs::read(session1_path()).expect("archive");
    for (name, bytes) in [
        ("truncated", &good[..good.len() / 2]),
        ("garbage", &b"not an archive at all"[..]),
        ("empty", &b""[..]),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, bytes).expect("write");
        assert!(autotuner::read_tar_xz(&p, 256 << 20).is_err(), "{name}");
    }
    // A cap smaller than the archive unpacks to is an error too.
    let p = dir.join("whole");
    std::fs::write(&p, &good).expect("write");
    assert!(autotuner::read_tar_xz(&p, 1000).is_err());
    let session = session1();
    let logs = std::str::from_utf8(&session.files["logs/odd_f32.textproto"]).expect("utf-8");
    for cut in (0..logs.len()).step_by(997) {
        // Cut anywhere: parsed or refused, never a panic.
        let _ = autotuner::read_profiles(&logs[..cut]);
        let _ = autotuner::Environment::from_text(&logs[..cut]);
    }
    assert!(autotuner::read_profiles("instruction_profiles { config_profiles { } }").is_err());
    assert!(autotuner::Environment::from_text("device: \"x\"").is_err());
    assert!(TileModel::from_json(
        "{\"kind\":\"layout\",\"provenance\":\"\",\"k\":3,\"records\":[]}"
    )
    .is_err());
    assert!(TileModel::from_json("[1, 2").is_err());
}
