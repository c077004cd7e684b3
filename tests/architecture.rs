//! The contributors' guide, `docs/architecture.md`, stays true.
//!
//! Specification:
//! - every repository path the guide writes in backticks exists. A code span
//!   is a path when it has no white space, no `::`, does not begin with `-`
//!   or `.`, and has a `/` or ends in a file extension of [`EXTENSIONS`];
//!   it is read relative to the repository root, and a `*` in it matches
//!   any part of one name (at least one file must match);
//! - the dependencies among the workspace's crates, as each member's
//!   `Cargo.toml` declares them (`cargo metadata --no-deps`: normal and build
//!   dependencies, not dev-dependencies), equal the guide's `crate-graph`
//!   block, line for line;
//! - that block lists each crate below every crate it depends on, so a
//!   dependency that points up the layers (or a cycle) cannot be stated;
//! - each check reports a violation planted in a copy of its input (a path
//!   that does not exist, a dependency the guide does not state, a stated
//!   dependency that points up).
//!
//! That `hlo`'s IR imports nothing from its text, proto and check layers is
//! `hlo/tests/layers.rs`'s check.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// File extensions that make a code span without a `/` a path.
const EXTENSIONS: &[&str] = &[
    "rs", "md", "toml", "h", "c", "py", "pyi", "pest", "hlo", "hlocm", "sh", "json", "snap",
];

/// Crate name -> the workspace crates it depends on.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn guide() -> String {
    let path = repo().join("docs/architecture.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The inline code spans of a Markdown text (fenced blocks skipped).
fn code_spans(md: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        spans.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
    }
    spans
}

fn is_path(span: &str) -> bool {
    if span.is_empty()
        || span.contains(char::is_whitespace)
        || span.contains("::")
        || span.starts_with(['-', '.'])
    {
        return false;
    }
    span.contains('/')
        || span
            .rsplit_once('.')
            .is_some_and(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext))
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters.
fn wildcard(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => {
            let Some(tail) = name.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len())
                .filter(|&i| tail.is_char_boundary(i))
                .any(|i| wildcard(rest, &tail[i..]))
        }
    }
}

/// Whether a path (relative to `base`, `*` allowed in any component) names
/// at least one existing file or folder.
fn exists(base: &Path, components: &[&str]) -> bool {
    let Some((first, rest)) = components.split_first() else {
        return base.exists();
    };
    if !first.contains('*') {
        return exists(&base.join(first), rest);
    }
    let Ok(entries) = std::fs::read_dir(base) else {
        return false;
    };
    entries
        .flatten()
        .any(|e| wildcard(first, &e.file_name().to_string_lossy()) && exists(&e.path(), rest))
}

/// The paths written in backticks in `md` that name nothing under `root`.
fn missing_paths(md: &str, root: &Path) -> Vec<String> {
    code_spans(md)
        .into_iter()
        .filter(|s| is_path(s))
        .filter(|s| {
            let components: Vec<&str> = s.split('/').filter(|c| !c.is_empty()).collect();
            !exists(root, &components)
        })
        .collect()
}

/// The guide's `crate-graph` block: one line per crate, `name -> a, b`
/// (nothing after `->` for a crate that depends on no workspace crate;
/// `#` starts a comment), in the order of the lines.
fn stated_graph(md: &str) -> Result<Vec<(String, BTreeSet<String>)>, String> {
    let mut lines = md.lines();
    lines
        .by_ref()
        .find(|l| l.trim() == "```crate-graph")
        .ok_or("no ```crate-graph block")?;
    let mut out = Vec::new();
    for line in lines {
        if line.trim_start().starts_with("```") {
            return Ok(out);
        }
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (name, deps) = line
            .split_once("->")
            .ok_or_else(|| format!("`{line}`: expected `crate -> dependencies`"))?;
        let deps = deps
            .split([',', ' '])
            .filter(|d| !d.is_empty())
            .map(str::to_string)
            .collect();
        out.push((name.trim().to_string(), deps));
    }
    Err("the ```crate-graph block is not closed".to_string())
}

