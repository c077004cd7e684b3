//! No two files of a crate import each other in a circle, in any crate of
//! the workspace (house style, "Layers": imports point down).
//!
//! Specification:
//! - a file is a module (`src/a/b.rs` and `src/a/b/mod.rs` are `a::b`;
//!   `lib.rs` and `main.rs` the root); comments, strings and
//!   `#[cfg(test)]` items are not read;
//! - a file imports the deepest file module a path in it names: `use`
//!   trees (braces expanded) and paths written in code, starting with
//!   `crate::`, `super::`, `self::` or a child module's name;
//! - a path to an ancestor's items is no import: a child module is part of
//!   its parent (it sees the parent's private items);
//! - the graph of imports has no cycle; each cycle is reported with its
//!   files in order;
//! - a cycle planted in a copy of a crate's sources is reported.
//!
//! `hlo/tests/layers.rs` checks `hlo`'s layers more closely (re-exports
//! resolved to where they come from, inline modules).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The folders whose `src/` is a crate's (the workspace's members and the
/// root package).
const CRATES: &[&str] = &["hlo", "costmodel", "passes", "pjrt", "ffi", "python", "."];

type Module = Vec<String>;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `src/`-relative path -> text, for every `.rs` file of a crate except
/// its binaries (`src/bin/`, crates of their own).
fn sources(krate: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(dir: &Path, src: &Path, out: &mut BTreeMap<PathBuf, String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() && p != src.join("bin") {
                walk(&p, src, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).expect("a readable source");
                out.insert(p.strip_prefix(src).expect("under src").to_path_buf(), text);
            }
        }
    }
    let src = krate.join("src");
    let mut out = BTreeMap::new();
    walk(&src, &src, &mut out);
    out
}

fn module_of(rel: &Path) -> Module {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.trim_end_matches(".rs");
    if !matches!(stem, "lib" | "main" | "mod") {
        parts.push(stem.to_string());
    }
    parts
}

