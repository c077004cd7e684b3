"""A Ray cluster of two nodes on this machine, on loopback only, for the
fleet tests (test_fleet.py) and the benchmark (scripts/bench_fleet.py).

Every node is started by `ray start` with `--node-ip-address 127.0.0.1`,
one CPU and one `hlo_opt_device`, usage statistics off
(`RAY_USAGE_STATS_ENABLED=0`, `--disable-usage-stats`), no dashboard, no
metrics export (`RAY_enable_metrics_collection=0`). On Linux `ray start`
swaps a loopback `--node-ip-address` for the machine's outward address
(`ray._private.services.resolve_ip_for_localhost`); the nodes are started
through a shim that keeps it, and drivers run with
`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`, under which Ray's own address
lookup answers 127.0.0.1. `stop()` kills, by process id, every process of
the cluster: the process groups `ray start` ran in (its daemons stay in
them) and any process carrying the cluster's mark in its environment;
then removes the temporary folder.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

RESOURCE = "hlo_opt_device"

# `ray start`, keeping a loopback node address (see the module doc).
SHIM = (
    "import sys\n"
    "import ray._private.services as services\n"
    "services.resolve_ip_for_localhost = lambda host: host\n"
    "from ray.scripts.scripts import main\n"
    "sys.argv[0] = 'ray'\n"
    "sys.exit(main())\n"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cmdline(pid: str) -> list[str]:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").split("\0")
    except OSError:
        return []


def raylet_pids() -> set[int]:
    return {int(p) for p in os.listdir("/proc") if p.isdigit() and _cmdline(p)[:1] and _cmdline(p)[0].endswith("/raylet")}


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _ip(hex_addr: str) -> str:
    """An address of /proc/net/tcp{,6} (little-endian 32-bit words) as text."""
    import ipaddress

    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(words)
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return str(ip)


def _children(pid: int) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(p))
            except (OSError, IndexError, ValueError):
                pass
    return out


class LoopbackCluster:
    def __init__(self, extra_env: dict[str, str] | None = None):
        # Short: Ray's socket paths live under it (107 characters at most).
        self.temp = Path(tempfile.mkdtemp(prefix="hf", dir="/tmp"))
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.mark = uuid.uuid4().hex
        self.groups: list[int] = []
        self.raylets: list[int] = []
        self.env = {
            **os.environ,
            **(extra_env or {}),
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_enable_metrics_collection": "0",
            "HLO_OPT_FLEET_MARK": self.mark,
        }

    def start_node(self, head: bool = False, timeout: float = 180) -> int:
        """Starts a node; returns its raylet's pid."""
        args = ["start", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
                "--resources", json.dumps({RESOURCE: 1}), "--disable-usage-stats"]
        if head:
            args += ["--head", "--port", str(self.port), "--include-dashboard=false", "--temp-dir", str(self.temp)]
        else:
            args += ["--address", self.address]
        before = raylet_pids()
        p = subprocess.Popen([sys.executable, "-c", SHIM, *args], env=self.env, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.groups.append(p.pid)
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        if p.returncode != 0:
            self.stop()
            raise RuntimeError(f"ray start failed:\n{out.decode(errors='replace')[-3000:]}")
        new = [r for r in raylet_pids() - before if _pgid(r) == p.pid]
        if len(new) != 1:
            self.stop()
            raise RuntimeError(f"expected one new raylet in process group {p.pid}, found {new}")
        self.raylets.append(new[0])
        return new[0]

    def running_task(self, raylet: int, name: str = "_task") -> bool:
        """Whether a worker of the node of `raylet` is running a task
        `name` (Ray titles such a worker `ray::NAME`)."""
        return any(_cmdline(str(w))[0].startswith(f"ray::{name}") for w in _children(raylet) if _cmdline(str(w)))

    def kill_node(self, raylet: int) -> None:
        """Kills a node as a machine dies: its raylet, the daemons started
        with it, its workers and what they started, all at once."""
        groups = {_pgid(raylet)} | {_pgid(w) for w in _children(raylet)}
        for g in groups - {None, os.getpgid(0)}:
            try:
                os.killpg(g, signal.SIGKILL)
            except OSError:
                pass
        self.raylets.remove(raylet)

    def driver_env(self) -> dict[str, str]:
        """The environment of a driver on this cluster."""
        return {**self.env, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}

    def wait_for_devices(self, n: int, timeout: float = 60) -> None:
        """Waits until the cluster offers `n` devices (asked by a short driver)."""
        code = ("import ray, time, sys\n"
                f"ray.init(address={self.address!r}, _node_ip_address='127.0.0.1', log_to_driver=False)\n"
                f"t = time.time() + {timeout}\n"
                f"while ray.cluster_resources().get({RESOURCE!r}, 0) != {n} and time.time() < t:\n"
                "    time.sleep(0.5)\n"
                f"sys.exit(0 if ray.cluster_resources().get({RESOURCE!r}, 0) == {n} else 1)\n")
        r = subprocess.run([sys.executable, "-c", code], env=self.driver_env(), capture_output=True,
                           timeout=timeout + 60)
        if r.returncode != 0:
            raise RuntimeError(f"the cluster did not reach {n} devices: {r.stderr.decode(errors='replace')[-2000:]}")

    def pids(self) -> set[int]:
        """Every live process of this cluster."""
        out = set()
        me = os.getpid()
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) == me:
                continue
            pid = int(p)
            if _pgid(pid) in self.groups:
                out.add(pid)
                continue
            try:
                env = open(f"/proc/{p}/environ", "rb").read()
            except OSError:
                continue
            if f"HLO_OPT_FLEET_MARK={self.mark}".encode() in env:
                out.add(pid)
        return out

    def addresses(self) -> set[str]:
        """The IP addresses of every TCP socket of the cluster's processes,
        both ends (from /proc/net/tcp and tcp6)."""
        inodes = set()
        for pid in self.pids():
            try:
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if link.startswith("socket:["):
                        inodes.add(link[8:-1])
            except OSError:
                continue
        out = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                lines = open(table).read().splitlines()[1:]
            except OSError:
                continue
            for line in lines:
                f = line.split()
                if f[9] in inodes:
                    out.add(_ip(f[1].split(":")[0]))
                    if f[3] != "0A":  # not listening: the peer too
                        out.add(_ip(f[2].split(":")[0]))
        return out

    def stop(self) -> None:
        for _ in range(5):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.5)
        shutil.rmtree(self.temp, ignore_errors=True)
