"""What bench/faults.py and bench/soak.py share: the servers they start (naiad and the real
Triton through ../shared/bench/triton.sh), the model repository they write, the server's
processes as /proc shows them, and a small asyncio HTTP/1.1 client that counts every request.

Not run by itself. The client is raw asyncio (a Protocol per connection, keep-alive, one
request in flight per connection) because a load tool must tell apart what wrk cannot: an
answer with an error status (the server said no: *failed*) from a request whose connection
was closed or reset, or that timed out, with no answer (*lost*). A connection that could not
be opened is *refused* and no request was sent on it.

BENCH_DIR overrides where shared/bench is (default ../shared/bench beside the checkout);
ANCHORS where its environments are (default /tmp/anchors, as triton.sh).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
# naiad's Python model processes: forked from a stub template (same command line) or spawned.
NAIAD_STUB = "naiad_backend_python.model_side"
TRITON_STUB = "triton_python_backend_stub"
STOP_TIMEOUT_S = 40.0
READY_TIMEOUT_S = 180.0


def bench_dir() -> Path:
    return Path(os.environ.get("BENCH_DIR", ROOT.parent / "shared" / "bench"))


def anchors_dir() -> Path:
    return Path(os.environ.get("ANCHORS", "/tmp/anchors"))


def default_naiad() -> str:
    local = ROOT / ".venv" / "bin" / "naiad"
    return str(local) if local.exists() else "naiad"


# -- the model repository -------------------------------------------------------------------

# Triton's add_sub as ../shared/bench/models has it: a Python model with dynamic batching.
ADD_SUB_CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 64
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }}, {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }}, {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
dynamic_batching {{ max_queue_delay_microseconds: 100 }}
"""

ADD_SUB_PY = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUTPUT0", (a + b).astype(np.float32)),
                pb_utils.Tensor("OUTPUT1", (a - b).astype(np.float32))]))
        return responses
"""

# A model whose requests stay in flight: SLOW_S seconds each, four instances.
SLOW_S = 0.5
SLOW_CONFIG = """name: "slow"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { count: 4 kind: KIND_CPU } ]
"""

SLOW_PY = f"""import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            time.sleep({SLOW_S})
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", a)]))
        return responses
