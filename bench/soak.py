#!/usr/bin/env python3
"""Does a server's memory or its count of open files grow under a steady mix of every kind of
request? Not part of CI: it runs for minutes.

    .venv/bin/python bench/soak.py [--minutes 10] [--warmup-minutes 2] [--server naiad|triton]
        [--naiad-flags '--workers 2'] [--json soak.json]

Writes a model repository at run time (Python models, read unchanged by naiad and by the real
Triton 2.51 through ../shared/bench/triton.sh):

- add_sub (dynamic batching), over HTTP JSON (4 keep-alive connections, and 1 client opening a
  new connection for every request), HTTP binary tensors (4) and gRPC unary (4);
- repeat (decoupled: one response per element of IN, from a thread), over gRPC ModelStreamInfer
  (2 streams, each closed and opened again every 100 requests of 8 responses);
- tokens (decoupled, one word per response), over HTTP generate_stream (Server-Sent Events, 2);
- bls (a BLS model: a blocking exec() of add_sub, then an async_exec() of repeat with
  decoupled=True, reading every response), over HTTP JSON (2).

Every 30 s it prints, per process of the server (the server's own, its workers, its model
processes; named by /proc/PID/comm, model processes by the model they serve where their command
line says), RSS and open file descriptors, and the requests each stream completed and failed.
At the end: per process and in total, the growth of RSS and of open files from the first sample
after the warm-up to the last (the goal: under 1% of RSS). A process that appeared or went away
during the run is named.

naiad runs with its defaults (one process on two usable CPUs) plus --naiad-flags. Ports: 19310-
19312 (naiad), 18310-18312 (Triton), on 127.0.0.1. BENCH_DIR and ANCHORS as bench/faults.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import loadkit as lk
import numpy as np
from tritonclient.grpc import service_pb2  # type: ignore[import-untyped]

SAMPLE_S = 30.0
STREAM_REQUESTS = 100  # requests on one gRPC stream before it is closed and another opened
REPEAT_ELEMENTS = 8

REPEAT_CONFIG = """name: "repeat"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] } ]
"""

REPEAT_PY = """import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            sender = request.get_response_sender()
            threading.Thread(target=self.respond, args=(sender, values)).start()
        return None

    def respond(self, sender, values):
        for index, value in enumerate(values):
            out = pb_utils.Tensor("OUT", np.array([value], dtype=np.int32))
            idx = pb_utils.Tensor("IDX", np.array([index], dtype=np.uint32))
            sender.send(pb_utils.InferenceResponse(output_tensors=[out, idx]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

TOKENS_CONFIG = """name: "tokens"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ 1 ] } ]
"""

TOKENS_PY = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0].decode()
            for word in text.split():
                token = np.array([word.encode()], dtype=object)
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", token)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

BLS_CONFIG = """name: "bls"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1, 16 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 1, 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1, 16 ] }, { name: "COUNT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""

BLS_PY = f"""import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            inputs = [pb_utils.get_input_tensor_by_name(request, n) for n in ("INPUT0", "INPUT1")]
            added = pb_utils.InferenceRequest(
                model_name="add_sub", inputs=inputs, requested_output_names=["OUTPUT0"]
            ).exec()
            if added.has_error():
                responses.append(pb_utils.InferenceResponse(error=added.error()))
                continue
            repeat = pb_utils.InferenceRequest(
                model_name="repeat",
                inputs=[pb_utils.Tensor("IN", np.arange({REPEAT_ELEMENTS}, dtype=np.int32))],
                requested_output_names=["OUT"],
            )
            count = 0
            # A plain for, as Triton iterates a decoupled BLS result (it has no __aiter__ there).
            for answer in await repeat.async_exec(decoupled=True):
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
                if pb_utils.get_output_tensor_by_name(answer, "OUT") is not None:
                    count += 1
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.get_output_tensor_by_name(added, "OUTPUT0"),
                pb_utils.Tensor("COUNT", np.array([count], dtype=np.int32)),
            ]))
        return responses
