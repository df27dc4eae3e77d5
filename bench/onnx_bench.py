#!/usr/bin/env python3
"""Requests/s for a small ONNX MLP: onnxruntime in-process (one row per run, and batches of
rows), naiad's in-process Server, and `naiad serve` over HTTP (binary tensors) and gRPC, at 1
and 64 concurrent clients, each with and without dynamic batching.

    .venv/bin/python bench/onnx_bench.py [--duration 5] [--concurrency 1 64]
        [--schedulers direct dynamic] [--hidden 64] [--in-process-only]

Two references, both onnxruntime called in a loop in this process with one intra-op thread:
the batch-1 loop (what one client could get with no server at all) and the batched loop,
which runs batches of 64 rows (the model's max_batch_size) and counts rows/s (what any
batching server could at best get out of the framework). The issue's in-process goals (#17)
are printed at the end: naiad's `Server.infer` at one client (direct scheduling) >= 20,000
req/s, and naiad at 64 clients with dynamic batching >= 0.8 of the batched loop. Each
in-process row also shows the process's CPU time per request, steadier than requests/s on a
busy machine.

The model is served twice from one repository: `mlp` without a scheduler (each request runs
alone on the next free instance) and `mlp_dynamic` with `dynamic_batching { }`. Both are
loaded with auto-complete off, since auto-complete would give `mlp` dynamic batching too, as
Triton's onnxruntime backend does for a batching model that names no scheduler.

`--hidden` sets the MLP's hidden width: at the default 64 a batch-1 run costs ~8 us and the
per-request cost of any server dominates; at 65536 one run reads ~6 MB of weights and
execution dominates, which is where batching pays.

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
FEATURES = 16
# The model's max_batch_size, and the rows per run of onnxruntime's batched loop.
MAX_BATCH = 64
# The model's name for each scheduling choice.
MODELS = {"direct": "mlp", "dynamic": "mlp_dynamic"}
# The goals of issue #17 for the in-process path.
GOAL_ONE_CLIENT = 20_000
GOAL_BATCHED_SHARE = 0.8


def _build_models():
    spec = importlib.util.spec_from_file_location("build_models", ROOT / "examples" / "build_models.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def write_repository(root: Path, hidden: int = 64) -> bytes:
    """`mlp` (direct scheduling) and `mlp_dynamic` (dynamic batching), one model file."""
    model = _build_models().mlp_classifier_model(features=FEATURES, hidden=hidden)
    for scheduling, name in MODELS.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.onnx").write_bytes(model)
        config = f"""name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: {MAX_BATCH}
