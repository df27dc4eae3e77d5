"""naiad on Ray Serve beside plain `naiad serve`, on the same repository, in one run.

    .venv/bin/python bench/ray_bench.py [--duration 10] [--clients 64] [--replicas 1 2]
                                        [--modes direct proxy haproxy]

Drives the naiad_ray deployment with 1 and then 2 replicas, each between two runs of its
plain peer: `naiad serve --workers 1` (one process, as one replica) for 1 replica,
`--workers 2` for 2, so that the ratio compares figures taken minutes apart at most on a
machine whose load drifts. Every row gets the same HTTP binary-tensor requests: wrk, one
thread pinned to CPU 1, 64 connections, ../shared/bench's wrk_bin.lua and make_bodies.py on
its add_sub model (Python backend). Prints requests/s, p50, p99 and the CPU time the
serving processes spent per request (less sensitive than requests/s to what else runs on
the machine) per row, and for each Ray row both ratios to the mean of its peer's two rows.

Ray Serve modes, each on a fresh local cluster (2 CPUs, every Ray process on 127.0.0.1):
- direct: naiad_ray's default; each replica serves naiad's own HTTP/1.1 server on the
  node's shared port (SO_REUSEPORT), no Ray component on the request's path (Ray Serve's
  proxy is disabled).
- proxy: Ray Serve's HTTP proxy; requests go through its proxy actor to the replicas.
- haproxy: RAY_SERVE_THROUGHPUT_OPTIMIZED=1 and RAY_SERVE_ENABLE_HA_PROXY=1; HAProxy
  sends requests straight to each replica's own (uvicorn) HTTP server. Ray then binds
  HAProxy and the replicas' ports on all interfaces (for other nodes); the load stays on
  loopback.
Ray workers run at the same priority as `naiad serve` (RAY_worker_niceness=0; Ray's default
of 15 would lose every contest for the CPU on a busy machine).
Needs naiad-ray (integrations/ray) installed and wrk.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from naiad.testing import ServerProcess, free_port

CHECKOUT = Path(__file__).resolve().parent.parent
MODES = {
    "direct": {},
    "proxy": {},
    "haproxy": {"RAY_SERVE_THROUGHPUT_OPTIMIZED": "1", "RAY_SERVE_ENABLE_HA_PROXY": "1"},
}
RAY_ENV = {
    # Read by Ray at import: every Ray process on loopback, no usage report, no niceness.
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_worker_niceness": "0",
}


@dataclass
class Row:
    name: str
    rps: float
    p50: str
    p99: str
    non_2xx: int
    cpu_us: float  # CPU time of the serving processes per request, microseconds
    peer: str = ""  # the plain `naiad serve` this row compares with, measured around it


class Load:
    """wrk replaying the binary-tensor body of ../shared/bench."""

    def __init__(self, bench: Path, model: str, duration: int, clients: int) -> None:
        self.bench, self.duration, self.clients = bench, duration, clients
        self.path = f"/v2/models/{model}/infer"
        self.bodies = tempfile.mkdtemp(prefix="ray-bench-")
        subprocess.run([sys.executable, str(bench / "make_bodies.py"), self.bodies, model], check=True)

    def run(self, name: str, host_port: str, serving: Callable[[], list[psutil.Process]], peer: str = "") -> Row:
        """One row; `serving` finds the processes that serve it (their CPU time is counted)."""
        self._wrk(host_port, 2, 8)  # warm-up: connections, model process, caches
        processes = serving()
        cpu_before = cpu_seconds(processes)
        out = self._wrk(host_port, self.duration, self.clients)
        cpu = cpu_seconds(processes) - cpu_before
        found = {
            key: re.search(pattern, out, re.M)
            for key, pattern in (
                ("rps", r"Requests/sec:\s+([\d.]+)"),
                ("p50", r"^\s+50%\s+(\S+)"),
                ("p99", r"^\s+99%\s+(\S+)"),
                ("requests", r"(\d+) requests in"),
            )
        }
        if not all(found.values()):
            raise RuntimeError(f"unexpected wrk output:\n{out}")
        errors = re.search(r"Socket errors: .*", out)
        if errors:
            print(f"{name}: {errors.group(0)}", file=sys.stderr)
        non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        requests = int(found["requests"].group(1))
        return Row(
            name,
            float(found["rps"].group(1)),
            found["p50"].group(1),
            found["p99"].group(1),
            int(non_2xx.group(1)) if non_2xx else 0,
            1e6 * cpu / max(requests, 1),
            peer,
        )

    def _wrk(self, host_port: str, duration: int, clients: int) -> str:
        command = [
            "wrk",
            "-t1",
            f"-c{clients}",
            f"-d{duration}s",
            "-s",
            str(self.bench / "wrk_bin.lua"),
            "--latency",
            f"http://{host_port}{self.path}",
        ]
        if (os.cpu_count() or 1) > 1:
            command = ["taskset", "-c", "1", *command]
        env = {**os.environ, "BODY_DIR": self.bodies}
        return subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout


def cpu_seconds(processes: list[psutil.Process]) -> float:
    """User and system CPU time the processes have used so far (those gone count zero)."""
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def with_descendants(roots: list[psutil.Process]) -> list[psutil.Process]:
    """The processes and all theirs: a naiad server's Python-backend model processes."""
    return [p for root in roots for p in (root, *root.children(recursive=True))]


