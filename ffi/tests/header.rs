//! Specification: `include/hlo_opt.h` (hand-written, documented) declares
//! exactly what the crate exports. cbindgen generates the declarations from the
//! Rust source; both are reduced to their declarations (comments, preprocessor
//! lines, the `extern "C"` wrapper and whitespace removed) and compared as sets.

use std::collections::BTreeSet;
use std::path::Path;

/// The declarations of a C header: statements ending in `;` at brace depth 0,
/// with comments, preprocessor lines and `#ifdef __cplusplus` blocks (the
/// `extern "C"` wrapper) removed and whitespace normalized.
fn declarations(header: &str) -> BTreeSet<String> {
    let no_comments = strip_comments(header);
    let mut code = String::new();
    let mut in_cplusplus = false;
    for line in no_comments.lines() {
        let t = line.trim();
        if t == "#ifdef __cplusplus" {
            in_cplusplus = true;
        }
        if in_cplusplus {
            in_cplusplus = t != "#endif";
            continue;
        }
        if t.starts_with('#') {
            continue;
        }
        code.push_str(t);
        code.push('\n');
    }
    let mut out = BTreeSet::new();
    let mut depth = 0i32;
    let mut current = String::new();
    for c in code.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        current.push(c);
        if c == ';' && depth == 0 {
            out.insert(normalize(&current));
            current.clear();
        }
    }
    assert!(
        normalize(&current).is_empty(),
        "trailing text after the last declaration: {current:?}"
    );
    out
}

fn strip_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    loop {
        let line = rest.find("//");
        let block = rest.find("/*");
        match (line, block) {
            (None, None) => {
                out.push_str(rest);
                return out;
            }
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |n| &rest[l + n..]);
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                out.push(' ');
                let end = rest[b + 2..]
                    .find("*/")
                    .expect("unterminated block comment");
                rest = &rest[b + 2 + end + 2..];
            }
            (Some(_), None) => unreachable!(),
        }
    }
}

/// Collapses whitespace; drops it next to punctuation, so that `char *s`,
/// `char* s` and `char * s` compare equal.
fn normalize(s: &str) -> String {
    let words: Vec<&str> = s.split_whitespace().collect();
    let mut out = String::new();
    for w in words {
        let prev_word = out
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        let next_word = w
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if prev_word && next_word {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

fn generated_header(crate_dir: &Path) -> String {
    let config = cbindgen::Config {
        language: cbindgen::Language::C,
        usize_is_size_t: true,
        no_includes: true,
        cpp_compat: false,
        style: cbindgen::Style::Type,
        ..Default::default()
    };
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen generates the header from the crate");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("cbindgen writes UTF-8")
}

#[test]
fn hand_written_header_declares_exactly_what_the_crate_exports() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let generated = generated_header(crate_dir);
    let hand_written = std::fs::read_to_string(crate_dir.join("include/hlo_opt.h"))
        .expect("read include/hlo_opt.h");
    let want = declarations(&generated);
    let have = declarations(&hand_written);
    assert!(
        !want.is_empty(),
        "cbindgen found no declarations:\n{generated}"
    );
    let missing: Vec<_> = want.difference(&have).collect();
    let extra: Vec<_> = have.difference(&want).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "include/hlo_opt.h drifted from the crate.\n\
         declared by the crate but not (or differently) by the header:\n  {}\n\
         declared by the header but not by the crate:\n  {}\n\
         cbindgen's header:\n{generated}",
        missing
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  "),
        extra
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  "),
    );
}

#[test]
fn declaration_extraction_ignores_comments_and_spacing() {
    let a = "/* doc */\n#include <x.h>\nint  f(const char *s); // c\ntypedef enum e { A = 0, B = 1 } e;";
    let b = "int f(const char* s);\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n/** other\n doc */ typedef enum e {\n  A = 0,\n  B = 1\n} e;";
    assert_eq!(declarations(a), declarations(b));
    assert_ne!(
        declarations("int f(int a);"),
        declarations("int f(long a);")
    );
}
