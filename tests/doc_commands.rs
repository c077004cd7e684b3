//! The shell commands quoted in README.md and docs/*.md exist as written.
//!
//! Specification: every line of a ```sh block that runs one of the project's
//! own commands names things that exist, and uses only flags they accept:
//! - `hlo-opt` (also as `target/release/hlo-opt`, `cargo run --bin hlo-opt --`
//!   or through `scripts/quickstart`, which hands its arguments to it): each
//!   flag is one `hlo-opt --help` lists, each `--pass=` name one
//!   `hlo-opt --list-passes` lists, an input under a repository folder exists;
//! - `hlo-cost SUB`: SUB is a subcommand `hlo-cost --help` lists, each flag
//!   one `hlo-cost SUB --help` lists, an input under a repository folder
//!   exists;
//! - `bash SCRIPT` / `SCRIPT` and `python SCRIPT.py`: the script exists and
//!   each `--flag` used occurs in its source (argparse's `"--flag"`, a shell
//!   `case` arm);
//! - `cargo`: `-p` names a workspace package, `--bin`, `--example` and
//!   `--test` a target of it, `cargo fuzz run T` a target in fuzz/;
//! - a command beginning `hlo-` that is none of the tools is an error.
//!
//! Other commands (cc, git, pip, valgrind, ...) are not ours and are left
//! alone. Synopsis lines may write placeholders (`FILE`, `[--seed S]`,
//! `a|b`): brackets are dropped and placeholders are not paths.
//!
//! And the commands run as written (`documented_commands_run_as_written`):
//! each line of a document's sh blocks that calls `hlo-opt` or `hlo-cost`
//! with real files (no placeholder) runs, in document order, in a scratch
//! folder that holds the repository's folders (so `testdata/...` and the
//! files earlier lines wrote are there), and must exit 0; the report the
//! README quotes is what its first command prints. Lines that cannot run in
//! a test are named with the reason: `hlo-cost collect` (a 30-minute
//! measurement; tests/cli_collect.rs runs it briefly), lines reading what a
//! skipped line makes (`cpu.hlocm`), `--measure` without XLA's CPU plugin;
//! the C example's `cc` and `./app` lines run in ffi/tests/c_api.rs, set-up
//! and build commands (`cargo`, `bash scripts/...`, `pip`) are what the
//! test runs after.

#[path = "support/report.rs"]
mod report;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The long and short flags a `--help` text lists (`-o, --output <OUT>`).
fn flags_in_help(help: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in help.lines() {
        let t = line.trim_start();
        if !t.starts_with('-') {
            continue;
        }
        for word in t.split([' ', ',']).filter(|w| !w.is_empty()) {
            let word = word.split(['=', '[', '<']).next().unwrap_or("");
            if word.len() > 1
                && word.starts_with('-')
                && word[1..]
                    .trim_start_matches('-')
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-')
            {
                out.insert(word.to_string());
            } else {
                break;
            }
        }
    }
    out
}

/// The subcommands under `Commands:` of a clap `--help` text.
fn subcommands_in_help(help: &str) -> BTreeSet<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|w| w != "help")
        .collect()
}

