//! Functions a contributor must read fit on a screen (house style,
//! "Stages, not walls"): no function of non-test code is longer than
//! [`LIMIT`] lines, in any crate.
//!
//! Specification:
//! - non-test code is every crate's `src/` (not `tests/`, `benches/`,
//!   `examples/`, nor `#[cfg(test)]` modules);
//! - a function's length counts from its `fn` line to the closing brace at
//!   the same indentation, both included (rustfmt's layout);
//! - none is longer than [`LIMIT`] in the crates of [`CRATES`], every
//!   crate of the workspace and the root package (issue 36 split the last
//!   ones in `hlo` and `costmodel`); a crate added to the workspace but not
//!   here is an error;
//! - a planted long function is reported.

use std::path::{Path, PathBuf};

const LIMIT: usize = 150;
/// Every crate: the workspace members and the root package (`src`).
const CRATES: &[&str] = &["hlo", "costmodel", "passes", "pjrt", "ffi", "python", "src"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Whether a line starts a function item (`pub(crate) unsafe fn x(`).
fn is_fn_line(line: &str) -> bool {
    let mut words = line.split_whitespace();
    for w in words.by_ref() {
        let w = w.split('(').next().unwrap_or_default();
        match w {
            "pub" | "const" | "async" | "unsafe" | "extern" | "\"C\"" | "default" => continue,
            _ if w.starts_with("pub") => continue,
            "fn" => return true,
            _ => return false,
        }
    }
    false
}

/// `(name, first line (1-based), lines)` of each function of `text`
/// longer than `limit`, `#[cfg(test)]` modules skipped.
fn long_functions(text: &str, limit: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let close = |from: usize, ind: usize| {
        (from..lines.len()).find(|&k| indent(lines[k]) == ind && lines[k].trim() == "}")
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim() == "#[cfg(test)]" {
            let item = (i + 1..lines.len()).find(|&k| !lines[k].trim_start().starts_with("#["));
            if let Some(k) = item.filter(|&k| lines[k].trim_end().ends_with('{')) {
                i = close(k + 1, indent(lines[k])).unwrap_or(lines.len());
                continue;
            }
        }
        if is_fn_line(line) {
            // The body opens where the signature ends: a line ending in `{`
            // (a `;` first: a declaration without a body).
            let open = (i..lines.len()).find(|&k| {
                let t = lines[k].trim_end();
                t.ends_with('{') || t.ends_with(';')
            });
            if let Some(open) = open.filter(|&k| lines[k].trim_end().ends_with('{')) {
                if let Some(end) = close(open + 1, indent(line)) {
                    let n = end - i + 1;
                    if n > limit {
                        let name = line.split("fn ").nth(1).unwrap_or_default();
                        let name = name.split(['(', '<']).next().unwrap_or_default();
                        out.push((name.to_string(), i + 1, n));
                    }
                }
            }
        }
        i += 1;
    }
    out
}

/// `crate/src/file.rs:line fn name (N lines)` for each long function of
/// the crate's non-test code.
fn long_in(krate: &str) -> Vec<String> {
    let root = repo();
    let src = if krate == "src" {
        root.join("src")
    } else {
        root.join(krate).join("src")
    };
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("a readable source");
        for (name, line, n) in long_functions(&text, LIMIT) {
            let rel = f.strip_prefix(&root).unwrap_or(&f).display().to_string();
            out.push(format!("{rel}:{line} fn {name} ({n} lines)"));
        }
    }
    out
}

#[test]
fn no_function_is_longer_than_the_limit() {
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).expect("Cargo.toml");
    let members = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("a members line");
    for m in members.split('"').skip(1).step_by(2) {
        assert!(
            CRATES.contains(&m),
            "workspace member {m} is not checked here: add it to CRATES"
        );
    }
    let long: Vec<String> = CRATES.iter().flat_map(|k| long_in(k)).collect();
    assert!(
        long.is_empty(),
        "functions over {LIMIT} lines (split them into named stages):\n{}",
        long.join("\n")
    );
}

#[test]
fn a_planted_long_function_is_reported() {
    let body = "    let x = 1;\n".repeat(LIMIT);
    let text = format!(
        "pub(crate) fn long(a: u32) -> u32 {{\n{body}    x\n}}\n\ntrait T {{\n    fn decl(&self);\n}}\n\n#[cfg(test)]\nmod tests {{\n    fn also_long() {{\n{body}    }}\n}}\n"
    );
    assert_eq!(
        long_functions(&text, LIMIT),
        vec![("long".to_string(), 1, LIMIT + 3)]
    );
    let short = format!("fn short() {{\n{}}}\n", "    f();\n".repeat(LIMIT - 2));
    assert!(long_functions(&short, LIMIT).is_empty());
}
