"""The training code (costmodel/training) reads data and computes metrics
through `hlo_opt`, i.e. through the Rust code `hlo-cost eval` and the cost
models use, instead of copies of its own:

- `data.load_graph` is `hlo_opt.load_npz` + `hlo_opt.prune_khop` (then
  deduplicated, in training's dtypes), and `data.meta_edge_index` is
  `hlo_opt.meta_edges`; the package's pruning and meta-graph follow their
  rules on small hand-made graphs (costmodel/src/prune.rs's cases);
- `metrics.ranking_metrics` gives scipy's Kendall tau-b and the slowdowns by
  their definitions (testdata/costmodel/metrics_fixtures.json, computed once
  with scipy), rounded as training reports them, with the two zeros tied
  as numpy ties them.
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

import hlo_opt
from conftest import ROOT, TESTDATA

sys.path.insert(0, str(ROOT / "costmodel" / "training"))
import data as D  # noqa: E402
import metrics as training_metrics  # noqa: E402

MASK_RCNN = TESTDATA / "costmodel" / "npz" / "layout_xla_mask_rcnn_unsorted_ids.npz"
TILE = TESTDATA / "costmodel" / "npz" / "tile_xla_valid_inception_v3.npz"


def graph(n, edges, ids):
    """A layout graph whose node i has feature value i and opcode i."""
    return {
        "node_feat": np.repeat(np.arange(n, dtype=np.float32)[:, None], 140, axis=1),
        "node_opcode": np.arange(n, dtype=np.uint8),
        "edge_index": np.array(edges, np.int64).reshape(-1, 2),
        "node_config_ids": np.array(ids, np.int64),
    }


# A chain 0 <- 1 <- 2 <- 3 <- 4 (rows [consumer, producer]) and a lone node 5; node 2 configurable.
CHAIN = graph(6, [[0, 1], [1, 2], [2, 3], [3, 4]], [2])
# 6 -> 0 -> 1 -> 2 -> 3 -> 4 -> 5 and 0 -> 5 (twice), configurable 5, 0, 3, 6.
META = graph(7, [[1, 0], [2, 1], [3, 2], [4, 3], [5, 4], [5, 0], [5, 0], [0, 6]], [5, 0, 3, 6])


def test_prune_keeps_the_nodes_within_k_hops_in_order():
    one = hlo_opt.prune_khop(CHAIN, 1)
    assert list(one) == ["node_feat", "node_opcode", "edge_index", "node_config_ids"]
    assert one["node_opcode"].tolist() == [1, 2, 3]
    assert one["node_feat"][:, 0].tolist() == [1.0, 2.0, 3.0]
    assert one["edge_index"].tolist() == [[0, 1], [1, 2]]
    assert one["node_config_ids"].tolist() == [1]
    assert hlo_opt.prune_khop(CHAIN, 0)["node_opcode"].tolist() == [2]
    assert hlo_opt.prune_khop(CHAIN, 10)["node_opcode"].tolist() == [0, 1, 2, 3, 4]


def test_meta_edges_join_configurable_nodes_through_unconfigurable_paths():
    assert hlo_opt.meta_edges(META).tolist() == [[0, 1], [0, 2], [1, 3], [2, 1]]
    assert hlo_opt.meta_edges(META, 2).tolist() == [[0, 1], [0, 2], [1, 3]]
    assert hlo_opt.meta_edges(META, 0).shape == (0, 2)
    assert hlo_opt.meta_edges(hlo_opt.prune_khop(META, 2)).tolist() == hlo_opt.meta_edges(META).tolist()


def test_a_bad_graph_is_a_value_error():
    bad = dict(CHAIN, edge_index=np.array([[0, 9]], np.int64))
    with pytest.raises(ValueError):
        hlo_opt.prune_khop(bad, 1)
    with pytest.raises(KeyError):
        hlo_opt.meta_edges({k: v for k, v in CHAIN.items() if k != "node_config_ids"})


def test_load_npz_without_configs_leaves_them_out():
    full, light = hlo_opt.load_npz(MASK_RCNN), hlo_opt.load_npz(MASK_RCNN, configs=False)
    assert set(full) - set(light) == {"node_config_feat"}
    for k in light:
        np.testing.assert_array_equal(full[k], light[k])
    assert "config_feat" not in hlo_opt.load_npz(TILE, configs=False)


def test_training_loads_graphs_through_the_package():
    d = hlo_opt.load_npz(MASK_RCNN)
    pruned = hlo_opt.prune_khop(d, 0)  # 16 of 58 nodes (1 hop keeps all)
    g = D.load_graph(str(MASK_RCNN), "layout", 0, dedup=False)
    np.testing.assert_array_equal(g.node_feat, pruned["node_feat"])
    np.testing.assert_array_equal(g.node_opcode, pruned["node_opcode"])
    np.testing.assert_array_equal(g.edge_index, pruned["edge_index"])
    np.testing.assert_array_equal(g.node_config_ids, pruned["node_config_ids"])
    np.testing.assert_array_equal(g.config_feat, d["node_config_feat"])
    np.testing.assert_array_equal(g.runtime, d["config_runtime"])
    assert (g.edge_index.dtype, g.node_config_ids.dtype, g.runtime.dtype) == (np.int32, np.int32, np.float64)
    np.testing.assert_array_equal(D.meta_edge_index(g), hlo_opt.meta_edges(pruned))
    t = D.load_graph(str(TILE), "tile", dedup=False)
    dt = hlo_opt.load_npz(TILE)
    np.testing.assert_array_equal(t.runtime, dt["config_runtime"] / dt["config_runtime_normalizers"])
    # The copies are gone: nothing to keep equal to the Rust side.
    assert not hasattr(D, "prune_khop")


def test_training_metrics_are_scipy_and_the_definitions():
    fixture = json.loads((TESTDATA / "costmodel" / "metrics_fixtures.json").read_text())
    assert len(fixture["cases"]) >= 12
    for c in fixture["cases"]:
        m = training_metrics.ranking_metrics(np.array(c["pred"]), np.array(c["runtime"]))
        want_tau = None if c["kendall_tau"] is None else round(c["kendall_tau"], 4)
        assert m["kendall"] == want_tau, c["name"]
        for k in (1, 5, 10):
            want = c[f"top{k}_slowdown"]
            got = m[f"slowdown@{k}"]
            assert (math.isnan(got) and want is None) or got == round(want, 5), (c["name"], k)


def test_the_two_zeros_are_one_prediction():
    runtime = np.array([5.0, 1.0, 2.0, 3.0])
    signed = training_metrics.ranking_metrics(np.array([-0.0, 0.0, 1.0, -0.0]), runtime)
    plain = training_metrics.ranking_metrics(np.array([0.0, 0.0, 1.0, 0.0]), runtime)
    assert signed == plain
    assert hlo_opt.metrics.top_k_slowdown([0.0, -0.0], [1.0, 2.0], 1) == 0.0
