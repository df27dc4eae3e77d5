#!/usr/bin/env python3
"""What the workers' control plane costs on the plain inference path: requests/s of
`Server.infer` (one process, `--workers 1`) next to `WorkerServer.infer` (a worker of
`--workers N`, here with no peer) on the same small ONNX model, in one process, alternating.

    .venv/bin/python bench/workers_bench.py [--duration 3] [--rounds 3] [--concurrency 1 64]

Both run the same scheduler and model; the only difference is the worker's check for a
`sequence_id` parameter before it calls `Server.infer`. Figures on a shared machine are noisy:
compare the rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import tempfile
import time
from pathlib import Path

import numpy as np

from naiad import InferenceRequest, Server, ServerOptions, Tensor
from naiad.workers import Topology, WorkerServer

ROOT = Path(__file__).resolve().parents[1]


def write_repository(root: Path) -> None:
    spec = importlib.util.spec_from_file_location("build_models", ROOT / "examples" / "build_models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (root / "mlp" / "1").mkdir(parents=True)
    (root / "mlp" / "1" / "model.onnx").write_bytes(module.mlp_classifier_model(features=16, hidden=64))
    (root / "mlp" / "config.pbtxt").write_text("""platform: "onnxruntime_onnx"
max_batch_size: 64
input [ { name: "input" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 8 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
""")


async def requests_per_second(server: Server, concurrency: int, duration: float) -> float:
    features = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    done = 0
    deadline = time.perf_counter() + duration

    async def client() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await server.infer(InferenceRequest("mlp", [Tensor.from_numpy("input", features)]))
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return done / (time.perf_counter() - started)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 64])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        write_repository(Path(tmp))
        options = ServerOptions(model_repositories=[tmp])
        topology = Topology.create(1)
        servers = {"Server (--workers 1)": Server(options), "WorkerServer": WorkerServer(options, topology)}
        try:
            for server in servers.values():
                await server.start()
            for concurrency in args.concurrency:
                rates: dict[str, list[float]] = {name: [] for name in servers}
                for _ in range(args.rounds):
                    for name, server in servers.items():
                        rates[name].append(await requests_per_second(server, concurrency, args.duration))
                for name, values in rates.items():
                    print(
                        f"c={concurrency:<3} {name:<22} best {max(values):9,.0f} req/s  "
                        f"median {sorted(values)[len(values) // 2]:9,.0f} req/s  ({args.rounds} rounds)"
                    )
        finally:
            for server in servers.values():
                await server.stop()
            topology.remove()


if __name__ == "__main__":
    asyncio.run(main())