fn run_help(exe: &str, args: &[&str]) -> String {
    let out = Command::new(exe).args(args).output().expect("run the tool");
    assert!(out.status.success(), "{exe} {args:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the project's tools accept, asked from the built binaries.
struct Tools {
    hlo_opt_flags: BTreeSet<String>,
    passes: BTreeSet<String>,
    hlo_cost_subcommands: BTreeSet<String>,
    /// Per subcommand, its flags.
    hlo_cost_flags: Vec<(String, BTreeSet<String>)>,
    /// Workspace packages and their folders.
    packages: Vec<(String, PathBuf)>,
}

impl Tools {
    fn ask() -> Tools {
        let opt = env!("CARGO_BIN_EXE_hlo-opt");
        let cost = env!("CARGO_BIN_EXE_hlo-cost");
        let passes = run_help(opt, &["--list-passes"])
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect();
        let subs = subcommands_in_help(&run_help(cost, &["--help"]));
        let hlo_cost_flags = subs
            .iter()
            .map(|s| (s.clone(), flags_in_help(&run_help(cost, &[s, "--help"]))))
            .collect();
        let mut packages = vec![("hlo-opt".to_string(), repo())];
        for dir in ["hlo", "costmodel", "passes", "pjrt", "ffi"] {
            let manifest =
                std::fs::read_to_string(repo().join(dir).join("Cargo.toml")).expect("manifest");
            let name = manifest
                .lines()
                .find_map(|l| l.strip_prefix("name = "))
                .expect("a package name")
                .trim_matches('"')
                .to_string();
            packages.push((name, repo().join(dir)));
        }
        Tools {
            hlo_opt_flags: flags_in_help(&run_help(opt, &["--help"])),
            passes,
            hlo_cost_subcommands: subs,
            hlo_cost_flags,
            packages,
        }
    }
}

/// A ```sh block's lines, continuation lines joined: per command, its
/// block's number, the line number of its first line, the text.
fn shell_lines(text: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut block = 0;
    let mut pending: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_end();
        if t.starts_with("```") {
            in_block = !in_block && matches!(t, "```sh" | "```bash" | "```shell");
            block += 1;
            continue;
        }
        if !in_block {
            continue;
        }
        let (start, mut acc) = pending.take().unwrap_or((n + 1, String::new()));
        match t.strip_suffix('\\') {
            Some(head) => {
                acc.push_str(head);
                acc.push(' ');
                pending = Some((start, acc));
            }
            None => {
                acc.push_str(t);
                out.push((block, start, acc));
            }
        }
    }
    out
}

/// The words of one shell line, split into simple commands at `&&`, `||`,
/// `|`, `;` and `&`; comments dropped; brackets of synopses removed.
fn commands(line: &str) -> Vec<Vec<String>> {
    let line = match line.trim_start().starts_with('#') {
        true => return Vec::new(),
        false => line,
    };
    // A comment starts at ` #` outside quotes.
    let mut quote = None;
    let mut cut = line.len();
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match (quote, b) {
            (None, b'"' | b'\'') => quote = Some(b),
            (Some(q), _) if q == b => quote = None,
            (None, b'#') if i > 0 && bytes[i - 1] == b' ' => {
                cut = i;
                break;
            }
            _ => {}
        }
    }
    let words = shlex::split(&line[..cut]).unwrap_or_default();
    let mut out = vec![Vec::new()];
    for w in words {
        if matches!(w.as_str(), "&&" | "||" | "|" | ";" | "&") {
            out.push(Vec::new());
            continue;
        }
        let w = w.trim_start_matches('[').trim_end_matches(']').to_string();
        if !w.is_empty() {
            out.last_mut().expect("one command").push(w);
        }
    }
    out.retain(|c| !c.is_empty());
    out
}

/// The flag a word uses, if it is one: `--name` of `--name=value`, or `-x`.
fn flag_of(word: &str) -> Option<&str> {
    if let Some(rest) = word.strip_prefix("--") {
        if rest.is_empty() {
            return None;
        }
        return Some(word.split('=').next().unwrap_or(word));
    }
    let b = word.as_bytes();
    (b.len() == 2 && b[0] == b'-' && b[1].is_ascii_alphabetic()).then_some(word)
}

/// A word that names a file of the repository (not a placeholder).
fn repo_path(word: &str) -> Option<&str> {
    const TOP: [&str; 12] = [
        "hlo/",
        "costmodel/",
        "passes/",
        "pjrt/",
        "ffi/",
        "src/",
        "tests/",
        "testdata/",
        "scripts/",
        "fuzz/",
        "docs/",
        "examples/",
    ];
    let plain = !word.contains(['*', '<', '{', '$', '|']) && !word.contains("...");
    (plain && TOP.iter().any(|t| word.starts_with(t))).then_some(word)
}