def ray_serving(mode: str) -> list[psutil.Process]:
    """The replicas (with their model processes), and Ray Serve's proxy or HAProxy, which
    carry each request on those paths."""
    roots = []
    for process in psutil.process_iter(["cmdline", "name"]):
        command = " ".join(process.info["cmdline"] or ())
        if "ServeReplica:naiad" in command or (
            mode != "direct" and ("ProxyActor" in command or process.info["name"] == "haproxy")
        ):
            roots.append(process)
    return with_descendants(roots)


def ray_rows(load: Load, repository: Path, mode: str, replica_counts: list[int]) -> list[Row]:
    """Rows for one Ray Serve mode; run in a child process whose environment Ray read.
    Each deployment is measured between two runs of its plain peer (`naiad serve --workers
    N`, N the replicas), which run beside the idle Ray cluster."""
    import naiad_ray
    import ray
    from ray import serve

    ray.init(
        address="local", num_cpus=2, include_dashboard=False, object_store_memory=80 * 1024 * 1024, log_to_driver=False
    )
    rows = []
    try:
        port = free_port()
        if mode == "direct":
            serve.start(proxy_location="Disabled")
            ports = {"host": "127.0.0.1", "http_port": port, "grpc_port": free_port()}
            route_prefix = None
        else:
            serve.start(http_options={"host": "127.0.0.1", "port": port})
            ports = {"http_port": None, "grpc_port": None}
            route_prefix = "/"
        for replicas in replica_counts:
            peer = f"naiad --workers {replicas}"
            rows.append(plain_row(load, repository, peer, replicas))
            app = naiad_ray.build_app(
                str(repository), min_replicas=replicas, max_replicas=replicas, num_cpus=2 / max(replica_counts), **ports
            )
            serve.run(app, name="naiad", route_prefix=route_prefix)
            rows.append(load.run(f"ray {mode} x{replicas}", f"127.0.0.1:{port}", lambda: ray_serving(mode), peer))
            serve.delete("naiad")
            rows.append(plain_row(load, repository, peer, replicas))
        serve.shutdown()
    finally:
        ray.shutdown()
    return rows


def plain_row(load: Load, repository: Path, name: str, workers: int) -> Row:
    with ServerProcess(repository, "--workers", str(workers)) as server:
        assert server.process is not None
        return load.run(name, server.http_url, lambda: with_descendants([psutil.Process(server.process.pid)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench-dir", type=Path, default=CHECKOUT.parent / "shared" / "bench")
    parser.add_argument("--duration", type=int, default=10, help="seconds of load per row")
    parser.add_argument("--clients", type=int, default=64, help="wrk connections")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--model", default="add_sub")
    parser.add_argument("--ray-child", choices=list(MODES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    bench: Path = args.bench_dir.resolve()
    repository = bench / "models"
    load = Load(bench, args.model, args.duration, args.clients)

    if args.ray_child:
        rows = ray_rows(load, repository, args.ray_child, args.replicas)
        print("ROWS " + json.dumps([asdict(row) for row in rows]))
        return

    rows = []
    for mode in args.modes:
        child = subprocess.run(
            [
                sys.executable,
                __file__,
                "--ray-child",
                mode,
                "--bench-dir",
                str(bench),
                "--model",
                args.model,
                "--duration",
                str(args.duration),
                "--clients",
                str(args.clients),
                "--replicas",
                *map(str, args.replicas),
            ],
            env={**os.environ, **RAY_ENV, **MODES[mode]},
            capture_output=True,
            text=True,
        )
        found = re.search(r"^ROWS (.*)$", child.stdout, re.M)
        if child.returncode or not found:
            raise RuntimeError(f"Ray Serve mode {mode} failed:\n{child.stdout[-3000:]}\n{child.stderr[-3000:]}")
        rows += [Row(**row) for row in json.loads(found.group(1))]

    print(
        f"HTTP binary tensors, {args.model}, {args.clients} connections, {args.duration} s per row, "
        f"{os.cpu_count()} CPUs. A Ray row's ratio is to the mean of its peer's rows before and after it "
        "(x1: `naiad serve --workers 1`, one process as one replica; x2: `--workers 2`)."
    )
    print(
        "CPU us/req: CPU time of the serving processes (the servers with their model processes; Ray Serve's "
        "proxy or HAProxy on those paths) per request answered."
    )
    print(
        f"{'server':<20}{'req/s':>9}{'p50':>10}{'p99':>10}{'non-2xx':>9}{'CPU us/req':>12}{'vs peer':>9}"
        f"{'CPU vs peer':>13}"
    )
    for i, row in enumerate(rows):
        ratio = cpu_ratio = ""
        if row.peer:
            before, after = rows[i - 1], rows[i + 1]
            ratio = f"{2 * row.rps / (before.rps + after.rps):.2f}"
            cpu_ratio = f"{2 * row.cpu_us / (before.cpu_us + after.cpu_us):.2f}"
        print(
            f"{row.name:<20}{row.rps:>9.0f}{row.p50:>10}{row.p99:>10}{row.non_2xx:>9}{row.cpu_us:>12.0f}"
            f"{ratio:>9}{cpu_ratio:>13}"
        )


if __name__ == "__main__":
    main()
