#!/usr/bin/env python3
"""Images/s, p50 and p99 of a ResNet-18-sized CNN served by `naiad serve` on a GPU, over HTTP
(binary tensors), gRPC, and gRPC with CUDA shared memory, beside torch's own in-process ceiling
on the same GPU, in one run.

    python bench/gpu_bench.py [--duration 5] [--concurrency 1 8 64] [--json results.json]
        [--naiad-flags '--workers 4'] [--instances 2] [--client-processes 4] [--no-cuda-graphs]
    python bench/gpu_bench.py --backend python --protocols grpc+cudashm   # the same CNN in a model.py
    python bench/gpu_bench.py --device cpu --quick     # the plumbing, on a machine without a GPU

The network is our own, built here with random weights (nothing is downloaded): ResNet-18's
shape (a 7x7 stem, four stages of two basic blocks with 64, 128, 256 and 512 channels, global
pooling, 1000 classes) on FP32 images of [3, 224, 224]; `--quick` shrinks it (channels / 8,
[3, 32, 32] images) so that a CPU runs it in seconds. It is traced to TorchScript and served
by naiad's PyTorch backend as `cnn` with `instance_group { kind: KIND_GPU count: --instances }`
(KIND_CPU with --device cpu), `max_batch_size: 64`, `dynamic_batching { }` and, on a GPU,
`optimization { cuda { graphs: true } }` (`--no-cuda-graphs` leaves it out). With `--backend
python` the same TorchScript file is served by a Triton `model.py` instead (MODEL_PY below: torch
on the instance's device, FORCE_CPU_ONLY_INPUT_TENSORS "no", so that inputs and outputs in CUDA
shared memory stay on the GPU), with the same batching and no graphs.

The run, in order:
1. the ceiling: the traced module called in a loop in this process on the same device, inputs
   already there, at batch 1, 8, 16, 32 and 64; the best images/s is the ceiling;
2. `naiad serve` with --allow-client-shm=true (and --naiad-flags), its answer checked against
   the module in this process over HTTP and gRPC with tritonclient;
3. the load, each row --duration seconds after a short warm-up: one image per request, every
   connection with one request in flight, the connections split over --client-processes
   processes (spawned, so the client's CPU is not one core's); HTTP requests are the bytes
   tritonclient's binary extension sends, gRPC ones a serialized ModelInferRequest on its own
   HTTP/2 connection; for `grpc+cudashm` each connection has its own input and output CUDA
   regions, made and registered here with tritonclient's cuda_shared_memory (the request names
   them; its body holds no tensor), and the client does not read the outputs back.

It prints each row (images/s, p50, p99 in ms, mean batch size the server formed, errors, share
of the ceiling, the server's mean microseconds per request in Triton's phases from the model's
statistics, and the CPUs used by the model home, the front-door workers, the server's other
processes and the load's clients; with --profile, py-spy's view of the process that runs the
model at each protocol's highest concurrency: the model home, or with --backend python the
model's own process), then the goal: with CUDA shared memory at the highest
concurrency, served images/s >= 0.8 of the ceiling. It exits 0 when every row ran without errors (the goal's
outcome is printed, not the exit status). Ports are free ones on 127.0.0.1; the server is
stopped at the end, on failure too.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import multiprocessing
import os
import shlex
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from naiad.local_ports import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loadkit  # noqa: E402
from py_spy_profile import Recording  # noqa: E402

CLASSES = 1000
MAX_BATCH = 64
MODEL = "cnn"
PROTOCOLS = ["http", "grpc", "grpc+cudashm"]
INPUT, OUTPUT = "INPUT__0", "OUTPUT__0"
CEILING_BATCHES = (1, 8, 16, 32, 64)
GOAL_CEILING_SHARE = 0.8
WARMUP_S = 1.0


@dataclass(frozen=True)
class Shape:
    image: tuple[int, int, int]
    widths: tuple[int, int, int, int]


FULL = Shape((3, 224, 224), (64, 128, 256, 512))
QUICK = Shape((3, 32, 32), (8, 16, 32, 64))


# -- the model ------------------------------------------------------------------------------


def build_network(shape: Shape) -> Any:
    """ResNet-18's layout with random weights."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
                nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
                nn.BatchNorm2d(cout),
            )
            self.skip = (
                nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                if stride != 1 or cin != cout
                else nn.Identity()
            )

        def forward(self, x: Any) -> Any:
            return torch.relu(self.body(x) + self.skip(x))

    torch.manual_seed(0)
    first = shape.widths[0]
    layers: list[Any] = [
        nn.Conv2d(shape.image[0], first, 7, 2, 3, bias=False),
        nn.BatchNorm2d(first),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    ]
    cin = first
    for index, width in enumerate(shape.widths):
        layers += [Block(cin, width, 1 if index == 0 else 2), Block(width, width, 1)]
        cin = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, CLASSES)]
    return nn.Sequential(*layers).eval()


