//! The `hlo` crate's modules import each other in layers, never in a circle
//! (house style, "Layers"): the IR at the bottom, the formats (text, proto)
//! and the checks above it.
//!
//! This reads `hlo/src/**/*.rs`, tokenizes each file (`proc-macro2`, so
//! comments, doc comments and strings are never mistaken for paths), and
//! builds the graph of module imports: an edge `a -> b` for each
//! `use crate::b::..`, `use super::..`, `use self::..`, each path written as
//! `crate::b::x` / `super::x` / `self::x` in code, and each path through a
//! child module (`child::x`). A module is a file or an inline `mod m { .. }`
//! (so a `#[cfg(test)] mod tests` is its own module and may use anything).
//! A child module is part of its parent (Rust's privacy unit: it sees the
//! parent's private items; a large module is split into files this way),
//! so a use of an ancestor's items (`super::x`) is no edge; every other
//! import is one, between siblings too (`proto::read` and `proto::write`).
//! A path resolves to the deepest module it names; a name a module imports
//! or re-exports (`use`, `pub use`) resolves to where it comes from, and a
//! name of the crate root not re-exported by name to its glob re-export
//! (`pub use ir::*`): the root only re-exports, it is no layer of its own.
//!
//! Checks:
//! - the graph has no cycle (each cycle found is printed with its modules
//!   and a path `a -> b -> .. -> a` through them);
//! - the IR's modules ([`IR`]) import only from the IR;
//! - the cycle finder reports a cycle planted in a small graph, and one
//!   planted in the real sources (an import of the parser from `ir.rs`);
//!   the IR check reports an import of the printer planted in `ir/literal.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::str::FromStr;

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

/// The IR layer: these modules (and their non-test children) import only
/// from each other.
const IR: &[&str] = &["ir", "opcode", "error"];

/// A module path, `crate` for the root, else `a::b`.
type Mod = String;

fn join(parts: &[String]) -> Mod {
    if parts.is_empty() {
        "crate".to_string()
    } else {
        parts.join("::")
    }
}

/// The module path of a source file relative to `src/`.
fn file_module(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    let stem = last.strip_suffix(".rs").expect("a .rs file").to_string();
    if stem != "lib" && stem != "mod" {
        parts.push(stem);
    }
    parts
}

/// One source file's tokens with the module it defines.
struct Source {
    module: Vec<String>,
    tokens: TokenStream,
}

fn tokenize(files: &BTreeMap<String, String>) -> Vec<Source> {
    files
        .iter()
        .map(|(rel, text)| Source {
            module: file_module(Path::new(rel)),
            tokens: TokenStream::from_str(text)
                .unwrap_or_else(|e| panic!("{rel} does not tokenize: {e:?}")),
        })
        .collect()
}

