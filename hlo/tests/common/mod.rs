//! Helpers shared by the integration tests: locating test data and the round
//! trip property.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `<repo root>/testdata`.
pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("testdata")
}

/// `<repo root>/../shared`, when present.
pub fn shared() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
        .join("shared");
    p.is_dir().then_some(p)
}

/// `.hlo` files of a folder, sorted.
pub fn hlo_files(dir: &Path) -> Vec<PathBuf> {
    files_with_extension(dir, "hlo")
}

/// Files of a folder with extension `ext`, sorted.
pub fn files_with_extension(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == ext))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The shared corpus's folders of valid modules (XLA's tests, jax models,
/// TpuGraphs modules and tile kernels), relative to `../shared`.
pub const SHARED_VALID: [&str; 4] = [
    "corpus/xla/valid",
    "corpus/jax",
    "data/tpugraphs/hlo",
    "data/tpugraphs/tile_kernels",
];

/// `.hlo` files of the given folders under `root`, folder by folder.
pub fn hlo_files_in(root: &Path, dirs: &[&str]) -> Vec<PathBuf> {
    dirs.iter().flat_map(|d| hlo_files(&root.join(d))).collect()
}

/// Checks `parse(print(parse(x))) == parse(x)`: the reparsed module prints to
/// the same text and has the same structure. Returns a description of the
/// first difference.
pub fn round_trip(text: &str, name: &str) -> Result<(), String> {
    let m1 = hlo::parse_module_named(text, name).map_err(|e| format!("parse: {e}"))?;
    let p1 = hlo::print_module(&m1);
    let m2 = hlo::parse_module_named(&p1, &format!("{name} (printed)"))
        .map_err(|e| format!("reparse: {e}"))?;
    let p2 = hlo::print_module(&m2);
    if p1 != p2 {
        let line = p1
            .lines()
            .zip(p2.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        return Err(format!(
            "printed text differs at line {}:\n  first:  {}\n  second: {}",
            line + 1,
            p1.lines().nth(line).unwrap_or(""),
            p2.lines().nth(line).unwrap_or("")
        ));
    }
    if m1.instruction_count() != m2.instruction_count()
        || m1.num_computations() != m2.num_computations()
    {
        return Err("instruction or computation counts differ".into());
    }
    Ok(())
}

/// xorshift64*: tiny, deterministic, good enough to pick mutation sites.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Runs `hlo/conformance/SCRIPT` with `python` and `args`, echoes and returns
/// its stdout; a failing script fails the test with its output.
pub fn run_conformance(python: &str, script: &str, args: &[std::ffi::OsString]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("conformance")
        .join(script);
    let res = std::process::Command::new(python)
        .arg(&script)
        .args(args)
        .output()
        .expect("run the conformance script");
    let stdout = String::from_utf8_lossy(&res.stdout).into_owned();
    println!("{stdout}");
    assert!(
        res.status.success(),
        "{} failed:\n{stdout}\n{}",
        script.display(),
        String::from_utf8_lossy(&res.stderr)
    );
    stdout
}

/// One to four random edits of `text`: a cut, a splice of one of
/// `splices`, a byte replaced by one of `alphabet`, a repeated slice, or
/// the rest dropped. Invalid UTF-8 made by an edit is replaced.
pub fn mutate(rng: &mut Rng, text: &str, splices: &[&str], alphabet: &[u8]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(5) {
            0 => {
                let end = (at + 1 + rng.below(16)).min(bytes.len());
                bytes.drain(at.min(end)..end);
            }
            1 => {
                let s = splices[rng.below(splices.len())].as_bytes();
                bytes.splice(at..at, s.iter().copied());
            }
            2 if !bytes.is_empty() => {
                let i = at.min(bytes.len() - 1);
                bytes[i] = alphabet[rng.below(alphabet.len())];
            }
            4 => bytes.truncate(at),
            _ => {
                // Duplicate a slice (repeats instructions, brackets, ...).
                let end = (at + rng.below(64)).min(bytes.len());
                let piece: Vec<u8> = bytes[at.min(end)..end].to_vec();
                bytes.splice(at..at, piece);
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}