def export_torchscript(network: Any, shape: Shape, path: Path) -> None:
    import torch

    with torch.no_grad():
        torch.jit.trace(network, torch.zeros(1, *shape.image)).save(str(path))  # type: ignore[no-untyped-call]


def images(count: int, shape: Shape, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, *shape.image)).astype(np.float32)


# The network in a Triton model.py: a batch's inputs gathered on the instance's device (read in
# place where a client put them in CUDA shared memory), one forward, and each request's rows
# answered as a tensor on that device (written into the client's region where it placed them).
MODEL_PY = f"""
import os

import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        gpu = args["model_instance_kind"] == "GPU"
        self.device = torch.device(f"cuda:{{args['model_instance_device_id']}}" if gpu else "cpu")
        path = os.path.join(args["model_repository"], args["model_version"], "model.pt")
        self.module = torch.jit.load(path, map_location=self.device).eval()

    def execute(self, requests):
        parts = [
            torch.from_dlpack(pb_utils.get_input_tensor_by_name(request, "{INPUT}").to_dlpack())
            for request in requests
        ]
        with torch.no_grad():
            out = self.module(torch.cat(parts).to(self.device))
        responses, start = [], 0
        for part in parts:
            rows = out[start : start + part.shape[0]]
            start += part.shape[0]
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor.from_dlpack("{OUTPUT}", rows)]))
        return responses
"""


def write_repository(repo: Path, shape: Shape, device: str, instances: int, graphs: bool, backend: str) -> Path:
    version = repo / MODEL / "1"
    version.mkdir(parents=True)
    export_torchscript(build_network(shape), shape, version / "model.pt")
    dims = ", ".join(str(d) for d in shape.image)
    kind = "KIND_GPU" if device == "cuda" else "KIND_CPU"
    if backend == "python":
        (version / "model.py").write_text(MODEL_PY)
    serving = (
        'backend: "python"\nparameters { key: "FORCE_CPU_ONLY_INPUT_TENSORS" value: { string_value: "no" } }'
        if backend == "python"
        else 'platform: "pytorch_libtorch"'
    )
    (repo / MODEL / "config.pbtxt").write_text(
        f"""name: "{MODEL}"
{serving}
max_batch_size: {MAX_BATCH}
input [ {{ name: "{INPUT}" data_type: TYPE_FP32 dims: [ {dims} ] }} ]
output [ {{ name: "{OUTPUT}" data_type: TYPE_FP32 dims: [ {CLASSES} ] }} ]
instance_group [ {{ count: {instances} kind: {kind} }} ]
dynamic_batching {{ }}
"""
        + ("optimization { cuda { graphs: true } }\n" if graphs and backend == "pytorch" else "")
    )
    return version / "model.pt"


# -- the ceiling ----------------------------------------------------------------------------


