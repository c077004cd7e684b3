//! Bad npz input: truncated files, missing keys, wrong dtypes, inconsistent
//! sizes, corrupt compressed data. Each is a `CostModelError::Npz` naming the
//! file and saying what is wrong — never a panic. The corrupted files are
//! made here from the copies in `testdata/costmodel/npz/`.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use common::{fixture, rewrite, LAYOUT, TILE};
use costmodel::npz::NpzGraphFile;
use costmodel::CostModelError;
use npyz::WriterBuilder;

fn tmp(name: &str) -> PathBuf {
    common::tmp("npz_bad_input", name)
}

/// The entries of an npz: (name, uncompressed bytes), in file order.
fn entries(path: &Path) -> Vec<(String, Vec<u8>)> {
    common::unzip(&std::fs::read(path).expect("read"))
}

/// Writes entries as a zip (deflated unless `stored`).
fn write_zip(path: &Path, entries: &[(String, Vec<u8>)], stored: bool) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).expect("create"));
    let method = if stored {
        zip::CompressionMethod::Stored
    } else {
        zip::CompressionMethod::Deflated
    };
    for (name, bytes) in entries {
        zip.start_file(
            name.as_str(),
            zip::write::SimpleFileOptions::default().compression_method(method),
        )
        .expect("start");
        zip.write_all(bytes).expect("write");
    }
    zip.finish().expect("finish");
}

/// An npy array: header for `descr` and `shape`, then `data` as is.
fn npy(descr: &str, shape: &[u64], data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    npyz::WriteOptions::<f32>::new()
        .dtype(npyz::DType::Plain(descr.parse().expect("descr")))
        .shape(shape)
        .writer(&mut out)
        .write_header_only()
        .expect("header");
    out.extend_from_slice(data);
    out
}

/// An npy file made of a magic, version 1.0 and the given header text only.
fn raw_npy(text: &str) -> Vec<u8> {
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(text.len() as u16).to_le_bytes());
    b.extend_from_slice(text.as_bytes());
    b
}

/// Copies `src` with one entry replaced (or removed with `None`).
fn with_entry(src: &str, dst: &str, key: &str, new: Option<Vec<u8>>) -> PathBuf {
    let mut e = entries(&fixture(src));
    let name = format!("{key}.npy");
    let at = e.iter().position(|(n, _)| *n == name).expect("key present");
    match new {
        Some(bytes) => e[at].1 = bytes,
        None => {
            e.remove(at);
        }
    }
    let out = tmp(dst);
    write_zip(&out, &e, false);
    out
}

/// Opens and, if that works, decodes every configuration; returns the error message.
fn npz_error(path: &Path) -> String {
    let result = NpzGraphFile::open(path).and_then(|f| f.all_configs().map(|_| ()));
    match result {
        Err(CostModelError::Npz { path: p, message }) => {
            assert_eq!(Path::new(&p), path, "the error names the file");
            message
        }
        Err(other) => panic!("expected an npz error for {}, got {other}", path.display()),
        Ok(()) => panic!("{} was accepted", path.display()),
    }
}

#[test]
fn truncated_files_are_refused() {
    let bytes = std::fs::read(fixture(LAYOUT)).expect("fixture");
    for keep in [
        0,
        10,
        100,
        bytes.len() / 2,
        bytes.len() - 30,
        bytes.len() - 1,
    ] {
        let p = tmp(&format!("truncated_{keep}.npz"));
        std::fs::write(&p, &bytes[..keep]).expect("write");
        let m = npz_error(&p);
        assert!(
            m.contains("zip") || m.contains("truncated"),
            "{keep} bytes: {m}"
        );
    }
}

#[test]
fn not_a_zip_is_refused() {
    let p = tmp("garbage.npz");
    std::fs::write(&p, b"this is not an npz file at all, just text").expect("write");
    assert!(npz_error(&p).contains("zip"));
    let m = npz_error(&tmp("does_not_exist.npz"));
    assert!(m.contains("cannot open"), "{m}");
}

#[test]
fn a_missing_key_is_named() {
    for key in [
        "node_feat",
        "node_opcode",
        "edge_index",
        "node_config_ids",
        "config_runtime",
    ] {
        let m = npz_error(&with_entry(
            LAYOUT,
            &format!("missing_{key}.npz"),
            key,
            None,
        ));
        assert!(m.contains(&format!("missing array `{key}`")), "{m}");
    }
    let m = npz_error(&with_entry(
        LAYOUT,
        "missing_configs.npz",
        "node_config_feat",
        None,
    ));
    assert!(
        m.contains("neither `node_config_feat` (layout) nor `config_feat` (tile)"),
        "{m}"
    );
    let m = npz_error(&with_entry(
        TILE,
        "tile_missing_runtime.npz",
        "config_runtime",
        None,
    ));
    assert!(
        m.contains("missing array `config_runtime` (required for a tile file)"),
        "{m}"
    );
}