input [ {{ name: "input" data_type: TYPE_FP32 dims: [ {FEATURES} ] }} ]
output [ {{ name: "probabilities" data_type: TYPE_FP32 dims: [ 8 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
parameters {{ key: "intra_op_thread_count" value {{ string_value: "1" }} }}
"""
        if scheduling == "dynamic":
            config += "dynamic_batching { }\n"
        (root / name / "config.pbtxt").write_text(config)
    return model


def the_input() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1, FEATURES)).astype(np.float32)


# -- in-process ----------------------------------------------------------------------------


def onnxruntime_loop(model: bytes, duration: float, rows: int = 1) -> tuple[float, float]:
    """Rows/s of onnxruntime run in a loop on batches of `rows` rows, and the CPU time per
    row in microseconds."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    feed = {"input": np.repeat(the_input(), rows, axis=0)}
    count, deadline = 0, time.perf_counter() + duration
    start, cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() < deadline:
        session.run(["probabilities"], feed)
        count += rows
    return count / (time.perf_counter() - start), (time.process_time() - cpu) * 1e6 / max(count, 1)


def naiad_in_process(repo: Path, model_name: str, duration: float, concurrency: int) -> tuple[float, float]:
    """Requests/s, and the process's CPU time per request in microseconds (every thread:
    the event loop and onnxruntime's), which a busy shared machine disturbs less."""
    from naiad import InferenceRequest, Server, ServerOptions, Tensor

    x = the_input()

    async def go() -> tuple[float, float]:
        options = ServerOptions(
            [str(repo)], model_control_mode="explicit", load_models=[model_name], auto_complete_config=False
        )
        async with Server(options) as server:
            count = 0
            deadline = time.perf_counter() + duration

            async def client() -> None:
                nonlocal count
                while time.perf_counter() < deadline:
                    await server.infer(InferenceRequest(model_name, [Tensor.from_numpy("input", x)]))
                    count += 1

            start, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(client() for _ in range(concurrency)))
            return count / (time.perf_counter() - start), (time.process_time() - cpu) * 1e6 / max(count, 1)

    return asyncio.run(go())


# -- served --------------------------------------------------------------------------------


def check_answers(server, model: bytes, model_name: str) -> None:
    import onnxruntime as ort
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    x = the_input()
    expected = ort.InferenceSession(model).run(["probabilities"], {"input": x})[0]
    for module, url in ((httpclient, server.http_url), (grpcclient, server.grpc_url)):
        tensor = module.InferInput("input", [1, FEATURES], "FP32")
        tensor.set_data_from_numpy(x)
        got = module.InferenceServerClient(url).infer(model_name, [tensor]).as_numpy("probabilities")
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


def write_bodies(directory: Path, model_name: str) -> None:
    """The binary-tensor HTTP body and a framed gRPC ModelInferRequest for `model_name`,
    replayed by the load generators."""
    directory.mkdir(parents=True)
    raw = the_input().tobytes()
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "input",
                    "shape": [1, FEATURES],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": len(raw)},
                }
            ],
            "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}],
        }
    ).encode()
    (directory / "body.bin").write_bytes(header + raw)
    (directory / "body.bin.hdrlen").write_text(str(len(header)))
    shape = _varint(1) + _varint(FEATURES)
    tensor = _field(1, b"input") + _field(2, b"FP32") + _field(3, shape)
    message = _field(1, model_name.encode()) + _field(5, tensor) + _field(7, raw)
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


