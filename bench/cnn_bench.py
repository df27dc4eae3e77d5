#!/usr/bin/env python3
"""Images/s, p50 and p99 for a small real image classifier served by the real Triton server and
by `naiad serve`, beside the framework's own in-process ceiling, in one run on one machine.

    .venv/bin/python bench/cnn_bench.py [--duration 8] [--concurrency 1 8 64]
        [--naiad-models cnn_onnx cnn_torch cnn_py] [--naiad-flags '--workers 1']
        [--channels 16 48 96 192] [--queue-delay-us 0] [--grpc] [--json results.json]

(`bench/cnn_bench.sh` does the same after making sure the anchors of ../shared/bench exist.)

The model is built at run time with torch (bench/cnn_model.py, which `naiad tune`'s bench and tests
import too): four 3x3 convolutions with stride 2 and ReLU (16, 48,
96 and 192 channels; `--channels` changes them), global average pooling and a linear layer to 10
classes, taking one FP32 NCHW image of [3, 96, 96]. The default channels make one image cost
about 0.3 ms in onnxruntime at batch 1 with one thread on the 2-core machine this was written on
(widths off multiples of 16 leave onnxruntime's fast kernels: 17 costs twice 16); the run prints
the cost it measures. The network is exported to ONNX (dynamic batch axis) and to TorchScript,
and written into a temporary model repository three ways, each with `max_batch_size: 64`,
`dynamic_batching { }` (`--queue-delay-us N` adds `max_queue_delay_microseconds: N` to every
config, Triton's and naiad's alike) and one CPU instance:

- `cnn_onnx`: naiad's ONNX Runtime backend (model.onnx);
- `cnn_torch`: naiad's PyTorch backend (model.pt);
- `cnn_py`: a Triton Python-backend model.py that runs the same model.onnx in onnxruntime, one
  run per execute for all of its requests. The real Triton 2.51 (shared/bench/triton.sh, its
  Python backend; it cannot serve ONNX on this machine) and naiad both serve this one.

Triton's Python stub runs in the Python environment $ANCHORS/pyt (triton.sh puts its bin/ first
on PATH and the stub starts that interpreter, so its site-packages are the stub's): the script
pip-installs onnxruntime there when `import onnxruntime` fails in it.

The run, in order: the framework ceilings (onnxruntime and TorchScript called in a loop in this
process at batch 1, 8, 16, 32 and 64 with as many intra-op threads as this process may use
CPUs), while no server runs; then Triton serving cnn_py; then `naiad serve` with its defaults
(only the repository, ports and loopback addresses; add flags with --naiad-flags) serving the
chosen models; then the ceilings once more. A framework's ceiling is its best batch size in the
better of the two passes, so a neighbour's burst during one pass does not lower it (the highest
of ten noisy figures errs high, which makes the ceiling goal harder, never easier). Each server
is checked with tritonclient (HTTP and gRPC, a batch of two images) and with the exact body the
load replays, against onnxruntime in this process, before it is loaded. The load is wrk with one
binary-tensor request per image (tritonclient's binary extension), at each concurrency for
--duration seconds, the client pinned to the last CPU (as shared/bench/load.sh does). After each
step the model's statistics give the mean batch size (inference_count / execution_count,
differences around the step); a note is printed where the statistics counted fewer or more
images than the client completed. `--grpc` adds h2load rows (images/s and the mean latency:
h2load gives no percentiles), which the goals do not judge.

The table shows, per server, model and concurrency: images/s, p50, p99, mean batch, non-2xx
responses, naiad/Triton images/s and p99, and at the highest concurrency the share of the
framework's ceiling. The goal lines follow, each PASS or FAIL: for each naiad model, >= 1.2x
Triton's images/s at every concurrency with p99 <= Triton's and no errors; >= 0.8 of its
framework's ceiling at the highest concurrency; a mean batch there >= Triton's. Triton serves
only cnn_py, so naiad's cnn_onnx and cnn_torch are held against Triton's cnn_py (the same
onnxruntime work, behind Python). Figures on a shared 2-core machine are noisy: compare rows of
one run, and repeat before believing a change under 10%.

BENCH_DIR overrides where shared/bench is (default ../shared/bench beside the checkout); ANCHORS
where its environments are (default /tmp/anchors, as triton.sh). Ports: Triton 18100-18102,
naiad 19100-19102, all on 127.0.0.1; every server started is stopped at the end, on failure too.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from cnn_model import (
    CLASSES,
    DEFAULT_CHANNELS,
    IMAGE,
    INPUT,
    OUTPUT,
    build_model,
    dynamic_batching,
    model_config,
)

from naiad.malloc_thresholds import raise_malloc_thresholds

ROOT = Path(__file__).resolve().parents[1]
CEILING_BATCHES = (1, 8, 16, 32, 64)
NAIAD_MODELS = ("cnn_onnx", "cnn_torch", "cnn_py")
TRITON_MODEL = "cnn_py"
# Which in-process ceiling each served model is held against.
FRAMEWORK = {"cnn_onnx": "onnxruntime", "cnn_torch": "torch", "cnn_py": "onnxruntime"}
# The issue's goals.
GOAL_SPEEDUP = 1.2
GOAL_CEILING_SHARE = 0.8
READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 40.0


def bench_dir() -> Path:
    return Path(os.environ.get("BENCH_DIR", ROOT.parent / "shared" / "bench"))


def anchors_dir() -> Path:
    return Path(os.environ.get("ANCHORS", "/tmp/anchors"))


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0))


# -- the model ------------------------------------------------------------------------------


def ort_session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def images(count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, *IMAGE)).astype(np.float32)


def per_image_ms(onnx_path: Path, duration: float = 1.0) -> float:
    """One image's cost in onnxruntime at batch 1 with one thread (the median of short runs,
    steadier than the mean on a busy machine)."""
    session = ort_session(onnx_path, 1)
    feed = {INPUT: images(1)}
    for _ in range(20):
        session.run([OUTPUT], feed)
    times: list[float] = []
    deadline = time.perf_counter() + duration
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        session.run([OUTPUT], feed)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


# -- the repository -------------------------------------------------------------------------

MODEL_PY = '''"""The CNN in onnxruntime: one run for all the requests of one execute."""
import os

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        options = ort.SessionOptions()
        # As many intra-op threads as the server may use CPUs, like the in-process ceiling.
        options.intra_op_num_threads = len(os.sched_getaffinity(0))
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def execute(self, requests):
        batches = [pb_utils.get_input_tensor_by_name(r, "INPUT__0").as_numpy() for r in requests]
        scores = self.session.run(["OUTPUT__0"], {"INPUT__0": np.concatenate(batches)})[0]
        responses, start = [], 0
        for batch in batches:
            part = scores[start : start + len(batch)]
            start += len(batch)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT__0", part)]))
        return responses
'''


def write_model(repo: Path, name: str, onnx_path: Path, torch_path: Path, queue_delay_us: int) -> None:
    version = repo / name / "1"
    version.mkdir(parents=True)
    if name == "cnn_onnx":
        shutil.copy(onnx_path, version / "model.onnx")
        kind = 'platform: "onnxruntime_onnx"'
    elif name == "cnn_torch":
        shutil.copy(torch_path, version / "model.pt")
        kind = 'platform: "pytorch_libtorch"'
    else:
        shutil.copy(onnx_path, version / "model.onnx")
        (version / "model.py").write_text(MODEL_PY)
        kind = 'backend: "python"'
    (repo / name / "config.pbtxt").write_text(model_config(name, kind, queue_delay_us))


def write_repository(repo: Path, names: list[str], onnx_path: Path, torch_path: Path, queue_delay_us: int) -> None:
    for name in names:
        write_model(repo, name, onnx_path, torch_path, queue_delay_us)


# -- in-process ceilings --------------------------------------------------------------------


def _loop_rate(run: Any, batch: int, duration: float) -> float:
    # TorchScript's profiling executor optimises the graph only after its first few calls.
    for _ in range(10):
        run()
    count, start = 0, time.perf_counter()
    deadline = start + duration
    while time.perf_counter() < deadline:
        run()
        count += batch
    return count / (time.perf_counter() - start)


def ort_ceiling(onnx_path: Path, threads: int, batch: int, duration: float) -> float:
    session = ort_session(onnx_path, threads)
    feed = {INPUT: images(batch)}
    return _loop_rate(lambda: session.run([OUTPUT], feed), batch, duration)


def torch_ceiling(torch_path: Path, threads: int, batch: int, duration: float) -> float:
    import torch

    torch.set_num_threads(threads)
    # In the form naiad's PyTorch backend serves it on the CPU (OPTIMIZE_FOR_INFERENCE).
    module = torch.jit.optimize_for_inference(torch.jit.load(str(torch_path)).eval())  # type: ignore[no-untyped-call]
    x = torch.from_numpy(images(batch))
    with torch.inference_mode():
        return _loop_rate(lambda: module(x), batch, duration)


def ceilings(onnx_path: Path, torch_path: Path, frameworks: set[str], duration: float) -> dict[str, dict[int, float]]:
    """Images/s of each framework called in a loop, per batch size, with one intra-op thread
    per CPU this process may use (the servers may use the same CPUs), and the malloc
    thresholds naiad serve sets: this process only, so Triton's processes do not get them."""
    raise_malloc_thresholds(environ={})
    threads = usable_cpus()
    measure = {"onnxruntime": lambda b: ort_ceiling(onnx_path, threads, b, duration)}
    measure["torch"] = lambda b: torch_ceiling(torch_path, threads, b, duration)
    result: dict[str, dict[int, float]] = {}
    for framework in ("onnxruntime", "torch"):
        if framework not in frameworks:
            continue
        result[framework] = {}
        for batch in CEILING_BATCHES:
            result[framework][batch] = measure[framework](batch)
            print(
                f"  {framework:<12} batch {batch:>2}, {threads} threads: {result[framework][batch]:>8.0f} images/s",
                flush=True,
            )
    return result


