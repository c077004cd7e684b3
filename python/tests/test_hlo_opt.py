"""The Python package against the command-line tools, which are the
specification: what `hlo_opt` gives equals what `hlo-opt` / `hlo-cost`
print or write for the same input, byte for byte where they write bytes.

- errors: a bad module raises `HloError` (a `ValueError`) whose message is
  what `hlo-opt` prints, with `.path`, `.line`, `.col` of the position;
- printing: `str(module)` is `hlo-opt FILE`'s output; `to_proto()` is
  `--emit=proto`'s;
- passes: `run_passes` gives `hlo-opt --pass=...`'s module byte for byte and
  its `--explain` report (timings aside), plus the decisions as data;
- features: `featurize` is `hlo-cost featurize`'s npz (keys, order, dtypes,
  shapes, values; `save_npz` writes the same bytes) on the real unet_3d module;
- scores: `CostModel.score` is `hlo-cost eval --predictions`, the metrics
  are eval's;
- the GIL is released during a pass.
"""

from __future__ import annotations

import json
import re
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import hlo_opt
from conftest import TESTDATA, cli

UNET = TESTDATA / "tpugraphs" / "layout_xla_default_valid_unet_3d.4x4.bf16.hlo"
UNET_NPZ = TESTDATA / "tpugraphs" / "layout_xla_default_valid_unet_3d.4x4.bf16.npz"
LAYOUT_MODULES = sorted((TESTDATA / "layout").glob("*.hlo"))
TILE_MODULES = sorted((TESTDATA / "tile" / "kernels").glob("*.hlo")) + [
    TESTDATA / "tile" / "modules" / "mlp.post.hlo"
]


# --- errors ---------------------------------------------------------------


@pytest.mark.parametrize("path", sorted((TESTDATA / "invalid").glob("*.hlo"))[:40], ids=lambda p: p.name)
def test_an_invalid_module_raises_what_the_cli_prints(path: Path) -> None:
    out = cli("hlo-opt", path)
    assert out.returncode == 1, out.stderr
    with pytest.raises(hlo_opt.HloError) as e:
        hlo_opt.read(path)
    assert str(e.value) + "\n" == out.stderr.decode()
    # The position is the one the message starts with.
    m = re.match(r"(.*?):(\d+):(\d+): error: ", str(e.value))
    if m:
        assert (e.value.path, e.value.line, e.value.col) == (m[1], int(m[2]), int(m[3]))


def test_an_error_has_its_position_and_is_a_value_error() -> None:
    text = "HloModule m\n\nENTRY e {\n  p = f32[2]{0} parameter(0)\n  ROOT a = f32[3]{0} add(p, p)\n}\n"
    with pytest.raises(ValueError) as e:
        hlo_opt.parse(text, name="m.hlo")
    err = e.value
    assert isinstance(err, hlo_opt.HloError)
    assert (err.path, err.line, err.col) == ("m.hlo", 5, 8)
    assert str(err).startswith("m.hlo:5:8: error: in computation e, instruction %a:")
    # Parsed unverified, the verifier then places the error the same way.
    m = hlo_opt.parse(text, name="m.hlo", verify=False)
    with pytest.raises(hlo_opt.HloError) as again:
        m.verify()
    assert str(again.value) == str(err)
    with pytest.raises(hlo_opt.HloError) as syntax:
        hlo_opt.parse(b"HloModule m\n\nENTRY e {\n  ROOT p = f32[2]{0} parameter(0) x\n}\n")
    assert (syntax.value.path, syntax.value.line, syntax.value.col) == ("<input>", 4, 35)


def test_bad_arguments_are_python_errors_not_crashes() -> None:
    with pytest.raises(TypeError):
        hlo_opt.parse(42)  # type: ignore[arg-type]
    with pytest.raises(OSError):
        hlo_opt.read(TESTDATA / "no such file.hlo")
    m = hlo_opt.read(TESTDATA / "layout" / "convnet_unet3d.hlo")
    with pytest.raises(ValueError, match="unknown pass `nope`"):
        m.run_passes(["layout", "nope"])
    with pytest.raises(ValueError, match="--budget 0"):
        m.run_passes(["layout"], budget=0)
    with pytest.raises(ValueError, match="trust_radius"):
        m.run_passes(["layout"], trust_radius="some")
    with pytest.raises(hlo_opt.PassError, match="no-such-model"):
        m.run_passes(["layout"], layout_model="no-such-model.hlocm")
    with pytest.raises(ValueError, match="task"):
        hlo_opt.featurize(m, task="other")
    with pytest.raises(KeyError):
        hlo_opt.CostModel("layout").score({"node_feat": np.zeros((1, 140))})
    with pytest.raises(ValueError, match="edge_index"):
        hlo_opt.CostModel("layout").score(
            {
                "node_feat": np.zeros((2, 140)),
                "node_opcode": np.zeros(2),
                "edge_index": np.array([[0, 7]]),
                "node_config_ids": np.array([0]),
                "node_config_feat": np.zeros((1, 1, 18)),
            }
        )