/// Checks one simple command; problems go to `bad`.
fn check(words: &[String], cwd: &Path, tools: &Tools, bad: &mut Vec<String>) {
    let mut w: Vec<&str> = words.iter().map(String::as_str).collect();
    // Prefixes that run the real command: VAR=value, nice -n N, /usr/bin/time -v.
    loop {
        match w.as_slice() {
            [first, ..] if first.contains('=') && !first.starts_with('-') => {
                w.remove(0);
            }
            ["nice", "-n", _, ..] => {
                w.drain(..3);
            }
            ["/usr/bin/time", "-v", ..] => {
                w.drain(..2);
            }
            _ => break,
        }
    }
    let Some(&cmd) = w.first() else { return };
    let args = &w[1..];
    let tool = cmd.rsplit('/').next().unwrap_or(cmd);
    match tool {
        "hlo-opt" => check_hlo_opt(args, cwd, tools, bad),
        "hlo-cost" => check_hlo_cost(args, cwd, tools, bad),
        "cargo" => check_cargo(args, cwd, tools, bad),
        "bash" | "sh" => {
            if let Some(script) = args.first() {
                check_script(script, &args[1..], cwd, tools, bad)
            }
        }
        "python" | "python3" => match args.first() {
            Some(&"-m") | None => {}
            Some(script) => check_script(script, &args[1..], cwd, tools, bad),
        },
        _ if cmd.starts_with("hlo-") => bad.push(format!("`{cmd}`: no such tool")),
        _ if cmd.contains('/') && repo_path(cmd).is_some() => {
            check_script(cmd, args, cwd, tools, bad)
        }
        _ => {}
    }
}

fn check_flags(
    what: &str,
    args: &[&str],
    known: &BTreeSet<String>,
    cwd: &Path,
    bad: &mut Vec<String>,
) {
    for a in args {
        if let Some(f) = flag_of(a) {
            if !known.contains(f) {
                bad.push(format!("{what}: unknown flag `{f}`"));
            }
        } else if let Some(p) = repo_path(a) {
            if !cwd.join(p).exists() {
                bad.push(format!("{what}: `{p}` does not exist"));
            }
        }
    }
}

fn check_hlo_opt(args: &[&str], cwd: &Path, tools: &Tools, bad: &mut Vec<String>) {
    check_flags("hlo-opt", args, &tools.hlo_opt_flags, cwd, bad);
    for (i, a) in args.iter().enumerate() {
        let list = match a.strip_prefix("--pass=") {
            Some(l) => Some(l),
            None if *a == "--pass" => args.get(i + 1).copied(),
            None => None,
        };
        for name in list.into_iter().flat_map(|l| l.split(',')) {
            if !tools.passes.contains(name) {
                bad.push(format!("hlo-opt: no pass `{name}`"));
            }
        }
    }
}

fn check_hlo_cost(args: &[&str], cwd: &Path, tools: &Tools, bad: &mut Vec<String>) {
    let Some(sub) = args.first() else { return };
    if !tools.hlo_cost_subcommands.contains(*sub) {
        bad.push(format!("hlo-cost: no subcommand `{sub}`"));
        return;
    }
    let known = &tools
        .hlo_cost_flags
        .iter()
        .find(|(s, _)| s == sub)
        .expect("asked for every subcommand")
        .1;
    check_flags(&format!("hlo-cost {sub}"), &args[1..], known, cwd, bad);
}

/// A script of the repository: it exists, and the flags given to it occur in
/// its source (`scripts/quickstart` hands its flags to hlo-opt).
fn check_script(script: &str, args: &[&str], cwd: &Path, tools: &Tools, bad: &mut Vec<String>) {
    let path = cwd.join(script);
    let Ok(source) = std::fs::read_to_string(&path) else {
        if repo_path(script).is_some() || script.ends_with(".py") || script.ends_with(".sh") {
            bad.push(format!("`{script}` does not exist"));
        }
        return;
    };
    if script.trim_start_matches("./") == "scripts/quickstart" {
        check_hlo_opt(args, cwd, tools, bad);
        return;
    }
    for a in args {
        if let Some(f) = flag_of(a) {
            if !source.contains(&format!("\"{f}\""))
                && !source.contains(&format!("'{f}'"))
                && !source.contains(&format!("{f})"))
                && !source.contains(&format!("{f}|"))
            {
                bad.push(format!("{script}: takes no flag `{f}`"));
            }
        }
    }
}

