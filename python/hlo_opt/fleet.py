"""A collection spread over machines: ``hlo-cost collect --ray ADDRESS`` and
``hlo_opt.collect(..., ray_address=...)`` (docs/fleet.md).

The work is split into (program, configuration batch) tasks. Each task runs
where a measuring device is free: on a Ray cluster, a task asks for one unit
of the custom resource ``hlo_opt_device`` (:data:`RESOURCE`), which each
node offers once, so two measurements never share a device; without Ray the
same task function runs in local processes. A task measures with the XLA of
the machine it runs on and returns one state record with that machine's
device fingerprint. The driver (this process) alone writes files: as each
record arrives it is added to its program's state ``STEM.collect.jsonl``
(the whole file rewritten to a temporary file and renamed), and the
program's npz and ``manifest.json`` are refreshed from the states.

Faults: Ray reruns a task whose worker or node died (``max_retries``) on a
node still alive. A driver that dies loses only the tasks in flight: the
states hold every record that arrived, and the same command run again
measures only what they lack. A record is never written twice: the driver
drops configurations its state already holds.

The kind of collection is a :class:`Collector` (the driver's half: plan a
program, publish its files) with a picklable :class:`Measure` (the task's
half: fingerprint the machine, measure a batch). :class:`LayoutCollector`
is ``hlo-cost collect``'s layout collection; another collector (e.g. XLA:CPU
kernel choices) plugs in by implementing the two.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor
from concurrent.futures import wait as _wait_futures
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, Sequence

#: The Ray resource that stands for one measuring device; a node offers it
#: once (``ray start --resources '{"hlo_opt_device": 1}'``).
RESOURCE = "hlo_opt_device"

#: The fingerprint keys that may differ between measurements of one
#: dataset; every other key of a fingerprint must agree.
FINGERPRINT_IGNORED = ("hostname", "plugin")

RAY_MISSING = "Ray is not installed: pip install 'hlo-opt[ray]' (or pip install -r python/requirements.txt)"


class MixedDevicesError(ValueError):
    """A measurement came from a device whose fingerprint differs from the
    dataset's (allow_mixed_devices=True / --allow-mixed-devices accepts it)."""


# --- The interface a kind of collection implements --------------------------


class Measure(Protocol):
    """The task's half of a collector: picklable, it runs on the machine
    that measures (a Ray worker or a local process)."""

    def fingerprint(self) -> dict[str, Any]:
        """This machine's device, JSON values: what must agree for two
        measurements to be comparable (CPU or GPU model, XLA version...),
        besides FINGERPRINT_IGNORED (``device``, when there, names it in
        the state header, e.g. ``xla-cpu``)."""
        ...

    def measure(self, payload: Any, batch: list[int]) -> dict[str, Any]:
        """Measures configurations ``batch`` of the program ``payload``
        (:attr:`Planned.payload`) and returns one state record, a JSON
        object whose ``configs`` is ``batch``. An empty batch measures the
        program's reference alone. Raises when the program cannot be
        measured at all."""
        ...


@dataclass
class Planned:
    """A program as the driver plans it."""

    stem: str  #: output files are STEM.collect.jsonl, STEM.npz
    configs: list[int]  #: the configurations to measure, each once
    payload: Any  #: what a task needs to measure it (picklable, small)
    header: Callable[[str], dict[str, Any]]  #: the state's first line, for a device name
    batch: int = 8  #: configurations per task
    reference_alone: bool = True  #: with nothing else to do, one empty batch measures the reference


class Collector(Protocol):
    """The driver's half of a kind of collection."""

    task: str  #: e.g. "layout"
    measure: Measure

    def plan(self, program: Any) -> Planned:
        """A program as this collector knows it (a module's path for
        layouts; e.g. an object with ``fn`` and ``args`` for XLA:CPU)."""
        ...

    def publish(self, stem: str, device: str) -> dict[str, Any]:
        """Writes the program's derived files from its state (atomically)
        and returns its manifest entry."""
        ...

    def settings(self) -> dict[str, Any]: ...


# --- The layout collection of hlo-cost collect -------------------------------


# Per worker process, across tasks (each task unpickles its own Measure):
# the device fingerprint per device, the planned programs per (name, text,
# settings).
_FINGERPRINTS: dict[str, dict[str, Any]] = {}
_PROGRAMS: dict[tuple, Any] = {}