/// Every module: the files, and the inline `mod m { .. }` blocks in them.
fn collect_modules(sources: &[Source]) -> BTreeSet<Vec<String>> {
    fn inline(tokens: &TokenStream, here: &[String], out: &mut BTreeSet<Vec<String>>) {
        let tts: Vec<TokenTree> = tokens.clone().into_iter().collect();
        for (i, tt) in tts.iter().enumerate() {
            if let TokenTree::Group(g) = tt {
                match inline_mod_name(&tts, i) {
                    Some(name) => {
                        let mut child = here.to_vec();
                        child.push(name);
                        out.insert(child.clone());
                        inline(&g.stream(), &child, out);
                    }
                    None => inline(&g.stream(), here, out),
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    for s in sources {
        out.insert(s.module.clone());
        inline(&s.tokens, &s.module, &mut out);
    }
    out
}

/// `mod NAME { .. }` where `tts[i]` is the braced group: the name.
fn inline_mod_name(tts: &[TokenTree], i: usize) -> Option<String> {
    let TokenTree::Group(g) = &tts[i] else {
        return None;
    };
    if g.delimiter() != Delimiter::Brace || i < 2 {
        return None;
    }
    match (&tts[i - 2], &tts[i - 1]) {
        (TokenTree::Ident(m), TokenTree::Ident(name)) if m == "mod" => Some(name.to_string()),
        _ => None,
    }
}

fn is_path_sep(tts: &[TokenTree], i: usize) -> bool {
    matches!((tts.get(i), tts.get(i + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':')
}

/// The paths a `use` tree names, each as its segments (`*` and `{..}`
/// expanded, `{self, ..}` as the path itself) with the name it binds
/// (`as` renames; `*` for a glob).
fn use_paths(tts: &[TokenTree], prefix: &[String], out: &mut Vec<(Vec<String>, String)>) {
    let mut path = prefix.to_vec();
    let mut alias = None;
    let mut i = 0;
    while i < tts.len() {
        match &tts[i] {
            TokenTree::Ident(id) if id == "as" => {
                alias = tts.get(i + 1).map(|t| t.to_string());
                i += 2;
                continue;
            }
            TokenTree::Ident(id) if id == "self" && !path.is_empty() => {}
            TokenTree::Ident(id) => path.push(id.to_string()),
            TokenTree::Punct(p) if p.as_char() == '*' => path.push("*".to_string()),
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {
                let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                for part in inner.split(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ','))
                {
                    if !part.is_empty() {
                        use_paths(part, &path, out);
                    }
                }
                return;
            }
            _ => {}
        }
        i += 1;
    }
    if let Some(last) = path.last().cloned() {
        out.push((path, alias.unwrap_or(last)));
    }
}

/// The `use` items directly in `tts` (not in nested blocks), as
/// `use_paths` gives them.
fn uses_in(tts: &[TokenTree], out: &mut Vec<(Vec<String>, String)>) {
    let mut i = 0;
    while i < tts.len() {
        if matches!(&tts[i], TokenTree::Ident(id) if id == "use") {
            let end = (i..tts.len())
                .find(|&j| matches!(&tts[j], TokenTree::Punct(p) if p.as_char() == ';'))
                .unwrap_or(tts.len());
            use_paths(&tts[i + 1..end], &[], out);
            i = end;
        }
        i += 1;
    }
}

/// The crate's import graph: module -> modules it imports.
struct Graph {
    modules: BTreeSet<Vec<String>>,
    /// Per module, the names its `use` items bind -> the path they name
    /// (as written there); globs under `*`.
    uses: BTreeMap<Vec<String>, Vec<(Vec<String>, String)>>,
    edges: BTreeMap<Mod, BTreeSet<Mod>>,
}

impl Graph {
    fn build(files: &BTreeMap<String, String>) -> Graph {
        let sources = tokenize(files);
        let modules = collect_modules(&sources);
        let mut g = Graph {
            modules,
            uses: BTreeMap::new(),
            edges: BTreeMap::new(),
        };
        for s in &sources {
            g.collect_uses(&s.tokens, &s.module);
        }
        for s in &sources {
            if !s.module.is_empty() {
                g.scan(&s.tokens, &s.module);
            }
        }
        g
    }

    fn collect_uses(&mut self, tokens: &TokenStream, here: &[String]) {
        let tts: Vec<TokenTree> = tokens.clone().into_iter().collect();
        let mut found = Vec::new();
        uses_in(&tts, &mut found);
        self.uses.entry(here.to_vec()).or_default().extend(found);
        for (i, tt) in tts.iter().enumerate() {
            if let (TokenTree::Group(g), Some(name)) = (tt, inline_mod_name(&tts, i)) {
                let mut child = here.to_vec();
                child.push(name);
                self.collect_uses(&g.stream(), &child);
            }
        }
    }

    /// The module a path written in `here` refers to, if it is one of ours.
    fn resolve(&self, here: &[String], path: &[String]) -> Option<Vec<String>> {
        self.resolve_in(here, path, 0)
    }

    fn resolve_in(&self, here: &[String], path: &[String], depth: usize) -> Option<Vec<String>> {
        if depth > 16 {
            return None;
        }
        let (first, rest) = path.split_first()?;
        let mut base: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => here.to_vec(),
            "super" => here[..here.len().checked_sub(1)?].to_vec(),
            name => {
                let mut c = here.to_vec();
                c.push(name.to_string());
                if self.modules.contains(&c) {
                    c
                } else {
                    // A name a `use` of this module binds.
                    let (p, _) = self.uses.get(here)?.iter().find(|(_, n)| n == name)?;
                    if p.len() == 1 {
                        return None;
                    }
                    return self.resolve_in(here, &[p.as_slice(), rest].concat(), depth + 1);
                }
            }
        };
        let mut rest = rest;
        while let Some((seg, tail)) = rest.split_first() {
            if seg == "super" {
                base.pop()?;
                rest = tail;
                continue;
            }
            let mut next = base.clone();
            next.push(seg.clone());
            if self.modules.contains(&next) {
                base = next;
                rest = tail;
                continue;
            }
            // A name `base` re-exports: where it takes it from.
            let uses = self.uses.get(&base);
            let bound = uses.and_then(|u| u.iter().find(|(_, n)| n == seg && seg != "*"));
            if let Some((p, _)) = bound {
                if p.len() > 1 {
                    return self.resolve_in(&base, &[p.as_slice(), tail].concat(), depth + 1);
                }
            }
            if base.is_empty() && seg != "*" {
                // The root defines nothing: a name not re-exported by name
                // comes through its glob re-export.
                let glob = uses.and_then(|u| u.iter().find(|(_, n)| n == "*"));
                if let Some((p, _)) = glob {
                    return self.resolve_in(&base, &p[..p.len() - 1], depth + 1);
                }
            }
            break;
        }
        Some(base)
    }

    fn add(&mut self, here: &[String], path: &[String]) {
        if let Some(to) = self.resolve(here, path) {
            // A module's own items and its ancestors' are its own unit.
            if !here.starts_with(&to) {
                self.edges.entry(join(here)).or_default().insert(join(&to));
            }
        }
    }

    fn scan(&mut self, tokens: &TokenStream, here: &[String]) {
        let tts: Vec<TokenTree> = tokens.clone().into_iter().collect();
        let mut i = 0;
        while i < tts.len() {
            match &tts[i] {
                TokenTree::Group(g) => {
                    match inline_mod_name(&tts, i) {
                        Some(name) => {
                            let mut child = here.to_vec();
                            child.push(name);
                            self.scan(&g.stream(), &child);
                        }
                        None => self.scan(&g.stream(), here),
                    }
                    i += 1;
                }
                TokenTree::Ident(id) if id == "use" => {
                    let end = (i..tts.len())
                        .find(|&j| matches!(&tts[j], TokenTree::Punct(p) if p.as_char() == ';'))
                        .unwrap_or(tts.len());
                    let mut paths = Vec::new();
                    use_paths(&tts[i + 1..end], &[], &mut paths);
                    for (p, _) in paths {
                        self.add(here, &p);
                    }
                    i = end;
                }
                TokenTree::Ident(id)
                    if is_path_sep(&tts, i + 1) && (i < 2 || !is_path_sep(&tts, i - 2)) =>
                {
                    let mut path = vec![id.to_string()];
                    let mut j = i + 1;
                    while is_path_sep(&tts, j) {
                        match tts.get(j + 2) {
                            Some(TokenTree::Ident(next)) => path.push(next.to_string()),
                            _ => break,
                        }
                        j += 3;
                    }
                    self.add(here, &path);
                    i = j;
                }
                _ => i += 1,
            }
        }
    }
}

/// Each strongly connected group of more than one module (Tarjan), sorted,
/// with one cycle through it, `a -> b -> .. -> a`.
fn find_cycles(edges: &BTreeMap<Mod, BTreeSet<Mod>>) -> Vec<(Vec<Mod>, Vec<Mod>)> {
    struct T<'a> {
        edges: &'a BTreeMap<Mod, BTreeSet<Mod>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        groups: Vec<Vec<Mod>>,
    }
    impl<'a> T<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let l = self.low[w.as_str()].min(self.low[v]);
                    self.low.insert(v, l);
                } else if self.on.contains(w.as_str()) {
                    let l = self.index[w.as_str()].min(self.low[v]);
                    self.low.insert(v, l);
                }
            }
            if self.low[v] == self.index[v] {
                let mut group = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    group.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    self.groups.push(group);
                }
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        groups: Vec::new(),
    };
    let nodes: BTreeSet<&str> = edges
        .iter()
        .flat_map(|(a, bs)| std::iter::once(a.as_str()).chain(bs.iter().map(String::as_str)))
        .collect();
    for v in nodes {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    let mut groups = t.groups;
    groups.sort();
    groups
        .into_iter()
        .map(|g| {
            let cycle = cycle_in(edges, &g);
            (g, cycle)
        })
        .collect()
}

/// A shortest cycle through the group's first member, staying in the group.
fn cycle_in(edges: &BTreeMap<Mod, BTreeSet<Mod>>, group: &[Mod]) -> Vec<Mod> {
    let members: BTreeSet<&str> = group.iter().map(String::as_str).collect();
    let start = group[0].as_str();
    let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for w in edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !members.contains(w) {
                continue;
            }
            if w == start {
                let mut path = vec![v.to_string()];
                let mut at = v;
                while at != start {
                    at = prev[at];
                    path.push(at.to_string());
                }
                path.reverse();
                path.push(start.to_string());
                return path;
            }
            if !prev.contains_key(w) && w != start {
                prev.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    unreachable!("a strongly connected group has a cycle through each member")
}

fn report(cycles: &[(Vec<Mod>, Vec<Mod>)]) -> String {
    cycles
        .iter()
        .map(|(g, c)| format!("  {{{}}}: {}\n", g.join(", "), c.join(" -> ")))
        .collect()
}

fn sources() -> BTreeMap<String, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("src readable") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(&src).expect("under src");
                let rel = rel.to_string_lossy().replace('\\', "/");
                out.insert(rel, std::fs::read_to_string(&p).expect("source readable"));
            }
        }
    }
    out
}

