//! Real fused TPU kernels (`testdata/tpugraphs/tile_kernels/*.hlo`, printed
//! by XLA, with every tile configuration the autotuner measured in the
//! `.runs.json` beside each) featurize into the published tile format: a
//! graph of 140-feature nodes without configurable nodes, and one 24-feature
//! config row per tile choice.
//!
//! The snapshot lists, per kernel: each node (TpuGraphs opcode, name and its
//! non-zero features as `index:value`), the edges `[consumer, producer]`, and
//! each successful run's config row with its runtime.

use std::fmt::Write as _;

use costmodel::features::{featurize, opcode_name, tile_config_row};
use costmodel::graph::{NODE_FEAT_DIM, TILE_CONFIG_DIM};
use costmodel::Task;

fn ints(v: &serde_json::Value) -> Vec<i64> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|x| x.as_i64().expect("an integer"))
        .collect()
}

#[test]
fn tile_kernels_featurize_into_the_tile_format() {
    insta::glob!("../../testdata/tpugraphs/tile_kernels", "*.hlo", |path| {
        let text = std::fs::read_to_string(path).expect("read hlo");
        let m = hlo::parse_module(&text).expect("parse");
        let f = featurize(&m, Task::Tile).expect("featurize");
        let g = &f.graph;
        let n = g.num_nodes();

        assert_eq!(n, m.instruction_count());
        assert_eq!(g.node_feat.len(), n * NODE_FEAT_DIM);
        assert!(g.node_config_ids.is_empty() && f.config_nodes.is_empty());
        assert!(g
            .edge_index
            .iter()
            .all(|e| e[0] < n as i64 && e[1] < n as i64 && e[0] != e[1]));
        assert!(
            g.node_opcode.iter().all(|&o| o != 0),
            "every opcode is known to TpuGraphs"
        );

        let mut out = String::new();
        writeln!(
            out,
            "nodes {n}, edges {}, splits {:?}",
            g.edge_index.len(),
            g.node_splits
        )
        .expect("fmt");
        for (k, &id) in f.node_inst.iter().enumerate() {
            let feats: Vec<String> = g.node_feat[k * NODE_FEAT_DIM..(k + 1) * NODE_FEAT_DIM]
                .iter()
                .enumerate()
                .filter(|(_, v)| **v != 0.0)
                .map(|(i, v)| format!("{i}:{v}"))
                .collect();
            let op = g.node_opcode[k];
            writeln!(
                out,
                "{k:>3} {op:>3} {:<20} %{} [{}]",
                opcode_name(op).unwrap_or("?"),
                m.inst(id).name,
                feats.join(" ")
            )
            .expect("fmt");
        }
        writeln!(out, "edges {:?}", g.edge_index).expect("fmt");

        let runs_path = path.with_extension("runs.json");
        let runs: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(runs_path).expect("read runs"))
                .expect("json");
        for run in runs["runs"].as_array().expect("runs") {
            if run["error"].as_bool() != Some(false) {
                continue;
            }
            let t = &run["tile"];
            let row = tile_config_row(
                &ints(&t["kernel_bounds"]),
                &ints(&t["output_bounds"]),
                &ints(&t["input_bounds"]),
            );
            assert_eq!(row.len(), TILE_CONFIG_DIM);
            let row: Vec<String> = row.iter().map(|v| v.to_string()).collect();
            writeln!(
                out,
                "run {:>9} ns: [{}]",
                run["compute_time_ns"],
                row.join(", ")
            )
            .expect("fmt");
        }
        insta::assert_snapshot!(out);
    });
}
