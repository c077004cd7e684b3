//! Compact tuple-element operands (`%t#1`, `%t#1#0`, `f32[10] %t#0`), newer
//! XLA syntax that the parser desugars into `get-tuple-element`
//! instructions. For every `testdata/compact_gte/*.hlo`:
//! - it parses, verifies, and its printed text (pinned by an insta snapshot)
//!   parses back to the same module;
//! - it has the same instructions (names, opcodes, operands, shapes without
//!   layouts, attributes) as `testdata/compact_gte/xla/<same name>`, XLA's own
//!   desugaring of it (copied from the corpus; `own_*` written by hand);
//! - with `HLO_OPT_PYTHON` (jaxlib 0.10.2, which cannot read the compact
//!   syntax itself): XLA reads our printed text as the same module as that
//!   expected file (except inputs with forward references, which XLA's
//!   parser rejects in any form; see `FORWARD_REFERENCE`).
//!
//! Bad uses (`#i` on a non-tuple, out of range, `#a`, a written shape that
//! differs) are in `testdata/invalid` (see `errors.rs`).

mod common;
#[path = "../../tests/support/report.rs"]
mod report;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// Inputs with a use before the definition (this parser resolves forward
/// references; XLA's parser and our verifier require definitions first):
/// neither verified nor given to XLA.
const FORWARD_REFERENCE: &[&str] = &["own_forward_base.hlo"];

fn is_forward_reference(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| FORWARD_REFERENCE.iter().any(|f| n == *f))
}

fn folder() -> PathBuf {
    testdata().join("compact_gte")
}

/// The expected desugaring of input `path`.
fn expected_path(path: &Path) -> PathBuf {
    folder()
        .join("xla")
        .join(path.file_name().expect("file name"))
}

/// Every instruction of every computation as one line: root marker, name,
/// shape without layout, opcode, operand names, attributes. Sorted within a
/// computation: XLA prints in post-order, so only the set is compared.
fn instructions(m: &hlo::Module) -> Vec<String> {
    let mut out = Vec::new();
    for c in m.computations() {
        let comp = m.comp(c);
        let mut lines: Vec<String> = comp
            .order
            .iter()
            .map(|&i| {
                let inst = m.inst(i);
                let operands: Vec<&str> = inst.operands.iter().map(|&o| &*m.inst(o).name).collect();
                let attrs: Vec<String> = inst
                    .attrs
                    .iter()
                    .map(|a| match &a.value {
                        hlo::AttrValue::Raw(v) => format!("{}={v}", a.key),
                        hlo::AttrValue::Comp(c) => format!("{}={}", a.key, m.comp(*c).name),
                        other => format!("{}={other:?}", a.key),
                    })
                    .collect();
                format!(
                    "{}{} = {} {}({}) {}",
                    if comp.root == i { "ROOT " } else { "" },
                    inst.name,
                    hlo::print_shape_no_layout(m, inst.shape),
                    inst.opcode,
                    operands.join(", "),
                    attrs.join(", ")
                )
            })
            .collect();
        lines.sort();
        out.push(format!("{}:", comp.name));
        out.extend(lines);
    }
    out
}

#[test]
fn compact_tuple_operands_desugar_like_xla() {
    insta::glob!("../../testdata/compact_gte", "*.hlo", |path| {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).expect("readable test file");
        let m = hlo::parse_module_named(&text, &name).unwrap_or_else(|e| panic!("{}", e.render()));
        if !is_forward_reference(path) {
            hlo::verify(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        round_trip(&text, &name).unwrap_or_else(|e| panic!("{name}: {e}"));

        let expected_text =
            std::fs::read_to_string(expected_path(path)).expect("expected desugaring beside it");
        let expected = hlo::parse_module_named(&expected_text, "expected")
            .unwrap_or_else(|e| panic!("{}", e.render()));
        assert_eq!(
            instructions(&m).join("\n"),
            instructions(&expected).join("\n"),
            "{name}: desugared differently from its expected module"
        );
        insta::assert_snapshot!(hlo::print_module(&m));
    });
}

#[test]
fn xla_reads_our_desugaring_as_its_own() {
    let Ok(python) = std::env::var("HLO_OPT_PYTHON") else {
        report::skipped("HLO_OPT_PYTHON is not set (XLA conformance needs jaxlib)");
        return;
    };
    report::ran();
    let inputs: Vec<PathBuf> = hlo_files(&folder())
        .into_iter()
        .filter(|f| !is_forward_reference(f))
        .collect();
    assert!(!inputs.is_empty(), "testdata/compact_gte has no .hlo files");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("conformance-compact_gte");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).expect("create output folder");
    let mut expected = Vec::new();
    for f in &inputs {
        let text = std::fs::read_to_string(f).expect("readable module");
        let m = hlo::parse_module_named(&text, &f.display().to_string())
            .unwrap_or_else(|e| panic!("{}", e.render()));
        // Named like the expected file: check_xla.py pairs them by name.
        let name = f.file_name().expect("file name");
        std::fs::write(out.join(name), hlo::print_module(&m)).expect("write printed module");
        expected.push(expected_path(f));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/check_xla.py");
    let res = Command::new(&python)
        .arg(&script)
        .arg("--printed-dir")
        .arg(&out)
        .args(&expected)
        .output()
        .expect("run check_xla.py");
    let stdout = String::from_utf8_lossy(&res.stdout);
    println!("{stdout}");
    assert!(
        res.status.success(),
        "XLA reads our desugaring differently:\n{stdout}\n{}",
        String::from_utf8_lossy(&res.stderr)
    );
    // Nothing skipped: XLA must read every expected file.
    assert!(
        stdout.contains(&format!(
            "conformance: {n} of {n} modules match (0 known differences, 0 skipped)",
            n = inputs.len()
        )),
        "not every module was compared:\n{stdout}"
    );
}
