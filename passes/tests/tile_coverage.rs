//! The tile enumeration against the TPU autotuner's records
//! (`testdata/tile/kernels/kernel_NN.{hlo,runs.json}`, real TpuGraphs kernels):
//! every configuration the autotuner tried for a kernel must be one we
//! enumerate, and our default-tile heuristic is compared with XLA's default.
//! Run with `--nocapture` for the per-kernel report.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use passes::tile::{kernel, runs, space, DEFAULT_MEMORY_BUDGET};

fn kernels_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/tile/kernels")
}

struct Case {
    name: String,
    module: hlo::Module,
    runs: Vec<runs::Run>,
}

fn cases() -> Vec<Case> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(kernels_dir())
        .expect("testdata/tile/kernels exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "hlo"))
        .collect();
    names.sort();
    assert!(names.len() >= 8, "expected the 8 sample kernels");
    names
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("readable");
            let module =
                hlo::parse_module_named(&text, &p.display().to_string()).expect("kernel parses");
            let runs_text = std::fs::read_to_string(p.with_extension("runs.json"))
                .expect("runs.json beside it");
            let runs = runs::parse_runs(&runs_text).expect("runs parse");
            let name = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            Case { name, module, runs }
        })
        .collect()
}

/// The kernel of a `kernel_NN.hlo` module: the root of its entry computation.
fn the_kernel(m: &hlo::Module) -> hlo::InstId {
    let ks = kernel::find_kernels(m);
    assert_eq!(ks.len(), 1, "one kernel per sample module");
    assert_eq!(ks[0], m.entry_computation().root);
    ks[0]
}

#[test]
fn every_configuration_the_autotuner_tried_is_enumerated() {
    let mut total_tried = 0;
    let mut total_ours = 0;
    for case in cases() {
        let k = the_kernel(&case.module);
        let space = kernel::analyze(&case.module, k).expect("sample kernels are tileable");
        let choices = space.enumerate(DEFAULT_MEMORY_BUDGET, 0);
        let ours: BTreeSet<space::TileConfig> = choices.iter().map(|c| space.config(c)).collect();
        let tried: BTreeSet<space::TileConfig> =
            case.runs.iter().map(|r| r.config.clone()).collect();
        let missing: Vec<_> = tried.difference(&ours).collect();
        println!(
            "{}: %{} enumerated {} (raw {}), autotuner tried {} runs / {} distinct, all covered: {}",
            case.name,
            case.module.inst(k).name,
            ours.len(),
            space.raw_size(),
            case.runs.len(),
            tried.len(),
            missing.is_empty()
        );
        assert!(
            missing.is_empty(),
            "{}: tried but not enumerated: {missing:?}",
            case.name
        );
        total_tried += tried.len();
        total_ours += ours.len();
    }
    println!("total: enumerated {total_ours}, tried {total_tried} distinct");
}

#[test]
fn the_default_heuristic_matches_xlas_default_tile() {
    let mut matched = 0;
    let mut n = 0;
    for case in cases() {
        let k = the_kernel(&case.module);
        let space = kernel::analyze(&case.module, k).expect("tileable");
        let choices = space.enumerate(DEFAULT_MEMORY_BUDGET, 0);
        let ours = space
            .default_choice(&choices, DEFAULT_MEMORY_BUDGET)
            .map(|c| space.config(&c))
            .expect("a default");
        let Some(xla) = case.runs.iter().find(|r| r.is_default) else {
            continue;
        };
        n += 1;
        let same = ours == xla.config;
        matched += usize::from(same);
        println!(
            "{}: ours {ours}, XLA {}{}",
            case.name,
            xla.config,
            if same { "" } else { "  (differs)" }
        );
    }
    println!("default heuristic = XLA default on {matched} of {n} kernels");
    assert_eq!(matched, n);
}

#[test]
fn a_smaller_memory_budget_removes_only_large_tiles() {
    for case in cases() {
        let k = the_kernel(&case.module);
        let space = kernel::analyze(&case.module, k).expect("tileable");
        let all = space.enumerate(u64::MAX, 0);
        let max = all.iter().map(|c| space.footprint(c)).max().unwrap_or(0);
        let budget = max / 4;
        let kept = space.enumerate(budget, 0);
        assert!(!kept.is_empty());
        if kept.len() > 1 || space.footprint(&kept[0]) <= budget {
            assert!(
                kept.iter().all(|c| space.footprint(c) <= budget),
                "{}",
                case.name
            );
            let expected = all.iter().filter(|c| space.footprint(c) <= budget).count();
            assert_eq!(kept.len(), expected, "{}", case.name);
        }
    }
}
