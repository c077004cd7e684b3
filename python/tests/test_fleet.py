"""The fleet (`hlo-cost collect --ray`, `hlo_opt.fleet`, docs/fleet.md) on
a Ray cluster of two nodes on this machine, loopback only
(fleet_support.py), collecting 22 small programs, two tasks each:

- one node dies mid-run (its raylet and workers killed while it measures):
  the task is retried on the other node, the run completes, and every
  (program, configuration) is in the output exactly once;
- the driver is killed and the command rerun: it resumes (what was written
  stays as it was) and ends with the same set;
- the cluster's dataset is the single-machine one (`hlo-cost collect`
  without --ray) but for the runtimes, which agree within the noise (the
  configurations' ratios to the default correlate, and differ by no more
  than a few times the control's error).

Without Ray (local processes): a folder refuses a second device
fingerprint unless told to; a Python without Ray is named with the command
that installs it. The Ray tests are skipped (and recorded) without Ray or
XLA's CPU plugin."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import hlo_opt
from conftest import binary, plugin_available
from fleet_support import LoopbackCluster

try:
    import ray  # noqa: F401

    HAVE_RAY = True
except ImportError:
    HAVE_RAY = False

needs_plugin = pytest.mark.skipif(
    not plugin_available(), reason="XLA's CPU PJRT plugin (pip install xla-cpu-pjrt) is not installed"
)
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="Ray is not installed (pip install -r python/requirements.txt)")

# Two tasks per program (one configuration each, beside the default),
# timed long enough (0.3 s) that two runs agree beyond the noise.
SETTINGS = dict(configs=3, chunk=1, measure_budget=0.3, seed=3)
PROGRAMS = 22


def make_programs(folder: Path) -> list[Path]:
    """Small modules of two dots each, of different shapes."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(PROGRAMS):
        # Large enough that layouts matter beyond the noise (as in mlp.pre.hlo).
        b, k, h, n = 32, 256 + 128 * (i % 5), 256 * (1 + i % 2), 128 * (1 + i % 3)
        text = (
            f"HloModule fleet_{i:02d}, entry_computation_layout="
            f"{{(f32[{b},{k}]{{1,0}}, f32[{k},{h}]{{1,0}}, f32[{h},{n}]{{1,0}})->f32[{b},{n}]{{1,0}}}}\n\n"
            "ENTRY main {\n"
            f"  x = f32[{b},{k}]{{1,0}} parameter(0)\n"
            f"  w1 = f32[{k},{h}]{{1,0}} parameter(1)\n"
            f"  d1 = f32[{b},{h}]{{1,0}} dot(x, w1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n"
            f"  w2 = f32[{h},{n}]{{1,0}} parameter(2)\n"
            f"  ROOT d2 = f32[{b},{n}]{{1,0}} dot(d1, w2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n"
            "}\n"
        )
        p = folder / f"fleet_{i:02d}.hlo"
        p.write_text(text)
        paths.append(p)
    return paths


def flags(**settings) -> list[str]:
    return [f"--{k.replace('_', '-')}={v}" for k, v in settings.items()]


def records(folder: Path) -> dict[str, list[dict]]:
    """Each program's state records (the header left out)."""
    out = {}
    for p in sorted(folder.glob("*.collect.jsonl")):
        lines = p.read_text().splitlines()
        out[p.name] = [json.loads(line) for line in lines[1:]]
    return out


def count(folder: Path) -> int:
    try:
        return sum(len(r) for r in records(folder).values())
    except (json.JSONDecodeError, OSError):
        return 0  # a file replaced while read: asked again


def assert_exactly_once(folder: Path, programs: list[Path]) -> set[tuple[str, int]]:
    """Every planned configuration of every program in its state once and
    in its npz; returns the (program, configuration) set."""
    got = set()
    recs = records(folder)
    assert sorted(recs) == sorted(f"{p.stem}.collect.jsonl" for p in programs)
    for name, rs in recs.items():
        header = json.loads((folder / name).read_text().splitlines()[0])
        planned = len(header["plan"])
        seen = collections.Counter(c for r in rs for c in r["configs"])
        assert seen == collections.Counter(range(1, planned)), (name, seen)
        arrays = hlo_opt.load_npz(folder / name.replace(".collect.jsonl", ".npz"))
        assert arrays["config_runtime"].shape == (planned,), name
        got.update((name, c) for c in range(planned))
    return got