#[test]
fn wrong_dtypes_are_named() {
    // node_feat as int64: (1277, 140).
    let m = npz_error(&with_entry(
        LAYOUT,
        "int_node_feat.npz",
        "node_feat",
        Some(npy("<i8", &[1277, 140], &vec![0u8; 1277 * 140 * 8])),
    ));
    assert!(
        m.contains("node_feat") && m.contains("<i8") && m.contains("float"),
        "{m}"
    );
    // node_opcode as float32.
    let m = npz_error(&with_entry(
        LAYOUT,
        "float_opcode.npz",
        "node_opcode",
        Some(npy("<f4", &[1277], &[0u8; 1277 * 4])),
    ));
    assert!(m.contains("node_opcode") && m.contains("integer"), "{m}");
    // A string dtype.
    let m = npz_error(&with_entry(
        LAYOUT,
        "string_runtime.npz",
        "config_runtime",
        Some(npy("|S8", &[20], &[b'x'; 160])),
    ));
    assert!(
        m.contains("config_runtime") && m.contains("not a number type"),
        "{m}"
    );
    // Opcodes that do not fit a u8.
    let mut ops = Vec::new();
    for i in 0..1277i32 {
        ops.extend_from_slice(&(if i == 5 { 300i32 } else { 1 }).to_le_bytes());
    }
    let m = npz_error(&with_entry(
        LAYOUT,
        "big_opcode.npz",
        "node_opcode",
        Some(npy("<i4", &[1277], &ops)),
    ));
    assert!(m.contains("node_opcode[5] = 300"), "{m}");
}

#[test]
fn inconsistent_sizes_are_named() {
    let m = npz_error(&with_entry(
        LAYOUT,
        "short_opcode.npz",
        "node_opcode",
        Some(npy("|u1", &[1276], &[1u8; 1276])),
    ));
    assert!(
        m.contains("node_opcode: shape (1276,), expected (1277,)"),
        "{m}"
    );
    let m = npz_error(&with_entry(
        LAYOUT,
        "short_runtime.npz",
        "config_runtime",
        Some(npy("<i8", &[19], &[1u8; 19 * 8])),
    ));
    assert!(
        m.contains("config_runtime: shape (19,), expected (20,)"),
        "{m}"
    );
    let ids: Vec<u8> = (0..61i64).flat_map(|v| v.to_le_bytes()).collect();
    let m = npz_error(&with_entry(
        LAYOUT,
        "short_ids.npz",
        "node_config_ids",
        Some(npy("<i8", &[61], &ids)),
    ));
    assert!(
        m.contains("node_config_feat: shape (20, 62, 18), expected (n, 61, 18)"),
        "{m}"
    );
    let m = npz_error(&with_entry(
        LAYOUT,
        "feat_139.npz",
        "node_feat",
        Some(npy("<f4", &[1277, 139], &vec![0u8; 1277 * 139 * 4])),
    ));
    assert!(
        m.contains("node_feat: shape (1277, 139), expected (n, 140)"),
        "{m}"
    );
    // An edge to node 5000 in a 1277-node graph.
    let edges: Vec<u8> = [5000i64, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let m = npz_error(&with_entry(
        LAYOUT,
        "bad_edge.npz",
        "edge_index",
        Some(npy("<i8", &[1, 2], &edges)),
    ));
    assert!(m.contains("edge_index[0] = [5000, 0]"), "{m}");
    // A configurable node named twice (any order is fine, repeats are not).
    let mut ids: Vec<i64> = (0..62).rev().collect();
    ids[40] = ids[3];
    let bytes: Vec<u8> = ids.iter().flat_map(|v| v.to_le_bytes()).collect();
    let m = npz_error(&with_entry(
        LAYOUT,
        "repeated_ids.npz",
        "node_config_ids",
        Some(npy("<i8", &[62], &bytes)),
    ));
    assert!(
        m.contains("node_config_ids[40] = 58 repeats node_config_ids[3]"),
        "{m}"
    );
    // A configurable node id outside the graph.
    ids[40] = 1277;
    let bytes: Vec<u8> = ids.iter().flat_map(|v| v.to_le_bytes()).collect();
    let m = npz_error(&with_entry(
        LAYOUT,
        "id_out_of_range.npz",
        "node_config_ids",
        Some(npy("<i8", &[62], &bytes)),
    ));
    assert!(
        m.contains("node_config_ids[40] = 1277 is not a node (0..1277)"),
        "{m}"
    );
}

#[test]
fn an_entry_shorter_than_its_header_says_is_truncated() {
    // Header says (20, 62, 18) float32, the data holds half of that.
    let m = npz_error(&with_entry(
        LAYOUT,
        "short_data.npz",
        "node_config_feat",
        Some(npy("<f4", &[20, 62, 18], &vec![0u8; 20 * 62 * 18 * 2])),
    ));
    assert!(
        m.contains("node_config_feat") && m.contains("(truncated)"),
        "{m}"
    );
    // A header that is cut off.
    let m = npz_error(&with_entry(
        LAYOUT,
        "cut_header.npz",
        "node_opcode",
        Some(b"\x93NUMPY\x01\x00\x76\x00{'descr'".to_vec()),
    ));
    assert!(m.contains("node_opcode"), "{m}");
    // Not an npy at all.
    let m = npz_error(&with_entry(
        LAYOUT,
        "bad_magic.npz",
        "node_opcode",
        Some(b"PK not numpy".to_vec()),
    ));
    assert!(m.contains("bad magic"), "{m}");
    // A shape whose size overflows.
    let m = npz_error(&with_entry(
        LAYOUT,
        "huge_shape.npz",
        "node_config_feat",
        Some(raw_npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999, 99999999999), }\n",
        )),
    ));
    assert!(m.contains("too large") || m.contains("header"), "{m}");
}