"""


def write_repository(repo: Path) -> Path:
    lk.write_repository(repo, ["add_sub"])
    lk.write_model(repo, "repeat", REPEAT_CONFIG, REPEAT_PY)
    lk.write_model(repo, "tokens", TOKENS_CONFIG, TOKENS_PY)
    lk.write_model(repo, "bls", BLS_CONFIG, BLS_PY)
    return repo


# -- request bodies -------------------------------------------------------------------------


def add_sub_binary() -> bytes:
    """add_sub with both inputs and both outputs as raw bytes (tritonclient's binary extension)."""
    raw = np.arange(16, dtype=np.float32).tobytes()
    header = json.dumps(
        {
            "inputs": [
                {"name": n, "datatype": "FP32", "shape": [1, 16], "parameters": {"binary_data_size": len(raw)}}
                for n in ("INPUT0", "INPUT1")
            ],
            "outputs": [{"name": n, "parameters": {"binary_data": True}} for n in ("OUTPUT0", "OUTPUT1")],
        }
    ).encode()
    body = header + raw + raw
    extra = f"Inference-Header-Content-Length: {len(header)}\r\n"
    return lk.post("/v2/models/add_sub/infer", body, extra).replace(
        b"Content-Type: application/json", b"Content-Type: application/octet-stream"
    )


def bls_json() -> bytes:
    values = [float(i) for i in range(16)]
    inputs = [{"name": n, "datatype": "FP32", "shape": [1, 16], "data": values} for n in ("INPUT0", "INPUT1")]
    return lk.infer("bls", json.dumps({"inputs": inputs}).encode())


def generate_stream() -> bytes:
    body = json.dumps({"text_input": "a soak keeps sending the same few words"}).encode()
    return lk.post("/v2/models/tokens/generate_stream", body)


def repeat_request() -> bytes:
    request = service_pb2.ModelInferRequest(model_name="repeat")
    request.inputs.add(name="IN", datatype="INT32", shape=[REPEAT_ELEMENTS])
    request.raw_input_contents.append(np.arange(REPEAT_ELEMENTS, dtype=np.int32).tobytes())
    return bytes(request.SerializeToString())


# -- the streams of load --------------------------------------------------------------------


async def new_connection_client(
    address: tuple[str, int], payload: bytes, tally: lk.Tally, until: Callable[[], bool]
) -> None:
    while not until():
        await lk.one_request(address, payload, tally)


async def sse_client(address: tuple[str, int], payload: bytes, tally: lk.Tally, until: Callable[[], bool]) -> None:
    """generate_stream on a keep-alive connection: an answer is whole once its chunked body ends;
    it failed when an event carries an error."""
    conn: lk.Connection | None = None
    while not until():
        if conn is None or conn.closed:
            try:
                conn = await lk.connect(address)
            except (TimeoutError, OSError):
                tally.refused += 1
                await asyncio.sleep(0.1)
                continue
        tally.sent += 1
        try:
            response = await conn.request(payload, 10.0)
        except lk.Lost as lost:
            tally.lost += 1
            tally.lost_why[lost.why] += 1
            conn = None
            continue
        if response.error_event:
            tally.failed += 1
            tally.statuses["error event"] += 1
        else:
            tally.record(response)
        if response.close:
            conn.close()
            conn = None


async def grpc_stream_client(channel: Any, payload: bytes, tally: lk.Tally, until: Callable[[], bool]) -> None:
    """ModelStreamInfer with the decoupled `repeat`: one request, then its REPEAT_ELEMENTS
    responses, STREAM_REQUESTS times on one stream, then a new stream."""
    method = channel.stream_stream(
        lk.STREAM_METHOD, response_deserializer=service_pb2.ModelStreamInferResponse.FromString
    )
    while not until():
        call = method()
        try:
            for _ in range(STREAM_REQUESTS):
                if until():
                    break
                tally.sent += 1
                await call.write(payload)
                errors = 0
                for _ in range(REPEAT_ELEMENTS):
                    answer = await call.read()
                    if answer is grpc.aio.EOF:
                        raise ConnectionError("the stream ended")
                    errors += bool(answer.error_message)
                if errors:
                    tally.failed += 1
                else:
                    tally.answered += 1
            await call.done_writing()
        except grpc.aio.AioRpcError as error:
            outcome, why = lk.grpc_outcome(error)
            tally.lost += outcome == "lost"
            tally.failed += outcome == "failed"
            tally.refused += outcome == "refused"
            tally.lost_why[why] += 1
        except ConnectionError as error:
            tally.lost += 1
            tally.lost_why[str(error)] += 1
        finally:
            call.cancel()


@dataclass
class Streams:
    tallies: dict[str, lk.Tally] = field(default_factory=dict)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def tally(self, name: str) -> lk.Tally:
        return self.tallies.setdefault(name, lk.Tally(keep_times=False))


def start_streams(server: lk.Server, channel: Any, until: Callable[[], bool]) -> Streams:
    streams = Streams()
    address = server.http

    def many(name: str, count: int, make: Callable[[lk.Tally], Any]) -> None:
        tally = streams.tally(name)
        streams.tasks += [asyncio.create_task(make(tally)) for _ in range(count)]

    json_body, binary = lk.infer("add_sub", lk.add_sub_json()), add_sub_binary()
    many("HTTP JSON add_sub", 4, lambda t: lk.keep_alive_client(address, json_body, t, until))
    many("HTTP JSON add_sub, new connections", 1, lambda t: new_connection_client(address, json_body, t, until))
    many("HTTP binary add_sub", 4, lambda t: lk.keep_alive_client(address, binary, t, until))
    grpc_body = lk.grpc_add_sub()
    many("gRPC add_sub", 4, lambda t: lk.grpc_unary_client(channel, lk.INFER_METHOD, grpc_body, t, until))
    repeat = repeat_request()
    many("gRPC stream repeat (decoupled)", 2, lambda t: grpc_stream_client(channel, repeat, t, until))
    many("HTTP SSE generate_stream tokens", 2, lambda t: sse_client(address, generate_stream(), t, until))
    many("HTTP JSON bls (BLS)", 2, lambda t: lk.keep_alive_client(address, bls_json(), t, until))
    return streams


# -- sampling -------------------------------------------------------------------------------


@dataclass
class Sample:
    at_s: float
    rss_kib: dict[int, int]
    fds: dict[int, int]


def label(pid: int, repo: Path) -> str:
    """A process's name: its comm, and for a Triton stub the model it serves."""
    name = lk.comm(pid)
    line = lk.cmdline(pid)
    if lk.TRITON_STUB in line:
        for model in ("add_sub", "repeat", "tokens", "bls"):
            if f"{repo}/{model}/" in line:
                return f"stub {model}"
    if lk.NAIAD_STUB in line:
        return "stub template" if lk.NAIAD_STUB not in lk.cmdline(lk.parent(pid)) else "model process"
    return name


def sample(root: int, at_s: float) -> Sample:
    pids = [root, *lk.descendants(root)]
    return Sample(at_s, {p: lk.rss_kib(p) for p in pids}, {p: lk.open_files(p) for p in pids})


def print_sample(s: Sample, names: dict[int, str], streams: Streams, previous: dict[str, tuple[int, int]]) -> None:
    total_rss = sum(s.rss_kib.values()) / 1024
    total_fds = sum(s.fds.values())
    print(f"[{s.at_s / 60:5.1f} min] RSS {total_rss:8.1f} MiB, {total_fds} open files", flush=True)
    for pid in sorted(s.rss_kib):
        print(
            f"    {names.get(pid, '?'):<18} {pid:>7} {s.rss_kib[pid] / 1024:8.1f} MiB {s.fds[pid]:>5} fds", flush=True
        )
    parts = []
    for name, tally in streams.tallies.items():
        done, bad = previous.get(name, (0, 0))
        parts.append(
            f"{name} +{tally.answered - done}"
            + (f" ({tally.failed + tally.lost - bad} bad)" if tally.failed + tally.lost - bad else "")
        )
        previous[name] = (tally.answered, tally.failed + tally.lost)
    print("    requests: " + "; ".join(parts), flush=True)


def growth(samples: list[Sample], warmup_s: float, names: dict[int, str]) -> dict[str, Any]:
    # A sample lands a few milliseconds either side of its mark.
    base = next((s for s in samples if s.at_s >= warmup_s - 1.0), samples[0])
    end = samples[-1]
    rows = {}
    for pid in sorted(set(base.rss_kib) | set(end.rss_kib)):
        before, after = base.rss_kib.get(pid), end.rss_kib.get(pid)
        rows[f"{names.get(pid, '?')} {pid}"] = {
            "rss_mib": [None if before is None else before / 1024, None if after is None else after / 1024],
            "growth_pct": None if not before or after is None else 100 * (after - before) / before,
            "fds": [base.fds.get(pid), end.fds.get(pid)],
        }
    total_before, total_after = sum(base.rss_kib.values()), sum(end.rss_kib.values())
    return {
        "from_min": base.at_s / 60,
        "to_min": end.at_s / 60,
        "processes": rows,
        "total_rss_mib": [total_before / 1024, total_after / 1024],
        "total_growth_pct": 100 * (total_after - total_before) / total_before if total_before else None,
        "total_fds": [sum(base.fds.values()), sum(end.fds.values())],
    }


def print_growth(result: dict[str, Any]) -> None:
    print(f"\ngrowth from {result['from_min']:.1f} min (after the warm-up) to {result['to_min']:.1f} min:")
    for name, row in result["processes"].items():
        before, after = row["rss_mib"]
        if before is None or after is None:
            print(f"    {name:<26} {'appeared' if before is None else 'went away'}")
            continue
        print(
            f"    {name:<26} RSS {before:8.1f} -> {after:8.1f} MiB ({row['growth_pct']:+.2f}%), "
            f"fds {row['fds'][0]} -> {row['fds'][1]}"
        )
    before, after = result["total_rss_mib"]
    pct = result["total_growth_pct"]
    verdict = "PASS" if pct is not None and pct < 1.0 else "FAIL"
    print(
        f"    total                      RSS {before:8.1f} -> {after:8.1f} MiB ({pct:+.2f}%), "
        f"fds {result['total_fds'][0]} -> {result['total_fds'][1]}"
    )
    print(f"goal: RSS growth under 1% after the warm-up: {verdict}")


def print_totals(streams: Streams, seconds: float) -> None:
    print(f"\nrequests over {seconds / 60:.1f} min:")
    for name, t in streams.tallies.items():
        print(
            f"    {name:<38} sent {t.sent:>8} answered {t.answered:>8} failed {t.failed:>5} lost {t.lost:>5} "
            f"refused {t.refused:>3}"
            + (
                f"  {dict(t.lost_why)} {dict((k, v) for k, v in t.statuses.items() if not k.startswith('2'))}"
                if t.failed or t.lost
                else ""
            )
        )


async def soak(
    server: lk.Server, repo: Path, minutes: float, warmup_minutes: float, every_s: float
) -> tuple[dict[str, Any], Streams]:
    done = False
    channel = grpc.aio.insecure_channel(f"{lk.HOST}:{server.ports.grpc}")
    streams = start_streams(server, channel, lambda: done)
    started = time.monotonic()
    samples: list[Sample] = []
    names: dict[int, str] = {}
    previous: dict[str, tuple[int, int]] = {}
    try:
        while True:
            await asyncio.sleep(every_s - (time.monotonic() - started) % every_s)
            now = time.monotonic() - started
            s = sample(server.pid, now)
            for pid in s.rss_kib:
                names.setdefault(pid, label(pid, repo))
            samples.append(s)
            print_sample(s, names, streams, previous)
            if now >= minutes * 60 - 1:
                break
    finally:
        done = True
        await asyncio.wait_for(asyncio.gather(*streams.tasks, return_exceptions=True), 30)
        await channel.close()
    print_totals(streams, time.monotonic() - started)
    result = growth(samples, warmup_minutes * 60, names)
    return result, streams


def _terminate_as_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--warmup-minutes", type=float, default=2.0, help="growth is measured from here (default 2)")
    parser.add_argument("--every", type=float, default=SAMPLE_S, help="seconds between samples (default 30)")
    parser.add_argument("--server", choices=("naiad", "triton"), default="naiad")
    parser.add_argument("--naiad", default=lk.default_naiad(), help="the naiad command (default: .venv's, else PATH's)")
    parser.add_argument("--naiad-flags", default="", help="extra flags for naiad serve (one word: --naiad-flags=--x)")
    parser.add_argument("--naiad-ports", type=int, nargs=3, default=[19310, 19311, 19312], metavar="PORT")
    parser.add_argument("--triton-ports", type=int, nargs=3, default=[18310, 18311, 18312], metavar="PORT")
    parser.add_argument("--json", type=Path, help="write the growth figures and request counts to this file")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _terminate_as_exit)
    loop = lk.use_uvloop()
    ports = lk.Ports(*(args.naiad_ports if args.server == "naiad" else args.triton_ports))
    with tempfile.TemporaryDirectory(prefix="naiad-soak-") as tmp:
        repo = write_repository(Path(tmp) / "models")
        server = lk.start(args.server, args.naiad, repo, ports, shlex.split(args.naiad_flags), Path(tmp) / "server.log")
        print(f"{server.label} (pid {server.pid}) for {args.minutes:g} min; client on {loop}", flush=True)
        with lk.running(server):
            try:
                result, streams = asyncio.run(soak(server, repo, args.minutes, args.warmup_minutes, args.every))
            except Exception:
                print(
                    f"the soak failed; the last of the server's log:\n{server.log.read_text(errors='replace')[-3000:]}"
                )
                raise
        print_growth(result)
        if args.json:
            result["requests"] = {name: t.counts() for name, t in streams.tallies.items()}
            args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