fn check_cargo(args: &[&str], cwd: &Path, tools: &Tools, bad: &mut Vec<String>) {
    let mut args: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| !a.starts_with('+'))
        .collect();
    let passthrough = match args.iter().position(|a| *a == "--") {
        Some(k) => {
            let rest = args.split_off(k);
            rest[1..].to_vec()
        }
        None => Vec::new(),
    };
    let value = |flag: &str| {
        args.iter()
            .position(|a| *a == flag)
            .and_then(|k| args.get(k + 1).copied())
    };
    if args.first() == Some(&"fuzz") {
        if args.get(1) == Some(&"run") {
            let target = args.iter().skip(2).find(|a| !a.starts_with('-'));
            if let Some(t) = target {
                if !repo()
                    .join("fuzz/fuzz_targets")
                    .join(format!("{t}.rs"))
                    .exists()
                {
                    bad.push(format!("cargo fuzz: no fuzz target `{t}`"));
                }
            }
        }
        return;
    }
    if args.first() == Some(&"install") {
        return;
    }
    let package = value("-p").or_else(|| value("--package"));
    let dir = match package {
        None => repo(),
        Some(p) => match tools.packages.iter().find(|(n, _)| n == p) {
            Some((_, d)) => d.clone(),
            None => {
                bad.push(format!("cargo: no workspace package `{p}`"));
                return;
            }
        },
    };
    if let Some(b) = value("--bin") {
        if !["hlo-opt", "hlo-cost", "hlo-opt-pjrt-worker"].contains(&b) {
            bad.push(format!("cargo: no binary `{b}`"));
        }
        match b {
            "hlo-opt" => check_hlo_opt(&passthrough, cwd, tools, bad),
            "hlo-cost" => check_hlo_cost(&passthrough, cwd, tools, bad),
            _ => {}
        }
    }
    for (flag, folder) in [
        ("--example", "examples"),
        ("--test", "tests"),
        ("--bench", "benches"),
    ] {
        if let Some(t) = value(flag) {
            if !dir.join(folder).join(format!("{t}.rs")).exists() {
                bad.push(format!(
                    "cargo: no {} `{t}` in {}",
                    &flag[2..],
                    package.unwrap_or("hlo-opt")
                ));
            }
        }
    }
}

/// Every problem of one document's shell blocks, as `doc:line: problem`.
fn problems(doc: &str, text: &str, tools: &Tools) -> Vec<String> {
    let mut bad = Vec::new();
    let mut cwd = repo();
    let mut current = 0;
    for (block, line_no, line) in shell_lines(text) {
        // Each block starts at the repository root; `cd` moves within it.
        if block != current {
            cwd = repo();
            current = block;
        }
        for c in commands(&line) {
            if c[0] == "cd" {
                if let Some(d) = c.get(1) {
                    cwd = cwd.join(d);
                }
                continue;
            }
            let mut found = Vec::new();
            check(&c, &cwd, tools, &mut found);
            bad.extend(found.into_iter().map(|p| format!("{doc}:{line_no}: {p}")));
        }
    }
    bad
}

/// README.md and every docs/*.md, in name order.
fn documents() -> Vec<PathBuf> {
    let mut docs = vec![repo().join("README.md")];
    let mut more: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

/// Each document's name (relative to the repository) and text.
fn document_texts() -> Vec<(String, String)> {
    documents()
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("read the document");
            let name = path
                .strip_prefix(repo())
                .unwrap_or(&path)
                .display()
                .to_string();
            (name, text)
        })
        .collect()
}