"""

# A model with a large answer: N float32 ones, for clients that never read it.
BIG_CONFIG = """name: "big"
backend: "python"
max_batch_size: 0
input [ { name: "N" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

BIG_PY = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy().reshape(-1)[0])
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUT", np.ones(n, np.float32))]))
        return responses
"""


def write_model(repo: Path, name: str, config: str, model_py: str) -> None:
    version = repo / name / "1"
    version.mkdir(parents=True, exist_ok=True)
    (version / "model.py").write_text(model_py)
    (repo / name / "config.pbtxt").write_text(config)


def write_repository(repo: Path, models: list[str]) -> Path:
    """A Triton repository that both servers read unchanged: any of add_sub, slow, big and
    reload_me (a second add_sub, for load/unload cycles)."""
    sources = {
        "add_sub": (ADD_SUB_CONFIG.format(name="add_sub"), ADD_SUB_PY),
        "reload_me": (ADD_SUB_CONFIG.format(name="reload_me"), ADD_SUB_PY),
        "slow": (SLOW_CONFIG, SLOW_PY),
        "big": (BIG_CONFIG, BIG_PY),
    }
    for name in models:
        write_model(repo, name, *sources[name])
    return repo


def add_sub_json() -> bytes:
    values = [float(i) for i in range(16)]
    inputs = [{"name": name, "datatype": "FP32", "shape": [1, 16], "data": values} for name in ("INPUT0", "INPUT1")]
    return json.dumps({"inputs": inputs}).encode()


def slow_json() -> bytes:
    inputs = [{"name": "INPUT0", "datatype": "FP32", "shape": [16], "data": [1.0] * 16}]
    return json.dumps({"inputs": inputs}).encode()


def big_json(floats: int) -> bytes:
    """A request for `floats` float32 values back as raw bytes (the binary-tensor extension)."""
    body = {
        "inputs": [{"name": "N", "datatype": "INT32", "shape": [1], "data": [floats]}],
        "outputs": [{"name": "OUT", "parameters": {"binary_data": True}}],
    }
    return json.dumps(body).encode()


def post(path: str, body: bytes, extra: str = "") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n{extra}"
    return head.encode() + b"Content-Length: %d\r\n\r\n" % len(body) + body


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()


def infer(model: str, body: bytes) -> bytes:
    return post(f"/v2/models/{model}/infer", body)


# -- processes ------------------------------------------------------------------------------


def children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        with contextlib.suppress(OSError):
            found += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    return found


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    for child in children(pid):
        found += [child, *descendants(child)]
    return found


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def cpu_seconds(pid: int) -> float:
    """User and system CPU time `pid` has used (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def open_files(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def pids_named(root: int, name: str) -> list[int]:
    """The processes under (or at) `root` whose /proc/PID/comm is `name`."""
    return [pid for pid in [root, *descendants(root)] if comm(pid) == name]


def model_processes(root: int, model: str | None = None) -> list[int]:
    """The Python model processes under `root`. naiad's are forked from a stub template with the
    template's command line, so the template (whose parent is not one of them) is left out;
    Triton's stub names its model's file on its command line, which `model` selects."""
    found = []
    for pid in descendants(root):
        line = cmdline(pid)
        if NAIAD_STUB in line:
            template = "stub_template" in line and NAIAD_STUB not in cmdline(parent(pid))
            if not template:
                found.append(pid)
        elif TRITON_STUB in line and (model is None or f"/{model}/" in line):
            found.append(pid)
    return found


def tree_rss_mib(root: int) -> float:
    """RSS summed over `root` and its descendants (pages shared between them counted in each)."""
    return sum(rss_kib(pid) for pid in [root, *descendants(root)]) / 1024


# -- servers --------------------------------------------------------------------------------


@dataclass
class Ports:
    http: int
    grpc: int
    metrics: int


@dataclass
class Server:
    """A server started in its own session: its process group is every process it started
    (those that do not leave it), and stopping signals the group."""

    label: str
    kind: str  # "naiad" or "triton"
    ports: Ports
    log: Path
    process: subprocess.Popen[bytes] | None = None
    pid: int = 0
    seen: set[int] = field(default_factory=set)

    @property
    def http(self) -> tuple[str, int]:
        return HOST, self.ports.http

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        return self.pid > 0 and alive(self.pid)

    def note_processes(self) -> None:
        """Remember every process of the server seen so far, so that stop() can end one that
        left its parent (an orphan) too."""
        if self.pid:
            self.seen.update(descendants(self.pid))

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        self.note_processes()
        if self.pid:
            signal_group(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.1)
            signal_group(self.pid, signal.SIGKILL)
        for pid in self.seen:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)
        wait_port_free(self.ports.http)


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex((HOST, port)) == 0


def wait_port_free(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while port_in_use(port) and time.monotonic() < deadline:
        time.sleep(0.1)


def naiad_command(naiad: str, repo: Path, ports: Ports, flags: list[str]) -> list[str]:
    return [
        *shlex.split(naiad),
        "serve",
        "--model-repository",
        str(repo),
        "--http-address",
        HOST,
        "--grpc-address",
        HOST,
        "--metrics-address",
        HOST,
        "--http-port",
        str(ports.http),
        "--grpc-port",
        str(ports.grpc),
        "--metrics-port",
        str(ports.metrics),
        *flags,
    ]


def start_naiad(naiad: str, repo: Path, ports: Ports, flags: list[str], log: Path) -> Server:
    """Starts `naiad serve` and returns at once (wait_ready waits)."""
    if port_in_use(ports.http):
        raise RuntimeError(f"port {ports.http} is already in use")
    label = "naiad" + (f" {' '.join(flags)}" if flags else "")
    with log.open("wb") as out:
        process = subprocess.Popen(
            naiad_command(naiad, repo, ports, flags), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return Server(label, "naiad", ports, log, process, process.pid)


def start_triton(repo: Path, ports: Ports, args: str = "") -> tuple[Server, subprocess.Popen[str]]:
    """Starts ../shared/bench/triton.sh, which returns once Triton is ready and prints its PID;
    returns at once with that script running, so a caller may watch readiness itself.
    `args` are extra tritonserver flags (TRITON_ARGS)."""
    if port_in_use(ports.http):
        raise RuntimeError(f"port {ports.http} is already in use")
    script = subprocess.Popen(
        [str(bench_dir() / "triton.sh"), str(repo), str(ports.http), str(ports.grpc), str(ports.metrics)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ANCHORS": str(anchors_dir()), "TRITON_ARGS": args},
    )
    label = "triton" + (f" {args}" if args else "")
    return Server(label, "triton", ports, anchors_dir() / f"triton-{ports.http}.log"), script


def adopt_triton(server: Server, script: subprocess.Popen[str]) -> None:
    """Takes Triton's PID from triton.sh once it has ended. triton.sh starts tritonserver under
    setsid, so that PID is also its process group's (its Python stubs are in the group)."""
    out, err = script.communicate(timeout=READY_TIMEOUT_S)
    if script.returncode != 0:
        server.pid = find_triton(server.ports.http)
        raise RuntimeError(f"triton.sh failed: {err.strip()}; its log: {server.log}")
    server.pid = int(out.split()[-1])


def find_triton(http_port: int) -> int:
    """The tritonserver on `http_port`, for cleaning up after a triton.sh that failed."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            line = cmdline(int(entry))
            if "tritonserver" in line and f"--http-port {http_port} " in line:
                return int(entry)
    return 0


def wait_ready(server: Server, timeout: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process is not None and server.process.poll() is not None:
            raise RuntimeError(f"{server.label} exited before it was ready; its log: {server.log}")
        if http_status(server.http, get("/v2/health/ready")) == 200:
            return
        time.sleep(0.1)
    raise RuntimeError(f"{server.label} was not ready in {timeout:.0f} s; its log: {server.log}")


def start(
    kind: str, naiad: str, repo: Path, ports: Ports, flags: list[str], log: Path, triton_args: str = ""
) -> Server:
    """A server of `kind`, ready."""
    if kind == "naiad":
        server = start_naiad(naiad, repo, ports, flags, log)
    else:
        server, script = start_triton(repo, ports, triton_args)
        try:
            adopt_triton(server, script)
        except Exception:
            server.stop()
            raise
    try:
        wait_ready(server)
    except Exception:
        server.stop()
        raise
    server.note_processes()
    return server


@contextlib.contextmanager
def running(server: Server) -> Iterator[Server]:
    try:
        yield server
    finally:
        server.stop()


def http_status(address: tuple[str, int], request: bytes, timeout: float = 5.0) -> int:
    """The status of one request on a fresh blocking connection; 0 when none came back."""
    try:
        with socket.create_connection(address, timeout=timeout) as sock:
            sock.sendall(request)
            data = b""
            while b"\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    return 0
                data += chunk
            return int(data.split(b" ", 2)[1])
    except (OSError, ValueError, IndexError):
        return 0


def http_call(address: tuple[str, int], request: bytes, timeout: float = 30.0) -> tuple[int, bytes]:
    """The status and body of one request on a fresh blocking connection (Connection: close)."""
    request = request.replace(b"\r\n", b"\r\nConnection: close\r\n", 1)
    try:
        with socket.create_connection(address, timeout=timeout) as sock:
            sock.sendall(request)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    except OSError:
        return 0, b""
    data = b"".join(chunks)
    parsed = parse_response(bytearray(data))
    if parsed is None:
        return 0, b""
    head_end = data.find(b"\r\n\r\n") + 4
    return parsed.status, data[head_end : parsed.consumed]


# -- the HTTP/1.1 client --------------------------------------------------------------------


@dataclass
class Response:
    status: int
    close: bool  # the server said Connection: close
    consumed: int
    error_event: bool = False  # a chunked (Server-Sent Events) body that carried an "error"


_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
_CHUNKED = re.compile(rb"\r\ntransfer-encoding:[^\r]*chunked", re.IGNORECASE)
_CLOSE = re.compile(rb"\r\nconnection:[^\r]*close", re.IGNORECASE)


def parse_response(buffer: bytearray) -> Response | None:
    """The first whole response in `buffer`, or None while it is incomplete."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(buffer[: end + 2])
    status = int(head[9:12])
    close = _CLOSE.search(head) is not None or head.startswith(b"HTTP/1.0")
    length = _CONTENT_LENGTH.search(head)
    if length is not None:
        total = end + 4 + int(length.group(1))
        return Response(status, close, total) if len(buffer) >= total else None
    if _CHUNKED.search(head) is not None:
        return _parse_chunked(buffer, end + 4, status, close)
    # No length: the body ends with the connection; only seen on errors here.
    return Response(status, True, end + 4)


def _parse_chunked(buffer: bytearray, at: int, status: int, close: bool) -> Response | None:
    start = at
    while True:
        line_end = buffer.find(b"\r\n", at)
        if line_end < 0:
            return None
        size = int(bytes(buffer[at:line_end]).split(b";")[0], 16)
        at = line_end + 2 + size + 2
        if len(buffer) < at:
            return None
        if size == 0:
            return Response(status, close, at, b'"error"' in buffer[start:at])


class Lost(Exception):
    """No answer came: the connection was closed or reset, or the time ran out."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class Connection(asyncio.Protocol):
    """One keep-alive connection with at most one request in flight."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[Response] | None = None
        self.closed = False
        self.closed_at = 0.0
        self.reset = False  # closed by a reset (ECONNRESET) rather than an orderly close
        self.by_client = False  # this side closed it (close() or abort())
        self.by_server = False  # the server closed it (or reset it) first
        self.on_close: Callable[[Connection], None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without deriving from it.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.waiter is None or self.waiter.done():
            return
        response = parse_response(self.buffer)
        if response is not None:
            del self.buffer[: response.consumed]
            self.waiter.set_result(response)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:  # else the kernel's state told first (faults.py's watch_closes)
            self.closed = True
            self.closed_at = time.monotonic()
            self.reset = isinstance(exc, ConnectionResetError)
            self.by_server = not self.by_client
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(Lost("reset" if self.reset else "closed"))
        if self.on_close is not None:
            self.on_close(self)

    async def request(self, payload: bytes, timeout: float) -> Response:
        assert self.transport is not None
        if self.closed:
            raise Lost("closed")
        waiter: asyncio.Future[Response] = self.loop.create_future()
        self.waiter = waiter
        self.transport.write(payload)
        timer = self.loop.call_later(timeout, _expire, waiter)
        try:
            return await waiter
        finally:
            timer.cancel()
            self.waiter = None

    def close(self) -> None:
        self.by_client = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self.by_client = True
        if self.transport is not None:
            self.transport.abort()


def _expire(waiter: asyncio.Future[Response]) -> None:
    if not waiter.done():
        waiter.set_exception(Lost("timeout"))


async def connect(address: tuple[str, int], timeout: float = 5.0, rcvbuf: int = 0) -> Connection:
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    if rcvbuf:
        # Set before connecting, so the window the kernel offers stays small.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    try:
        await asyncio.wait_for(loop.sock_connect(sock, address), timeout)
        _, protocol = await loop.create_connection(Connection, sock=sock)
    except BaseException:
        sock.close()
        raise
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return protocol


@dataclass
class Tally:
    """What happened to the requests of one stream of load."""

    sent: int = 0
    answered: int = 0  # 2xx
    failed: int = 0  # any other status: the server said no
    lost: int = 0  # no answer: closed, reset or timed out under a request in flight
    refused: int = 0  # connections that could not be opened (nothing sent)
    told_to_close: int = 0  # answers that carried Connection: close
    closed_idle: int = 0  # connections the server closed between requests
    statuses: Counter[str] = field(default_factory=Counter)  # HTTP statuses, gRPC code names
    lost_why: Counter[str] = field(default_factory=Counter)
    answered_at: list[float] = field(default_factory=list)  # time.monotonic() of each 2xx, in order
    keep_times: bool = True  # False where only counts matter (a soak would hoard millions)

    def record(self, response: Response) -> None:
        self.statuses[str(response.status)] += 1
        if 200 <= response.status < 300:
            self.answered += 1
            if self.keep_times:
                self.answered_at.append(time.monotonic())
        else:
            self.failed += 1
        if response.close:
            self.told_to_close += 1

    def add(self, other: Tally) -> None:
        for name in ("sent", "answered", "failed", "lost", "refused", "told_to_close", "closed_idle"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.statuses.update(other.statuses)
        self.lost_why.update(other.lost_why)
        self.answered_at = sorted(self.answered_at + other.answered_at)

    def snapshot(self) -> Tally:
        copy = Tally(keep_times=self.keep_times)
        copy.add(self)
        return copy

    def since(self, earlier: Tally) -> Tally:
        """The requests that ended after `earlier` (a snapshot of this tally) was taken, those
        in flight then included; call it once every request has ended."""
        later = Tally(keep_times=self.keep_times)
        for name in ("answered", "failed", "lost", "refused", "told_to_close", "closed_idle"):
            setattr(later, name, getattr(self, name) - getattr(earlier, name))
        later.sent = later.answered + later.failed + later.lost
        later.statuses = self.statuses - earlier.statuses
        later.lost_why = self.lost_why - earlier.lost_why
        later.answered_at = self.answered_at[len(earlier.answered_at) :]
        return later

    def rate(self, start: float, end: float) -> float:
        """Answers per second between two time.monotonic() instants."""
        count = bisect.bisect_left(self.answered_at, end) - bisect.bisect_left(self.answered_at, start)
        return count / (end - start) if end > start else 0.0

    def counts(self) -> dict[str, Any]:
        return {
            "sent": self.sent,
            "answered": self.answered,
            "failed": self.failed,
            "lost": self.lost,
            "refused": self.refused,
            "told_to_close": self.told_to_close,
            "closed_idle": self.closed_idle,
            "statuses": dict(sorted(self.statuses.items())),
            "lost_why": dict(self.lost_why),
        }


async def keep_alive_client(
    address: tuple[str, int],
    payload: bytes,
    tally: Tally,
    until: Callable[[], bool],
    timeout: float = 10.0,
    retry_s: float = 0.02,
) -> None:
    """Sends `payload` again and again on one keep-alive connection until `until()`; opens a new
    connection when the server closed it (told or not) and retries a refused one every
    `retry_s`. The request in flight when `until()` becomes true is finished and counted."""
    conn: Connection | None = None
    while not until():
        if conn is not None and conn.closed:
            tally.closed_idle += 1
            conn = None
        if conn is None:
            try:
                conn = await connect(address, timeout)
            except (TimeoutError, OSError):
                tally.refused += 1
                await asyncio.sleep(retry_s)
                continue
        tally.sent += 1
        try:
            response = await conn.request(payload, timeout)
        except Lost as lost:
            tally.lost += 1
            tally.lost_why[lost.why] += 1
            conn.abort()
            conn = None
            continue
        tally.record(response)
        if response.close:
            conn.close()
            conn = None
    if conn is not None:
        conn.close()


async def one_request(address: tuple[str, int], payload: bytes, tally: Tally, timeout: float = 10.0) -> None:
    """One request on a new connection, then close it."""
    try:
        conn = await connect(address, timeout)
    except (TimeoutError, OSError):
        tally.refused += 1
        return
    tally.sent += 1
    try:
        tally.record(await conn.request(payload, timeout))
    except Lost as lost:
        tally.lost += 1
        tally.lost_why[lost.why] += 1
    finally:
        conn.close()


def run_load(
    address: tuple[str, int], payload: bytes, connections: int, until: Callable[[], bool], timeout: float = 10.0
) -> tuple[Tally, list[asyncio.Task[None]]]:
    """Starts `connections` keep-alive clients in the running loop; returns their shared tally
    and their tasks (await them to finish the requests in flight)."""
    tally = Tally()
    tasks = [
        asyncio.create_task(keep_alive_client(address, payload, tally, until, timeout)) for _ in range(connections)
    ]
    return tally, tasks


def use_uvloop() -> str:
    """The client's event loop: uvloop where installed (about twice the requests per CPU)."""
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


# -- gRPC -----------------------------------------------------------------------------------

INFER_METHOD = "/inference.GRPCInferenceService/ModelInfer"
STREAM_METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"
# What grpc's own transport says when a call ended with no status from the server (a closed or
# reset connection, a GOAWAY that cut a call in flight, a deadline): such calls are lost.
_TRANSPORT = re.compile(
    r"socket closed|connection reset|broken pipe|goaway|stream removed|deadline exceeded|rst_stream|"
    r"end of tcp stream|connection aborted|not connected",
    re.IGNORECASE,
)
# ... and when it could not open a connection, so the call never left.
_REFUSED = re.compile(r"failed to connect to all addresses|connection refused", re.IGNORECASE)


def grpc_outcome(error: Any) -> tuple[str, str]:
    """("lost" | "refused" | "failed", why) for a grpc.aio.AioRpcError: lost or refused when
    grpc's transport made the status up, failed when the server sent it."""
    code = error.code().name
    details = error.details() or ""
    why = f"{code}: {details[:80]}"
    transport = code in ("UNAVAILABLE", "UNKNOWN", "CANCELLED", "DEADLINE_EXCEEDED", "INTERNAL")
    if transport and _REFUSED.search(details):
        return "refused", why
    if transport and _TRANSPORT.search(details):
        return "lost", why
    return "failed", why


def grpc_add_sub() -> bytes:
    """add_sub's ModelInferRequest as tritonclient builds it (raw_input_contents), serialized."""
    import numpy as np
    from tritonclient.grpc import service_pb2  # type: ignore[import-untyped]

    request = service_pb2.ModelInferRequest(model_name="add_sub")
    data = np.arange(16, dtype=np.float32).reshape(1, 16)
    for name in ("INPUT0", "INPUT1"):
        request.inputs.add(name=name, datatype="FP32", shape=[1, 16])
        request.raw_input_contents.append(data.tobytes())
    return bytes(request.SerializeToString())


async def grpc_unary_client(
    channel: Any,
    method: str,
    payload: bytes,
    tally: Tally,
    until: Callable[[], bool],
    timeout: float = 10.0,
    retry_s: float = 0.02,
) -> None:
    """Sends `payload` (a serialized request) again and again on `channel` (grpc.aio)."""
    import grpc  # type: ignore[import-untyped]

    call = channel.unary_unary(method)
    while not until():
        try:
            await call(payload, timeout=timeout)
        except grpc.aio.AioRpcError as error:
            outcome, why = grpc_outcome(error)
            if outcome == "refused":
                tally.refused += 1
                await asyncio.sleep(retry_s)
                continue
            tally.sent += 1
            if outcome == "lost":
                tally.lost += 1
                tally.lost_why[why] += 1
            else:
                tally.failed += 1
                tally.statuses[why] += 1
            continue
        tally.sent += 1
        tally.answered += 1
        if tally.keep_times:
            tally.answered_at.append(time.monotonic())