# --- printing -------------------------------------------------------------


PRINTED = sorted((TESTDATA / "hlo").glob("*.hlo")) + LAYOUT_MODULES + [UNET]


@pytest.mark.parametrize("path", PRINTED, ids=lambda p: p.name)
def test_a_module_prints_as_the_cli_prints_it(path: Path) -> None:
    out = cli("hlo-opt", path)
    if out.returncode != 0:
        with pytest.raises(hlo_opt.HloError):
            hlo_opt.read(path)
        return
    m = hlo_opt.read(path)
    assert str(m).encode() == out.stdout
    proto = cli("hlo-opt", path, "--emit=proto")
    if proto.returncode != 0:
        # What cannot be written to a proto is refused alike, by name.
        with pytest.raises(hlo_opt.HloError) as e:
            m.to_proto()
        assert str(e.value) + "\n" == proto.stderr.decode()
    else:
        assert m.to_proto() == proto.stdout


def test_a_proto_reads_as_the_cli_reads_it(tmp_path: Path) -> None:
    m = hlo_opt.read(UNET)
    written = tmp_path / "unet.pb"
    written.write_bytes(m.to_proto())
    again = hlo_opt.parse(written.read_bytes(), name=str(written))
    assert str(again).encode() == cli("hlo-opt", written, check=True).stdout


# --- passes ---------------------------------------------------------------

# Wall times in the --explain report ("in 0.03 s", "in 0.03 s (95,000/s)"): they vary between runs.
TIMING = re.compile(r"in \d+\.\d+ s( \([\d,]+/s\))?")


def cli_pass(path: Path, passes: str, *flags: str) -> tuple[bytes, str]:
    out = cli("hlo-opt", path, f"--pass={passes}", "--explain", *flags)
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout, out.stderr.decode()


@pytest.mark.parametrize("path", LAYOUT_MODULES, ids=lambda p: p.name)
def test_the_layout_pass_gives_the_cli_output_byte_for_byte(path: Path) -> None:
    for flags, kwargs in [
        (["--budget=3000"], dict(budget=3000)),
        (["--budget=3000", "--trust-radius=all", "--seed=7"], dict(budget=3000, trust_radius="all", seed=7)),
    ]:
        stdout, stderr = cli_pass(path, "layout", *flags)
        r = hlo_opt.read(path).run_passes(["layout"], explain=True, **kwargs)
        assert str(r.module).encode() == stdout
        assert TIMING.sub("", r.explain) == TIMING.sub("", stderr)
        [d] = r.decisions
        # The decision is the --explain-json object, key for key (timing aside).
        out = cli("hlo-opt", path, "--pass=layout", "--explain", "--explain-json=-", "-o", "/dev/null", *flags)
        assert out.returncode == 0, out.stderr.decode()
        [want] = json.loads(out.stdout)["passes"]
        assert list(d) == list(want)
        d["search"]["seconds"] = want["search"]["seconds"]
        assert d == want
        assert d["pass"] == "layout" and d["search"]["scored"] > 0
        assert r.changed == (d["decision"]["applied"] and d["result"]["copies_added"] + d["result"]["instructions_relaid_out"] > 0)
        assert f"scored {d['search']['scored']:,} configurations in" in stderr
        for node in d["considered"]:
            assert f"%{node['node']}: " in stderr


def test_the_unbounded_layout_search_changes_bert_and_explains_it() -> None:
    path = TESTDATA / "layout" / "transformer_bert.hlo"
    stdout, stderr = cli_pass(path, "layout", "--trust-radius=all", "--budget=3000")
    r = hlo_opt.read(path).run_passes("layout", trust_radius="all", budget=3000, explain=True)
    assert str(r.module).encode() == stdout
    [d] = r.decisions
    assert d["decision"]["applied"] and r.changed, r.explain
    changed = [n for n in d["considered"] if n["changed"] and n["choice"] != n["default"]]
    assert changed and all("score_alone" in n for n in changed)
    for n in changed:
        assert f"%{n['node']}: {n['choice']} (default {n['default']})" in stderr


@pytest.mark.parametrize("path", TILE_MODULES, ids=lambda p: p.name)
def test_the_tile_pass_gives_the_cli_output_byte_for_byte(path: Path) -> None:
    stdout, stderr = cli_pass(path, "tile", "--top-k=3", "--budget=500")
    r = hlo_opt.read(path).run_passes(["tile"], top_k=3, budget=500, explain=True)
    assert str(r.module).encode() == stdout
    assert r.explain == stderr
    for d in r.decisions:
        assert d["pass"] == "tile"
        assert len(d["candidates"]) <= 3 and d["candidates"][0] == [d["chosen"], d["score"]]
        assert f"tile %{d['kernel']}: {d['chosen']} predicted {d['score']:.4f}" in stderr