def ceiling(model_path: Path, shape: Shape, device: str, seconds: float) -> tuple[float, int, dict[int, float]]:
    """(best images/s, its batch, images/s per batch) of the module in a loop on `device`,
    inputs already there."""
    import torch

    module = torch.jit.load(str(model_path), map_location=device).eval()  # type: ignore[no-untyped-call]
    rates: dict[int, float] = {}
    with torch.inference_mode():
        for batch in CEILING_BATCHES:
            x = torch.from_numpy(images(batch, shape)).to(device)
            for _ in range(10):  # TorchScript's profiling executor optimises after a few calls
                module(x)
            sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
            sync()
            count, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                module(x)
                count += batch
            sync()
            rates[batch] = count / (time.perf_counter() - start)
            print(f"  ceiling  batch {batch:>2}: {rates[batch]:>9.0f} images/s", flush=True)
    best = max(rates, key=lambda b: rates[b])
    del module
    if device == "cuda":
        torch.cuda.empty_cache()
    return rates[best], best, rates


# -- requests -------------------------------------------------------------------------------


def http_request(shape: Shape) -> bytes:
    """One image as tritonclient's binary-tensor extension sends it, as whole HTTP/1.1 bytes."""
    raw = images(1, shape).tobytes()
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": INPUT,
                    "shape": [1, *shape.image],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": len(raw)},
                }
            ],
            "outputs": [{"name": OUTPUT, "parameters": {"binary_data": True}}],
        }
    ).encode()
    return loadkit.post(
        f"/v2/models/{MODEL}/infer", header + raw, f"Inference-Header-Content-Length: {len(header)}\r\n"
    )


def grpc_request(shape: Shape, region: int | None = None) -> bytes:
    """A serialized ModelInferRequest: the image in raw_input_contents, or (`region`) the input
    and output in that connection's CUDA regions `in<region>` / `out<region>`."""
    from tritonclient.grpc import service_pb2  # type: ignore[import-untyped]

    request = service_pb2.ModelInferRequest(model_name=MODEL)
    tensor = request.inputs.add(name=INPUT, datatype="FP32", shape=[1, *shape.image])
    output = request.outputs.add(name=OUTPUT)
    if region is None:
        request.raw_input_contents.append(images(1, shape).tobytes())
    else:
        for place, name, size in ((tensor, f"in{region}", input_bytes(shape)), (output, f"out{region}", CLASSES * 4)):
            place.parameters["shared_memory_region"].string_param = name
            place.parameters["shared_memory_byte_size"].int64_param = size
    return bytes(request.SerializeToString())


def input_bytes(shape: Shape) -> int:
    return int(np.prod(shape.image)) * 4


# -- the load (in spawned client processes) -------------------------------------------------


@dataclass
class Part:
    """What one client process measured."""

    images: int = 0
    errors: int = 0
    window_s: float = 0.0
    cpu_s: float = 0.0  # the process's CPU time over the measured window
    latencies_ms: list[float] = field(default_factory=list)
    first_error: str = ""


async def _http_connection(address: tuple[str, int], payload: bytes, part: Part, window: tuple[float, float]) -> None:
    conn = await loadkit.connect(address)
    try:
        while time.monotonic() < window[1]:
            start = time.monotonic()
            try:
                response = await conn.request(payload, 30.0)
            except loadkit.Lost as lost:
                part.errors += 1
                part.first_error = part.first_error or f"lost: {lost.why}"
                conn.abort()
                conn = await loadkit.connect(address)
                continue
            end = time.monotonic()
            if response.status != 200:
                part.errors += 1
                part.first_error = part.first_error or f"HTTP {response.status}"
            elif window[0] <= start and end <= window[1]:
                part.images += 1
                part.latencies_ms.append((end - start) * 1e3)
    finally:
        conn.close()


async def _grpc_connection(address: tuple[str, int], payload: bytes, part: Part, window: tuple[float, float]) -> None:
    import grpc  # type: ignore[import-untyped]

    # A local subchannel pool: each channel its own HTTP/2 connection, as separate clients.
    options = [("grpc.use_local_subchannel_pool", 1), ("grpc.max_receive_message_length", -1)]
    async with grpc.aio.insecure_channel(f"{address[0]}:{address[1]}", options=options) as channel:
        call = channel.unary_unary(loadkit.INFER_METHOD)
        while time.monotonic() < window[1]:
            start = time.monotonic()
            try:
                await call(payload, timeout=30.0)
            except grpc.aio.AioRpcError as error:
                part.errors += 1
                part.first_error = part.first_error or f"{error.code().name}: {error.details()}"
                continue
            end = time.monotonic()
            if window[0] <= start and end <= window[1]:
                part.images += 1
                part.latencies_ms.append((end - start) * 1e3)


