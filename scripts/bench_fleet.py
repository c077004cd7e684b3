"""Orchestration overhead of the fleet (hlo_opt.fleet, docs/fleet.md)
against measurement time, at the default task size (one chunk of 8
configurations, --measure-budget 2): the same programs collected by
`hlo-cost collect` in one process (no orchestration), by the fleet driver
with one local process, and over a loopback Ray cluster of 1 and of 2
nodes (python/tests/fleet_support.py: one CPU and one device each).
Prints one table row per run and writes the timings as JSON.

    .venv/bin/python scripts/bench_fleet.py [--programs 8] [--configs 17] [--out target/bench-fleet]

Not a test: the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python" / "tests"))

from fleet_support import LoopbackCluster  # noqa: E402
from test_fleet import make_programs  # noqa: E402


def load1() -> float:
    return float(open("/proc/loadavg").read().split()[0])


def driver_replay(module: Path, configs: int, chunk: int, out: Path) -> int:
    """The driver's work per result without any device: a program's plan,
    then made-up chunk records of `chunk` configurations each (ratio 1)
    added to its state and published, timed as the state grows."""
    import hlo_opt.fleet as fleet

    folder = out / "replay"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    collector = fleet.LayoutCollector(folder, configs=configs, chunk=chunk)
    t0 = time.perf_counter()
    planned = collector.plan(module)
    plan_seconds = time.perf_counter() - t0
    state = fleet.State(folder / f"{planned.stem}.collect.jsonl", planned)
    fp = {"device": "xla-cpu", "platform": "cpu", "pjrt_api_version": "0.0", "package": "xla-cpu-pjrt",
          "package_version": "0", "cpu": "bench", "cores": 2, "hostname": "bench"}
    adds, pubs = [], []
    for i in range(0, len(planned.configs), chunk):
        batch = planned.configs[i:i + chunk]
        n = len(batch)
        rec = {"configs": batch, "ratio": [1.0] * n, "ratio_min": [1.0] * n, "notes": [""] * n,
               "default_seconds": 1e-3, "default_min_seconds": 1e-3, "spread": 0.01, "control_ratio": 1.0,
               "control_ratio_min": 1.0, "rounds": 10, "load1": 1.0, "wall_seconds": 2.0, "device": fp,
               "node": "bench"}
        t0 = time.perf_counter()
        state.add(rec, "xla-cpu")
        adds.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        collector.publish(planned.stem, "xla-cpu")
        pubs.append(time.perf_counter() - t0)
    size = (folder / f"{planned.stem}.collect.jsonl").stat().st_size
    print(f"replay {module.name}: {len(planned.configs) + 1} configurations, {len(adds)} results of {chunk};"
          f" plan {plan_seconds * 1e3:.0f} ms; state rewrite first/last {adds[0] * 1e3:.1f}/{adds[-1] * 1e3:.1f} ms"
          f" (final {size / 1e3:.0f} kB); npz publish first/last {pubs[0] * 1e3:.1f}/{pubs[-1] * 1e3:.1f} ms;"
          f" load {load1():.1f}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver-replay", metavar="MODULE", help="time the driver's work per result on MODULE only")
    ap.add_argument("--programs", type=int, default=8)
    ap.add_argument("--configs", type=int, default=17, help="per program: the default + 2 tasks of 8")
    ap.add_argument("--chunk", type=int, default=8)
    ap.add_argument("--measure-budget", type=float, default=2.0)
    ap.add_argument("--out", default=str(ROOT / "target" / "bench-fleet"))
    ap.add_argument("--runs", default="cli,local,ray1,ray2")
    a = ap.parse_args()
    out = Path(a.out)
    if a.driver_replay:
        return driver_replay(Path(a.driver_replay), a.configs, a.chunk, out)
    shutil.rmtree(out, ignore_errors=True)
    programs = make_programs(out / "programs")[: a.programs]
    settings = ["--configs", str(a.configs), "--chunk", str(a.chunk), "--measure-budget", str(a.measure_budget)]
    py = [sys.executable, "-m", "hlo_opt.fleet", *map(str, programs), *settings]
    rows = []
    for run in a.runs.split(","):
        folder = out / run
        timing = out / f"{run}.timing.json"
        cluster = None
        try:
            if run == "cli":
                cmd = [str(ROOT / "target" / "release" / "hlo-cost"), "collect", *map(str, programs), "-o",
                       str(folder), *settings]
                env = dict(os.environ)
            elif run == "local":
                cmd = [*py, "-o", str(folder), "--ray", "local", "--timing", str(timing)]
                env = dict(os.environ)
            else:
                cluster = LoopbackCluster()
                cluster.start_node(head=True)
                for _ in range(int(run[3:]) - 1):
                    cluster.start_node()
                cluster.wait_for_devices(int(run[3:]))
                cmd = [*py, "-o", str(folder), "--ray", cluster.address, "--timing", str(timing)]
                env = cluster.driver_env()
            load = load1()
            t0 = time.perf_counter()
            r = subprocess.run(cmd, env=env, capture_output=True)
            wall = time.perf_counter() - t0
            if r.returncode != 0:
                print(r.stderr.decode(errors="replace")[-3000:], file=sys.stderr)
                return 1
        finally:
            if cluster is not None:
                cluster.stop()
        row = {"run": run, "command_seconds": wall, "load1_at_start": load}
        if timing.exists():
            row.update(json.loads(timing.read_text()))
        else:  # hlo-cost collect: its own chunk timings
            states = [json.loads(x) for p in folder.glob("*.collect.jsonl") for x in p.read_text().splitlines()[1:]]
            row.update(tasks=len(states), measure_seconds=sum(s["wall_seconds"] for s in states))
        rows.append(row)
        f = lambda x, d=2: "-" if x is None else (f"{x:.{d}f}" if isinstance(x, float) else str(x))  # noqa: E731
        print(f"{run:6} tasks {row['tasks']:3}  command {wall:6.1f} s  measuring {f(row['measure_seconds'], 1)} s"
              f" ({f(row.get('measure_seconds_per_task'))} s/task)  in-task overhead median"
              f" {f(row.get('in_task_overhead_seconds_median'), 3)} s  gap median {f(row.get('gap_seconds_median'), 3)} s"
              f"  overhead {f(row.get('overhead') and 100 * row['overhead'], 1)}%"
              f"  (wall-charged {f(row.get('overhead_wall') and 100 * row['overhead_wall'], 1)}%)"
              f"  driver {f(row.get('driver_seconds_per_result_mean') and 1e3 * row['driver_seconds_per_result_mean'], 1)}"
              f" ms/result  load {load:.1f}",
              flush=True)
    (out / "bench.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
