"""What the stub process costs a request: the same add_sub model (max_batch_size 64, dynamic
batching with a 100 us queue delay, as in ../shared/bench) in process mode (the default: the
model in its own process) beside inline mode (the model on the server's loop: no IPC at all),
served by the in-process naiad Server on uvloop, one client and 64.

    .venv/bin/python backends/python/bench/ipc_cost.py [--seconds 3]

Prints per mode and concurrency: requests/s, and CPU time per request of the server process
and of the model's process (read from /proc; in inline mode both are the server). CPU per
request moves less than throughput on a shared machine; compare within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from naiad import InferenceRequest, Server, ServerOptions, Tensor

MODEL = Path(__file__).resolve().parent.parent / "tests" / "models" / "add_sub_fp32" / "1" / "model.py"
CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 64
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }}, {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }}, {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
dynamic_batching {{ max_queue_delay_microseconds: 100 }}
parameters {{ key: "execution_mode" value: {{ string_value: "{mode}" }} }}
"""
MODES = ("process", "inline")


def build_repository(root: Path) -> None:
    for mode in MODES:
        (root / mode / "1").mkdir(parents=True)
        shutil.copy(MODEL, root / mode / "1" / "model.py")
        (root / mode / "config.pbtxt").write_text(CONFIG.format(name=mode, mode=mode))


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (every thread)."""
    if pid == os.getpid():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def model_pid(server: Server, model: str) -> int:
    connection = getattr(server.model(model).runners[0].instance, "_connection", None)
    return os.getpid() if connection is None else connection.process.pid


async def measure(server: Server, model: str, clients: int, seconds: float) -> str:
    a = np.ones((1, 16), dtype=np.float32)

    def request() -> InferenceRequest:
        return InferenceRequest(model, [Tensor.from_numpy("INPUT0", a), Tensor.from_numpy("INPUT1", a)])

    for _ in range(200):
        await server.infer(request())
    pid = model_pid(server, model)
    count = 0
    deadline = time.perf_counter() + seconds

    async def client() -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            await server.infer(request())
            count += 1

    server_before, model_before, started = process_cpu_s(os.getpid()), process_cpu_s(pid), time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    server_us = 1e6 * (process_cpu_s(os.getpid()) - server_before) / count
    model_us = 1e6 * (process_cpu_s(pid) - model_before) / count if pid != os.getpid() else 0.0
    return (
        f"{model:8} c={clients:<3} {count / elapsed:8.0f} req/s  server {server_us:6.1f} us/req  "
        f"model process {model_us:6.1f} us/req"
    )


async def main(seconds: float) -> None:
    with tempfile.TemporaryDirectory() as directory:
        build_repository(Path(directory))
        async with Server(ServerOptions(model_repositories=[directory])) as server:
            for clients in (1, 64):
                for mode in MODES:
                    print(await measure(server, mode, clients, seconds), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    import uvloop

    uvloop.run(main(parser.parse_args().seconds))
