//! Zip bombs: a small model or npz file that inflates to far more than any
//! real one. Refused from the zip directory's declared sizes before anything
//! is inflated (`MAX_MODEL_BYTES`, `MAX_WHOLE_ARRAY_BYTES`), and, when the
//! declared size lies, the read itself stops at the limit.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use costmodel::npz::{NpzGraphFile, MAX_WHOLE_ARRAY_BYTES};
use costmodel::onnx::MAX_MODEL_BYTES;
use costmodel::{CostModelError, Task};

fn tmp(name: &str) -> PathBuf {
    common::tmp("zip_bombs", name)
}

/// Writes a zip with one deflated entry per `(name, prefix, zeros)`: the
/// prefix bytes then that many zero bytes (streamed: never held in memory).
fn write_bomb(path: &Path, entries: &[(&str, &[u8], u64)]) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).expect("create"));
    let chunk = vec![0u8; 1 << 20];
    for (name, prefix, zeros) in entries {
        zip.start_file(
            *name,
            zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated)
                .compression_level(Some(1)),
        )
        .expect("start");
        zip.write_all(prefix).expect("write");
        let mut left = *zeros;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            zip.write_all(&chunk[..n]).expect("write");
            left -= n as u64;
        }
    }
    zip.finish().expect("finish");
}

/// Sets the declared uncompressed size of every entry to `size` (local
/// headers and central directory), leaving the data as it is: a lying archive.
fn declare_size(path: &Path, size: u32) {
    let mut b = std::fs::read(path).expect("read");
    let mut i = 0;
    while i + 30 <= b.len() {
        let at = match &b[i..i + 4] {
            b"PK\x03\x04" => Some(i + 22),
            b"PK\x01\x02" => Some(i + 24),
            _ => None,
        };
        if let Some(at) = at {
            b[at..at + 4].copy_from_slice(&size.to_le_bytes());
        }
        i += 1;
    }
    std::fs::write(path, b).expect("write");
}

fn model_error(path: &Path) -> String {
    match costmodel::load_model(Some(path), Task::Layout, 1) {
        Err(CostModelError::Model { message, .. }) => message,
        Err(e) => panic!("not a model error: {e}"),
        Ok(_) => panic!("a zip bomb was accepted as a model"),
    }
}

#[test]
fn a_model_entry_declared_beyond_the_limit_is_refused_before_inflating() {
    let path = tmp("bomb.hlocm");
    write_bomb(&path, &[("model.json", b"{", MAX_MODEL_BYTES + (16 << 20))]);
    assert!(std::fs::metadata(&path).expect("stat").len() < MAX_MODEL_BYTES / 100);
    let message = model_error(&path);
    assert!(message.contains("MAX_MODEL_BYTES"), "{message}");
    assert!(message.contains("refused before inflating"), "{message}");
}

#[test]
fn a_model_entry_that_lies_about_its_size_is_read_only_up_to_the_limit() {
    let path = tmp("lying_bomb.hlocm");
    write_bomb(&path, &[("model.json", b"{", MAX_MODEL_BYTES + (16 << 20))]);
    declare_size(&path, 100);
    let message = model_error(&path);
    assert!(
        message.contains("MAX_MODEL_BYTES") || message.contains("cannot read"),
        "{message}"
    );
}

#[test]
fn a_model_file_beyond_the_limit_is_refused() {
    // A sparse file: no disk space used.
    let path = tmp("huge.onnx");
    let f = std::fs::File::create(&path).expect("create");
    f.set_len(MAX_MODEL_BYTES + 1).expect("set_len");
    let message = model_error(&path);
    assert!(message.contains("MAX_MODEL_BYTES"), "{message}");
}

#[test]
fn an_npz_array_declared_beyond_the_limit_is_refused_before_inflating() {
    let path = tmp("bomb.npz");
    let header = b"\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2000000, 140), }";
    let mut npy = header.to_vec();
    npy.resize(10 + 0x76, b' ');
    npy[10 + 0x75] = b'\n';
    write_bomb(
        &path,
        &[("node_feat.npy", &npy, MAX_WHOLE_ARRAY_BYTES + (1 << 20))],
    );
    assert!(std::fs::metadata(&path).expect("stat").len() < MAX_WHOLE_ARRAY_BYTES / 100);
    let message = match NpzGraphFile::open(&path) {
        Err(CostModelError::Npz { message, .. }) => message,
        Err(e) => panic!("not an npz error: {e}"),
        Ok(_) => panic!("a zip bomb was accepted"),
    };
    assert!(message.contains("MAX_WHOLE_ARRAY_BYTES"), "{message}");
    assert!(message.contains("refused before inflating"), "{message}");
}