fn in_ir(m: &str) -> bool {
    let top = m.split("::").next().unwrap_or(m);
    IR.contains(&top) && !m.split("::").any(|s| s == "tests")
}

#[test]
fn no_import_cycles() {
    let g = Graph::build(&sources());
    // The graph was read: the parser's imports of the IR are in it.
    assert!(
        g.edges
            .get("parse")
            .is_some_and(|e| e.contains("ir") && e.contains("semantic")),
        "the graph misses parse -> ir, parse -> semantic: {:?}",
        g.edges.get("parse")
    );
    let cycles = find_cycles(&g.edges);
    assert!(
        cycles.is_empty(),
        "import cycles among hlo's modules (a module imports one of its own importers):\n{}",
        report(&cycles)
    );
}

/// Each import of an IR module from above the IR, `from -> to`.
fn ir_violations(g: &Graph) -> Vec<String> {
    g.edges
        .iter()
        .filter(|(from, _)| in_ir(from))
        .flat_map(|(from, tos)| {
            tos.iter()
                .filter(|to| !in_ir(to))
                .map(move |to| format!("{from} -> {to}"))
        })
        .collect()
}

#[test]
fn ir_imports_only_the_ir() {
    let bad = ir_violations(&Graph::build(&sources()));
    assert!(
        bad.is_empty(),
        "the IR imports from above it:\n  {}",
        bad.join("\n  ")
    );
}