def wait_until(predicate, timeout: float, what: str) -> None:
    end = time.time() + timeout
    while not predicate():
        if time.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> list[Path]:
    return make_programs(tmp_path_factory.mktemp("programs"))


@pytest.fixture(scope="module")
def cluster():
    if not HAVE_RAY:
        pytest.skip("Ray is not installed (pip install -r python/requirements.txt)")
    c = LoopbackCluster()
    try:
        c.start_node(head=True)
        c.start_node()
        c.wait_for_devices(2)
        yield c
    finally:
        c.stop()
        assert not c.pids(), "Ray processes left running"


def collect_cmd(cluster: LoopbackCluster, programs: list[Path], out: Path, *extra: str) -> list[str]:
    return [str(binary("hlo-cost")), "collect", *map(str, programs), "-o", str(out),
            "--ray", cluster.address, *flags(**SETTINGS), *extra]


def run_to_end(cmd: list[str], env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, env=env, capture_output=True, timeout=timeout)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-4000:]
    return r


@pytest.fixture(scope="module")
def node_killed(cluster, programs, tmp_path_factory):
    """A run whose second node dies (its raylet, its workers and what they
    started are killed) while it measures, once 6 of the 44 tasks are in;
    then the node is started again for the next tests."""
    out = tmp_path_factory.mktemp("node_killed")
    total = 2 * len(programs)
    victim = cluster.raylets[1]
    driver = subprocess.Popen(collect_cmd(cluster, programs, out), env=cluster.driver_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: count(out) >= 6 or driver.poll() is not None, 300, "6 records")
        wait_until(lambda: cluster.running_task(victim) or driver.poll() is not None, 60, "a task on node 2")
        addresses = cluster.addresses()  # busy: nodes, workers, the driver's peers
        at_kill = count(out)
        cluster.kill_node(victim)
        stdout, stderr = driver.communicate(timeout=600)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    cluster.start_node()
    cluster.wait_for_devices(2)
    return out, at_kill, total, driver.returncode, stderr.decode(errors="replace"), addresses


@needs_ray
@needs_plugin
def test_a_killed_node_loses_nothing_and_counts_nothing_twice(node_killed, programs):
    out, at_kill, total, rc, stderr, addresses = node_killed
    assert addresses and addresses <= {"127.0.0.1"}, f"Ray used other addresses than loopback: {addresses}"
    assert at_kill < total, "the node was killed after the run ended"
    assert rc == 0, stderr[-4000:]
    assert_exactly_once(out, programs)
    nodes = {r["node"] for rs in records(out).values() for r in rs}
    assert len(nodes) == 2, f"both nodes measured before the kill: {nodes}"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tool"] == "hlo_opt.fleet" and len(manifest["devices"]) == 1


@needs_ray
@needs_plugin
def test_a_killed_driver_is_resumed_by_the_same_command(cluster, programs, node_killed, tmp_path):
    out = tmp_path / "driver_killed"
    cmd = collect_cmd(cluster, programs, out)
    driver = subprocess.Popen(cmd, env=cluster.driver_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: count(out) >= 10 or driver.poll() is not None, 300, "10 records")
        driver.send_signal(signal.SIGKILL)  # hlo-cost exec'd the driver: this is the driver
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    before = {p.name: p.read_text() for p in out.glob("*.collect.jsonl")}
    done_before = count(out)
    assert 0 < done_before < 2 * len(programs), "killed mid-run"
    run_to_end(cmd, cluster.driver_env())
    for name, text in before.items():
        assert (out / name).read_text().startswith(text), f"{name}: a record written before the kill changed"
    assert assert_exactly_once(out, programs) == assert_exactly_once(node_killed[0], programs)


