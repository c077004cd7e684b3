//! npz reading and writing on real TpuGraphs files (copies in
//! `testdata/costmodel/npz/`; the big NLP graph from `../shared` when present).
//!
//! Specification:
//! - the published files open with the right task, shapes and runtimes;
//! - any slice of configurations equals the same rows of the whole array, for
//!   deflated (published) and stored (`np.savez`) entries, and batching walks
//!   all configurations in order;
//! - what we write reads back equal, and (with `HLO_OPT_PYTHON`) numpy reads it
//!   with the published keys, dtypes, shapes and values.

mod common;
use common::report;

use std::path::PathBuf;
use std::process::Command;

use common::{fixture, python, repo, rewrite, LAYOUT, TILE};
use costmodel::npz::{write_npz, NpzGraphFile};
use costmodel::{ConfigBatch, Task};

fn fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join("testdata/costmodel/npz"))
        .expect("testdata/costmodel/npz")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "npz"))
        .collect();
    v.sort();
    assert!(v.len() >= 4, "fixtures missing");
    v
}

fn tmp(name: &str) -> PathBuf {
    common::tmp("npz_tests", name)
}

#[test]
fn published_layout_file_opens_with_its_shapes_and_runtimes() {
    let f = NpzGraphFile::open(fixture(LAYOUT)).expect("open");
    assert_eq!(f.task(), Task::Layout);
    let g = f.graph();
    assert_eq!(g.num_nodes(), 1277);
    assert_eq!(g.node_feat.len(), 1277 * 140);
    assert_eq!(g.edge_index.len(), 2063);
    assert_eq!(g.num_config_nodes(), 62);
    assert_eq!(g.node_splits.first(), Some(&0));
    assert_eq!(g.node_splits.last(), Some(&1277));
    assert_eq!(g.node_splits.len(), 5);
    assert_eq!(f.num_configs(), 20);
    assert_eq!(f.runtimes().len(), 20);
    assert!(f.has_runtimes());
    assert!(f.runtime_normalizers().is_none());
    // edge_index is stored in Fortran order in the published files: rows must
    // still be [consumer, producer] pairs, consumer after producer here.
    assert!(
        g.edge_index.iter().all(|&[c, p]| c > p),
        "edges must be [consumer, producer]"
    );
    let all = f.all_configs().expect("configs");
    assert_eq!(
        (all.num_configs, all.nodes_per_config, all.feat.len()),
        (20, 62, 20 * 62 * 18)
    );
    // Layout config features are minor-to-major prefixes or -1.
    assert!(all
        .feat
        .iter()
        .all(|&v| v == v.trunc() && (-1.0..6.0).contains(&v)));
}

/// A slice of the published mask_rcnn graph (`testdata/costmodel/gen_unsorted_ids.py`):
/// its `node_config_ids` are not increasing, as in the published file.
const UNSORTED: &str = "layout_xla_mask_rcnn_unsorted_ids.npz";

#[test]
fn unsorted_configurable_node_ids_are_read_in_file_order() {
    let f = NpzGraphFile::open(fixture(UNSORTED)).expect("unsorted ids are valid");
    let g = f.graph();
    assert_eq!(g.num_nodes(), 58);
    assert_eq!(
        g.node_config_ids,
        [30, 34, 38, 42, 46, 50, 52, 56, 1, 5, 9, 13, 17, 21, 23, 27],
        "ids keep the file's order"
    );
    assert_eq!(g.node_splits, [0, 29, 58]);
    assert_eq!(f.num_configs(), 20);
    // Written and read back: the order survives.
    let out = tmp("unsorted_rewritten.npz");
    rewrite(&f, &out, false);
    let back = NpzGraphFile::open(&out).expect("reopen");
    assert_eq!(back.graph(), g);
    assert_eq!(
        back.all_configs().expect("configs"),
        f.all_configs().expect("configs")
    );
    // Pruning keeps the ids' order (renumbered).
    let pruned = costmodel::prune::prune_khop(g, 0);
    assert_eq!(
        pruned.node_config_ids,
        [8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7]
    );
}

