"""Process mode against in-process mode: the same add_sub model.py, served by the in-process
naiad Server (no sockets, so only the backend's own cost is measured).

    .venv/bin/python backends/python/bench/compare_modes.py [--requests 2000]

Prints, per mode and tensor size, the mean and p50/p99 latency of sequential requests and
the throughput with 8 requests in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from naiad import InferenceRequest, Server, ServerOptions, Tensor

MODEL = Path(__file__).resolve().parent.parent / "tests" / "models" / "add_sub_fp32" / "1" / "model.py"
CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }}, {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }}, {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ -1 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
{extra}
"""


def build_repository(root: Path) -> None:
    for name, extra in (
        ("process", ""),
        ("in_process", 'parameters { key: "execution_mode" value: { string_value: "in_process" } }'),
    ):
        (root / name / "1").mkdir(parents=True)
        shutil.copy(MODEL, root / name / "1" / "model.py")
        (root / name / "config.pbtxt").write_text(CONFIG.format(name=name, extra=extra))


def request(model: str, a: np.ndarray) -> InferenceRequest:
    return InferenceRequest(model, [Tensor.from_numpy("INPUT0", a), Tensor.from_numpy("INPUT1", a)])


async def measure(server: Server, model: str, elements: int, count: int) -> dict[str, float]:
    a = np.random.default_rng(0).standard_normal(elements).astype(np.float32)
    for _ in range(50):
        await server.infer(request(model, a))
    latencies = []
    for _ in range(count):
        start = time.perf_counter()
        await server.infer(request(model, a))
        latencies.append(time.perf_counter() - start)
    latencies.sort()

    async def worker(n: int) -> None:
        for _ in range(n):
            await server.infer(request(model, a))

    start = time.perf_counter()
    await asyncio.gather(*(worker(count // 8) for _ in range(8)))
    throughput = (count // 8 * 8) / (time.perf_counter() - start)
    return {
        "mean_us": statistics.fmean(latencies) * 1e6,
        "p50_us": latencies[len(latencies) // 2] * 1e6,
        "p99_us": latencies[int(len(latencies) * 0.99)] * 1e6,
        "rps_c8": throughput,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        build_repository(Path(directory))
        async with Server(ServerOptions(model_repositories=[directory])) as server:
            print(f"{'mode':<11} {'tensor':>10} {'mean us':>9} {'p50 us':>9} {'p99 us':>9} {'req/s c8':>9}")
            for elements in (16, 262_144):
                for model in ("process", "in_process"):
                    count = args.requests if elements < 10_000 else max(args.requests // 10, 100)
                    row = await measure(server, model, elements, count)
                    size = f"{elements * 4 // 1024} KiB" if elements * 4 >= 1024 else f"{elements * 4} B"
                    print(
                        f"{model:<11} {size:>10} {row['mean_us']:9.0f} {row['p50_us']:9.0f} "
                        f"{row['p99_us']:9.0f} {row['rps_c8']:9.0f}"
                    )


if __name__ == "__main__":
    asyncio.run(main())