@needs_ray
@needs_plugin
def test_the_cluster_dataset_is_the_single_machine_one_within_noise(node_killed, programs, tmp_path):
    cluster_out = node_killed[0]
    local = tmp_path / "local"
    r = subprocess.run([str(binary("hlo-cost")), "collect", *map(str, programs), "-o", str(local),
                        *flags(**SETTINGS)], capture_output=True, timeout=600)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    ours, theirs, control = [], [], []
    for p in programs:
        a = hlo_opt.load_npz(cluster_out / f"{p.stem}.npz")
        b = hlo_opt.load_npz(local / f"{p.stem}.npz")
        assert list(a) == list(b)
        for key in a:
            if key != "config_runtime":
                np.testing.assert_array_equal(a[key], b[key], err_msg=f"{p.stem}: {key}")
        assert (cluster_out / f"{p.stem}.collect.jsonl").read_text().splitlines()[0] == \
            (local / f"{p.stem}.collect.jsonl").read_text().splitlines()[0], "the same plan"
        ra, rb = a["config_runtime"].astype(float), b["config_runtime"].astype(float)
        ours.extend(np.log(ra[1:] / ra[0]))
        theirs.extend(np.log(rb[1:] / rb[0]))
        for folder in (cluster_out, local):
            control.extend(abs(np.log(r["control_ratio"])) for r in records(folder)[f"{p.stem}.collect.jsonl"])
    # Each configuration's ratio to the default, measured once on each
    # side. The noise of a ratio: the control's (the default against itself,
    # true ratio 1), median |ln ratio|. Two single-machine runs of these
    # programs (28 Nov, load 7): correlation 0.81, median difference 3.3x
    # the control's error; the cluster against one machine: 0.61, 3.6x; the
    # same values with configurations mismatched (shuffled): 0.03-0.2,
    # 7.4-8.9x.
    ours, theirs = np.array(ours), np.array(theirs)
    noise = float(np.median(control))
    diff = float(np.median(np.abs(ours - theirs)))
    corr = float(np.corrcoef(ours, theirs)[0, 1])
    assert corr >= 0.4 and diff <= 6 * noise, dict(correlation=corr, median_diff=diff, control_error=noise)


@needs_plugin
def test_a_folder_refuses_a_second_device_unless_told(tmp_path):
    [prog] = make_programs(tmp_path / "p")[:1]
    out = tmp_path / "out"
    first = hlo_opt.collect(prog, out, ray_address="local", **SETTINGS)
    assert first["not_measured"] == 0 and first["failures"] == []
    state = out / f"{prog.stem}.collect.jsonl"
    header, *lines = state.read_text().splitlines()
    # Another machine measured the first chunk; the second is measured again here.
    rec = json.loads(lines[0])
    rec["device"]["cpu"] = "Another CPU"
    state.write_text("\n".join([header, json.dumps(rec)]) + "\n")
    before = state.read_text()
    with pytest.raises(hlo_opt.fleet.MixedDevicesError, match="Another CPU"):
        hlo_opt.collect(prog, out, ray_address="local", **SETTINGS)
    assert state.read_text() == before, "nothing written"
    mixed = hlo_opt.collect(prog, out, ray_address="local", allow_mixed_devices=True, **SETTINGS)
    assert len(mixed["devices"]) == 2 and mixed["not_measured"] == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(d["cpu"] for d in manifest["devices"])[0] == "Another CPU"


def test_without_ray_the_message_says_how_to_install_it(tmp_path):
    fake = tmp_path / "noray"
    (fake / "ray").mkdir(parents=True)
    (fake / "ray" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'ray'\", name='ray')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), os.environ.get("PYTHONPATH", "")]),
           "HLO_OPT_PYTHON": sys.executable}
    prog = make_programs(tmp_path / "p")[0]
    r = subprocess.run([str(binary("hlo-cost")), "collect", str(prog), "-o", str(tmp_path / "o"), "--ray", "auto"],
                       env=env, capture_output=True, timeout=120)
    assert r.returncode == 1
    assert "pip install 'hlo-opt[ray]'" in r.stderr.decode(), r.stderr.decode()
    code = ("import hlo_opt, sys\n"
            "try:\n"
            f"    hlo_opt.collect({str(prog)!r}, {str(tmp_path / 'o')!r}, ray_address='auto')\n"
            "except ImportError as e:\n"
            "    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=120)
    assert "pip install 'hlo-opt[ray]'" in r.stdout.decode(), r.stderr.decode()
    assert not (tmp_path / "o").exists()