#[test]
fn published_tile_files_open_with_normalizers() {
    let f = NpzGraphFile::open(fixture(TILE)).expect("open");
    assert_eq!(f.task(), Task::Tile);
    assert_eq!(f.graph().num_nodes(), 2);
    assert_eq!(f.graph().node_opcode, vec![63, 27]);
    assert_eq!(f.graph().edge_index, vec![[1, 0]]);
    assert!(f.graph().node_config_ids.is_empty());
    assert_eq!(f.num_configs(), 9);
    assert_eq!(
        f.runtimes(),
        &[8911, 17340, 31998, 11465, 10211, 9385, 9784, 9501, 8521]
    );
    assert_eq!(f.runtime_normalizers(), Some(&[8911i64; 9][..]));
    assert_eq!(f.normalized_runtimes()[0], 1.0);
    let c = f.configs(0..1).expect("config 0");
    // Output bounds 1x1x20x10: sum 32, product 200 (features 8..16).
    assert_eq!(
        &c.feat[8..16],
        &[1.0, 1.0, 20.0, 10.0, 0.0, 0.0, 32.0, 200.0]
    );

    let test = NpzGraphFile::open(fixture("tile_xla_test_0a8a2b24.npz")).expect("open");
    assert_eq!(test.num_configs(), 807);
    assert!(!test.has_runtimes(), "the test split carries no runtimes");
}

fn check_slices(f: &NpzGraphFile) {
    let all = f.all_configs().expect("all configs");
    let c = f.num_configs();
    let row = all.nodes_per_config * f.task().config_dim();
    for range in [0..0, 0..1, 0..c, c / 3..c / 2, c.saturating_sub(1)..c, c..c] {
        let s = f.configs(range.clone()).expect("slice");
        assert_eq!(s.num_configs, range.len());
        assert_eq!(
            s.feat,
            all.feat[range.start * row..range.end * row],
            "{:?} of {}",
            range,
            f.path().display()
        );
    }
    assert!(f.configs(0..c + 1).is_err());
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = 2..1;
    assert!(f.configs(backwards).is_err());
    for batch in [1, 7, c.max(1)] {
        let mut feat = Vec::new();
        let mut n = 0;
        for b in f.config_batches(batch).expect("batches") {
            let b = b.expect("batch");
            assert!(b.num_configs <= batch);
            n += b.num_configs;
            feat.extend(b.feat);
        }
        assert_eq!(n, c);
        assert_eq!(feat, all.feat);
    }
    assert!(f.config_batches(0).is_err());
}

#[test]
fn slices_equal_rows_of_the_whole_array_in_deflated_files() {
    for path in fixtures() {
        check_slices(&NpzGraphFile::open(&path).expect("open"));
    }
}

#[test]
fn written_files_read_back_equal_stored_and_deflated() {
    for path in fixtures() {
        let f = NpzGraphFile::open(&path).expect("open");
        let configs = f.all_configs().expect("configs");
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        for stored in [false, true] {
            let out = tmp(&format!(
                "{}{name}",
                if stored { "stored_" } else { "deflated_" }
            ));
            rewrite(&f, &out, stored);
            let back = NpzGraphFile::open(&out).expect("read back");
            assert_eq!(back.task(), f.task());
            assert_eq!(back.graph(), f.graph(), "{name}");
            assert_eq!(back.runtimes(), f.runtimes());
            assert_eq!(back.runtime_normalizers(), f.runtime_normalizers());
            assert_eq!(back.all_configs().expect("configs"), configs);
            // Stored entries are read by seeking: slices still match.
            check_slices(&back);
        }
    }
}

#[test]
fn writing_is_deterministic_and_defaults_runtimes_to_zero() {
    let f = NpzGraphFile::open(fixture("tile_xla_train_retinanet.npz")).expect("open");
    let configs = f.all_configs().expect("configs");
    let (a, b) = (tmp("det_a.npz"), tmp("det_b.npz"));
    write_npz(&a, f.graph(), Some(&configs), None, Task::Tile).expect("write a");
    write_npz(&b, f.graph(), Some(&configs), None, Task::Tile).expect("write b");
    assert_eq!(std::fs::read(&a).expect("a"), std::fs::read(&b).expect("b"));
    let back = NpzGraphFile::open(&a).expect("open");
    assert_eq!(back.runtimes(), &[0, 0]);
    assert_eq!(back.runtime_normalizers(), Some(&[1i64, 1][..]));
    assert!(!back.has_runtimes());
}

