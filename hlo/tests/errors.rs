//! Error messages for bad input, as snapshots: every `testdata/invalid/*.hlo`
//! (copies of XLA's negative tests plus `own_*` cases) is rejected, and the
//! rendered error (`file:line:col: error: message`, source line, caret) is
//! pinned by an insta snapshot. Adding a case is adding a file. Files are
//! read as bytes: invalid UTF-8, NUL bytes and a byte order mark are cases
//! too, and an echoed source line is at most `MAX_SNIPPET_CHARS` wide.

#[test]
fn invalid_inputs_are_rejected_with_positioned_messages() {
    insta::glob!("../../testdata/invalid", "*.hlo", |path| {
        // Bytes, not a String: some cases are not UTF-8 (hlo::source_text).
        let bytes = std::fs::read(path).expect("readable test file");
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let parsed =
            hlo::source_text(&bytes, &name).and_then(|text| hlo::parse_module_named(text, &name));
        let err = match parsed {
            Ok(_) => panic!("{name} must be rejected"),
            Err(e) => e,
        };
        assert!(
            matches!(err, hlo::Error::Parse { .. }),
            "{name}: not a positioned parse error: {err}"
        );
        let rendered = err.render();
        // The echoed source line is capped, however long the input line.
        for line in rendered.lines().skip(1) {
            assert!(
                line.chars().count() <= hlo::error::MAX_SNIPPET_CHARS + 6,
                "{name}: echoed line of {} chars",
                line.chars().count()
            );
        }
        insta::assert_snapshot!(rendered);
    });
}