#[test]
fn every_documented_command_names_tools_flags_and_files_that_exist() {
    let tools = Tools::ask();
    let mut bad = Vec::new();
    let mut checked = 0;
    for (name, text) in document_texts() {
        checked += shell_lines(&text).len();
        bad.extend(problems(&name, &text, &tools));
    }
    assert!(checked > 20, "only {checked} shell lines found");
    assert!(
        bad.is_empty(),
        "{} problems:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// The checker itself: each planted mistake is reported, the correct
/// commands are not.
#[test]
fn planted_mistakes_in_a_shell_block_are_reported() {
    let tools = Tools::ask();
    let doc = "\
Text.

```sh
hlo-opt testdata/layout/transformer_bert.hlo --pass=layout --explain -o out.hlo
hlo-opt testdata/layout/transformer_bert.hlo --pass=lyout --explian
hlo-opt testdata/layout/no_such_module.hlo --pass=layout
hlo-cost evaluate x.npz
hlo-cost eval --modle reference x.npz
hlo-optimize FILE
bash scripts/quickstart --trust-radius all
bash scripts/quickstart --trust-radios all
bash scripts/no_such_script
.venv/bin/python costmodel/training/train.py --task layout --ridge-blend 1 \\
    --no-such-option 3
cargo run -p passes --release --example layout_noise -- FILE 20 8
cargo run -p passes --release --example no_such_example
cargo test -p hlo_parser
cd fuzz && cargo +nightly fuzz run no_such_target corpus/x
```
";
    let found = problems("planted.md", doc, &tools);
    let expected = [
        "planted.md:5: hlo-opt: unknown flag `--explian`",
        "planted.md:5: hlo-opt: no pass `lyout`",
        "planted.md:6: hlo-opt: `testdata/layout/no_such_module.hlo` does not exist",
        "planted.md:7: hlo-cost: no subcommand `evaluate`",
        "planted.md:8: hlo-cost eval: unknown flag `--modle`",
        "planted.md:9: `hlo-optimize`: no such tool",
        "planted.md:11: hlo-opt: unknown flag `--trust-radios`",
        "planted.md:12: `scripts/no_such_script` does not exist",
        "planted.md:13: costmodel/training/train.py: takes no flag `--no-such-option`",
        "planted.md:16: cargo: no example `no_such_example` in passes",
        "planted.md:17: cargo: no workspace package `hlo_parser`",
        "planted.md:18: cargo fuzz: no fuzz target `no_such_target`",
    ];
    assert_eq!(found, expected);
}

#[test]
fn help_texts_are_read_as_flags() {
    let help = "Options:\n  -o, --output <OUTPUT>  Write here\n      --explain[=<WHAT>]  Report\n  -h, --help  Print help\n\nExit status:\n  0  success\n";
    let flags: Vec<String> = flags_in_help(help).into_iter().collect();
    assert_eq!(flags, ["--explain", "--help", "--output", "-h", "-o"]);
}

/// Every relative link of README.md and docs/*.md (`[text](path)`, anchors
/// dropped) names a file or folder of the repository.
#[test]
fn every_relative_link_resolves() {
    let mut bad = Vec::new();
    for path in documents() {
        let text = std::fs::read_to_string(&path).expect("read the document");
        let base = path.parent().expect("a folder");
        for (n, line) in text.lines().enumerate() {
            for part in line.split("](").skip(1) {
                let Some(target) = part.split(')').next() else {
                    continue;
                };
                let file = target.split('#').next().unwrap_or("");
                if file.is_empty() || file.contains("://") {
                    continue;
                }
                if !base.join(file).exists() {
                    bad.push(format!("{}:{}: {target}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(bad.is_empty(), "links to nothing:\n{}", bad.join("\n"));
}

/// Whether a word is a synopsis placeholder (`FILE`, `OUT.npz`, `a|b`,
/// `$NLP`) or names something outside the repository (`/tmp/...`,
/// `../shared/...`): a line holding one is an illustration, not run.
fn placeholder(word: &str) -> bool {
    let stem = word.split('.').next().unwrap_or(word);
    let upper = stem.len() > 1
        && stem.chars().any(|c| c.is_ascii_uppercase())
        && stem
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    upper
        || word.contains(['[', '|', '<'])
        || word.contains("...")
        || (word.contains('$') && !word.contains("$PWD"))
        || word.starts_with("/tmp/")
        || word.starts_with("../")
}

/// Why a documented line is not run here, or `None` when it runs.
/// `scratch` is where earlier lines ran (the files they wrote).
fn not_run(words: &[String], scratch: &Path, plugin: bool) -> Option<String> {
    let tool = words.first()?.rsplit('/').next().unwrap_or("");
    if !matches!(tool, "hlo-opt" | "hlo-cost") {
        return Some(format!(
            "`{tool}` is not a tool of this repository run here"
        ));
    }
    if let Some(w) = words.iter().find(|w| placeholder(w)) {
        return Some(format!("a synopsis (placeholder `{w}`)"));
    }
    if tool == "hlo-cost" && words.get(1).map(String::as_str) == Some("collect") {
        return Some("a 30-minute measurement (tests/cli_collect.rs runs collect briefly)".into());
    }
    if words.iter().any(|w| w.starts_with("--measure=")) && !plugin {
        return Some("XLA's CPU plugin is not installed (scripts/test installs it)".into());
    }
    // An input no earlier line made (e.g. the model a skipped training writes).
    let inputs = words
        .windows(2)
        // A word after a flag without `=` is taken for the flag's value.
        .filter(|p| !p[1].starts_with('-') && (!p[0].starts_with('-') || p[0].contains('=')))
        .map(|p| &p[1]);
    for w in inputs {
        let file_like = [
            ".hlo",
            ".pb",
            ".npz",
            ".hlocm",
            ".textproto",
            ".json",
            ".xz",
        ]
        .iter()
        .any(|e| w.ends_with(e));
        if file_like && !scratch.join(w).exists() {
            return Some(format!("reads `{w}`, which no line run before makes"));
        }
    }
    for (flag, value) in words.iter().zip(words.iter().skip(1)) {
        let reads = matches!(
            flag.as_str(),
            "--layout-model" | "--model" | "--tile-model" | "--autotune-env" | "--session"
        );
        if reads && value.contains('.') && !scratch.join(value).exists() {
            return Some(format!("reads `{value}`, which no line run before makes"));
        }
    }
    None
}

/// The scratch folder a document's commands run in: the repository's
/// top-level folders linked in, and `target/` the one the tools were built in.
fn scratch_for(doc: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("doc_commands")
        .join(doc.replace('/', "_"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    for top in [
        "hlo",
        "costmodel",
        "passes",
        "pjrt",
        "ffi",
        "src",
        "tests",
        "testdata",
        "scripts",
        "fuzz",
        "docs",
        "examples",
        "python",
        ".venv",
    ] {
        let from = repo().join(top);
        if from.exists() {
            std::os::unix::fs::symlink(&from, dir.join(top)).expect("link a repository folder");
        }
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_hlo-opt"));
    let target = bin
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/hlo-opt");
    std::os::unix::fs::symlink(target, dir.join("target")).expect("link target/");
    dir
}

/// The stderr of each line of `doc` that ran (in order), and the lines not
/// run with their reasons; a line that fails is a problem in `bad`.
fn run_document(
    doc: &str,
    text: &str,
    plugin: bool,
    bad: &mut Vec<String>,
) -> (Vec<(String, String)>, Vec<String>) {
    let scratch = scratch_for(doc);
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_hlo-opt"))
        .parent()
        .expect("the tools' folder")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = Vec::new();
    let mut skipped = Vec::new();
    for (_, line_no, line) in shell_lines(text) {
        let cmds = commands(&line);
        let Some(first) = cmds.first() else { continue };
        if cmds.len() > 1 {
            let ours = cmds.iter().any(|c| {
                not_run(c, &scratch, plugin).is_none_or(|why| !why.contains("is not a tool"))
            });
            if ours {
                skipped.push(format!("{doc}:{line_no}: several commands on one line"));
            }
            continue;
        }
        if let Some(why) = not_run(first, &scratch, plugin) {
            // Not ours at all (cc, cargo, pip, perf): not worth a note.
            if !why.contains("is not a tool") {
                skipped.push(format!("{doc}:{line_no}: {why}"));
            }
            continue;
        }
        let out = Command::new("bash")
            .arg("-c")
            .arg(&line)
            .current_dir(&scratch)
            .env("PATH", &path)
            .env("PWD", &scratch)
            .output()
            .expect("run bash");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            bad.push(format!(
                "{doc}:{line_no}: `{line}` exited with {:?}:\n{err}",
                out.status.code()
            ));
        }
        ran.push((line, err));
    }
    (ran, skipped)
}

/// The lines of the README's quoted report (the ``` block whose first line
/// starts with `layout:`), `...` lines dropped.
fn readme_quoted_report(readme: &str) -> Vec<String> {
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    let mut open: Option<(bool, Vec<&str>)> = None;
    for line in readme.lines() {
        if let Some(lang) = line.strip_prefix("```") {
            match open.take() {
                None => open = Some((lang.is_empty(), Vec::new())),
                Some((plain, lines)) => {
                    if plain {
                        blocks.push(lines);
                    }
                }
            }
        } else if let Some((_, lines)) = open.as_mut() {
            lines.push(line);
        }
    }
    let block = blocks
        .into_iter()
        .find(|b| b.first().is_some_and(|l| l.starts_with("layout:")))
        .expect("README.md quotes a layout report");
    block
        .into_iter()
        .filter(|l| l.trim() != "...")
        .map(str::to_string)
        .collect()
}

#[test]
fn documented_commands_run_as_written() {
    if std::env::var_os("ORT_DYLIB_PATH").is_none() {
        report::skipped("ORT_DYLIB_PATH is not set (the passes need ONNX Runtime)");
        return;
    }
    let plugin = pjrt::find_plugin(None).is_ok();
    if !plugin {
        report::skipped("XLA's CPU plugin is missing: the --measure lines are not run");
    } else {
        report::ran();
    }
    let mut bad = Vec::new();
    let mut skipped = Vec::new();
    let mut readme_runs = Vec::new();
    for (name, text) in document_texts() {
        let (ran, not_run) = run_document(&name, &text, plugin, &mut bad);
        if name == "README.md" {
            readme_runs = ran;
        }
        skipped.extend(not_run);
    }
    eprintln!("not run:\n  {}", skipped.join("\n  "));
    assert!(bad.is_empty(), "{}", bad.join("\n\n"));
    // The README's examples: every use that can run here did.
    let ran_lines: Vec<&str> = readme_runs.iter().map(|(l, _)| l.as_str()).collect();
    for needle in [
        "--explain -o bert.layout.hlo",
        "--explain=all --trust-radius all",
        "--explain-json bert.explain.json",
        "--pass=tile --explain --top-k 3",
        "--emit=proto -o bert.pb",
        "hlo-opt bert.pb --pass=layout",
        "hlo-cost eval --model reference",
        "--autotune-cache-dir cache/",
    ]
    .into_iter()
    .chain(plugin.then_some("--measure=xla-cpu"))
    {
        assert!(
            ran_lines.iter().any(|l| l.contains(needle)),
            "README.md's `{needle}` line did not run: {ran_lines:#?}\nnot run: {skipped:#?}"
        );
    }
    // What the README says the first example prints, it prints.
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let (first, err) = &readme_runs[0];
    for quoted in readme_quoted_report(&readme) {
        assert!(
            err.lines().any(|l| l == quoted),
            "README.md quotes `{quoted}` as the report of `{first}`, which printed:\n{err}"
        );
    }
}

/// The runner itself: a line that fails is reported with its status, lines
/// that read what an earlier line wrote run after it, synopses are not run.
#[test]
fn a_documented_command_that_fails_is_reported() {
    let doc = "\
```sh
hlo-opt testdata/layout/transformer_bert.hlo --emit=proto -o m.pb
hlo-opt m.pb -o m.hlo
hlo-opt testdata/layout/transformer_bert.hlo --pass=layout --min-gain 500 -o /dev/null
hlo-opt FILE --pass=layout
hlo-opt --pass=layout made_by_nothing.hlo
```
";
    let mut bad = Vec::new();
    let (ran, not_run) = run_document("planted.md", doc, false, &mut bad);
    assert_eq!(ran.len(), 3, "{ran:?}");
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(
        bad[0].starts_with("planted.md:4: `hlo-opt testdata/layout/transformer_bert.hlo --pass=layout --min-gain 500")
            && bad[0].contains("exited with Some(2)"),
        "{bad:?}"
    );
    assert_eq!(
        not_run,
        [
            "planted.md:5: a synopsis (placeholder `FILE`)",
            "planted.md:6: reads `made_by_nothing.hlo`, which no line run before makes",
        ]
    );
}