async def _cpu_over(window: tuple[float, float], part: Part) -> None:
    """The process's CPU time between the window's ends (every thread: grpc's own too)."""
    await asyncio.sleep(max(0.0, window[0] - time.monotonic()))
    start = time.process_time()
    await asyncio.sleep(max(0.0, window[1] - time.monotonic()))
    part.cpu_s = time.process_time() - start


def client_process(protocol: str, address: tuple[str, int], payloads: list[bytes], duration: float) -> Part:
    """Runs one connection per payload for WARMUP_S + `duration` seconds; counts what ended
    inside the measured window."""
    loadkit.use_uvloop()
    part = Part()

    async def run() -> None:
        now = time.monotonic()
        window = (now + WARMUP_S, now + WARMUP_S + duration)
        connection = _http_connection if protocol == "http" else _grpc_connection
        clock = asyncio.ensure_future(_cpu_over(window, part))
        await asyncio.gather(*(connection(address, payload, part, window) for payload in payloads))
        await clock

    asyncio.run(run())
    part.window_s = duration
    return part


# -- the server -----------------------------------------------------------------------------


def check_answers(server: loadkit.Server, model_path: Path, shape: Shape, device: str) -> None:
    """The served answer for two images equals the module's in this process."""
    import torch
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    x = images(2, shape, seed=1)
    module = torch.jit.load(str(model_path), map_location=device).eval()  # type: ignore[no-untyped-call]
    with torch.inference_mode():
        expected = module(torch.from_numpy(x).to(device)).cpu().numpy()
    del module
    for client_module, port in ((httpclient, server.ports.http), (grpcclient, server.ports.grpc)):
        client = client_module.InferenceServerClient(f"{loadkit.HOST}:{port}")
        tensor = client_module.InferInput(INPUT, list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        got = client.infer(MODEL, [tensor]).as_numpy(OUTPUT)
        # cuDNN may pick other kernels for another batch size: close, not equal.
        np.testing.assert_allclose(got, expected, rtol=1e-2, atol=1e-2)


@dataclass(frozen=True)
class Counters:
    """The model's statistics at one moment: inferences, executions, and the nanoseconds and
    counts of each of Triton's server-side phases."""

    inferences: int
    executions: int
    phases: dict[str, tuple[int, int]]  # phase -> (ns, count)

    def per_request_us(self, earlier: Counters) -> dict[str, float]:
        """Mean microseconds per request of each phase between `earlier` and now."""
        means = {}
        for phase, (ns, count) in self.phases.items():
            before_ns, before_count = earlier.phases.get(phase, (0, 0))
            requests = count - before_count
            means[phase] = (ns - before_ns) / requests / 1e3 if requests else 0.0
        return means


PHASES = ("queue", "compute_input", "compute_infer", "compute_output")
CPU_GROUPS = ("home", "workers", "other", "clients")


def server_cpu(server: loadkit.Server) -> dict[str, float]:
    """CPU seconds used so far by the server's processes, by kind (process names are set by
    `naiad serve`: naiad-home, naiad-worker-N)."""
    used = dict.fromkeys(CPU_GROUPS[:3], 0.0)
    for pid in [server.pid, *loadkit.descendants(server.pid)]:
        name = loadkit.comm(pid)
        group = "home" if name == "naiad-home" else "workers" if name.startswith("naiad-worker") else "other"
        used[group] += loadkit.cpu_seconds(pid)
    return used


def counters(server: loadkit.Server) -> Counters:
    url = f"http://{loadkit.HOST}:{server.ports.http}/v2/models/{MODEL}/stats"
    with urllib.request.urlopen(url, timeout=10) as response:
        stats = json.loads(response.read())["model_stats"][0]
    inference = stats["inference_stats"]
    return Counters(
        int(stats["inference_count"]),
        int(stats["execution_count"]),
        {phase: (int(inference[phase]["ns"]), int(inference[phase]["count"])) for phase in PHASES},
    )


class CudaRegions:
    """One input and one output CUDA region per connection, made with tritonclient's
    cuda_shared_memory in this process and registered with the server over HTTP."""

    def __init__(self, server: loadkit.Server, count: int, shape: Shape) -> None:
        import tritonclient.http as httpclient
        import tritonclient.utils.cuda_shared_memory as cudashm

        self.cudashm = cudashm
        self.client = httpclient.InferenceServerClient(f"{loadkit.HOST}:{server.ports.http}")
        self.handles: list[Any] = []
        image = images(1, shape)
        for index in range(count):
            source = cudashm.create_shared_memory_region(f"in{index}", input_bytes(shape), 0)
            cudashm.set_shared_memory_region(source, [image])
            target = cudashm.create_shared_memory_region(f"out{index}", CLASSES * 4, 0)
            self.handles += [source, target]
            for name, handle, size in (
                (f"in{index}", source, input_bytes(shape)),
                (f"out{index}", target, CLASSES * 4),
            ):
                self.client.register_cuda_shared_memory(name, cudashm.get_raw_handle(handle), 0, size)

    def close(self) -> None:
        self.client.unregister_cuda_shared_memory()
        for handle in self.handles:
            self.cudashm.destroy_shared_memory_region(handle)


# -- the run --------------------------------------------------------------------------------


@dataclass
class Row:
    protocol: str
    connections: int
    images_per_s: float
    p50_ms: float
    p99_ms: float
    mean_batch: float
    errors: int
    ceiling_share: float
    first_error: str = ""
    # Server-side mean microseconds per request: queue, compute input, infer, output (Triton's
    # statistics: what perf_analyzer prints as the server's share of the latency).
    server_us: dict[str, float] = field(default_factory=dict)
    # CPUs' worth of time each kind of the server's processes used during the row (the model
    # home, the front-door workers together, anything else), and the load's client processes:
    # where the CPU goes, without a profiler.
    cpus: dict[str, float] = field(default_factory=dict)
    # With --profile, the top rows only: py-spy's busiest frames in the process that runs the
    # model (`profiled`: the model home, the one server process, or a model.py's own process),
    # each with its share of the samples; and those of the thread holding the interpreter lock,
    # which the process's other threads wait for.
    profiled: str = ""
    profile: list[tuple[str, float]] = field(default_factory=list)
    gil_profile: list[tuple[str, float]] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return float(np.percentile(np.asarray(values), q))


def measure(
    pool: concurrent.futures.Executor,
    server: loadkit.Server,
    protocol: str,
    connections: int,
    payloads: list[bytes],
    processes: int,
    duration: float,
    ceiling_rate: float,
    profile_to: Path | None = None,
    profile_model_process: bool = False,
) -> Row:
    port = server.ports.http if protocol == "http" else server.ports.grpc
    wire = "http" if protocol == "http" else "grpc"
    shares = [payloads[i::processes] for i in range(min(processes, connections))]
    before = counters(server)
    futures = [pool.submit(client_process, wire, (loadkit.HOST, port), share, duration) for share in shares]
    time.sleep(WARMUP_S)
    cpu_before, started = server_cpu(server), time.monotonic()
    recordings: tuple[Recording, ...] = ()
    profiled = ""
    if profile_to is not None:
        models = loadkit.model_processes(server.pid) if profile_model_process else []
        homes = loadkit.pids_named(server.pid, "naiad-home")
        pid, profiled = (
            (models[0], "model process") if models else (homes[0], "model home") if homes else (server.pid, "server")
        )
        recordings = (
            Recording(pid, duration - 1, profile_to),
            Recording(pid, duration - 1, profile_to.with_suffix(".gil.txt"), gil=True),
        )
    parts = [future.result(timeout=duration + 120) for future in futures]
    cpu_after, ended = server_cpu(server), time.monotonic()
    after = counters(server)
    latencies = [ms for part in parts for ms in part.latencies_ms]
    rate = sum(part.images / part.window_s for part in parts)
    executions = after.executions - before.executions
    return Row(
        protocol=protocol,
        connections=connections,
        images_per_s=rate,
        p50_ms=percentile(latencies, 50),
        p99_ms=percentile(latencies, 99),
        mean_batch=(after.inferences - before.inferences) / executions if executions else 0.0,
        errors=sum(part.errors for part in parts),
        ceiling_share=rate / ceiling_rate if ceiling_rate else 0.0,
        first_error=next((part.first_error for part in parts if part.first_error), ""),
        server_us=after.per_request_us(before),
        cpus={
            **{group: (cpu_after[group] - cpu_before[group]) / (ended - started) for group in cpu_after},
            "clients": sum(part.cpu_s for part in parts) / duration,
        },
        profiled=profiled,
        profile=recordings[0].finish() if recordings else [],
        gil_profile=recordings[1].finish() if recordings else [],
    )


def print_row(row: Row) -> None:
    print(
        f"  {row.protocol:<13} {row.connections:>4} {row.images_per_s:>10.0f} {row.p50_ms:>9.2f} {row.p99_ms:>9.2f} "
        f"{row.mean_batch:>6.1f} {row.errors:>6} {row.ceiling_share:>8.2f}  "
        + " ".join(f"{row.server_us.get(phase, 0.0):>6.0f}" for phase in PHASES)
        + "  "
        + " ".join(f"{row.cpus.get(group, 0.0):>5.2f}" for group in CPU_GROUPS),
        flush=True,
    )
    if row.first_error:
        print(f"      first error: {row.first_error}", flush=True)
    for title, frames in (("busiest frames", row.profile), ("holding the interpreter lock", row.gil_profile)):
        if frames:
            print(f"      {row.profiled}, py-spy, {title}:", flush=True)
        for frame, share in frames:
            print(f"      {share:6.1%}  {frame}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--quick", action="store_true", help="a small network and short rows: the plumbing")
    parser.add_argument("--duration", type=float, help="seconds per row (default 5, --quick 1)")
    parser.add_argument("--concurrency", type=int, nargs="+", help="connections per row (default 1 8 64; --quick 1 4)")
    parser.add_argument("--instances", type=int, default=2, help="instances of the model (default 2)")
    parser.add_argument("--client-processes", type=int, help="processes the connections are split over")
    parser.add_argument("--naiad-flags", default="", help="more flags for naiad serve")
    parser.add_argument(
        "--no-cuda-graphs", action="store_true", help="leave out the config's optimization { cuda { graphs: true } }"
    )
    parser.add_argument(
        "--backend", choices=["pytorch", "python"], default="pytorch", help="serve the TorchScript file or a model.py"
    )
    parser.add_argument(
        "--protocols", nargs="+", choices=PROTOCOLS, help="which rows (default: all; grpc+cudashm only on a GPU)"
    )
    parser.add_argument("--naiad", default=f"{shlex.quote(sys.executable)} -m naiad.cli", help="the naiad command")
    parser.add_argument("--json", type=Path, help="write the figures there too")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="py-spy the process running the model during each protocol's top row (needs py-spy)",
    )
    args = parser.parse_args(argv)
    shape = QUICK if args.quick else FULL
    duration = args.duration or (1.0 if args.quick else 5.0)
    concurrency = args.concurrency or ([1, 4] if args.quick else [1, 8, 64])
    processes = args.client_processes or (1 if args.quick else min(4, max(1, (os.cpu_count() or 2) // 4)))
    protocols = [p for p in args.protocols or PROTOCOLS if p != "grpc+cudashm" or args.device == "cuda"]
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("gpu_bench: no GPU: torch sees no CUDA device (use --device cpu --quick for the plumbing)")
            return 2
        print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}", flush=True)
    print(f"network: ResNet-18 layout, widths {shape.widths}, images {shape.image}, FP32", flush=True)

    with tempfile.TemporaryDirectory(prefix="naiad-gpu-bench-") as scratch:
        repo = Path(scratch) / "models"
        graphs = args.device == "cuda" and not args.no_cuda_graphs and args.backend == "pytorch"
        served = "the PyTorch backend" if args.backend == "pytorch" else "a model.py (the Python backend)"
        print(f"config: {served}, {args.instances} instances, CUDA graphs {'on' if graphs else 'off'}", flush=True)
        model_path = write_repository(repo, shape, args.device, args.instances, graphs, args.backend)
        print("ceiling (torch in a loop in this process, inputs on the device):", flush=True)
        ceiling_rate, ceiling_batch, ceiling_rates = ceiling(model_path, shape, args.device, 0.3 if args.quick else 1.5)
        ports = loadkit.Ports(free_port(), free_port(), free_port())
        flags = ["--allow-client-shm=true", *shlex.split(args.naiad_flags)]
        log = Path(scratch) / "naiad.log"
        started = time.monotonic()
        server = loadkit.start("naiad", args.naiad, repo, ports, flags, log)
        rows: list[Row] = []
        try:
            print(f"naiad serve {' '.join(flags)}: ready in {time.monotonic() - started:.1f} s", flush=True)
            check_answers(server, model_path, shape, args.device)
            print("answers checked over HTTP and gRPC against the module in this process", flush=True)
            context = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(processes, mp_context=context) as pool:
                print(
                    f"  {'protocol':<13} {'conn':>4} {'images/s':>10} {'p50 ms':>9} {'p99 ms':>9} "
                    f"{'batch':>6} {'errors':>6} {'ceiling':>8}  server us/request: queue input  infer output"
                    "  CPUs: home workers other clients"
                )
                for protocol in protocols:
                    regions = CudaRegions(server, max(concurrency), shape) if protocol == "grpc+cudashm" else None
                    try:
                        for connections in concurrency:
                            if protocol == "http":
                                payloads = [http_request(shape)] * connections
                            elif protocol == "grpc":
                                payloads = [grpc_request(shape)] * connections
                            else:
                                payloads = [grpc_request(shape, index) for index in range(connections)]
                            profile_to = (
                                Path(scratch) / f"profile-{protocol}.txt"
                                if args.profile and connections == max(concurrency)
                                else None
                            )
                            row = measure(
                                pool,
                                server,
                                protocol,
                                connections,
                                payloads,
                                processes,
                                duration,
                                ceiling_rate,
                                profile_to,
                                profile_model_process=args.backend == "python",
                            )
                            rows.append(row)
                            print_row(row)
                    finally:
                        if regions is not None:
                            regions.close()
        except Exception:
            print(f"naiad's log ({log}):\n{log.read_text(errors='replace')[-4000:]}", flush=True)
            raise
        finally:
            server.stop()

    print(f"ceiling: {ceiling_rate:.0f} images/s at batch {ceiling_batch}")
    top = max(concurrency)
    verdicts = [row for row in rows if row.protocol == protocols[-1] and row.connections == top]
    for row in verdicts:
        outcome = "PASS" if row.ceiling_share >= GOAL_CEILING_SHARE else "FAIL"
        print(
            f"goal: {row.protocol} at {top} connections >= {GOAL_CEILING_SHARE} of the ceiling: {outcome} "
            f"({row.images_per_s:.0f} images/s = {row.ceiling_share:.2f}, p99 {row.p99_ms:.2f} ms)"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "device": args.device,
                    "shape": asdict(shape),
                    "backend": args.backend,
                    "cuda_graphs": graphs,
                    "ceiling": {"images_per_s": ceiling_rate, "batch": ceiling_batch, "per_batch": ceiling_rates},
                    "rows": [asdict(row) for row in rows],
                },
                indent=2,
            )
        )
    errors = sum(row.errors for row in rows)
    if errors:
        print(f"{errors} request(s) failed")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
