#!/usr/bin/env python3
"""Requests/s for a small ONNX MLP: onnxruntime in-process in a loop, naiad's in-process
Server, and `naiad serve` over HTTP (binary tensors) and gRPC at 1 and 64 concurrent clients.

    .venv/bin/python bench/onnx_bench.py [--duration 5] [--concurrency 1 64] [--dynamic-batching] [--hidden 64]

`--hidden` sets the MLP's hidden width: at the default 64 a batch-1 run costs ~8 us and the
per-request cost of any server dominates; at 65536 one run reads ~6 MB of weights, and the
issue's ONNX goal (served throughput at 64 clients with dynamic batching >= the in-process
batch-1 loop) is about what batching buys.

Every request carries one row of 16 FP32 features (the same bytes each time); answers are
checked against onnxruntime before the load starts. The served rows use wrk (HTTP) and
h2load (gRPC) pinned to the last CPU when they are installed, like shared/bench/load.sh,
and tritonclient's asyncio clients otherwise. Without the HTTP/gRPC frontends the served
rows are skipped with a message. Figures on a shared machine are noisy: compare rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODEL = "mlp"
FEATURES = 16


def _build_models():
    spec = importlib.util.spec_from_file_location("build_models", ROOT / "examples" / "build_models.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def write_repository(root: Path, dynamic_batching: bool, hidden: int = 64) -> bytes:
    model = _build_models().mlp_classifier_model(features=FEATURES, hidden=hidden)
    (root / MODEL / "1").mkdir(parents=True)
    (root / MODEL / "1" / "model.onnx").write_bytes(model)
    config = f"""platform: "onnxruntime_onnx"