#[test]
fn corrupt_compressed_data_is_an_error() {
    // Flip bytes inside the deflated node_config_feat entry of the published file.
    let bytes = std::fs::read(fixture(LAYOUT)).expect("fixture");
    let zip = zip::ZipArchive::new(std::io::Cursor::new(bytes.clone())).expect("zip");
    drop(zip);
    let mut seen_error = false;
    for at in [200usize, 400, 1000, 3000, 8000, 12000, 16000] {
        let mut b = bytes.clone();
        for k in 0..16 {
            b[at + k] ^= 0x5a;
        }
        let p = tmp(&format!("flipped_{at}.npz"));
        std::fs::write(&p, &b).expect("write");
        // Either refused with an npz error or (if the flip hit padding) accepted: never a panic.
        if let Err(e) = NpzGraphFile::open(&p).and_then(|f| f.all_configs().map(|_| ())) {
            assert!(matches!(e, CostModelError::Npz { .. }), "{e}");
            seen_error = true;
        }
    }
    assert!(seen_error, "corrupting deflated data must be noticed");
}

/// No single corrupted byte anywhere in a published file makes the reader
/// panic, and a corrupted file is either refused or reads exactly the
/// original arrays (the byte was zip metadata the reader does not use, like a
/// timestamp, or deflate padding): corrupt numbers are never returned.
#[test]
fn no_byte_flip_panics_or_returns_changed_data() {
    let bytes = std::fs::read(fixture(TILE)).expect("fixture");
    let original = NpzGraphFile::open(fixture(TILE)).expect("open");
    let original_configs = original.all_configs().expect("configs");
    let p = tmp("byte_flip.npz");
    let mut refused = 0;
    for at in 0..bytes.len() {
        let mut b = bytes.clone();
        b[at] = b[at].wrapping_add(0x41);
        std::fs::write(&p, &b).expect("write");
        match NpzGraphFile::open(&p).and_then(|f| f.all_configs().map(|c| (f, c))) {
            Err(_) => refused += 1,
            Ok((f, c)) => {
                assert_eq!(f.graph(), original.graph(), "byte {at}");
                assert_eq!(c, original_configs, "byte {at}");
                assert_eq!(f.runtimes(), original.runtimes(), "byte {at}");
                assert_eq!(
                    f.runtime_normalizers(),
                    original.runtime_normalizers(),
                    "byte {at}"
                );
            }
        }
    }
    println!(
        "{refused} of {} single-byte corruptions refused",
        bytes.len()
    );
    assert!(refused > bytes.len() / 2);
}

#[test]
fn stored_entries_with_bad_data_are_refused_too() {
    let mut e = entries(&fixture(LAYOUT));
    let at = e
        .iter()
        .position(|(n, _)| n == "node_config_feat.npy")
        .expect("entry");
    let len = e[at].1.len();
    e[at].1.truncate(len - 100);
    let p = tmp("stored_short.npz");
    write_zip(&p, &e, true);
    let m = npz_error(&p);
    assert!(
        m.contains("node_config_feat") && m.contains("truncated"),
        "{m}"
    );
}

/// A changed number inside a stored (uncompressed) array is noticed through the
/// zip CRC-32, for the graph arrays and for whole-array configuration reads.
#[test]
fn a_changed_value_in_stored_data_fails_the_crc_check() {
    let f = NpzGraphFile::open(fixture(LAYOUT)).expect("open");
    let stored = tmp("stored_ok.npz");
    rewrite(&f, &stored, true);
    let bytes = std::fs::read(&stored).expect("read");
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes.clone())).expect("zip");
    let start = |zip: &mut zip::ZipArchive<_>, name: &str| {
        zip.by_name(name).expect("entry").data_start() as usize + 128 + 40
    };
    for (entry, on_open) in [("node_feat.npy", true), ("node_config_feat.npy", false)] {
        let at = start(&mut zip, entry);
        let mut b = bytes.clone();
        b[at] ^= 0x01;
        let p = tmp(&format!("flipped_value_{entry}.npz"));
        std::fs::write(&p, &b).expect("write");
        let opened = NpzGraphFile::open(&p);
        assert_eq!(opened.is_err(), on_open, "{entry}");
        let m = npz_error(&p);
        assert!(
            m.contains("CRC-32 mismatch") && m.contains(entry.trim_end_matches(".npy")),
            "{m}"
        );
        if let Ok(file) = opened {
            // A slice cannot be checked; the full walk is.
            assert!(file.configs(0..2).is_ok());
            let walked: Result<Vec<_>, _> = file.config_batches(3).expect("batches").collect();
            assert!(
                walked.is_err(),
                "{entry}: config_batches must check the CRC"
            );
        }
    }
}