def test_a_pass_never_changes_the_module_it_ran_on() -> None:
    m = hlo_opt.read(TESTDATA / "layout" / "transformer_bert.hlo")
    before = str(m)
    r = m.run_passes(["layout"], trust_radius="all", budget=500)
    assert str(m) == before and r.changed and str(r.module) != before


# --- features, npz, scores, metrics ----------------------------------------


def test_features_equal_hlo_cost_featurize_on_unet_3d(tmp_path: Path) -> None:
    npz = tmp_path / "cli.npz"
    cli("hlo-cost", "featurize", "--task=layout", UNET, "-o", npz, check=True)
    want = np.load(npz)
    got = hlo_opt.featurize(hlo_opt.read(UNET), task="layout")
    assert list(got) == list(want.keys())
    for key in want.keys():
        assert got[key].dtype == want[key].dtype, key
        assert got[key].shape == want[key].shape, key
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    assert got["node_feat"].shape[0] > 1000, "the real unet_3d module"
    # Written by the package, the file is the CLI's byte for byte.
    mine = tmp_path / "py.npz"
    hlo_opt.save_npz(mine, got)
    assert mine.read_bytes() == npz.read_bytes()
    back = hlo_opt.load_npz(mine)
    assert {k: v.tolist() for k, v in back.items()} == {k: v.tolist() for k, v in got.items()}


@pytest.mark.parametrize("kernel", sorted((TESTDATA / "tile" / "kernels").glob("*.hlo"))[:3], ids=lambda p: p.name)
def test_tile_features_equal_hlo_cost_featurize(tmp_path: Path, kernel: Path) -> None:
    npz = tmp_path / "cli.npz"
    cli("hlo-cost", "featurize", "--task=tile", kernel, "-o", npz, check=True)
    want = np.load(npz)
    got = hlo_opt.featurize(hlo_opt.read(kernel), task="tile")
    assert list(got) == list(want.keys())
    for key in want.keys():
        assert (got[key].dtype, got[key].shape) == (want[key].dtype, want[key].shape), key
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def test_a_module_of_several_kernels_is_refused_for_the_tile_task() -> None:
    path = TESTDATA / "tile" / "modules" / "mlp.post.hlo"
    out = cli("hlo-cost", "featurize", "--task=tile", path, "-o", "/dev/null")
    assert out.returncode == 1
    with pytest.raises(ValueError) as e:
        hlo_opt.featurize(hlo_opt.read(path), task="tile")
    assert str(e.value).removeprefix("invalid input: ") in out.stderr.decode()


SCORED = [
    ("layout", UNET_NPZ),
    ("layout", TESTDATA / "costmodel" / "npz" / "layout_xla_mask_rcnn_unsorted_ids.npz"),
    ("tile", TESTDATA / "costmodel" / "npz" / "tile_xla_valid_inception_v3.npz"),
    ("xla-cpu", UNET_NPZ),
    ("reference", TESTDATA / "costmodel" / "npz" / "layout_xla_random_openai_v0_rnn_optimized.npz"),
]


@pytest.mark.parametrize("spec,npz", SCORED, ids=lambda v: getattr(v, "name", v))
def test_scores_and_metrics_equal_hlo_cost_eval(spec: str, npz: Path) -> None:
    args = ["eval", "--json", "--predictions", npz]
    if spec not in ("layout", "tile"):
        args[1:1] = ["--model", spec]
    report = json.loads(cli("hlo-cost", *args, check=True).stdout)["files"][0]
    arrays = hlo_opt.load_npz(npz)
    model = hlo_opt.CostModel(spec)
    scores = model.score(arrays)
    assert scores.dtype == np.float32
    np.testing.assert_array_equal(scores, np.array(report["predictions"], dtype=np.float32))
    # Configurations given apart, in other batches, score the same (up to
    # the float rounding of ONNX Runtime's kernels at another batch size).
    key = "node_config_feat" if model.task == "layout" else "config_feat"
    np.testing.assert_allclose(model.score(arrays, arrays[key][:7], batch=3), scores[:7], rtol=1e-5)
    if report.get("metrics"):
        runtime = arrays["config_runtime"].astype(np.float64)
        if "config_runtime_normalizers" in arrays:
            runtime = runtime / arrays["config_runtime_normalizers"]
        got = hlo_opt.metrics.ranking_metrics(scores, runtime)
        for name, value in report["metrics"].items():
            if name in got and value is None:
                assert got[name] is None, name
            elif name in got:
                assert got[name] == pytest.approx(value, rel=1e-12, abs=1e-12), name