max_batch_size: 64
input [ {{ name: "input" data_type: TYPE_FP32 dims: [ {FEATURES} ] }} ]
output [ {{ name: "probabilities" data_type: TYPE_FP32 dims: [ 8 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
parameters {{ key: "intra_op_thread_count" value {{ string_value: "1" }} }}
"""
    if dynamic_batching:
        config += "dynamic_batching { }\n"
    (root / MODEL / "config.pbtxt").write_text(config)
    return model


def the_input() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1, FEATURES)).astype(np.float32)


# -- in-process ----------------------------------------------------------------------------


def onnxruntime_loop(model: bytes, duration: float) -> float:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    feed = {"input": the_input()}
    count, deadline = 0, time.perf_counter() + duration
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        session.run(["probabilities"], feed)
        count += 1
    return count / (time.perf_counter() - start)


def naiad_in_process(repo: Path, duration: float, concurrency: int) -> float:
    from naiad import InferenceRequest, Server, ServerOptions, Tensor

    x = the_input()

    async def go() -> float:
        async with Server(ServerOptions([str(repo)])) as server:
            count = 0
            deadline = time.perf_counter() + duration

            async def client() -> None:
                nonlocal count
                while time.perf_counter() < deadline:
                    await server.infer(InferenceRequest(MODEL, [Tensor.from_numpy("input", x)]))
                    count += 1

            start = time.perf_counter()
            await asyncio.gather(*(client() for _ in range(concurrency)))
            return count / (time.perf_counter() - start)

    return asyncio.run(go())


# -- served --------------------------------------------------------------------------------


def check_answers(server, model: bytes) -> None:
    import onnxruntime as ort
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    x = the_input()
    expected = ort.InferenceSession(model).run(["probabilities"], {"input": x})[0]
    for module, url in ((httpclient, server.http_url), (grpcclient, server.grpc_url)):
        tensor = module.InferInput("input", [1, FEATURES], "FP32")
        tensor.set_data_from_numpy(x)
        got = module.InferenceServerClient(url).infer(MODEL, [tensor]).as_numpy("probabilities")
        np.testing.assert_allclose(got, expected, rtol=1e-5)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def write_bodies(directory: Path) -> None:
    """The binary-tensor HTTP body and a framed gRPC ModelInferRequest, replayed by the
    load generators."""
    raw = the_input().tobytes()
    header = json.dumps({
        "inputs": [{"name": "input", "shape": [1, FEATURES], "datatype": "FP32",
                    "parameters": {"binary_data_size": len(raw)}}],
        "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}],
    }).encode()
    (directory / "body.bin").write_bytes(header + raw)
    (directory / "body.bin.hdrlen").write_text(str(len(header)))
    shape = _varint(1) + _varint(FEATURES)
    tensor = _field(1, b"input") + _field(2, b"FP32") + _field(3, shape)
    message = _field(1, MODEL.encode()) + _field(5, tensor) + _field(7, raw)
    (directory / "grpc_body.bin").write_bytes(b"\x00" + struct.pack(">I", len(message)) + message)
    (directory / "wrk.lua").write_text(
        'wrk.method = "POST"\n'
        f'local f = io.open("{directory}/body.bin", "rb"); wrk.body = f:read("*all"); f:close()\n'
        'wrk.headers["Content-Type"] = "application/octet-stream"\n'
        f'wrk.headers["Inference-Header-Content-Length"] = "{len(header)}"\n'
    )


def _pin() -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", str((os.cpu_count() or 1) - 1)]
    return []


def wrk_rate(server, bodies: Path, duration: float, concurrency: int) -> float:
    url = f"http://{server.http_url}/v2/models/{MODEL}/infer"
    out = subprocess.run(
        [*_pin(), "wrk", "-t1", f"-c{concurrency}", f"-d{int(duration)}s", "-s", str(bodies / "wrk.lua"), url],
        capture_output=True, text=True, check=True,
    ).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"wrk saw error responses:\n{out}")
    return float(next(line.split()[1] for line in out.splitlines() if line.startswith("Requests/sec")))


def h2load_rate(server, bodies: Path, duration: float, concurrency: int) -> float:
    out = subprocess.run(
        [*_pin(), "h2load", "-D", f"{int(duration)}", "-c", str(concurrency), "-m", "1",
         "-H", "content-type: application/grpc", "-H", "te: trailers", "-d", str(bodies / "grpc_body.bin"),
         f"http://{server.grpc_url}/inference.GRPCInferenceService/ModelInfer"],
        capture_output=True, text=True,
    ).stdout
    line = next((line for line in out.splitlines() if "finished in" in line), None)
    if line is None:
        raise RuntimeError(f"h2load gave no result:\n{out}")
    return float(line.split(",")[1].split()[0])


def tritonclient_rate(server, protocol: str, duration: float, concurrency: int) -> float:
    if protocol == "http":
        import tritonclient.http.aio as client_module
        url = server.http_url
    else:
        import tritonclient.grpc.aio as client_module
        url = server.grpc_url
    x = the_input()

    async def go() -> float:
        client = client_module.InferenceServerClient(url)
        count = 0
        deadline = time.perf_counter() + duration

        async def one() -> None:
            nonlocal count
            tensor = client_module.InferInput("input", [1, FEATURES], "FP32")
            if protocol == "http":
                tensor.set_data_from_numpy(x, binary_data=True)
                outputs = [client_module.InferRequestedOutput("probabilities", binary_data=True)]
            else:
                tensor.set_data_from_numpy(x)
                outputs = [client_module.InferRequestedOutput("probabilities")]
            while time.perf_counter() < deadline:
                await client.infer(MODEL, [tensor], outputs=outputs)
                count += 1

        start = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(concurrency)))
        rate = count / (time.perf_counter() - start)
        await client.close()
        return rate

    return asyncio.run(go())


def frontends_missing() -> list[str]:
    return [m for m in ("naiad.frontends.http", "naiad.frontends.grpc") if importlib.util.find_spec(m) is None]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per row (default 5)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--dynamic-batching", action="store_true", help="serve the model with dynamic_batching {}")
    parser.add_argument("--hidden", type=int, default=64, help="the MLP's hidden width (default 64)")
    parser.add_argument("--client", choices=("auto", "tritonclient"), default="auto",
                        help="auto: wrk/h2load when installed, else tritonclient's asyncio clients")
    args = parser.parse_args()

    rows: list[tuple[str, int, float]] = []

    def report(name: str, concurrency: int, rate: float) -> None:
        rows.append((name, concurrency, rate))
        print(f"{name:<34} c={concurrency:<3} {rate:>10.0f} req/s", flush=True)

    with tempfile.TemporaryDirectory(prefix="naiad-onnx-bench-") as tmp:
        repo = Path(tmp) / "models"
        model = write_repository(repo, args.dynamic_batching, args.hidden)
        print(f"ONNX MLP {FEATURES}->{args.hidden}->8, one row per request, {args.duration:.0f}s per row", flush=True)
        report("onnxruntime in-process loop", 1, onnxruntime_loop(model, args.duration))
        for concurrency in args.concurrency:
            report("naiad in-process Server.infer", concurrency, naiad_in_process(repo, args.duration, concurrency))

        missing = frontends_missing()
        if missing:
            print(f"skipping HTTP and gRPC rows: {', '.join(missing)} not installed", flush=True)
            return 0
        from naiad.testing import ServerProcess

        use_tools = args.client == "auto" and shutil.which("wrk") and shutil.which("h2load")
        bodies = Path(tmp) / "bodies"
        bodies.mkdir()
        write_bodies(bodies)
        with ServerProcess(repo, "--allow-metrics", "false") as server:
            check_answers(server, model)
            for concurrency in args.concurrency:
                if use_tools:
                    report("naiad HTTP binary (wrk)", concurrency, wrk_rate(server, bodies, args.duration, concurrency))
                else:
                    report("naiad HTTP binary (tritonclient)", concurrency,
                           tritonclient_rate(server, "http", args.duration, concurrency))
            for concurrency in args.concurrency:
                if use_tools:
                    report("naiad gRPC (h2load)", concurrency, h2load_rate(server, bodies, args.duration, concurrency))
                else:
                    report("naiad gRPC (tritonclient)", concurrency,
                           tritonclient_rate(server, "grpc", args.duration, concurrency))
    return 0


if __name__ == "__main__":
    sys.exit(main())
