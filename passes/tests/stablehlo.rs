//! The specification of `hlo::parse_stablehlo`: for each jax program in
//! testdata/stablehlo, the module read from its StableHLO (`NAME.mlir`,
//! generic op form) gives the same XLA:CPU program features and the same
//! contractions (signatures, eligibility, counts, rows, order) as the module
//! read from the HLO text jax gives for it (`NAME.hlo`). Adding a case is
//! adding a file pair (scripts/make_stablehlo_testdata.py writes them).

use std::path::{Path, PathBuf};

use passes::xla_cpu::contractions::contractions;
use passes::xla_cpu::features::{program_features, FEATURE_NAMES};

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/stablehlo");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("testdata/stablehlo")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "mlir"))
        .collect();
    found.sort();
    found
}

#[test]
fn stablehlo_and_jax_hlo_give_the_same_features_and_contractions() {
    let cases = cases();
    assert!(cases.len() >= 6, "expected the testdata/stablehlo cases");
    for mlir in cases {
        let name = mlir.display().to_string();
        let text = std::fs::read_to_string(&mlir).expect("the .mlir case");
        let hlo_text = std::fs::read_to_string(mlir.with_extension("hlo")).expect("its .hlo pair");
        let from_mlir = hlo::parse_stablehlo(&text).unwrap_or_else(|e| panic!("{}", e.render()));
        let from_hlo = hlo::parse_module(&hlo_text).expect("jax HLO parses");
        let (a, b) = (program_features(&from_hlo), program_features(&from_mlir));
        for (i, col) in FEATURE_NAMES.iter().enumerate() {
            assert_eq!(a[i], b[i], "{name}: feature {col}");
        }
        assert_eq!(
            contractions(&from_hlo),
            contractions(&from_mlir),
            "{name}: contractions"
        );
    }
}

#[test]
fn bad_stablehlo_is_an_error_with_a_position() {
    for (text, line) in [
        (
            "\"builtin.module\"() ({\n  \"func.func\"() <{sym_name = \"main\"",
            2,
        ),
        ("\"builtin.module\"() ({\n}) : () -> ()", 1),
        ("not mlir", 1),
        (&"(".repeat(10_000), 1),
    ] {
        let err = hlo::parse_stablehlo(text).expect_err(text);
        let shown = err.render();
        assert!(shown.contains(&format!(":{line}:")), "{shown}");
    }
}

#[test]
fn an_undefined_value_is_named() {
    let text = r#""builtin.module"() ({
  "func.func"() <{function_type = (tensor<2xf32>) -> tensor<2xf32>, sym_name = "main"}> ({
  ^bb0(%arg0: tensor<2xf32>):
    %0 = "stablehlo.add"(%arg0, %nope) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    "func.return"(%0) : (tensor<2xf32>) -> ()
  }) : () -> ()
}) : () -> ()"#;
    let err = hlo::parse_stablehlo(text)
        .expect_err("undefined value")
        .render();
    assert!(err.contains(":4:5:") && err.contains("%nope"), "{err}");
}

/// The `replica_groups=` values of an HLO text, in order.
fn replica_groups(hlo: &str) -> Vec<String> {
    hlo.split("replica_groups=")
        .skip(1)
        .map(|r| r.split(", ").next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn collectives_have_the_replica_groups_jax_writes() {
    // jaxlib 0.10.2 writes the groups (dense<...>), and its HLO lists them;
    // jaxlib 0.12.0.1 names mesh axes of an `sdy.mesh` (its HLO too, in
    // XLA's mesh syntax): both read as the lists jaxlib 0.10.2 wrote.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/stablehlo");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect(f);
    let want = replica_groups(&read("shard_map_all_reduce.hlo"));
    assert_eq!(want, ["{{0,1,2,3}}", "{{0,1,2,3}}", "{{0,1},{2,3}}"]);
    for case in ["shard_map_all_reduce.mlir", "shard_map_mesh_axes.mlir"] {
        let ours =
            hlo::stablehlo_to_hlo_text(&read(case)).unwrap_or_else(|e| panic!("{}", e.render()));
        assert_eq!(replica_groups(&ours), want, "{case}");
    }
}
