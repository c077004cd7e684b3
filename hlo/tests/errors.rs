//! Error messages for bad input, as snapshots: every `testdata/invalid/*.hlo`
//! (copies of XLA's negative tests plus `own_*` cases) is rejected, and the
//! rendered error (`file:line:col: error: message`, source line, caret) is
//! pinned by an insta snapshot. Adding a case is adding a file.

#[test]
fn invalid_inputs_are_rejected_with_positioned_messages() {
    insta::glob!("../../testdata/invalid", "*.hlo", |path| {
        let text = std::fs::read_to_string(path).expect("readable test file");
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let err = match hlo::parse_module_named(&text, &name) {
            Ok(_) => panic!("{name} must be rejected"),
            Err(e) => e,
        };
        assert!(
            matches!(err, hlo::Error::Parse { .. }),
            "{name}: not a positioned parse error: {err}"
        );
        insta::assert_snapshot!(err.render());
    });
}
