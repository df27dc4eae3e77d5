#!/usr/bin/env python3
"""Memory of a whole server, measured from outside: the proportional set size (PSS) summed
over the process `naiad serve` (or tritonserver) and every process under it, for two
repositories, with the issue's two goals as PASS/FAIL lines.

    .venv/bin/python bench/memory_bench.py [--scenario onnx python] [--naiad PATH]
        [--naiad-flags='--pin-loop-threads off'] [--json memory.json] [--onnx-mb 200]
        [--python-models 50] [--settle 5] [--verbose]

`onnx`: one ONNX model whose only weight is a 200 MB (200 * 10^6 bytes) FP32 matrix (a MatMul
of a [1, 1000] input and a [1000, 50000] initializer, summed to one number), built at run
time with onnx.helper and saved as one file with the weights inline. naiad serves it twice, with its default flags (one worker
per usable CPU) and with `--workers 1`. Goal: default / `--workers 1` PSS <= 1.15, i.e. the
workers do not each hold a copy of the weights.

`python`: 50 Python-backend models shaped like Triton's add_sub example (two FP32 [16] inputs,
OUTPUT0 = sum and OUTPUT1 = difference, `import numpy`, one KIND_CPU instance each). The same
directory is served by the real Triton server (../shared/bench/triton.sh: tritonserver and
one triton_python_backend_stub process per model), by naiad with its default flags and, for
reference, by naiad `--workers 1`. Goal: naiad default / Triton PSS <= 0.6. triton.sh gives
Triton 30 s to become ready and Triton loads a repository before it opens its ports, which 50
stubs outlast on a busy 2-core machine; so Triton runs with `--model-control-mode=explicit`
and the benchmark loads every model of the directory through its repository API, one at a
time, which starts the same one stub per model (20 models, measured here both ways, twice:
447 MiB either way).

Each server is started as a process, then measured from outside: wait until
/v2/health/ready, send inferences (the ONNX model gets `--onnx-requests`, each on a fresh
connection so that SO_REUSEPORT spreads them over every worker; each Python model gets one)
and check the answers, wait until the server's processes have stayed the same for `--settle`
seconds, then read Pss and Rss from /proc/PID/smaps_rollup of the started process and of
every descendant (psutil's recursive children), plus any process still in the server's
session that has left the tree. The benchmark, the shell and triton.sh are not in that set.
Servers run one at a time, bound to 127.0.0.1 (Triton on 18200-18202, naiad on 19200-19202,
clear of shared/bench's ports), and are stopped (SIGTERM, then SIGKILL, to their process
group) when measured, and on failure.

PSS divides each shared page among every process that maps it, so pages a server's processes
share with each other (a forked worker's copy-on-write pages, a shared-memory region, a
library) count once in its sum. A page also mapped outside the server (a library another
program on the machine has loaded) gives the server only its share, so the sum is close to,
not exactly, what stopping the server gives back. PSS cannot see tmpfs (/dev/shm) pages that
no process maps. RSS counts every shared page once per process and is printed beside PSS.
Sizes are printed in MiB (2^20 bytes). The exit status is 0 whenever the figures were
measured, PASS or FAIL; 1 when a server did not start or answered wrongly.

The naiad executable defaults to this checkout's .venv/bin/naiad; BENCH_DIR overrides where
shared/bench lives (default <checkout>/../shared/bench) and ANCHORS where triton.sh finds
Triton (default /tmp/anchors, as triton.sh reads it). This process never imports numpy or
onnx itself: the repositories are written by a short-lived child process, so that the
benchmark shares no numpy pages with the servers it measures.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped,unused-ignore]

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
# Ports clear of shared/bench (compare.sh uses 8000-8002 and 9000-9002).
TRITON_PORTS = (18200, 18201, 18202)
NAIAD_PORTS = (19200, 19201, 19202)
# The acceptance figures.
GOAL_ONNX_WORKERS = 1.15
GOAL_PYTHON_VS_TRITON = 0.6
# The ONNX model: a [1, ONNX_ROWS] input times a [ONNX_ROWS, columns] weight matrix.
ONNX_ROWS = 1000
ONNX_MODEL = "big_matmul"
FEATURES = 16

PYTHON_MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            total = pb_utils.Tensor("OUTPUT0", (a + b).astype(np.float32))
            difference = pb_utils.Tensor("OUTPUT1", (a - b).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[total, difference]))
        return responses
"""