def test_a_model_scores_one_graph_after_another_as_a_fresh_one() -> None:
    # Nothing of a previous call's graph (nodes, edges, configurable nodes,
    # splits) may remain in a model, nor of a call that failed.
    files = [UNET_NPZ, TESTDATA / "costmodel" / "npz" / "layout_xla_mask_rcnn_unsorted_ids.npz"]
    graphs = [hlo_opt.load_npz(f) for f in files]
    graphs.append(hlo_opt.featurize(hlo_opt.read(TESTDATA / "layout" / "transformer_bert.hlo")))
    for spec in ("layout", "reference"):
        model = hlo_opt.CostModel(spec)
        for g in graphs + graphs[::-1]:
            np.testing.assert_array_equal(model.score(g), hlo_opt.CostModel(spec).score(g))
        graphs[0]["node_opcode"] = graphs[0]["node_opcode"][:-1]  # a failed call leaves the model usable
        with pytest.raises(ValueError, match="node_opcode"):
            model.score(graphs[0])
        graphs[0] = hlo_opt.load_npz(files[0])
        np.testing.assert_array_equal(model.score(graphs[1]), hlo_opt.CostModel(spec).score(graphs[1]))


def test_a_model_reads_arrays_of_any_memory_layout_alike() -> None:
    # The model reads the graph where numpy holds it, uncopied, when the
    # arrays are C-contiguous (featurize's and load_npz's are); arrays in
    # another layout (Fortran order, strided views), read-only ones, or ones
    # of another dtype score the same, and are left as they were.
    arrays = hlo_opt.load_npz(UNET_NPZ)
    before = {k: v.copy() for k, v in arrays.items()}
    for spec in ("layout", "reference"):
        model = hlo_opt.CostModel(spec)
        want = model.score(arrays)
        odd = dict(arrays)
        odd["node_feat"] = np.asfortranarray(arrays["node_feat"])
        odd["edge_index"] = np.asfortranarray(arrays["edge_index"])
        ids = np.zeros(2 * len(arrays["node_config_ids"]), np.int64)
        ids[::2] = arrays["node_config_ids"]
        odd["node_config_ids"] = ids[::2]  # a strided view
        odd["node_opcode"] = arrays["node_opcode"].copy()
        odd["node_opcode"].flags.writeable = False
        assert not odd["node_feat"].flags.c_contiguous and not odd["node_config_ids"].flags.c_contiguous
        # straight to the extension, past the Python half's conversion
        np.testing.assert_array_equal(hlo_opt._native.CostModel.score(model._model, odd, None), want)
        np.testing.assert_array_equal(model.score(odd), want)
        odd["node_feat"] = arrays["node_feat"].astype(np.float64)
        np.testing.assert_array_equal(model.score(odd), want)
    for k, v in arrays.items():
        np.testing.assert_array_equal(v, before[k])
        assert v.flags.writeable, k


def test_metrics_are_the_rust_ones() -> None:
    pred = np.array([0.1, 0.4, 0.3, 0.2])
    runtime = np.array([1.0, 4.0, 2.0, 3.0])
    assert hlo_opt.metrics.kendall_tau(pred, runtime) == pytest.approx(2 / 3)
    assert hlo_opt.metrics.ordered_pair_accuracy(pred, runtime) == pytest.approx(5 / 6)
    assert hlo_opt.metrics.top_k_slowdown(pred, [3.0, 1.0, 2.0, 4.0], 1) == pytest.approx(2.0)
    assert hlo_opt.metrics.top_k_slowdown(pred, [3.0, 1.0, 2.0, 4.0], 3) == pytest.approx(1.0)
    assert hlo_opt.metrics.kendall_tau([1.0], [2.0]) is None
    with pytest.raises(ValueError):
        hlo_opt.metrics.kendall_tau([1.0, 2.0], [1.0])


# --- the GIL ---------------------------------------------------------------


def test_a_long_pass_lets_other_python_threads_run() -> None:
    m = hlo_opt.read(TESTDATA / "layout" / "transformer_bert.hlo")
    done = threading.Event()
    result = {}

    def work() -> None:
        start = time.perf_counter()
        result["r"] = m.run_passes(["layout"], budget=200000, trust_radius="all")
        result["seconds"] = time.perf_counter() - start
        done.set()

    t = threading.Thread(target=work)
    t.start()
    ticks = 0
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    t.join()
    # With the GIL held for the pass, this thread would not tick at all
    # until the pass ends; released, it ticks about once a millisecond.
    assert result["seconds"] > 0.3, "the pass is long enough to tell"
    assert ticks > result["seconds"] * 100, (ticks, result["seconds"])
