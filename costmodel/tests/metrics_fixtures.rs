//! The ranking metrics against values computed independently: Kendall tau-b by
//! `scipy.stats.kendalltau`, ordered-pair accuracy and top-K slowdown from their
//! definitions pair by pair, on cases with ties in the prediction, in the
//! runtimes and in both, and a real runtime vector.
//! The fixture is `testdata/costmodel/metrics_fixtures.json`, made once by
//! `testdata/costmodel/gen_metrics_fixtures.py` (no Python needed here).

use costmodel::metrics::{
    kaggle_layout_score, kaggle_tile_score, kendall_tau, ordered_pair_accuracy, top_k_slowdown,
    RankingMetrics,
};
use serde_json::Value;

fn fixture() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/costmodel/metrics_fixtures.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json")
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().expect("number"))
        .collect()
}

fn expect_close(name: &str, metric: &str, got: Option<f64>, want: &Value) {
    match (got, want.as_f64()) {
        (None, None) => {}
        (Some(g), Some(w)) => assert!(
            (g - w).abs() <= 1e-12,
            "{name}: {metric} = {g}, scipy/definition says {w}"
        ),
        (g, w) => panic!("{name}: {metric} = {g:?}, expected {w:?}"),
    }
}

#[test]
fn metrics_match_scipy_and_the_definitions() {
    let f = fixture();
    let cases = f["cases"].as_array().expect("cases");
    assert!(cases.len() >= 12);
    for c in cases {
        let name = c["name"].as_str().expect("name");
        let (pred, runtime) = (floats(&c["pred"]), floats(&c["runtime"]));
        expect_close(
            name,
            "kendall_tau",
            kendall_tau(&pred, &runtime),
            &c["kendall_tau"],
        );
        expect_close(
            name,
            "ordered_pair_accuracy",
            ordered_pair_accuracy(&pred, &runtime),
            &c["ordered_pair_accuracy"],
        );
        expect_close(
            name,
            "top1_slowdown",
            top_k_slowdown(&pred, &runtime, 1),
            &c["top1_slowdown"],
        );
        expect_close(
            name,
            "top5_slowdown",
            top_k_slowdown(&pred, &runtime, 5),
            &c["top5_slowdown"],
        );
        expect_close(
            name,
            "top10_slowdown",
            top_k_slowdown(&pred, &runtime, 10),
            &c["top10_slowdown"],
        );
        expect_close(
            name,
            "kaggle_tile_score",
            kaggle_tile_score(&pred, &runtime),
            &c["kaggle_tile_score"],
        );
        // The bundle agrees with the single functions.
        let m = RankingMetrics::compute(&pred, &runtime);
        assert_eq!(m.kendall_tau, kendall_tau(&pred, &runtime));
        assert_eq!(m.top5_slowdown, top_k_slowdown(&pred, &runtime, 5));
    }
}

#[test]
fn kaggle_layout_score_is_the_mean_kendall_tau_over_graphs() {
    let f = fixture();
    let cases = f["cases"].as_array().expect("cases");
    let names: Vec<&str> = f["layout_score"]["cases"]
        .as_array()
        .expect("names")
        .iter()
        .map(|v| v.as_str().expect("name"))
        .collect();
    let graphs: Vec<(Vec<f64>, Vec<f64>)> = names
        .iter()
        .map(|n| {
            let c = cases.iter().find(|c| c["name"] == *n).expect("case");
            (floats(&c["pred"]), floats(&c["runtime"]))
        })
        .collect();
    let score = kaggle_layout_score(graphs.iter().map(|(p, r)| (p.as_slice(), r.as_slice())));
    expect_close(
        "layout",
        "kaggle_layout_score",
        score,
        &f["layout_score"]["kaggle_layout_score"],
    );
}