def bench_dir() -> Path:
    return Path(os.environ.get("BENCH_DIR", ROOT.parent / "shared" / "bench"))


# --- repositories -------------------------------------------------------------------------


def _write_onnx_model(path: Path, megabytes: int) -> float:
    """Runs in a child process (numpy and onnx stay out of the benchmark's own pages).
    Returns the answer the model must give for `onnx_input()`."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    columns = megabytes * 1_000_000 // 4 // ONNX_ROWS
    weights = np.random.default_rng(0).standard_normal((ONNX_ROWS, columns), dtype=np.float32)
    weights *= 0.01
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["INPUT", "weights"], ["product"]),
            helper.make_node("ReduceSum", ["product", "axes"], ["OUTPUT"], keepdims=1),
        ],
        "big_matmul",
        [helper.make_tensor_value_info("INPUT", TensorProto.FLOAT, [1, ONNX_ROWS])],
        [helper.make_tensor_value_info("OUTPUT", TensorProto.FLOAT, [1, 1])],
        [numpy_helper.from_array(weights, "weights"), numpy_helper.from_array(np.array([1], np.int64), "axes")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # readable by every onnxruntime still in use
    # One file with the weights inline (< 2 GB): each process that loads it holds its own copy,
    # where external data could be mapped from the page cache and shared between processes.
    onnx.save_model(model, str(path))
    x = np.asarray(onnx_input(), np.float32).reshape(1, ONNX_ROWS)
    return float((x.astype(np.float64) @ weights.astype(np.float64)).sum())


def onnx_input() -> list[float]:
    return [((i % 7) - 3) / 8 for i in range(ONNX_ROWS)]


def write_onnx_repository(root: Path, megabytes: int) -> float:
    """`big_matmul`, one instance on the CPU. Returns its expected answer."""
    (root / ONNX_MODEL / "1").mkdir(parents=True)
    (root / ONNX_MODEL / "config.pbtxt").write_text(f"""name: "{ONNX_MODEL}"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ {{ name: "INPUT" data_type: TYPE_FP32 dims: [ 1, {ONNX_ROWS} ] }} ]