#[test]
fn an_ir_import_from_above_planted_in_the_sources_is_reported() {
    let mut files = sources();
    let lit = files.get_mut("ir/literal.rs").expect("ir/literal.rs");
    lit.push_str("\nuse crate::print::print_shape;\n");
    assert_eq!(
        ir_violations(&Graph::build(&files)),
        ["ir::literal -> print"]
    );
}

#[test]
fn graph_reads_paths_of_every_form() {
    let files: BTreeMap<String, String> = [
        ("lib.rs", "mod a; mod b; pub use a::{A, B as Bee}; pub use b::*;"),
        (
            "a.rs",
            "//! crate::c::x in a comment\nmod inner; fn f() { let s = \"crate::c::y\"; crate::b::g(); }\n\
             #[cfg(test)] mod tests { use crate::c::Z; use super::*; }",
        ),
        ("a/inner.rs", "use super::super::c::{self, W}; fn g() { self::h(); super::f(); }"),
        ("b.rs", "pub fn g() { crate::Anything::new(); }"),
        ("c.rs", "use crate::A as X; fn k() { crate::a::inner::g(); }"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let g = Graph::build(&files);
    let edges: Vec<String> = g
        .edges
        .iter()
        .flat_map(|(a, bs)| bs.iter().map(move |b| format!("{a} -> {b}")))
        .collect();
    assert_eq!(
        edges,
        [
            "a -> b",
            "a::inner -> c",
            "a::tests -> c",
            "c -> a",
            "c -> a::inner",
        ]
    );
    // b uses `crate::Anything`, found through the glob `b::*`: itself.
}

#[test]
fn a_planted_cycle_is_reported() {
    let edges: BTreeMap<Mod, BTreeSet<Mod>> =
        [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a"), ("c", "e")]
            .iter()
            .fold(BTreeMap::new(), |mut m, (a, b)| {
                m.entry(a.to_string())
                    .or_insert_with(BTreeSet::new)
                    .insert(b.to_string());
                m
            });
    let cycles = find_cycles(&edges);
    assert_eq!(report(&cycles), "  {a, b, c}: a -> b -> c -> a\n");
}

#[test]
fn a_cycle_planted_in_the_sources_is_reported() {
    let mut files = sources();
    let ir = files.get_mut("ir.rs").expect("ir.rs");
    ir.push_str("\nfn planted() { let _ = crate::parse::parse_module(\"\"); }\n");
    let g = Graph::build(&files);
    let cycles = find_cycles(&g.edges);
    assert!(
        cycles
            .iter()
            .any(|(grp, _)| grp.contains(&"ir".to_string()) && grp.contains(&"parse".to_string())),
        "a planted ir -> parse import went unnoticed:\n{}",
        report(&cycles)
    );
}
