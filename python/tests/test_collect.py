"""`hlo_opt.collect` against `hlo-cost collect`, which is the specification
(the same code, `hlo_opt_tools::collect`): on a tiny module
(testdata/hlo/mlp.pre.hlo, 9 configurable nodes), three configurations
timed briefly on XLA's CPU plugin give the CLI's plan and npz (the same
configurations and features; runtimes are measurements, so only their
presence is checked); a second call continues the folder's state and
measures nothing again; bad input raises (HloError with its position,
ValueError for settings and for a folder of other settings, BackendError for
a device that does not start); another Python thread runs while it
measures. Measuring tests are skipped (and recorded) without the plugin."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import hlo_opt
from conftest import TESTDATA, cli, plugin_available

TINY = TESTDATA / "hlo" / "mlp.pre.hlo"
# Few configurations, timed briefly: about a second per collection.
SMALL = dict(configs=3, chunk=2, measure_budget=0.05, seed=5)

needs_plugin = pytest.mark.skipif(
    not plugin_available(), reason="XLA's CPU PJRT plugin (pip install xla-cpu-pjrt) is not installed"
)


def header(folder: Path) -> dict:
    """The state file's first line: the plan and the settings."""
    first = (folder / "mlp.pre.collect.jsonl").read_text().splitlines()[0]
    return json.loads(first)


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    """One collection from Python (while another thread counts) and one by
    the CLI with the same settings."""
    py_dir = tmp_path_factory.mktemp("py")
    cli_dir = tmp_path_factory.mktemp("cli")
    ticks = 0
    done = threading.Event()

    def count():
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    try:
        start = time.perf_counter()
        outcome = hlo_opt.collect(TINY, py_dir, **SMALL)
        seconds = time.perf_counter() - start
    finally:
        done.set()
        t.join()
    args = [f"--{k.replace('_', '-')}={v}" for k, v in SMALL.items()]
    r = cli("hlo-cost", "collect", TINY, "-o", cli_dir, *args)
    assert r.returncode == 0, r.stderr.decode()
    return outcome, py_dir, cli_dir, ticks, seconds


@needs_plugin
def test_collect_gives_the_cli_plan_and_npz(collected):
    outcome, py_dir, cli_dir, _, _ = collected
    assert header(py_dir) == header(cli_dir)
    ours, theirs = hlo_opt.load_npz(py_dir / "mlp.pre.npz"), hlo_opt.load_npz(cli_dir / "mlp.pre.npz")
    assert list(ours) == list(theirs)
    for key in ours:
        if key != "config_runtime":
            np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)
    assert ours["node_config_feat"].shape[0] == 3
    assert (ours["config_runtime"] > 0).all()
    # The module's features are featurize's.
    f = hlo_opt.featurize(hlo_opt.read(TINY))
    np.testing.assert_array_equal(ours["node_feat"], f["node_feat"])
    [m] = outcome["modules"]
    assert (m["npz"], m["in_npz"], m["planned"]["total"], m["configurable_nodes"]) == ("mlp.pre.npz", 3, 3, 9)
    assert outcome["not_measured"] == 0
    manifest = json.loads(Path(outcome["manifest"]).read_text())
    assert manifest["modules"][0]["in_npz"] == 3 and manifest["device"] == "xla-cpu"


@needs_plugin
def test_the_gil_is_released_while_it_measures(collected):
    _, _, _, ticks, seconds = collected
    # The counter sleeps 1 ms per tick: with the GIL held it would not run.
    assert ticks > 0.2 * seconds * 1000 / 2, (ticks, seconds)


@needs_plugin
def test_a_second_call_continues_and_other_settings_are_refused(collected):
    _, py_dir, _, _, _ = collected
    before = (py_dir / "mlp.pre.collect.jsonl").read_text()
    again = hlo_opt.collect(TINY, py_dir, **SMALL)
    assert again["modules"][0]["in_npz"] == 3
    assert (py_dir / "mlp.pre.collect.jsonl").read_text() == before, "nothing measured twice"
    with pytest.raises(ValueError, match="--seed 5 .this run: 6."):
        hlo_opt.collect(TINY, py_dir, **{**SMALL, "seed": 6})


def test_bad_module_raises_hlo_error_with_its_position(tmp_path):
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] frobnicate(p)\n}\n")
    with pytest.raises(hlo_opt.HloError) as e:
        hlo_opt.collect(bad, tmp_path / "out")
    assert (e.value.path, e.value.line) == (str(bad), 5)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"configs": 0}, "--configs 0"),
        ({"chunk": 300}, "--chunk 300"),
        ({"random_fraction": 1.5}, "--random-fraction 1.5"),
        ({"measure_budget": -1.0}, "--measure-budget -1"),
        ({"device": "tpu"}, "--device `tpu`"),
        ({"estimator": "mean"}, "--estimator"),
        ({"budget": "soon"}, "--budget"),
        ({"budget": -3.0}, "budget -3"),
    ],
)
def test_bad_settings_raise_value_error(tmp_path, setting, message):
    with pytest.raises(ValueError, match=message):
        hlo_opt.collect(TINY, tmp_path / "out", **setting)
    assert not (tmp_path / "out").exists()


def test_a_module_without_configurable_node_is_refused(tmp_path):
    plain = tmp_path / "add.hlo"
    plain.write_text("HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] add(p, p)\n}\n")
    with pytest.raises(ValueError, match="no configurable node"):
        hlo_opt.collect(plain, tmp_path / "out")


def test_a_device_that_does_not_start_raises_backend_error(tmp_path):
    with pytest.raises(hlo_opt.BackendError, match="--device pjrt:"):
        hlo_opt.collect(TINY, tmp_path / "out", device=f"pjrt:{tmp_path / 'no-such-plugin.so'}")