output [ {{ name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1, 1 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
""")
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        return pool.submit(_write_onnx_model, root / ONNX_MODEL / "1" / "model.onnx", megabytes).result()


def python_model_names(count: int) -> list[str]:
    return [f"add_sub_{i:02d}" for i in range(count)]


def _tensors(prefix: str) -> str:
    return ", ".join(f'{{ name: "{prefix}{i}" data_type: TYPE_FP32 dims: [ {FEATURES} ] }}' for i in range(2))


def write_python_repository(root: Path, count: int) -> list[str]:
    names = python_model_names(count)
    for name in names:
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(PYTHON_MODEL)
        (root / name / "config.pbtxt").write_text(f"""name: "{name}"
backend: "python"
max_batch_size: 0
input [ {_tensors("INPUT")} ]
output [ {_tensors("OUTPUT")} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
""")
    return names


# --- servers ------------------------------------------------------------------------------


@dataclass
class Server:
    """A started server: the PID measured and stopped, and where to reach it."""

    label: str
    pid: int
    http_port: int
    log: Path
    # Every process seen in the server, so that stop() also ends one that left the group.
    seen: set[int] = field(default_factory=set)


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_ports_free(ports: tuple[int, ...], timeout: float = 30.0) -> None:
    """naiad quietly starts one process instead of its default workers on a taken port, which
    would make the default row measure `--workers 1`: refuse to start rather than mismeasure."""
    deadline = time.monotonic() + timeout
    while not all(port_free(p) for p in ports):
        if time.monotonic() > deadline:
            raise RuntimeError(f"ports {ports} are still in use; stop what listens there")
        time.sleep(0.5)


def http(port: int, path: str, body: dict[str, Any] | None = None, timeout: float = 30.0) -> tuple[int, bytes]:
    """One request on a fresh connection (urllib never reuses one)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method="POST" if data else "GET")
    if data:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def running_process(pid: int) -> bool:
    """Alive and not a zombie (a naiad that exited stays one until the benchmark reaps it)."""
    try:
        status: str = psutil.Process(pid).status()
    except psutil.Error:
        return False
    return bool(status != psutil.STATUS_ZOMBIE)


def wait_ready(server: Server, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not running_process(server.pid):
            raise RuntimeError(f"{server.label} exited before it was ready; log {server.log}:\n{log_tail(server.log)}")
        with contextlib.suppress(OSError):
            if http(server.http_port, "/v2/health/ready", timeout=5)[0] == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(f"{server.label} not ready after {timeout:.0f} s; log {server.log}:\n{log_tail(server.log)}")


def start_naiad(naiad: Path, repo: Path, flags: list[str], label: str, logs: Path, timeout: float) -> Server:
    http_port, grpc_port, metrics_port = NAIAD_PORTS
    wait_ports_free(NAIAD_PORTS)
    command = [
        str(naiad), "serve", "--model-repository", str(repo),
        "--http-port", str(http_port), "--grpc-port", str(grpc_port), "--metrics-port", str(metrics_port),
        "--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1", "--metrics-address", "127.0.0.1",
        *flags,
    ]  # fmt: skip
    log = logs / f"{label.replace(' ', '_').replace('/', '_')}.log"
    with log.open("wb") as out:
        # A session of its own: its process group is the server's alone, to stop as a whole.
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(label, process.pid, http_port, log)
    wait_ready(server, timeout)
    return server


def start_triton(repo: Path, models: list[str]) -> Server:
    """triton.sh starts tritonserver under setsid (its own session and process group), waits
    until it is ready and prints its PID; the shell has exited by the time it is measured.
    triton.sh gives the server 30 s, and Triton loads a whole repository before it opens its
    ports, which 50 Python stubs can outlast on a small machine: so Triton starts with
    `--model-control-mode=explicit` and loads every model of the repository through its
    repository API, which starts the same stub per model as loading at start-up does."""
    script = bench_dir() / "triton.sh"
    if not script.exists():
        raise RuntimeError(f"{script} not found: set BENCH_DIR to the shared/bench directory")
    wait_ports_free(TRITON_PORTS)
    http_port, grpc_port, metrics_port = TRITON_PORTS
    env = dict(os.environ)
    env["TRITON_ARGS"] = f"{env.get('TRITON_ARGS', '')} --model-control-mode=explicit".strip()
    try:
        done = subprocess.run(
            ["bash", str(script), str(repo), str(http_port), str(grpc_port), str(metrics_port)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
    except BaseException:
        # Stopped before triton.sh printed the PID: the tritonserver it started under setsid
        # is found by the repository, a directory of this run, on its command line.
        for process in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if f"--model-repository={repo}" in process.cmdline():
                    stop(Server("Triton", process.pid, http_port, Path()))
        raise
    anchors = Path(os.environ.get("ANCHORS", "/tmp/anchors"))
    log = anchors / f"triton-{http_port}.log"
    if done.returncode != 0 or not done.stdout.strip().isdigit():
        raise RuntimeError(f"triton.sh failed: {done.stderr.strip()}\n{log_tail(log)}")
    server = Server("Triton", int(done.stdout.strip()), http_port, log)
    try:
        load_all(server, models)
        wait_ready(server, 60)
    except BaseException:
        stop(server)
        raise
    return server


def load_all(server: Server, models: list[str]) -> None:
    """One load at a time: this Triton (2.51) has aborted here with a boost lock_exception
    while several Python models loaded through the API at once."""
    for name in models:
        status, text = http(server.http_port, f"/v2/repository/models/{name}/load", {}, timeout=300)
        if status != 200:
            raise RuntimeError(f"{server.label}: loading {name}: HTTP {status}: {text[:300]!r}")


def session_members(sid: int) -> list[psutil.Process]:
    members = []
    for process in psutil.process_iter():
        with contextlib.suppress(OSError, psutil.Error):
            if os.getsid(process.pid) == sid:
                members.append(process)
    return members


def server_processes(server: Server) -> list[psutil.Process]:
    """The started process, its descendants, and any process of its session that has been
    reparented out of the tree (both servers start in a session of their own, so no process
    of the benchmark or of a shell is in it)."""
    root = psutil.Process(server.pid)
    processes = {p.pid: p for p in [root, *root.children(recursive=True)]}
    for process in session_members(server.pid):
        processes.setdefault(process.pid, process)
    processes.pop(os.getpid(), None)  # never count the benchmark, whatever happened
    server.seen.update(processes)
    return list(processes.values())


def stop(server: Server) -> None:
    """SIGTERM to the process group, then SIGKILL to it and to any process once seen in the
    server that is still alive (a stub that moved to another group)."""
    with contextlib.suppress(psutil.Error):
        server_processes(server)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(server.pid, signal.SIGTERM)
    alive = [p for p in (_process(pid) for pid in server.seen | {server.pid}) if p is not None]
    _, alive = psutil.wait_procs(alive, timeout=30)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(server.pid, signal.SIGKILL)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=10)


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


@contextlib.contextmanager
def running(start: Any) -> Iterator[Server]:
    """A server from `start()`, stopped on the way out, whatever happened."""
    server = start()
    try:
        yield server
    finally:
        stop(server)


# --- inferences ---------------------------------------------------------------------------


def infer(port: int, model: str, inputs: list[tuple[str, list[int], list[float]]]) -> dict[str, list[float]]:
    body = {"inputs": [{"name": n, "shape": s, "datatype": "FP32", "data": d} for n, s, d in inputs]}
    status, text = http(port, f"/v2/models/{model}/infer", body, timeout=120)
    if status != 200:
        raise RuntimeError(f"{model}: HTTP {status}: {text[:300]!r}")
    return {output["name"]: output["data"] for output in json.loads(text)["outputs"]}


def exercise_onnx(server: Server, expected: float, requests: int) -> None:
    for _ in range(requests):
        got = infer(server.http_port, ONNX_MODEL, [("INPUT", [1, ONNX_ROWS], onnx_input())])["OUTPUT"][0]
        if abs(got - expected) > 1e-3 * max(1.0, abs(expected)):
            raise RuntimeError(f"{server.label}: {ONNX_MODEL} answered {got}, expected {expected}")


def exercise_python(server: Server, names: list[str]) -> None:
    a = [float(i) for i in range(FEATURES)]
    b = [0.5] * FEATURES
    for name in names:
        outputs = infer(server.http_port, name, [("INPUT0", [FEATURES], a), ("INPUT1", [FEATURES], b)])
        if outputs["OUTPUT0"] != [x + 0.5 for x in a] or outputs["OUTPUT1"] != [x - 0.5 for x in a]:
            raise RuntimeError(f"{server.label}: {name} answered {outputs}")


def settle(server: Server, quiet: float, timeout: float = 120.0) -> None:
    """Waits until the server's set of processes has stayed the same for `quiet` seconds: a
    server that answers while it still starts processes (a worker loading its models after
    another said ready) is measured once it has them all."""
    pids = {p.pid for p in server_processes(server)}
    since = started = time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() - started > timeout:
            print(f"  warning: {server.label} still changed its processes after {timeout:.0f} s", flush=True)
            return
        time.sleep(0.5)
        now = {p.pid for p in server_processes(server)}
        if now != pids:
            pids, since = now, time.monotonic()


# --- measurement --------------------------------------------------------------------------


@dataclass
class ProcessMemory:
    pid: int
    name: str
    pss: int
    rss: int


@dataclass
class Row:
    label: str
    processes: int
    pss_mib: float
    rss_mib: float
    by_process: list[ProcessMemory]


def smaps_rollup(pid: int) -> tuple[int, int]:
    """(Pss, Rss) in bytes: the kernel's own sums over every mapping of the process."""
    values = {}
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            key, _, rest = line.partition(":")
            if key in ("Pss", "Rss"):
                values[key] = int(rest.split()[0]) * 1024
    return values["Pss"], values["Rss"]


def describe(process: psutil.Process) -> str:
    """The process's name, with the module a `python -m` process runs (naiad's workers and
    stubs are all named python)."""
    name: str = process.name()
    arguments: list[str] = process.cmdline()
    if "-m" in arguments[:-1]:
        return f"{name} -m {arguments[arguments.index('-m') + 1]}"
    return name


def measure(server: Server) -> Row:
    memories = []
    for process in server_processes(server):
        try:
            pss, rss = smaps_rollup(process.pid)
            name = describe(process)
        except (OSError, psutil.Error):
            continue  # ended between the walk and the read: it holds nothing now
        memories.append(ProcessMemory(process.pid, name, pss, rss))
    return Row(
        server.label,
        len(memories),
        sum(m.pss for m in memories) / MIB,
        sum(m.rss for m in memories) / MIB,
        sorted(memories, key=lambda m: -m.pss),
    )


def print_table(title: str, rows: list[Row], verbose: bool) -> None:
    print(f"\n{title}")
    print(f"  {'server / config':<34} {'processes':>9} {'PSS MiB':>10} {'RSS MiB':>10}")
    for row in rows:
        print(f"  {row.label:<34} {row.processes:>9} {row.pss_mib:>10.1f} {row.rss_mib:>10.1f}")
        groups: dict[str, list[ProcessMemory]] = {}
        for memory in row.by_process:
            groups.setdefault(memory.name, []).append(memory)
        parts = [f"{name} x{len(ms)} {sum(m.pss for m in ms) / MIB:.1f}" for name, ms in groups.items()]
        print(f"  {'':<4}PSS MiB by process: {'; '.join(parts)}")
        if verbose:
            for memory in row.by_process:
                print(f"  {'':<6}{memory.pid:>8} {memory.name:<56} {memory.pss / MIB:>9.1f} {memory.rss / MIB:>9.1f}")


def ratio_line(text: str, value: float, goal: float | None) -> dict[str, Any]:
    verdict = "" if goal is None else f" (goal <= {goal})  {'PASS' if value <= goal else 'FAIL'}"
    print(f"{text} = {value:.3f}{verdict}")
    return {"text": text, "ratio": value, "goal": goal, "pass": None if goal is None else value <= goal}


# --- scenarios ----------------------------------------------------------------------------


@dataclass
class Settings:
    naiad: Path
    naiad_flags: list[str]
    onnx_mb: int
    onnx_requests: int
    python_models: int
    settle: float
    ready_timeout: float
    verbose: bool
    logs: Path


def onnx_scenario(settings: Settings, work: Path) -> dict[str, Any]:
    repo = work / "onnx_repository"
    print(f"building an ONNX model with {settings.onnx_mb} MB of weights in {repo} ...", flush=True)
    expected = write_onnx_repository(repo, settings.onnx_mb)
    rows = []
    for label, flags in (
        (f"naiad default {' '.join(settings.naiad_flags)}".strip(), settings.naiad_flags),
        ("naiad --workers 1", [*settings.naiad_flags, "--workers", "1"]),
    ):
        print(f"starting {label} ...", flush=True)
        start = _naiad_starter(settings, repo, label, flags)
        with running(start) as server:
            exercise_onnx(server, expected, settings.onnx_requests)
            settle(server, settings.settle)
            rows.append(measure(server))
    print_table(f"ONNX model, {settings.onnx_mb} MB of FP32 weights", rows, settings.verbose)
    ratio = ratio_line(
        f"ONNX {settings.onnx_mb} MB: default / --workers 1 PSS", rows[0].pss_mib / rows[1].pss_mib, GOAL_ONNX_WORKERS
    )
    return {"rows": [asdict(r) for r in rows], "ratios": [ratio]}


def python_scenario(settings: Settings, work: Path) -> dict[str, Any]:
    repo = work / "python_repository"
    names = write_python_repository(repo, settings.python_models)
    print(f"wrote {len(names)} Python models in {repo}", flush=True)
    starts = [
        ("Triton", lambda: start_triton(repo, names)),
        *(
            (label, _naiad_starter(settings, repo, label, flags))
            for label, flags in (
                (f"naiad default {' '.join(settings.naiad_flags)}".strip(), settings.naiad_flags),
                ("naiad --workers 1", [*settings.naiad_flags, "--workers", "1"]),
            )
        ),
    ]
    rows = []
    for label, start in starts:
        print(f"starting {label} ...", flush=True)
        with running(start) as server:
            exercise_python(server, names)
            settle(server, settings.settle)
            rows.append(measure(server))
    print_table(f"{len(names)} Python models (add_sub-sized, importing numpy)", rows, settings.verbose)
    triton, default, one = rows
    ratios = [
        ratio_line(
            f"{len(names)} Python models: naiad default / Triton PSS",
            default.pss_mib / triton.pss_mib,
            GOAL_PYTHON_VS_TRITON,
        ),
        ratio_line(f"{len(names)} Python models: naiad --workers 1 / Triton PSS", one.pss_mib / triton.pss_mib, None),
    ]
    return {"rows": [asdict(r) for r in rows], "ratios": ratios}


def _naiad_starter(settings: Settings, repo: Path, label: str, flags: list[str]) -> Any:
    return lambda: start_naiad(settings.naiad, repo, flags, label, settings.logs, settings.ready_timeout)


def exit_on_sigterm(*_: object) -> None:
    """SIGTERM ends the benchmark through its finally blocks, so no server outlives it; a
    second one must not cut those short."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(143)


def main() -> int:
    assert __doc__ is not None
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scenario",
        nargs="+",
        choices=["onnx", "python"],
        default=["onnx", "python"],
        help="which scenarios to run (default both)",
    )
    parser.add_argument(
        "--naiad",
        type=Path,
        default=ROOT / ".venv" / "bin" / "naiad",
        help="the naiad executable (default: this checkout's .venv/bin/naiad)",
    )
    parser.add_argument(
        "--naiad-flags",
        default="",
        help="extra flags for every naiad server, one shell-quoted string: --naiad-flags='--pin-loop-threads off'",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--onnx-mb", type=int, default=200, help="MB (10^6 bytes) of FP32 weights in the ONNX model")
    parser.add_argument(
        "--onnx-requests", type=int, default=16, help="inferences sent to the ONNX model, each on its own connection"
    )
    parser.add_argument("--python-models", type=int, default=50, help="Python models in the repository (default 50)")
    parser.add_argument(
        "--settle",
        type=float,
        default=5.0,
        help="seconds the server's processes must stay the same before the reading (default 5)",
    )
    parser.add_argument(
        "--ready-timeout", type=float, default=600.0, help="seconds a naiad server may take to become ready"
    )
    parser.add_argument("--keep-logs", action="store_true", help="keep the server logs (their directory is printed)")
    parser.add_argument("--verbose", action="store_true", help="print every process of every server")
    args = parser.parse_args()
    if not args.naiad.exists():
        parser.error(f"{args.naiad} not found (bash scripts/setup.sh, or pass --naiad)")
    signal.signal(signal.SIGTERM, exit_on_sigterm)
    logs = Path(tempfile.mkdtemp(prefix="memory_bench_logs_"))
    settings = Settings(
        naiad=args.naiad,
        naiad_flags=shlex.split(args.naiad_flags),
        onnx_mb=args.onnx_mb,
        onnx_requests=args.onnx_requests,
        python_models=args.python_models,
        settle=args.settle,
        ready_timeout=args.ready_timeout,
        verbose=args.verbose,
        logs=logs,
    )
    cpus, usable = os.cpu_count(), len(os.sched_getaffinity(0))
    print(f"naiad: {args.naiad} ({cpus} CPUs here, {usable} usable)")
    results: dict[str, Any] = {"naiad": str(args.naiad), "naiad_flags": settings.naiad_flags, "cpus": cpus}
    results["usable_cpus"] = usable
    try:
        with tempfile.TemporaryDirectory(prefix="memory_bench_") as work:
            if "onnx" in args.scenario:
                results["onnx"] = onnx_scenario(settings, Path(work))
            if "python" in args.scenario:
                results["python"] = python_scenario(settings, Path(work))
    except RuntimeError as exc:  # a server that did not start or answered wrongly: no figure
        print(f"error: {exc}", file=sys.stderr)
        args.keep_logs = True  # the message names a log: keep it to read
        return 1
    finally:
        if args.keep_logs:
            print(f"server logs: {logs}")
        else:
            shutil.rmtree(logs, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