def _file_sha256(path: str | None) -> str | None:
    import hashlib

    try:
        with open(path or "", "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()[:16]
    except OSError:
        return None


def _gpu_names() -> str | None:
    """This machine's GPUs and driver (``nvidia-smi``), when it has one."""
    import subprocess

    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return "; ".join(sorted(set(r.stdout.split("\n")) - {""})) if r.returncode == 0 else None


@dataclass(frozen=True)
class LayoutMeasure:
    device: str
    configs: int
    random_fraction: float
    seed: int
    chunk: int
    measure_budget: float
    estimator: str

    def _settings(self) -> dict[str, Any]:
        return dict(
            configs=self.configs,
            random_fraction=self.random_fraction,
            seed=self.seed,
            chunk=self.chunk,
            measure_budget=self.measure_budget,
            estimator=self.estimator,
        )

    def fingerprint(self) -> dict[str, Any]:
        fp = _FINGERPRINTS.get(self.device)
        if fp is None:
            from . import _native

            fp = json.loads(_native.device_fingerprint(self.device))
            machine = fp.pop("machine", {}) or {}
            fp.update(cpu=machine.get("cpu"), cores=machine.get("cores"), hostname=machine.get("hostname"))
            fp["plugin_sha256"] = _file_sha256(fp.get("plugin"))  # the XLA build, whatever its version says
            if fp.get("platform") != "cpu":
                fp["gpu"] = _gpu_names()
            _FINGERPRINTS[self.device] = fp
        return fp

    def measure(self, payload: Any, batch: list[int]) -> dict[str, Any]:
        from . import _native

        name, text = payload
        key = (name, text, self)
        program = _PROGRAMS.get(key)
        if program is None:
            # The module travels as bytes (the nodes need not share files);
            # planned here from a private copy: the same text and settings
            # give the driver's plan.
            with tempfile.TemporaryDirectory(prefix="hlo-opt-fleet-") as folder:
                path = Path(folder) / name
                path.write_bytes(text)
                program = _native.CollectProgram(path, folder, **self._settings())
            if len(_PROGRAMS) > 64:
                _PROGRAMS.clear()
            _PROGRAMS[key] = program
        return json.loads(program.measure(self.device, list(batch)))


class LayoutCollector:
    """``hlo-cost collect``: sampled layout configurations of each module,
    measured in chunks against the compiler default (src/collect.rs)."""

    task = "layout"

    def __init__(self, output: Path, *, device: str = "xla-cpu", configs: int = 32, random_fraction: float = 0.5,
                 seed: int = 0, chunk: int = 8, measure_budget: float = 2.0, estimator: str = "median"):
        self.output = Path(output)
        self.measure = LayoutMeasure(device, configs, random_fraction, seed, chunk, measure_budget, estimator)
        self._programs: dict[str, Any] = {}

    def settings(self) -> dict[str, Any]:
        return {"device": self.measure.device, **self.measure._settings()}

    def plan(self, path: Any) -> Planned:
        from . import _native

        path = Path(path)
        program = _native.CollectProgram(path, self.output, **self.measure._settings())
        self._programs[program.stem] = program
        return Planned(
            stem=program.stem,
            configs=list(range(1, program.planned)),
            payload=(Path(path).name, Path(path).read_bytes()),
            header=lambda device, p=program: json.loads(p.header(device)),
            batch=max(1, self.measure.chunk),
        )

    def publish(self, stem: str, device: str) -> dict[str, Any]:
        return json.loads(self._programs[stem].publish(device))


# --- The driver's files ------------------------------------------------------


def write_atomic(path: Path, data: bytes) -> None:
    """``path`` holds either its old bytes or ``data``, whatever happens."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _shown(fp: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in fp.items() if k not in FINGERPRINT_IGNORED)


def fingerprint_key(fp: dict[str, Any] | None) -> tuple | None:
    """What of a fingerprint must agree, hashable."""
    if fp is None:
        return None
    return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in fp.items() if k not in FINGERPRINT_IGNORED))


class State:
    """One program's ``STEM.collect.jsonl``: its header and records, the
    configurations they hold."""

    def __init__(self, path: Path, planned: Planned):
        self.path, self.planned = path, planned
        self.header: dict[str, Any] | None = None
        self.lines: list[str] = []
        self.done: set[int] = set()
        if path.exists():
            self._read()

    def _read(self) -> None:
        text = self.path.read_text()
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        elif lines:
            lines.pop()  # torn by an interrupted append (hlo-cost collect): measured again
        if not lines:
            return
        try:
            self.header = json.loads(lines[0])
        except json.JSONDecodeError:
            raise ValueError(f"{self.path}: not a collect state file (remove it, or choose another output)")
        if self.header.get("format") != "hlo-cost-collect-state":
            raise ValueError(f"{self.path}: not a collect state file (remove it, or choose another output)")
        mine = self.planned.header(self.header.get("device", ""))
        for key in sorted(set(mine) | set(self.header)):
            if key != "module" and mine.get(key) != self.header.get(key):
                what = {"module_fnv64": "another module (its text changed)", "plan": "another plan"}.get(
                    key, f"--{key.replace('_', '-')} {self.header.get(key)} (this run: {mine.get(key)})")
                raise ValueError(f"{self.path}: this folder holds a collection made with {what}; "
                                 "run with the same settings to continue it, or choose another output")
        for n, line in enumerate(lines[1:], start=2):
            try:
                record = json.loads(line)
                configs = [int(c) for c in record["configs"]]
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                raise ValueError(f"{self.path}: line {n} is not a measured chunk (the file was edited?)")
            self.lines.append(line)
            self.done.update(configs)

    @property
    def measured_any(self) -> bool:
        return bool(self.lines)

    def records(self) -> Iterable[dict[str, Any]]:
        return (json.loads(line) for line in self.lines)

    def todo(self) -> list[int]:
        return [c for c in self.planned.configs if c not in self.done]

    def add(self, record: dict[str, Any], device: str) -> bool:
        """Appends ``record`` minus what the state holds already; rewrites
        the file atomically. False when nothing was new."""
        fresh = [k for k, c in enumerate(record["configs"]) if c not in self.done]
        if self.measured_any and not fresh:
            return False
        if len(fresh) < len(record["configs"]):
            n = len(record["configs"])
            record = {k: ([v[i] for i in fresh] if isinstance(v, list) and len(v) == n else v)
                      for k, v in record.items()}
        if self.header is None:
            self.header = self.planned.header(device)
        self.lines.append(json.dumps(record, separators=(",", ":")))
        self.done.update(record["configs"])
        body = "\n".join([json.dumps(self.header, separators=(",", ":")), *self.lines]) + "\n"
        write_atomic(self.path, body.encode())
        return True


# --- Where tasks run ---------------------------------------------------------


def _task(measure: Measure, payload: Any, batch: list[int]) -> dict[str, Any]:
    """One (program, batch) task, on the machine that measures."""
    start = time.time()
    fp = measure.fingerprint()
    t0 = time.perf_counter()
    record = measure.measure(payload, batch)
    seconds = time.perf_counter() - t0
    node = socket.gethostname()
    if "ray" in sys.modules:  # a Ray worker: the node's id (two nodes may share a host)
        import ray

        if ray.is_initialized():
            node = f"{node}/{ray.get_runtime_context().get_node_id()[:12]}"
    return {"record": record, "fingerprint": fp, "node": node, "pid": os.getpid(),
            "start": start, "end": time.time(), "measure_seconds": seconds}


class LocalExecutor:
    """Tasks in ``workers`` local processes (one device: one worker)."""

    def __init__(self, workers: int = 1):
        self.workers = workers
        self.pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))

    def devices(self) -> int:
        return self.workers

    def put(self, payload: Any) -> Any:
        return payload

    def submit(self, measure: Measure, payload: Any, batch: list[int]):
        return self.pool.submit(_task, measure, payload, batch)

    def wait(self, handles: list) -> list[tuple[Any, Any, BaseException | None]]:
        done, _ = _wait_futures(handles, return_when=FIRST_COMPLETED)
        out = []
        for h in done:
            try:
                out.append((h, h.result(), None))
            except Exception as e:  # noqa: BLE001 - reported per task
                out.append((h, None, e))
        return out

    def lost(self, e: BaseException) -> bool:
        """Whether ``e`` is the machine's failure rather than the program's."""
        from concurrent.futures.process import BrokenProcessPool

        return isinstance(e, BrokenProcessPool)

    def cancel(self, handles: list) -> None:
        for h in handles:
            h.cancel()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


class RayExecutor:
    """Tasks on a Ray cluster: one ``hlo_opt_device`` each, retried on
    another node when theirs dies."""

    def __init__(self, address: str, max_retries: int = 3):
        try:
            import ray
        except ImportError:
            raise ImportError(RAY_MISSING) from None
        self.ray = ray
        kwargs: dict[str, Any] = {"address": address, "log_to_driver": False}
        host = address.split("://")[-1].rsplit(":", 1)[0]
        if host in ("127.0.0.1", "localhost"):
            kwargs["_node_ip_address"] = "127.0.0.1"
        self.owned = not ray.is_initialized()
        if self.owned:
            ray.init(**kwargs)
        n = int(ray.cluster_resources().get(RESOURCE, 0))
        if n < 1:
            raise RuntimeError(
                f"the Ray cluster at {address} offers no {RESOURCE!r} resource: start each measuring node with "
                f"`ray start ... --resources '{{\"{RESOURCE}\": 1}}'` (docs/fleet.md)")
        self.n = n
        self.remote = ray.remote(_task).options(
            resources={RESOURCE: 1}, num_cpus=0, max_retries=max_retries, retry_exceptions=False)

    def devices(self) -> int:
        return self.n

    def put(self, payload: Any) -> Any:
        return self.ray.put(payload)

    def submit(self, measure: Measure, payload: Any, batch: list[int]):
        return self.remote.remote(measure, payload, batch)

    def wait(self, handles: list, patience: float = 120) -> list[tuple[Any, Any, BaseException | None]]:
        """The next results; raises when no node has offered a device for
        ``patience`` seconds (the tasks would wait for ever)."""
        deviceless_since = None
        while True:
            done, _ = self.ray.wait(handles, num_returns=1, timeout=10)
            if done:
                break
            if self.ray.cluster_resources().get(RESOURCE, 0) >= 1:
                deviceless_since = None
            elif deviceless_since is None:
                deviceless_since = time.time()
            elif time.time() - deviceless_since > patience:
                raise RuntimeError(f"no node of the cluster has offered {RESOURCE!r} for {patience:.0f} s; "
                                   "the folder keeps what was measured: run the same command when nodes are back")
        out = []
        for h in done:
            try:
                out.append((h, self.ray.get(h), None))
            except Exception as e:  # noqa: BLE001 - reported per task
                out.append((h, None, e))
        return out

    def lost(self, e: BaseException) -> bool:
        return not isinstance(e, self.ray.exceptions.RayTaskError)

    def cancel(self, handles: list) -> None:
        for h in handles:
            try:
                self.ray.cancel(h, force=True)
            except Exception:  # noqa: BLE001 - already finished
                pass

    def close(self) -> None:
        if self.owned:
            self.ray.shutdown()


def executor_for(ray_address: str | None, *, max_retries: int = 3, workers: int = 1):
    if ray_address in (None, "", "local"):
        return LocalExecutor(workers)
    return RayExecutor(ray_address, max_retries=max_retries)


# --- The driver --------------------------------------------------------------


@dataclass
class Task:
    stem: str
    batch: list[int]
    submitted: float = 0.0


def run(collector: Collector, modules: Sequence[str | os.PathLike], output: str | os.PathLike, executor, *,
        allow_mixed_devices: bool = False, budget: float | None = None, window: int | None = None,
        say: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Collects ``modules`` into ``output`` with ``executor``'s machines:
    plan every program, read what the folder holds, cut the rest into
    tasks, run them (at most ``window`` at a time, none started after
    ``budget`` seconds) taking each result in as it arrives, publish.
    Returns each program's manifest entry, the failures, the tasks lost,
    the configurations not measured, the devices and the run's timing."""
    d = _Driver(collector, Path(output), executor, allow_mixed_devices, say)
    d.plan(modules)
    d.read_states()
    queue = d.tasks()
    try:
        d.schedule(queue, window or 2 * executor.devices(), budget)
    finally:
        d.finish()
    return d.outcome()


class _Driver:
    """The stages of :func:`run` and the run's state between them."""

    def __init__(self, collector: Collector, output: Path, executor, allow_mixed: bool, say):
        self.collector, self.output, self.executor = collector, output, executor
        self.allow_mixed, self.say = allow_mixed, say
        self.in_flight: dict[Any, Task] = {}
        self.failures: dict[str, str] = {}
        self.lost: list[str] = []
        self.timings: list[dict[str, Any]] = []
        self.dirty: set[str] = set()
        self.summaries: dict[str, dict[str, Any]] = {}
        self.devices: dict[tuple, dict[str, Any]] = {}
        self.dataset_fp: dict[str, Any] | None = None
        self.start = time.time()
        self.next_publish = 0.0

    def plan(self, modules) -> None:
        """Every program planned before anything is measured; stems unique."""
        if self.output.exists() and not self.output.is_dir():
            raise ValueError(f"-o {self.output}: exists and is not a folder")
        self.plans = [self.collector.plan(m) for m in modules]
        stems = [p.stem for p in self.plans]
        dup = sorted({s for s in stems if stems.count(s) > 1})
        if dup:
            raise ValueError(f"two inputs are named {dup[0]}: their files in {self.output} would collide; "
                             "collect them into separate folders")

    def read_states(self) -> None:
        """What the folder holds: each program's state, the dataset's device
        (the first fingerprint found)."""
        self.output.mkdir(parents=True, exist_ok=True)
        self.states = {p.stem: State(self.output / f"{p.stem}.collect.jsonl", p) for p in self.plans}
        for st in self.states.values():
            for r in st.records():
                if r.get("device"):
                    self.devices.setdefault(fingerprint_key(r["device"]), r["device"])
                    self.dataset_fp = self.dataset_fp or r["device"]
        if len(self.devices) > 1 and not self.allow_mixed:
            raise MixedDevicesError(f"{self.output} already holds measurements of {len(self.devices)} devices; "
                                    "pass allow_mixed_devices / --allow-mixed-devices to continue it")
        self.device_name = {stem: st.header.get("device") for stem, st in self.states.items() if st.header}

    def tasks(self) -> list[Task]:
        """The configurations the states lack, in batches of the plan's size."""
        queue = []
        for p in self.plans:
            st = self.states[p.stem]
            todo = st.todo()
            batches = [todo[i:i + p.batch] for i in range(0, len(todo), p.batch)]
            if not st.measured_any and not batches and p.reference_alone:
                batches = [[]]
            queue.extend(Task(p.stem, b) for b in batches)
        self.payloads = {p.stem: self.executor.put(p.payload) for p in self.plans if p.stem in {t.stem for t in queue}}
        return queue

    def schedule(self, queue: list[Task], window: int, budget: float | None) -> None:
        """Keeps ``window`` tasks in flight; takes each result in as it arrives."""
        queue = list(queue)
        while queue or self.in_flight:
            while queue and len(self.in_flight) < window and (budget is None or time.time() - self.start < budget):
                t = queue.pop(0)
                if t.stem in self.failures:
                    continue
                t.submitted = time.time()
                self.in_flight[self.executor.submit(self.collector.measure, self.payloads[t.stem], t.batch)] = t
            if not self.in_flight:
                break
            for handle, result, error in self.executor.wait(list(self.in_flight)):
                arrived = time.time()
                t = self.in_flight.pop(handle)
                if error is not None:
                    self.failed(t, error)
                    continue
                self.accept(t, result)
                self.publish(force=False)
                self.timings.append({"stem": t.stem, "configs": len(t.batch), "submitted": t.submitted,
                                     "arrived": arrived, "start": result["start"], "end": result["end"],
                                     "measure_seconds": result["measure_seconds"], "node": result["node"],
                                     "driver_seconds": time.time() - arrived})

    def failed(self, t: Task, error: BaseException) -> None:
        if self.executor.lost(error):
            self.lost.append(f"{t.stem}: configurations {t.batch}: {type(error).__name__}: {error}")
        else:
            cause = getattr(error, "cause", None) or error  # a Ray task's own exception
            self.failures.setdefault(t.stem, f"{t.stem}: {cause}")
            self.say(f"error: {self.failures[t.stem]}")

    def accept(self, t: Task, result: dict[str, Any]) -> None:
        """One result into its program's state, unless its device is not the dataset's."""
        fp = result["fingerprint"]
        key = fingerprint_key(fp)
        if self.dataset_fp is None:
            self.dataset_fp = fp
        if key != fingerprint_key(self.dataset_fp) and not self.allow_mixed:
            raise MixedDevicesError(
                f"node {result['node']} measures on {_shown(fp)}, but {self.output} holds measurements of "
                f"{_shown(self.dataset_fp)}; pass allow_mixed_devices / --allow-mixed-devices "
                "to mix them, or collect into another folder")
        self.devices.setdefault(key, fp)
        record = dict(result["record"], device=fp, node=result["node"])
        self.device_name.setdefault(t.stem, fp.get("device"))
        if self.states[t.stem].add(record, self.device_name[t.stem]):
            self.dirty.add(t.stem)

    def publish(self, force: bool) -> None:
        """The npz files and the manifest, derived from the states: refreshed
        at most once a second, and never taking more than a third of the
        driver's time (a wait twice as long as the last)."""
        if not force and time.time() < self.next_publish:
            return
        t0 = time.time()
        for stem in sorted(self.dirty):
            self.summaries[stem] = self.collector.publish(stem, self.device_name[stem])
        self.dirty.clear()
        write_manifest(self.output, self.collector, self.plans, self.states, self.summaries, self.devices,
                       self.timings, self.start)
        self.next_publish = time.time() + max(1.0, 2 * (time.time() - t0))

    def finish(self) -> None:
        """Tasks still in flight cancelled (their results are not written);
        every program's files as its state says."""
        self.executor.cancel(list(self.in_flight))
        for stem in sorted(self.states):
            if stem in self.device_name and stem not in self.summaries:
                self.dirty.add(stem)
        if self.dirty or not (self.output / "manifest.json").exists():
            self.publish(force=True)

    def outcome(self) -> dict[str, Any]:
        for stem, s in sorted(self.summaries.items()):
            self.say(f"{self.output / (stem + '.npz')}: {s.get('in_npz')} of {s.get('planned', {}).get('total')} "
                     f"configurations in the npz ({s.get('failed')} failed)")
        return {
            "manifest": str(self.output / "manifest.json"),
            "modules": [self.summaries[p.stem] for p in self.plans if p.stem in self.summaries],
            "not_measured": sum(len(st.todo()) for st in self.states.values()),
            "failures": [self.failures[s] for s in sorted(self.failures)],
            "lost": self.lost,
            "devices": list(self.devices.values()),
            "timing": summarize_timing(self.timings, time.time() - self.start, self.executor.devices()),
        }


def summarize_timing(timings: list[dict[str, Any]], wall: float, devices: int) -> dict[str, Any]:
    """Orchestration against measurement. Per task, its overhead is the
    time its device was held outside the measurement call (the task's own
    start-up: fingerprint, unpickling, planning the program on first use)
    plus the gap since the previous task on that node ended (scheduling,
    the result's way back, the driver's turn). ``overhead`` is their sum
    over the time spent measuring; ``overhead_wall`` charges everything
    (the driver's start, the last tasks' uneven end) as
    ``devices * wall / measured - 1``."""
    measured = sum(t["measure_seconds"] for t in timings)
    in_task = [t["end"] - t["start"] - t["measure_seconds"] for t in timings]
    gaps = []
    by_node: dict[str, list[dict[str, Any]]] = {}
    for t in timings:
        by_node.setdefault(t["node"], []).append(t)
    for ts in by_node.values():
        ts.sort(key=lambda t: t["start"])
        gaps.extend(max(0.0, b["start"] - a["end"]) for a, b in zip(ts, ts[1:]))

    def median(v: list[float]) -> float | None:
        return sorted(v)[len(v) // 2] if v else None

    return {
        "tasks": len(timings),
        "devices": devices,
        "nodes": len(by_node),
        "wall_seconds": wall,
        "measure_seconds": measured,
        "measure_seconds_per_task": measured / len(timings) if timings else None,
        "in_task_overhead_seconds_median": median(in_task),
        "gap_seconds_median": median(gaps),
        "overhead": (sum(in_task) + sum(gaps)) / measured if measured else None,
        # The driver's time per result (its state rewritten, the npz and
        # manifest when due): one driver keeps up with nodes / task seconds
        # results a second while that is below 1 / this.
        "driver_seconds_per_result_mean": sum(t["driver_seconds"] for t in timings) / len(timings) if timings else None,
        "driver_seconds_per_result_max": max((t["driver_seconds"] for t in timings), default=None),
        "overhead_wall": devices * wall / measured - 1 if measured else None,
    }


def write_manifest(output: Path, collector: Collector, plans, states, summaries, devices, timings, start) -> None:
    doc = {
        "format": "hlo-cost-collect-manifest",
        "version": 1,
        "tool": "hlo_opt.fleet",
        "task": collector.task,
        "device": next((st.header.get("device") for st in states.values() if st.header), None),
        "devices": list(devices.values()),
        "settings": collector.settings(),
        "run": {"unix_time": int(start), "tasks_done": len(timings)},
        "modules": [summaries[p.stem] for p in plans if p.stem in summaries],
    }
    write_atomic(output / "manifest.json", (json.dumps(doc, indent=2) + "\n").encode())


def parse_budget(text: str) -> float:
    """Seconds of a duration as ``--budget`` takes it: 90, 90s, 10m, 1.5h, 1h30m."""
    import re

    parts = re.fullmatch(r"\s*((?:\d+(?:\.\d*)?[smh])*)(\d+(?:\.\d*)?)?\s*", text)
    if not text.strip() or parts is None:
        raise ValueError(f"budget {text!r}: expected a duration such as 90s, 10m, 1.5h or 1h30m")
    units = {"s": 1, "m": 60, "h": 3600}
    total = sum(float(v) * units[u] for v, u in re.findall(r"(\d+(?:\.\d*)?)([smh])", parts.group(1)))
    return total + float(parts.group(2) or 0)


def collect(modules, output, *, ray_address: str | None = None, device: str = "xla-cpu", configs: int = 32,
            random_fraction: float = 0.5, seed: int = 0, budget: float | None = None, chunk: int = 8,
            measure_budget: float = 2.0, estimator: str = "median", allow_mixed_devices: bool = False,
            max_retries: int = 3, workers: int = 1, say: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """``hlo_opt.collect`` over Ray (``ray_address``) or local processes
    (``ray_address="local"``); see :func:`run`."""
    collector = LayoutCollector(Path(output), device=device, configs=configs, random_fraction=random_fraction,
                                seed=seed, chunk=chunk, measure_budget=measure_budget, estimator=estimator)
    executor = executor_for(ray_address, max_retries=max_retries, workers=workers)
    try:
        return run(collector, modules, output, executor, allow_mixed_devices=allow_mixed_devices, budget=budget,
                   say=say)
    finally:
        executor.close()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hlo_opt.fleet",
                                 description="hlo-cost collect over a Ray cluster or local processes (docs/fleet.md)")
    ap.add_argument("modules", nargs="+")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--ray", default="local", help="Ray address (auto, HOST:PORT) or `local`")
    ap.add_argument("--device", default="xla-cpu")
    ap.add_argument("--configs", type=int, default=32)
    ap.add_argument("--random-fraction", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunk", type=int, default=8, help="configurations per task (one chunk)")
    ap.add_argument("--measure-budget", type=float, default=2.0)
    ap.add_argument("--estimator", default="median", choices=["median", "min"])
    ap.add_argument("--budget", type=float, default=None, help="seconds; no task starts after it")
    ap.add_argument("--allow-mixed-devices", action="store_true")
    ap.add_argument("--max-retries", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1, help="local processes (without --ray)")
    ap.add_argument("--timing", help="write the run's timing (JSON) here")
    a = ap.parse_args(argv)
    try:
        out = collect(a.modules, a.output, ray_address=a.ray, device=a.device, configs=a.configs,
                      random_fraction=a.random_fraction, seed=a.seed, budget=a.budget, chunk=a.chunk,
                      measure_budget=a.measure_budget, estimator=a.estimator,
                      allow_mixed_devices=a.allow_mixed_devices, max_retries=a.max_retries, workers=a.workers,
                      say=print)
    except ImportError as e:
        print(f"hlo-cost: error: {e}", file=sys.stderr)
        return 1
    except (ValueError, RuntimeError, OSError) as e:
        print(f"hlo-cost: error: {e}", file=sys.stderr)
        return 1
    if a.timing:
        Path(a.timing).write_text(json.dumps(out["timing"], indent=2) + "\n")
    for line in out["failures"]:
        print(f"hlo-cost: error: {line}", file=sys.stderr)
    for line in out["lost"]:
        print(f"hlo-cost: lost (run the same command again to measure it): {line}", file=sys.stderr)
    if out["not_measured"]:
        print(f"hlo-cost: {out['not_measured']} configurations not measured yet; run the same command again "
              "to continue", file=sys.stderr)
    # As hlo-cost collect: a spent budget is not a failure (the state is kept).
    return 0 if not out["failures"] and not out["lost"] else 1


if __name__ == "__main__":
    # Run as hlo_opt.fleet, not __main__: tasks then refer to this module's
    # functions and per-process caches by name instead of carrying copies.
    from hlo_opt import fleet as _fleet

    sys.exit(_fleet.main())