/// The workspace crates' dependencies on each other, from `cargo metadata`.
fn actual_graph() -> Graph {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(&cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(repo().join("Cargo.toml"))
        .output()
        .unwrap_or_else(|e| panic!("{cargo} metadata: {e}"));
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    graph_of_metadata(&meta)
}

fn graph_of_metadata(meta: &serde_json::Value) -> Graph {
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .expect("workspace_members")
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    let packages: Vec<&serde_json::Value> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| members.contains(id)))
        .collect();
    let names: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .filter_map(|d| d["name"].as_str())
                .filter(|d| names.contains(d))
                .map(str::to_string)
                .collect();
            (p["name"].as_str().unwrap_or("").to_string(), deps)
        })
        .collect()
}

/// Where the stated graph differs from the manifests', and each stated
/// dependency on a crate that is not listed above the crate.
fn graph_problems(stated: &[(String, BTreeSet<String>)], actual: &Graph) -> Vec<String> {
    let mut problems = Vec::new();
    let mut above = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for (name, deps) in stated {
        if !seen.insert(name) {
            problems.push(format!("`{name}` is listed twice"));
        }
        for d in deps.difference(&above) {
            problems.push(format!(
                "`{name} -> {d}` points up: `{d}` is not listed above `{name}`"
            ));
        }
        match actual.get(name) {
            None => problems.push(format!("`{name}` is no workspace crate")),
            Some(real) if real != deps => problems.push(format!(
                "`{name}`: the guide says it depends on {deps:?}, its Cargo.toml on {real:?}"
            )),
            Some(_) => {}
        }
        above.insert(name.clone());
    }
    for name in actual.keys().filter(|n| !seen.contains(n)) {
        problems.push(format!(
            "workspace crate `{name}` is missing from the guide"
        ));
    }
    problems
}

#[test]
fn every_path_in_the_guide_exists() {
    let missing = missing_paths(&guide(), &repo());
    assert!(
        missing.is_empty(),
        "docs/architecture.md names paths that do not exist: {missing:?}"
    );
}

#[test]
fn the_guide_states_the_crate_graph_of_the_manifests() {
    let stated = stated_graph(&guide()).unwrap_or_else(|e| panic!("docs/architecture.md: {e}"));
    let problems = graph_problems(&stated, &actual_graph());
    assert!(
        problems.is_empty(),
        "docs/architecture.md's crate-graph block:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_planted_wrong_path_is_reported() {
    let planted = "See `hlo/src/ir.rs`, `testdata/*/README.md`, `hlo/src/no_such_module.rs` \
                   and `testdata/*/no_such_case.hlo`.\n```sh\nls `not/a/span`\n```\n";
    assert_eq!(
        missing_paths(planted, &repo()),
        ["hlo/src/no_such_module.rs", "testdata/*/no_such_case.hlo"]
    );
    // Not paths: flags, Rust paths, commands, extensions.
    for span in ["--pass=layout", "hlo::Module", "hlo-opt FILE", ".hlocm"] {
        assert!(!is_path(span), "{span}");
    }
}

#[test]
fn a_planted_dependency_is_reported() {
    let stated = stated_graph(&guide()).expect("the guide's block parses");
    let agreeing: Graph = stated.iter().cloned().collect();
    assert_eq!(graph_problems(&stated, &agreeing), Vec::<String>::new());
    // A dependency added to a manifest that the guide does not state.
    let mut actual = agreeing.clone();
    actual
        .get_mut("costmodel")
        .expect("the guide lists costmodel")
        .insert("pjrt".to_string());
    let problems = graph_problems(&stated, &actual);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("`costmodel`: the guide says"));
    // The same dependency stated too: it points up the layers.
    let planted: Vec<_> = stated
        .iter()
        .cloned()
        .map(|(name, mut deps)| {
            if name == "costmodel" {
                deps.insert("pjrt".to_string());
            }
            (name, deps)
        })
        .collect();
    assert_eq!(
        graph_problems(&planted, &actual),
        ["`costmodel -> pjrt` points up: `pjrt` is not listed above `costmodel`"]
    );
    // A crate the guide leaves out.
    actual.insert("new_crate".to_string(), BTreeSet::new());
    assert_eq!(
        graph_problems(&planted, &actual),
        [
            "`costmodel -> pjrt` points up: `pjrt` is not listed above `costmodel`",
            "workspace crate `new_crate` is missing from the guide"
        ]
    );
}