#[test]
fn writing_refuses_inconsistent_input() {
    let f = NpzGraphFile::open(fixture(LAYOUT)).expect("open");
    let configs = f.all_configs().expect("configs");
    let out = tmp("refused.npz");
    let err = |r: costmodel::Result<()>| format!("{}", r.expect_err("must be refused"));
    // Runtimes of the wrong length.
    assert!(err(write_npz(
        &out,
        f.graph(),
        Some(&configs),
        Some(&[1, 2]),
        Task::Layout
    ))
    .contains("runtimes"));
    // Layout configs written as a tile file.
    assert!(err(write_npz(&out, f.graph(), Some(&configs), None, Task::Tile)).contains("task"));
    // Configs for another number of configurable nodes.
    let short = ConfigBatch {
        feat: configs.feat[..configs.feat.len() - 18].to_vec(),
        ..configs.clone()
    };
    assert!(
        err(write_npz(&out, f.graph(), Some(&short), None, Task::Layout)).contains("config batch")
    );
    // An edge to a node that does not exist.
    let mut g = f.graph().clone();
    g.edge_index.push([0, 1277]);
    assert!(err(write_npz(&out, &g, Some(&configs), None, Task::Layout)).contains("edge_index"));
}

/// The 21,918-node NLP graph with 1,001 configurations (optional: `../shared`).
#[test]
fn big_nlp_graph_slices_without_decoding_everything() {
    let dir = repo().join("../shared/data/tpugraphs/npz/layout/nlp/default/test");
    let Some(path) = std::fs::read_dir(&dir)
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .map(|e| e.path())
    else {
        report::skipped(&format!("{} is absent", dir.display()));
        return;
    };
    report::ran();
    let f = NpzGraphFile::open(&path).expect("open");
    assert_eq!(f.graph().num_nodes(), 21_918);
    assert_eq!(f.graph().num_config_nodes(), 848);
    assert_eq!(f.num_configs(), 1001);
    let tail = f.configs(991..1001).expect("tail");
    let mut last = None;
    for b in f.config_batches(100).expect("batches") {
        last = Some(b.expect("batch"));
    }
    let last = last.expect("at least one batch");
    assert_eq!(last.num_configs, 1);
    assert_eq!(&tail.feat[9 * 848 * 18..], &last.feat[..]);
}

/// numpy reads what we write exactly as it reads the published file: same
/// keys, dtypes, shapes and values.
#[test]
fn numpy_reads_written_files_like_the_published_ones() {
    let Some(py) = python() else {
        return;
    };
    let script = r#"
import sys, numpy as np
ref, ours = np.load(sys.argv[1]), np.load(sys.argv[2])
assert sorted(ref.files) == sorted(ours.files), (ref.files, ours.files)
for k in ref.files:
    a, b = ref[k], ours[k]
    assert a.dtype == b.dtype, (k, a.dtype, b.dtype)
    assert a.shape == b.shape, (k, a.shape, b.shape)
    assert np.array_equal(a, b), k
print("ok", len(ref.files))
"#;
    for path in fixtures() {
        let f = NpzGraphFile::open(&path).expect("open");
        let out = tmp(&format!(
            "numpy_{}",
            path.file_name().expect("name").to_string_lossy()
        ));
        rewrite(&f, &out, false);
        let run = Command::new(&py)
            .arg("-c")
            .arg(script)
            .arg(&path)
            .arg(&out)
            .output()
            .expect("run python");
        assert!(
            run.status.success(),
            "numpy disagrees on {}:\n{}{}",
            path.display(),
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
    }
}

/// Files written by numpy itself (`np.savez`, stored; other integer dtypes)
/// read like the published ones.
#[test]
fn files_written_by_numpy_savez_are_read() {
    let Some(py) = python() else {
        return;
    };
    let src = fixture(LAYOUT);
    let out = tmp("numpy_savez_stored.npz");
    let script = r#"
import sys, numpy as np
d = dict(np.load(sys.argv[1]))
d["node_opcode"] = d["node_opcode"].astype(np.int32)       # other int dtype
d["edge_index"] = np.asfortranarray(d["edge_index"].astype(">i8"))  # big-endian, Fortran
d["node_config_feat"] = d["node_config_feat"].astype(np.float64)  # f8
np.savez(sys.argv[2], **d)
"#;
    let run = Command::new(&py)
        .arg("-c")
        .arg(script)
        .arg(&src)
        .arg(&out)
        .output()
        .expect("run python");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let a = NpzGraphFile::open(&src).expect("published");
    let b = NpzGraphFile::open(&out).expect("np.savez");
    assert_eq!(a.graph(), b.graph());
    assert_eq!(a.all_configs().expect("a"), b.all_configs().expect("b"));
    check_slices(&b);
}