def best_ceilings(passes: list[dict[str, dict[int, float]]]) -> dict[str, tuple[float, int]]:
    """Per framework, the best images/s over every pass and batch size, and that batch size."""
    best: dict[str, tuple[float, int]] = {}
    for result in passes:
        for framework, rates in result.items():
            for batch, rate in rates.items():
                if rate > best.get(framework, (0.0, 0))[0]:
                    best[framework] = (rate, batch)
    return best


# -- servers --------------------------------------------------------------------------------


@dataclass
class Ports:
    http: int
    grpc: int
    metrics: int


@dataclass
class Server:
    """A server started in its own session: stopping it signals its whole process group."""

    name: str
    pid: int
    ports: Ports
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def stop(self) -> None:
        _signal_group(self.pid, signal.SIGTERM)
        # Triton drains for up to 30 s; naiad stops at once. Past the wait, kill what is left.
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        _signal_group(self.pid, signal.SIGKILL)
        if self.process is not None:
            self.process.wait()
        _wait_port_free(self.ports.http)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait_port_free(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while _port_in_use(port) and time.monotonic() < deadline:
        time.sleep(0.2)


def _get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return 0, b""


def wait_ready(server: Server, models: list[str]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    base = f"http://127.0.0.1:{server.ports.http}"
    while time.monotonic() < deadline:
        if not server.alive():
            raise RuntimeError(f"{server.name} exited before it was ready; its log: {server.log}")
        ready = _get(f"{base}/v2/health/ready")[0] == 200
        if ready and all(_get(f"{base}/v2/models/{m}/ready")[0] == 200 for m in models):
            return
        time.sleep(0.5)
    raise RuntimeError(f"{server.name} was not ready in {READY_TIMEOUT_S:.0f} s; its log: {server.log}")


def ensure_stub_onnxruntime(anchors: Path) -> None:
    """Triton's Python stub imports model.py's modules from $ANCHORS/pyt (triton.sh puts its
    bin/ first on PATH and the stub runs that interpreter), so onnxruntime must be there."""
    python = anchors / "pyt" / "bin" / "python"
    if not python.exists():
        raise RuntimeError(f"{python} is missing: run {bench_dir() / 'setup_anchors.sh'} first")
    if subprocess.run([str(python), "-c", "import onnxruntime"], capture_output=True).returncode == 0:
        return
    print(f"installing onnxruntime into {anchors / 'pyt'} for Triton's Python stub", flush=True)
    # numpy stays as the anchors have it (pytriton pins numpy<2): onnxruntime accepts both.
    subprocess.run([str(anchors / "pyt" / "bin" / "pip"), "install", "-q", "onnxruntime", "numpy<2"], check=True)


def start_triton(repo: Path, ports: Ports) -> Server:
    anchors = anchors_dir()
    ensure_stub_onnxruntime(anchors)
    if _port_in_use(ports.http):
        raise RuntimeError(f"port {ports.http} is already in use")
    script = bench_dir() / "triton.sh"
    out = subprocess.run(
        [str(script), str(repo), str(ports.http), str(ports.grpc), str(ports.metrics)],
        capture_output=True,
        text=True,
        env={**os.environ, "ANCHORS": str(anchors)},
    )
    log = anchors / f"triton-{ports.http}.log"
    if out.returncode != 0:
        raise RuntimeError(f"triton.sh failed: {out.stderr.strip()}; its log: {log}")
    # triton.sh starts tritonserver under setsid, so its PID is its process group's id and its
    # Python stubs are in that group.
    return Server("triton", int(out.stdout.split()[-1]), ports, log)


def naiad_command(naiad: str, repo: Path, ports: Ports, flags: str) -> list[str]:
    return [
        *shlex.split(naiad),
        "serve",
        "--model-repository",
        str(repo),
        "--http-port",
        str(ports.http),
        "--grpc-port",
        str(ports.grpc),
        "--metrics-port",
        str(ports.metrics),
        "--http-address",
        "127.0.0.1",
        "--grpc-address",
        "127.0.0.1",
        "--metrics-address",
        "127.0.0.1",
        *shlex.split(flags),
    ]


def start_naiad(command: list[str], ports: Ports, log: Path) -> Server:
    if _port_in_use(ports.http):
        raise RuntimeError(f"port {ports.http} is already in use")
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return Server("naiad", process.pid, ports, log, process)


@contextmanager
def running(start: Any) -> Iterator[Server]:
    server = start()
    try:
        yield server
    finally:
        server.stop()


def _terminate_as_exit(signum: int, frame: object) -> None:
    # A SIGTERM unwinds like an exception, so the `finally` clauses stop the servers.
    raise SystemExit(128 + signum)


# -- correctness ----------------------------------------------------------------------------


def binary_body() -> tuple[bytes, int]:
    """One image as tritonclient's binary-tensor extension sends it: JSON, then raw bytes."""
    raw = images(1).tobytes()
    header = json.dumps(
        {
            "inputs": [
                {"name": INPUT, "shape": [1, *IMAGE], "datatype": "FP32", "parameters": {"binary_data_size": len(raw)}}
            ],
            "outputs": [{"name": OUTPUT, "parameters": {"binary_data": True}}],
        }
    ).encode()
    return header + raw, len(header)


def _field(number: int, payload: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def grpc_body(model: str) -> bytes:
    """A framed gRPC ModelInferRequest of one image, hand-encoded (no generated code needed)."""
    shape = b"".join(_varint(d) for d in (1, *IMAGE))
    tensor = _field(1, INPUT.encode()) + _field(2, b"FP32") + _field(3, shape)
    message = _field(1, model.encode()) + _field(5, tensor) + _field(7, images(1).tobytes())
    return b"\x00" + struct.pack(">I", len(message)) + message


def check_body(server: Server, model: str, expected: np.ndarray) -> None:
    """The exact request wrk replays must succeed and give the right scores."""
    body, header_length = binary_body()
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.ports.http}/v2/models/{model}/infer",
        data=body,
        headers={"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(header_length)},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        data = response.read()
        length = int(response.headers.get("Inference-Header-Content-Length", len(data)))
    got = np.frombuffer(data[length:], dtype=np.float32).reshape(1, CLASSES)
    np.testing.assert_allclose(got, expected[:1], rtol=1e-3, atol=1e-4)


def check_answers(server: Server, model: str, reference: Any) -> None:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    x = images(2)
    expected = reference.run([OUTPUT], {INPUT: x})[0]
    for module, url in (
        (httpclient, f"127.0.0.1:{server.ports.http}"),
        (grpcclient, f"127.0.0.1:{server.ports.grpc}"),
    ):
        tensor = module.InferInput(INPUT, list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        got = module.InferenceServerClient(url).infer(model, [tensor]).as_numpy(OUTPUT)
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4)
    check_body(server, model, reference.run([OUTPUT], {INPUT: images(1)})[0])


# -- load -----------------------------------------------------------------------------------


@dataclass
class Row:
    server: str
    model: str
    protocol: str
    concurrency: int
    images_per_s: float
    p50_ms: float | None
    p99_ms: float | None
    mean_batch: float | None
    errors: int
    detail: dict[str, Any] = field(default_factory=dict)


def client_pin() -> list[str]:
    cpus = sorted(os.sched_getaffinity(0))
    if shutil.which("taskset") and len(cpus) > 1:
        return ["taskset", "-c", str(cpus[-1])]
    return []


def write_wrk_script(directory: Path) -> Path:
    body, header_length = binary_body()
    (directory / "body.bin").write_bytes(body)
    script = directory / "wrk_cnn.lua"
    script.write_text(
        'wrk.method = "POST"\n'
        f'local f = io.open("{directory / "body.bin"}", "rb"); wrk.body = f:read("*all"); f:close()\n'
        'wrk.headers["Content-Type"] = "application/octet-stream"\n'
        f'wrk.headers["Inference-Header-Content-Length"] = "{header_length}"\n'
    )
    return script


_UNITS_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def _duration_ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    if match is None:
        raise ValueError(f"not a wrk duration: {text!r}")
    return float(match.group(1)) * _UNITS_MS[match.group(2)]


def parse_wrk(out: str) -> tuple[float, float, float, int, int, int]:
    """Requests/s, p50 and p99 in ms, non-2xx responses, socket errors, requests completed."""
    rate = float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1))  # type: ignore[union-attr]
    completed = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    p50 = _duration_ms(re.search(r"^\s*50%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    p99 = _duration_ms(re.search(r"^\s*99%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", out)
    sockets = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    socket_errors = sum(int(n) for n in sockets.groups()) if sockets else 0
    return rate, p50, p99, int(non2xx.group(1)) if non2xx else 0, socket_errors, completed


def run_wrk(url: str, script: Path, concurrency: int, duration: int) -> str:
    # A 10 s timeout (wrk defaults to 2 s) so a slow answer counts in p99 instead of vanishing
    # from the latencies as a socket error.
    command = [*client_pin(), "wrk", "-t1", f"-c{concurrency}", f"-d{duration}s", "--timeout", "10s", "--latency"]
    command += ["-s", str(script), url]
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=duration + 60).stdout


def run_h2load(url: str, body: Path, concurrency: int, duration: int) -> str:
    command = [
        *client_pin(),
        "h2load",
        "-D",
        str(duration),
        "-c",
        str(concurrency),
        "-m",
        "1",
        "-H",
        "content-type: application/grpc",
        "-H",
        "te: trailers",
        "-d",
        str(body),
        url,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=duration + 60).stdout


def parse_h2load(out: str) -> tuple[float, float | None, int, int]:
    """Requests/s, the mean time per request in ms (h2load gives no percentiles), failed,
    succeeded."""
    finished = re.search(r"finished in [^,]+, ([\d.]+) req/s", out)
    if finished is None:
        raise RuntimeError(f"h2load gave no result:\n{out}")
    mean = re.search(r"time for request:\s+\S+\s+\S+\s+(\S+)", out)
    failed = re.search(r"requests: .*?(\d+) failed", out)
    succeeded = re.search(r"requests: .*?(\d+) succeeded", out)
    return (
        float(finished.group(1)),
        _duration_ms(mean.group(1)) if mean else None,
        int(failed.group(1)) if failed else 0,
        int(succeeded.group(1)) if succeeded else 0,
    )


def model_counts(server: Server, model: str) -> tuple[int, int]:
    """(inference_count, execution_count) summed over the model's versions."""
    status, body = _get(f"http://127.0.0.1:{server.ports.http}/v2/models/{model}/stats")
    if status != 200:
        return 0, 0
    stats = json.loads(body).get("model_stats", [])
    return sum(int(s.get("inference_count", 0)) for s in stats), sum(int(s.get("execution_count", 0)) for s in stats)


def _mean_batch(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    executions = after[1] - before[1]
    return (after[0] - before[0]) / executions if executions > 0 else None


def _stats_coverage(row: Row, completed: int, before: tuple[int, int], after: tuple[int, int]) -> None:
    """Records how many of the client's images the statistics counted: a server whose
    statistics saw only part of the load (one process's share, say) gives a mean batch size
    that describes only that part, and the row says so."""
    counted = after[0] - before[0]
    row.detail["requests_completed"] = completed
    row.detail["stats_inferences"] = counted
    # Requests in flight when the client stopped are counted by the server but not by it.
    if completed and not completed * 0.95 <= counted <= completed + 2 * row.concurrency + 0.05 * completed:
        print(f"    note: the statistics counted {counted} images for {completed} requests", flush=True)


def load_model(server: Server, label: str, model: str, work: Path, args: argparse.Namespace, script: Path) -> list[Row]:
    url = f"http://127.0.0.1:{server.ports.http}/v2/models/{model}/infer"
    # A short warm-up, so the first step does not pay for lazy initialisation.
    if args.warmup > 0:
        run_wrk(url, script, max(args.concurrency), args.warmup)
    rows = []
    for concurrency in args.concurrency:
        before = model_counts(server, model)
        out = run_wrk(url, script, concurrency, args.duration)
        after = model_counts(server, model)
        rate, p50, p99, non2xx, socket_errors, completed = parse_wrk(out)
        row = Row(label, model, "http", concurrency, rate, p50, p99, _mean_batch(before, after), non2xx + socket_errors)
        row.detail = {"non2xx": non2xx, "socket_errors": socket_errors}
        rows.append(row)
        print(_row_line(row), flush=True)
        _stats_coverage(row, completed, before, after)
    if args.grpc:
        body = work / f"grpc_{model}.bin"
        body.write_bytes(grpc_body(model))
        grpc_url = f"http://127.0.0.1:{server.ports.grpc}/inference.GRPCInferenceService/ModelInfer"
        for concurrency in args.concurrency:
            before = model_counts(server, model)
            rate, mean_ms, failed, succeeded = parse_h2load(run_h2load(grpc_url, body, concurrency, args.duration))
            after = model_counts(server, model)
            row = Row(label, model, "grpc", concurrency, rate, None, None, _mean_batch(before, after), failed)
            row.detail = {"mean_ms": mean_ms}
            rows.append(row)
            print(_row_line(row), flush=True)
            _stats_coverage(row, succeeded + failed, before, after)
    return rows


def _row_line(row: Row) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    batch = "-" if row.mean_batch is None else f"{row.mean_batch:.1f}"
    # h2load gives the mean only; wrk the percentiles.
    if "mean_ms" in row.detail:
        latency = f"mean={ms(row.detail['mean_ms'])}ms"
    else:
        latency = f"p50={ms(row.p50_ms)}ms p99={ms(row.p99_ms)}ms"
    return (
        f"  {row.server} {row.model} {row.protocol} c={row.concurrency}: {row.images_per_s:.0f} images/s "
        f"{latency} batch={batch} errors={row.errors}"
    )


# -- report ---------------------------------------------------------------------------------


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(rows: list[Row], best_ceiling: dict[str, float], top: int) -> None:
    """One line per server, model, protocol and concurrency; the ratios are to Triton's row of
    the same protocol and concurrency (Triton serves cnn_py only)."""
    triton = {(r.protocol, r.concurrency): r for r in rows if r.server == "triton"}
    width = max(6, *(len(r.server) for r in rows))
    print()
    print(
        f"{'server':<{width}} {'model':<10} {'proto':<5} {'c':>3} {'images/s':>9} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'batch':>6} {'errors':>6} {'x Triton':>8} {'p99/Tri':>8} {'of ceiling':>10}"
    )
    for r in rows:
        peer = triton.get((r.protocol, r.concurrency))
        speedup = _ratio(r.images_per_s, peer.images_per_s) if peer and r.server != "triton" else None
        p99 = _ratio(r.p99_ms, peer.p99_ms) if peer and r.server != "triton" else None
        ceiling = best_ceiling.get(FRAMEWORK[r.model])
        share = _ratio(r.images_per_s, ceiling) if r.concurrency == top else None
        print(
            f"{r.server:<{width}} {r.model:<10} {r.protocol:<5} {r.concurrency:>3} {r.images_per_s:>9.0f} "
            f"{_fmt(r.p50_ms, '7.2f'):>7} {_fmt(r.p99_ms, '7.2f'):>7} {_fmt(r.mean_batch, '6.1f'):>6} "
            f"{r.errors:>6} {_fmt(speedup, '8.2f'):>8} {_fmt(p99, '8.2f'):>8} {_fmt(share, '10.2f'):>10}"
        )
    # No server can beat the framework it calls: a share above 1 means both ceiling passes were
    # disturbed (a busy machine; TorchScript's OpenMP threads suffer most), not a fast server.
    beaten = sorted(
        {FRAMEWORK[r.model] for r in rows if (_ratio(r.images_per_s, best_ceiling.get(FRAMEWORK[r.model])) or 0) > 1.05}
    )
    for framework in beaten:
        print(f"note: a server beat the {framework} ceiling by more than 5%: its ceiling passes were disturbed")


def goals(
    rows: list[Row], best_ceiling: dict[str, float], label: str, top: int, queue_delay_us: int
) -> list[dict[str, Any]]:
    """The issue's goals for each naiad model, on the HTTP rows. A row with errors (non-2xx or
    socket errors) cannot pass the speed goal: failing fast is not serving. The issue sets them
    for `dynamic_batching { }`; with a queue delay each line says so."""
    name = label.replace("naiad", "naiad defaults", 1) if label == "naiad" else label
    if queue_delay_us:
        name += f" (both servers at max_queue_delay_microseconds: {queue_delay_us})"
    triton = {r.concurrency: r for r in rows if r.server == "triton" and r.protocol == "http"}
    results = []
    for model in dict.fromkeys(r.model for r in rows if r.server == label):
        mine = {r.concurrency: r for r in rows if r.server == label and r.model == model and r.protocol == "http"}
        shared = sorted(set(mine) & set(triton))
        faster = bool(shared) and all(
            mine[c].errors == 0
            and mine[c].images_per_s >= GOAL_SPEEDUP * triton[c].images_per_s
            and (mine[c].p99_ms or 0.0) <= (triton[c].p99_ms or 0.0)
            for c in shared
        )
        detail = ", ".join(
            f"c={c}: {mine[c].images_per_s / triton[c].images_per_s:.2f}x, p99 {_fmt(mine[c].p99_ms, '.2f')} vs "
            f"{_fmt(triton[c].p99_ms, '.2f')} ms" + (f", {mine[c].errors} errors" if mine[c].errors else "")
            for c in shared
        )
        concurrencies = ", ".join(str(c) for c in shared)
        results.append(
            {
                "model": model,
                "goal": f"{name} >= {GOAL_SPEEDUP}x Triton images/s at c={concurrencies} with p99 <= Triton's",
                "pass": faster,
                "detail": detail,
            }
        )
        ceiling = best_ceiling.get(FRAMEWORK[model])
        at_top = mine.get(top)
        share = _ratio(at_top.images_per_s, ceiling) if at_top else None
        results.append(
            {
                "model": model,
                "goal": f"{name} >= {GOAL_CEILING_SHARE} of the {FRAMEWORK[model]} in-process ceiling at c={top}",
                "pass": share is not None and share >= GOAL_CEILING_SHARE,
                "detail": f"{_fmt(share, '.2f')} of {_fmt(ceiling, '.0f')} images/s",
            }
        )
        theirs = triton.get(top)
        batch, their_batch = (at_top.mean_batch if at_top else None), (theirs.mean_batch if theirs else None)
        results.append(
            {
                "model": model,
                "goal": f"{name} mean batch size at c={top} >= Triton's",
                "pass": batch is not None and their_batch is not None and batch >= their_batch,
                "detail": f"{_fmt(batch, '.1f')} vs {_fmt(their_batch, '.1f')}",
            }
        )
    return results


def print_goals(results: list[dict[str, Any]]) -> None:
    print()
    for goal in results:
        verdict = "PASS" if goal["pass"] else "FAIL"
        print(f"{verdict}  {goal['model']:<10} {goal['goal']}  ({goal['detail']})")


# -- main -----------------------------------------------------------------------------------


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def default_naiad() -> str:
    local = ROOT / ".venv" / "bin" / "naiad"
    return str(local) if local.exists() else "naiad"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration", type=int, default=8, help="seconds of load per row (default 8)")
    parser.add_argument("--warmup", type=int, default=2, help="seconds of load before each model's rows (default 2)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--naiad-models", nargs="+", choices=NAIAD_MODELS, default=list(NAIAD_MODELS))
    parser.add_argument(
        "--naiad-flags",
        default="",
        help="extra flags for `naiad serve`, e.g. '--workers 1' (one word: --naiad-flags=--flag)",
    )
    parser.add_argument("--naiad", default=default_naiad(), help="the naiad command (default: .venv's, else PATH's)")
    parser.add_argument(
        "--channels", type=int, nargs=4, default=list(DEFAULT_CHANNELS), help="the convolutions' widths"
    )
    parser.add_argument("--ceiling-duration", type=float, default=2.0, help="seconds per ceiling batch size")
    parser.add_argument("--grpc", action="store_true", help="gRPC rows too (h2load; mean latency only)")
    parser.add_argument("--triton-ports", type=int, nargs=3, default=[18100, 18101, 18102], metavar="PORT")
    parser.add_argument("--naiad-ports", type=int, nargs=3, default=[19100, 19101, 19102], metavar="PORT")
    parser.add_argument(
        "--queue-delay-us",
        type=int,
        default=0,
        help="max_queue_delay_microseconds in every model's config, Triton's and naiad's alike "
        "(default 0: `dynamic_batching { }`, the config the goals are set for)",
    )
    parser.add_argument("--json", type=Path, help="write the raw figures to this file")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _terminate_as_exit)
    missing = [tool for tool in ("wrk", *(["h2load"] if args.grpc else [])) if shutil.which(tool) is None]
    if missing:
        print(f"missing load tools: {', '.join(missing)} (shared/bench/setup_anchors.sh installs them)")
        return 2
    top = max(args.concurrency)
    label = "naiad" + (f" {args.naiad_flags}" if args.naiad_flags else "")
    start_load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="naiad-cnn-bench-") as tmp:
        work = Path(tmp)
        onnx_path, torch_path = build_model(work, args.channels)
        cost = per_image_ms(onnx_path)
        print(
            f"CNN {IMAGE[0]}x{IMAGE[1]}x{IMAGE[2]} -> convs {','.join(map(str, args.channels))} -> {CLASSES} classes: "
            f"{cost:.3f} ms/image in onnxruntime, batch 1, 1 thread; {usable_cpus()} usable CPUs; "
            f"{dynamic_batching(args.queue_delay_us)}; "
            f"load average {_load()}",
            flush=True,
        )
        print("in-process ceilings (no server running):", flush=True)
        frameworks = {FRAMEWORK[m] for m in [TRITON_MODEL, *args.naiad_models]}
        passes = [ceilings(onnx_path, torch_path, frameworks, args.ceiling_duration)]

        reference = ort_session(onnx_path, 1)
        script = write_wrk_script(work)
        rows: list[Row] = []
        triton_repo, naiad_repo = work / "triton_models", work / "naiad_models"
        write_repository(triton_repo, [TRITON_MODEL], onnx_path, torch_path, args.queue_delay_us)
        write_repository(naiad_repo, args.naiad_models, onnx_path, torch_path, args.queue_delay_us)

        print(f"Triton serving {TRITON_MODEL}:", flush=True)
        with running(lambda: start_triton(triton_repo, Ports(*args.triton_ports))) as triton:
            wait_ready(triton, [TRITON_MODEL])
            check_answers(triton, TRITON_MODEL, reference)
            rows += load_model(triton, "triton", TRITON_MODEL, work, args, script)

        command = naiad_command(args.naiad, naiad_repo, Ports(*args.naiad_ports), args.naiad_flags)
        print(f"{label} serving {', '.join(args.naiad_models)}: {shlex.join(command)}", flush=True)
        # Beside the temporary repository, not in it, so the path it names outlives the run.
        log = Path(tempfile.gettempdir()) / f"naiad-cnn-bench-{args.naiad_ports[0]}.log"
        try:
            with running(lambda: start_naiad(command, Ports(*args.naiad_ports), log)) as naiad:
                wait_ready(naiad, args.naiad_models)
                for model in args.naiad_models:
                    check_answers(naiad, model, reference)
                for model in args.naiad_models:
                    rows += load_model(naiad, label, model, work, args, script)
        except Exception:
            print(f"naiad failed; the last of its log:\n{log.read_text(errors='replace')[-4000:]}", file=sys.stderr)
            raise

        # The ceilings again, now the servers are gone: on a shared machine a neighbour's burst
        # during one pass would otherwise make the ceiling, and every share of it, a fiction.
        print(f"in-process ceilings again (servers stopped; load average {_load()}):", flush=True)
        passes.append(ceilings(onnx_path, torch_path, frameworks, args.ceiling_duration))
        best = best_ceilings(passes)
        for framework, (rate, batch) in best.items():
            print(f"ceiling {framework}: {rate:.0f} images/s (batch {batch}, the better pass)", flush=True)
        best_ceiling = {framework: rate for framework, (rate, _) in best.items()}

        print_table(rows, best_ceiling, top)
        results = goals(rows, best_ceiling, label, top, args.queue_delay_us)
        print_goals(results)
        if args.json:
            record = {
                "model": {"channels": args.channels, "image": IMAGE, "classes": CLASSES, "per_image_ms": cost},
                "cpus": usable_cpus(),
                "load_average": {"start": start_load, "end": os.getloadavg()},
                "duration_s": args.duration,
                "queue_delay_us": args.queue_delay_us,
                "naiad_command": command,
                "ceiling_passes": [
                    {f: {str(b): r for b, r in rates.items()} for f, rates in p.items()} for p in passes
                ],
                "ceilings": {f: {"images_per_s": rate, "batch": batch} for f, (rate, batch) in best.items()},
                "rows": [asdict(r) for r in rows],
                "goals": results,
            }
            args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