/// The text with comments, string and char literals blanked out.
fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c[i] == 'r' && (next == Some('#') || next == Some('"')) && !ident_before(&c, i) {
            let hashes = c[i + 1..].iter().take_while(|&&x| x == '#').count();
            if c.get(i + 1 + hashes) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            i += 2 + hashes;
            while i < c.len() {
                if c[i] == '"' && c[i + 1..].iter().take_while(|&&x| x == '#').count() >= hashes {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            out.push_str("\"\"");
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && (c.get(i + 2) == Some(&'\'') || next == Some('\\')) {
            i += 1;
            while i < c.len() && c[i] != '\'' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn ident_before(c: &[char], i: usize) -> bool {
    i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_')
}

/// The code without `#[cfg(test)]` items (the attribute and the braced
/// item after it).
fn without_tests(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let (Some(open), semi) = (after.find('{'), after.find(';')) else {
            rest = "";
            break;
        };
        if semi.is_some_and(|s| s < open) {
            rest = &after[semi.unwrap_or(0) + 1..];
            continue;
        }
        let mut depth = 0;
        let mut end = after.len();
        for (k, ch) in after[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The paths of the `use` items and the module paths written in `code`,
/// as segments.
fn paths(code: &str) -> Vec<Vec<String>> {
    fn expand(tree: &str, prefix: &str, out: &mut Vec<Vec<String>>) {
        let tree = tree.trim();
        match tree.find('{') {
            Some(open) if tree.ends_with('}') => {
                let head = format!("{prefix}{}", &tree[..open]);
                let inner = &tree[open + 1..tree.len() - 1];
                let (mut depth, mut start) = (0, 0);
                for (k, ch) in inner.char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            expand(&inner[start..k], &head, out);
                            start = k + 1;
                        }
                        _ => {}
                    }
                }
                expand(&inner[start..], &head, out);
            }
            _ if !tree.is_empty() => {
                let full = format!("{prefix}{tree}");
                let full = full.split(" as ").next().unwrap_or_default();
                out.push(segments(full));
            }
            _ => {}
        }
    }
    fn segments(path: &str) -> Vec<String> {
        path.split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "*")
            .map(str::to_string)
            .collect()
    }
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let end = rest[at..].find(';').map_or(rest.len(), |e| at + e);
        expand(&rest[at + 3..end], "", &mut out);
        rest = &rest[end..];
    }
    // Paths written in code: an identifier followed by `::`.
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        if (bytes[i].is_alphabetic() || bytes[i] == '_') && !ident_before(&bytes, i) {
            let mut j = i;
            while j + 2 < bytes.len()
                && (bytes[j].is_alphanumeric() || bytes[j] == '_' || bytes[j] == ':')
            {
                j += 1;
            }
            let word: String = bytes[i..j].iter().collect();
            if word.contains("::") {
                out.push(segments(&word));
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

fn find_word(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(k) = text[from..].find(word) {
        let at = from + k;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        if boundary(before) && boundary(after) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The file module a path written in `here` names, if any (the deepest).
fn resolve(modules: &BTreeSet<Module>, here: &Module, path: &[String]) -> Option<Module> {
    match path.first()?.as_str() {
        "crate" => deepest(modules, Vec::new(), &path[1..]),
        "self" => deepest(modules, here.clone(), &path[1..]),
        "super" => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            let base = here[..here.len().saturating_sub(ups)].to_vec();
            deepest(modules, base, &path[ups..])
        }
        _ => {
            let mut child = here.clone();
            child.push(path[0].clone());
            modules
                .contains(&child)
                .then(|| deepest(modules, child, &path[1..]))?
        }
    }
}

fn deepest(modules: &BTreeSet<Module>, mut at: Module, rest: &[String]) -> Option<Module> {
    for seg in rest {
        at.push(seg.clone());
        if !modules.contains(&at) {
            at.pop();
            break;
        }
    }
    modules.contains(&at).then_some(at)
}

/// The crate's import graph, file module -> the file modules it imports.
fn graph(files: &BTreeMap<PathBuf, String>) -> BTreeMap<Module, BTreeSet<Module>> {
    let modules: BTreeSet<Module> = files.keys().map(|p| module_of(p)).collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (rel, text) in files {
        let here = module_of(rel);
        let code = without_tests(&code_only(text));
        let targets = edges.entry(here.clone()).or_default();
        for p in paths(&code) {
            let Some(to) = resolve(&modules, &here, &p) else {
                continue;
            };
            // An ancestor's items (or its own) are no import.
            if !here.starts_with(&to) {
                targets.insert(to);
            }
        }
    }
    edges
}

fn show(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// Each cycle of the graph, as `a -> b -> a` (one per strongly connected
/// group of modules, found by depth-first search).
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    let reach = |from: &Module| -> BTreeMap<Module, Module> {
        // Parent links of a breadth-first search from `from`.
        let mut parent = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([from.clone()]);
        while let Some(m) = queue.pop_front() {
            for n in edges.get(&m).into_iter().flatten() {
                if !parent.contains_key(n) {
                    parent.insert(n.clone(), m.clone());
                    queue.push_back(n.clone());
                }
            }
        }
        parent
    };
    let mut seen: BTreeSet<Module> = BTreeSet::new();
    let mut out = Vec::new();
    for m in edges.keys() {
        if seen.contains(m) {
            continue;
        }
        let parent = reach(m);
        if !parent.contains_key(m) {
            continue;
        }
        // Walk the parent links back from `m` to itself.
        let mut path = vec![m.clone()];
        let mut at = parent[m].clone();
        while at != *m {
            path.push(at.clone());
            at = parent[&at].clone();
        }
        path.push(m.clone());
        path.reverse();
        seen.extend(path.iter().cloned());
        out.push(path.iter().map(show).collect::<Vec<_>>().join(" -> "));
    }
    out
}

#[test]
fn no_crate_has_an_import_cycle_between_its_files() {
    let mut problems = Vec::new();
    for krate in CRATES {
        let files = sources(&repo().join(krate));
        assert!(!files.is_empty(), "{krate}/src has no sources");
        for c in cycles(&graph(&files)) {
            problems.push(format!("{krate}: {c}"));
        }
    }
    assert!(
        problems.is_empty(),
        "import cycles:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_cycle_planted_in_the_sources_is_reported() {
    let mut files = sources(&repo().join("passes"));
    let config = PathBuf::from("tile/xla_gpu/config.rs");
    let text = files
        .get_mut(&config)
        .expect("passes/src/tile/xla_gpu/config.rs");
    // proto.rs imports config.rs; config.rs now imports proto.rs.
    text.push_str("\nfn planted() -> super::proto::AutotuneResult { todo!() }\n");
    let found = cycles(&graph(&files));
    assert!(
        found
            .iter()
            .any(|c| c.contains("tile::xla_gpu::config") && c.contains("tile::xla_gpu::proto")),
        "{found:?}"
    );
}

#[test]
fn paths_in_comments_strings_and_tests_are_not_imports() {
    let files = BTreeMap::from([
        (PathBuf::from("lib.rs"), "mod a; mod b;".to_string()),
        (
            PathBuf::from("a.rs"),
            "use crate::b::X; // crate::c\n".to_string(),
        ),
        (
            PathBuf::from("b.rs"),
            "/* super::a */ const S: &str = \"crate::a::Y\";\n#[cfg(test)]\nmod tests { use crate::a::Z; }\n"
                .to_string(),
        ),
    ]);
    let g = graph(&files);
    assert!(cycles(&g).is_empty(), "{g:?}");
    assert_eq!(g[&vec!["a".to_string()]].len(), 1, "{g:?}");
    let mut planted = files.clone();
    planted.insert(
        PathBuf::from("b.rs"),
        "use super::{a::{self, Y}};".to_string(),
    );
    assert_eq!(cycles(&graph(&planted)), vec!["a -> b -> a".to_string()]);
}
