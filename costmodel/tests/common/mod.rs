//! Set-up shared by the costmodel tests: the published TpuGraphs files copied
//! into `testdata/costmodel/npz/` and the models in `testdata/costmodel/models/`,
//! per-test scratch files, the optional Python and ONNX Runtime (each records
//! the calling test as ran or skipped), rewriting an npz file through our
//! writer, and a model file with its `model.json` edited.

#![allow(dead_code)]

#[path = "../../../tests/support/report.rs"]
pub mod report;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use costmodel::npz::{write_npz_with, NpzGraphFile, WriteOptions};
use costmodel::onnx::DEFAULT_LAYOUT_MODEL;

/// A published layout file with runtimes (1,277 nodes, 62 configurable, 20 configs).
pub const LAYOUT: &str = "layout_xla_random_openai_v0_rnn_optimized.npz";
/// A published tile file with runtimes and normalizers (2 nodes, 9 configs).
pub const TILE: &str = "tile_xla_valid_inception_v3.npz";

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `testdata/costmodel/npz/<name>`.
pub fn fixture(name: &str) -> PathBuf {
    repo().join("testdata/costmodel/npz").join(name)
}

/// `testdata/costmodel/npz/<name>`, opened.
pub fn open_fixture(name: &str) -> NpzGraphFile {
    let path = fixture(name);
    NpzGraphFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `testdata/costmodel/models/<name>`.
pub fn model_fixture(name: &str) -> PathBuf {
    repo().join("testdata/costmodel/models").join(name)
}

/// Whether the ONNX Runtime shared library loads; records the calling test
/// as ran, or as skipped with why (the test then returns).
pub fn ort_available() -> bool {
    match costmodel::onnx::environment() {
        Ok(_) => {
            report::ran();
            true
        }
        Err(e) => {
            report::skipped(&format!("ONNX Runtime unavailable: {e}"));
            false
        }
    }
}

/// The entries of a zip archive (a `.hlocm`), in order.
pub fn unzip(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut z = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("zip");
    (0..z.len())
        .map(|i| {
            let mut f = z.by_index(i).expect("entry");
            let mut data = Vec::new();
            f.read_to_end(&mut data).expect("read entry");
            (f.name().to_string(), data)
        })
        .collect()
}

/// A zip archive of `entries`, in order.
pub fn rezip(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data) in entries {
        out.start_file(name.as_str(), zip::write::SimpleFileOptions::default())
            .expect("start");
        out.write_all(data).expect("write");
    }
    out.finish().expect("finish").into_inner()
}

/// A `.hlocm` with its `model.json` edited by `edit` (the other entries as
/// they are).
pub fn model_with_json(model: &[u8], edit: impl Fn(&mut serde_json::Value)) -> Vec<u8> {
    let mut entries = unzip(model);
    for (name, data) in entries.iter_mut() {
        if name == "model.json" {
            let mut json: serde_json::Value = serde_json::from_slice(data).expect("json");
            edit(&mut json);
            *data = serde_json::to_vec(&json).expect("json");
        }
    }
    rezip(&entries)
}

/// The embedded layout model with its `model.json` edited by `edit`.
pub fn layout_with_json(edit: impl Fn(&mut serde_json::Value)) -> Vec<u8> {
    model_with_json(DEFAULT_LAYOUT_MODEL, edit)
}

/// `<name>` in a scratch folder of the test binary `group`, created on demand.
pub fn tmp(group: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(group);
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir.join(name)
}

/// The Python of `HLO_OPT_PYTHON`; `None` (after printing why the test is
/// skipped) when it is unset.
pub fn python() -> Option<String> {
    let py = std::env::var("HLO_OPT_PYTHON")
        .ok()
        .filter(|p| !p.is_empty());
    match py {
        None => report::skipped("HLO_OPT_PYTHON is not set"),
        Some(_) => report::ran(),
    }
    py
}

/// Writes everything `f` holds (graph, configurations, runtimes, normalizers)
/// to `out` with our writer, deflated or `stored`.
pub fn rewrite(f: &NpzGraphFile, out: &Path, stored: bool) {
    let configs = f.all_configs().expect("configs");
    let opts = WriteOptions {
        stored,
        runtime_normalizers: f.runtime_normalizers(),
    };
    write_npz_with(
        out,
        f.graph(),
        Some(&configs),
        Some(f.runtimes()),
        f.task(),
        &opts,
    )
    .expect("write");
}