def wrk_rate(server, model_name: str, bodies: Path, duration: float, concurrency: int) -> float:
    url = f"http://{server.http_url}/v2/models/{model_name}/infer"
    out = subprocess.run(
        [*_pin(), "wrk", "-t1", f"-c{concurrency}", f"-d{int(duration)}s", "-s", str(bodies / "wrk.lua"), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"wrk saw error responses:\n{out}")
    return float(next(line.split()[1] for line in out.splitlines() if line.startswith("Requests/sec")))


def h2load_rate(server, model_name: str, bodies: Path, duration: float, concurrency: int) -> float:
    out = subprocess.run(
        [
            *_pin(),
            "h2load",
            "-D",
            f"{int(duration)}",
            "-c",
            str(concurrency),
            "-m",
            "1",
            "-H",
            "content-type: application/grpc",
            "-H",
            "te: trailers",
            "-d",
            str(bodies / "grpc_body.bin"),
            f"http://{server.grpc_url}/inference.GRPCInferenceService/ModelInfer",
        ],
        capture_output=True,
        text=True,
    ).stdout
    line = next((line for line in out.splitlines() if "finished in" in line), None)
    if line is None:
        raise RuntimeError(f"h2load gave no result:\n{out}")
    return float(line.split(",")[1].split()[0])


def tritonclient_rate(server, model_name: str, protocol: str, duration: float, concurrency: int) -> float:
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
                await client.infer(model_name, [tensor], outputs=outputs)
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
    parser.add_argument(
        "--schedulers",
        nargs="+",
        choices=tuple(MODELS),
        default=list(MODELS),
        help="direct: no scheduler in the config; dynamic: dynamic_batching { } (default both)",
    )
    parser.add_argument("--hidden", type=int, default=64, help="the MLP's hidden width (default 64)")
    parser.add_argument("--in-process-only", action="store_true", help="skip the HTTP and gRPC rows")
    parser.add_argument(
        "--client",
        choices=("auto", "tritonclient"),
        default="auto",
        help="auto: wrk/h2load when installed, else tritonclient's asyncio clients",
    )
    args = parser.parse_args()
    batch_rows = MAX_BATCH
    rates: dict[tuple[str, int], float] = {}
    cpu_times: dict[tuple[str, int], float] = {}

    def report(name: str, concurrency: int, rate: float, unit: str = "req/s", cpu_us: float | None = None) -> None:
        rates[(name, concurrency)] = rate
        if cpu_us is not None:
            cpu_times[(name, concurrency)] = cpu_us
        cpu = "" if cpu_us is None else f"  {cpu_us:6.1f} us CPU/{'row' if unit == 'rows/s' else 'request'}"
        print(f"{name:<44} c={concurrency:<3} {rate:>10.0f} {unit}{cpu}", flush=True)

    def in_process_row(scheduling: str) -> str:
        return f"naiad in-process Server.infer ({scheduling})"

    with tempfile.TemporaryDirectory(prefix="naiad-onnx-bench-") as tmp:
        repo = Path(tmp) / "models"
        model = write_repository(repo, args.hidden)
        print(f"ONNX MLP {FEATURES}->{args.hidden}->8, one row per request, {args.duration:.0f}s per row", flush=True)
        rate, cpu_us = onnxruntime_loop(model, args.duration)
        report("onnxruntime in-process loop, batch 1", 1, rate, cpu_us=cpu_us)
        batched_row = f"onnxruntime in-process loop, batch {batch_rows}"
        rate, cpu_us = onnxruntime_loop(model, args.duration, batch_rows)
        report(batched_row, 1, rate, "rows/s", cpu_us=cpu_us)
        for scheduling in args.schedulers:
            for concurrency in args.concurrency:
                rate, cpu_us = naiad_in_process(repo, MODELS[scheduling], args.duration, concurrency)
                report(in_process_row(scheduling), concurrency, rate, cpu_us=cpu_us)

        print("in-process goals (issue #17):", flush=True)
        one_client = rates.get((in_process_row("direct"), 1))
        if one_client is not None:
            print(f"  one client, direct: {one_client:,.0f} req/s (goal >= {GOAL_ONE_CLIENT:,})", flush=True)
        batched = rates.get((in_process_row("dynamic"), batch_rows))
        if batched is not None:
            reference = rates[(batched_row, 1)]
            print(
                f"  {batch_rows} clients, dynamic batching: {batched:,.0f} req/s = {batched / reference:.2f} of "
                f"onnxruntime's batch-{batch_rows} loop ({reference:,.0f} rows/s; goal >= {GOAL_BATCHED_SHARE})",
                flush=True,
            )
            # On a busy machine the rates above move with what else runs; CPU time moves less.
            share = cpu_times[(batched_row, 1)] / cpu_times[(in_process_row("dynamic"), batch_rows)]
            print(
                f"  the same in CPU time: onnxruntime's CPU per row is {share:.2f} of naiad's per request", flush=True
            )

        missing = frontends_missing()
        if args.in_process_only or missing:
            if missing:
                print(f"skipping HTTP and gRPC rows: {', '.join(missing)} not installed", flush=True)
            return 0
        from naiad.testing import ServerProcess

        use_tools = args.client == "auto" and shutil.which("wrk") and shutil.which("h2load")
        with ServerProcess(repo, "--allow-metrics", "false", "--disable-auto-complete-config") as server:
            for scheduling in args.schedulers:
                name = MODELS[scheduling]
                check_answers(server, model, name)
                bodies = Path(tmp) / "bodies" / name
                write_bodies(bodies, name)
                for concurrency in args.concurrency:
                    if use_tools:
                        rate = wrk_rate(server, name, bodies, args.duration, concurrency)
                        report(f"naiad HTTP binary (wrk, {scheduling})", concurrency, rate)
                    else:
                        rate = tritonclient_rate(server, name, "http", args.duration, concurrency)
                        report(f"naiad HTTP binary (tritonclient, {scheduling})", concurrency, rate)
                for concurrency in args.concurrency:
                    if use_tools:
                        rate = h2load_rate(server, name, bodies, args.duration, concurrency)
                        report(f"naiad gRPC (h2load, {scheduling})", concurrency, rate)
                    else:
                        rate = tritonclient_rate(server, name, "grpc", args.duration, concurrency)
                        report(f"naiad gRPC (tritonclient, {scheduling})", concurrency, rate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
