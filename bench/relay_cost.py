#!/usr/bin/env python3
"""What a front door's hop to the model home costs, beside what the model home's own
handling of a request costs.

    .venv/bin/python bench/relay_cost.py [--requests 20000] [--concurrency 1 8 64]

Serves ../shared/bench/models (add_sub: a Python model with dynamic batching) twice in one
run and prints CPU time per request, read from /proc, for:

- relayed: `naiad serve --workers 2`, with this script in the part of a front door: it
  connects to the model home's socket as a worker does (`HomeLink`, shared-memory rings) and
  sends add_sub requests, with no HTTP on its side. The model home's CPU per request is the
  price of a front door's request to the model home's event loop; this script's own is the
  front door's side of the hop (HTTP parsing and encoding come on top in a real worker).
- direct: `naiad serve --workers 1` loaded over HTTP with binary tensors by wrk (pinned to
  the last CPU, as ../shared/bench/load.sh does): the whole server's CPU per request, the
  price of a request the model home takes from its own connection.

Each also shows the model process's (the Python stub's) CPU per request. A front door pays
off where it takes more off the model home's loop than the hop puts back on, and the CPUs
can hold it. Figures on a shared machine are noisy: compare rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from naiad.inference import InferenceRequest
from naiad.tensor import Tensor
from naiad.testing import free_port
from naiad.workers.home_link import HomeLink
from naiad.workers.linux_process import HOME_NAME, process_name
from naiad.workers.model_mirror import ModelMirror

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadkit import cpu_seconds, descendants  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(os.environ.get("BENCH_DIR", ROOT.parent / "shared" / "bench"))
STUB = "naiad_backend_python.model_side"


def stub_pids(root: int) -> list[int]:
    """The model processes under `root` (forked from a stub template: same command line)."""
    pids = []
    for pid in descendants(root):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if STUB in command:
            pids.append(pid)
    return pids


class Serve:
    """`naiad serve` on loopback with the shared benchmark's models, stopped on exit."""

    def __init__(self, *flags: str) -> None:
        self.http = free_port()
        command = [
            str(ROOT / ".venv" / "bin" / "naiad"),
            "serve",
            "--model-repository",
            str(BENCH / "models"),
            "--http-port",
            str(self.http),
            "--grpc-port",
            str(free_port()),
            "--metrics-port",
            str(free_port()),
            "--http-address",
            "127.0.0.1",
            "--grpc-address",
            "127.0.0.1",
            "--metrics-address",
            "127.0.0.1",
            *flags,
        ]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.http}/v2/health/ready", timeout=1)
                return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("naiad did not become ready")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)

    def __enter__(self) -> Serve:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def home_socket(home: int) -> str:
    """The path of the model home's socket for front doors, from /proc/net/unix."""
    inodes = set()
    for fd in Path(f"/proc/{home}/fd").iterdir():
        target = os.readlink(fd)
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[6] in inodes and fields[7].endswith("home.sock"):
            return fields[7]
    raise RuntimeError("the model home's socket was not found")


async def relay(path: str, concurrency: int, requests: int) -> tuple[float, float]:
    """Requests/s and this process's CPU per request, `requests` sent at `concurrency`."""
    link = await HomeLink.connect(path, 99, 1 << 24, ModelMirror(lambda name, version: True))
    await link.table_arrived
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    sent = 0

    async def client() -> None:
        nonlocal sent
        while sent < requests:
            sent += 1
            request = InferenceRequest("add_sub", [Tensor.from_numpy("INPUT0", a), Tensor.from_numpy("INPUT1", a)])
            _, answer = link.infer(request)
            await answer

    started, own = time.perf_counter(), time.process_time()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    rate = requests / (time.perf_counter() - started)
    cpu = (time.process_time() - own) / requests
    link.close()
    return rate, cpu


def measure_relayed(concurrencies: list[int], requests: int) -> None:
    with Serve("--workers", "2") as server:
        homes = [pid for pid in descendants(server.process.pid) if process_name(pid) == HOME_NAME]
        home = homes[0]
        path = home_socket(home)
        stubs = stub_pids(home)
        asyncio.run(relay(path, 8, 2000))  # warm
        for concurrency in concurrencies:
            before = (cpu_seconds(home), sum(cpu_seconds(p) for p in stubs))
            rate, own = asyncio.run(relay(path, concurrency, requests))
            home_cpu = (cpu_seconds(home) - before[0]) / requests
            stub_cpu = (sum(cpu_seconds(p) for p in stubs) - before[1]) / requests
            print(
                f"relayed  c={concurrency:<3} {rate:8.0f} req/s   model home {home_cpu * 1e6:6.1f} us/req   "
                f"front door side (no HTTP) {own * 1e6:6.1f} us/req   model process {stub_cpu * 1e6:5.1f} us/req"
            )


def measure_direct(concurrencies: list[int], seconds: int) -> None:
    if shutil.which("wrk") is None:
        print("direct: wrk is not installed (../shared/bench/setup_anchors.sh installs it)")
        return
    bodies = Path(tempfile.mkdtemp())
    subprocess.run([sys.executable, str(BENCH / "make_bodies.py"), str(bodies), "add_sub"], check=True)
    env = dict(os.environ, BODY_DIR=str(bodies))
    last = max(os.sched_getaffinity(0))
    with Serve("--workers", "1") as server:
        pid = server.process.pid
        stubs = stub_pids(pid)
        url = f"http://127.0.0.1:{server.http}/v2/models/add_sub/infer"
        for concurrency in concurrencies:
            wrk = ["taskset", "-c", str(last), "wrk", "-t1", f"-c{concurrency}", f"-d{seconds}s"]
            wrk += ["-s", str(BENCH / "wrk_bin.lua"), url]
            before = (cpu_seconds(pid), sum(cpu_seconds(p) for p in stubs))
            out = subprocess.run(wrk, capture_output=True, text=True, env=env, check=True).stdout
            count = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
            rate = float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1))  # type: ignore[union-attr]
            server_cpu = (cpu_seconds(pid) - before[0]) / count
            stub_cpu = (sum(cpu_seconds(p) for p in stubs) - before[1]) / count
            print(
                f"direct   c={concurrency:<3} {rate:8.0f} req/s   one process (HTTP included) {server_cpu * 1e6:6.1f} us/req"
                f"   model process {stub_cpu * 1e6:5.1f} us/req"
            )
    shutil.rmtree(bodies, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20000, help="relayed requests per row")
    parser.add_argument("--seconds", type=int, default=5, help="wrk's duration per direct row")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64])
    args = parser.parse_args()
    print(f"add_sub, {len(os.sched_getaffinity(0))} usable CPUs, load average {os.getloadavg()[0]:.2f}")
    measure_relayed(args.concurrency, args.requests)
    measure_direct(args.concurrency, args.seconds)


if __name__ == "__main__":
    main()
