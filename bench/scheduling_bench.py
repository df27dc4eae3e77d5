"""Requests per second for the shared bench's add_sub model, with and without dynamic
batching, under N concurrent clients (default 64).

Not a test: run it by hand and read the figures.

    .venv/bin/python bench/scheduling_bench.py [--clients 64] [--seconds 5] [--http] [--wrk]

The model is ../shared/bench's add_sub (max_batch_size 64, two FP32 [16] inputs, one
CPU instance), served by the numpy test backend so the figures measure naiad's request
path and scheduler rather than a framework. Each configuration runs twice: with
`dynamic_batching { max_queue_delay_microseconds: 100 }` as the bench model has it, and
with no dynamic_batching (one request per execution). In-process, every client is an
asyncio task calling `Server.infer` in a loop; with --http (when naiad.frontends.http is
importable), a `naiad serve` process is started and every client is a tritonclient.http.aio
coroutine in this process; with --wrk, the same server is driven by `wrk` (one thread, the
binary-tensor body of ../shared/bench/make_bodies.py), a client light enough that the
server, not the client, is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHARED_BENCH = ROOT.parent.parent / "shared" / "bench"
sys.path.insert(0, str(ROOT / "tests"))

from numpy_backend import NumpyPlugin  # noqa: E402

from naiad import InferenceRequest, Server, ServerOptions, Tensor  # noqa: E402

MODEL = """name: "add_sub"
backend: "numpy"
max_batch_size: 64
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
parameters { key: "op" value { string_value: "add_sub" } }
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
BATCHING = "dynamic_batching { max_queue_delay_microseconds: 100 }\n"


def make_repo(root: Path, dynamic: bool) -> Path:
    repo = root / ("dynamic" if dynamic else "direct")
    (repo / "add_sub" / "1").mkdir(parents=True)
    (repo / "add_sub" / "config.pbtxt").write_text(MODEL + (BATCHING if dynamic else ""))
    return repo


async def closed_loop(call, clients: int, seconds: float) -> int:
    """Run `clients` loops of `call()` for `seconds` after a short warm-up; count calls."""
    done = 0
    measuring = False
    stop = False

    async def client() -> None:
        nonlocal done
        while not stop:
            await call()
            if measuring:
                done += 1

    tasks = [asyncio.ensure_future(client()) for _ in range(clients)]
    await asyncio.sleep(min(1.0, seconds / 4))
    measuring = True
    await asyncio.sleep(seconds)
    measuring = False
    stop = True
    await asyncio.gather(*tasks)
    return done


async def in_process(repo: Path, clients: int, seconds: float) -> tuple[float, dict]:
    options = ServerOptions([str(repo)], backend_plugins=[NumpyPlugin()], load_backend_entry_points=False)
    a = np.random.rand(1, 16).astype(np.float32)
    b = np.random.rand(1, 16).astype(np.float32)
    async with Server(options) as server:

        async def call() -> None:
            request = InferenceRequest("add_sub", [Tensor.from_numpy("INPUT0", a), Tensor.from_numpy("INPUT1", b)])
            await server.infer(request)

        count = await closed_loop(call, clients, seconds)
        stats = server.statistics("add_sub")[0]
    return count / seconds, stats


async def over_http(repo: Path, clients: int, seconds: float) -> float:
    import tritonclient.http.aio as httpclient

    a = np.random.rand(1, 16).astype(np.float32)
    b = np.random.rand(1, 16).astype(np.float32)
    with served(repo) as server:
        client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"), conn_limit=clients)
        try:
            inputs = [
                httpclient.InferInput("INPUT0", [1, 16], "FP32"),
                httpclient.InferInput("INPUT1", [1, 16], "FP32"),
            ]
            inputs[0].set_data_from_numpy(a, binary_data=True)
            inputs[1].set_data_from_numpy(b, binary_data=True)

            async def call() -> None:
                await client.infer("add_sub", inputs)

            count = await closed_loop(call, clients, seconds)
        finally:
            await client.close()
    return count / seconds


def served(repo: Path):
    from naiad.testing import ServerProcess

    return ServerProcess(repo, "--backend-plugin", "numpy_backend:NumpyPlugin", env={"PYTHONPATH": str(ROOT / "tests")})


def server_batches(http_url: str) -> tuple[int, int]:
    with urllib.request.urlopen(f"{http_url}/v2/models/add_sub/stats") as answer:
        stats = json.load(answer)["model_stats"][0]
    return int(stats["inference_count"]), int(stats["execution_count"])


def over_wrk(repo: Path, clients: int, seconds: float) -> tuple[float, int, int]:
    bodies = tempfile.mkdtemp()
    try:
        subprocess.run([sys.executable, str(SHARED_BENCH / "make_bodies.py"), bodies, "add_sub"], check=True)
        with served(repo) as server:
            base = server.http_url if server.http_url.startswith("http") else f"http://{server.http_url}"
            url = f"{base}/v2/models/add_sub/infer"
            out = subprocess.run(
                ["wrk", "-t1", f"-c{clients}", f"-d{int(seconds)}s", "-s", str(SHARED_BENCH / "wrk_bin.lua"), url],
                env={**os.environ, "BODY_DIR": bodies},
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            if "Non-2xx" in out:
                raise RuntimeError(f"wrk saw failed requests:\n{out}")
            rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
            inferences, executions = server_batches(base)
        return rate, inferences, executions
    finally:
        shutil.rmtree(bodies, ignore_errors=True)


def http_available() -> bool:
    try:
        import naiad.frontends.http  # noqa: F401
    except ImportError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--http", action="store_true", help="also measure over HTTP with tritonclient")
    parser.add_argument("--wrk", action="store_true", help="also measure over HTTP with wrk (needs wrk on PATH)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"add_sub (FP32 [1,16] x2), {args.clients} concurrent clients, {args.seconds:.0f} s per run")
        for dynamic in (False, True):
            label = "dynamic_batching" if dynamic else "no batching"
            repo = make_repo(Path(tmp), dynamic)
            rate, stats = asyncio.run(in_process(repo, args.clients, args.seconds))
            executions, inferences = stats["execution_count"], stats["inference_count"]
            print(
                f"{'in-process':22} {label:16}: {rate:9.0f} req/s   "
                f"(mean batch {inferences / max(executions, 1):.1f} over {executions} executions)"
            )
            if (args.http or args.wrk) and not http_available():
                print(f"{'HTTP':22} {label:16}: skipped (naiad.frontends.http is not importable here)")
                continue
            if args.http:
                rate = asyncio.run(over_http(repo, args.clients, args.seconds))
                print(f"{'HTTP tritonclient.aio':22} {label:16}: {rate:9.0f} req/s")
            if args.wrk:
                rate, inferences, executions = over_wrk(repo, args.clients, args.seconds)
                print(
                    f"{'HTTP wrk':22} {label:16}: {rate:9.0f} req/s   "
                    f"(mean batch {inferences / max(executions, 1):.1f} over {executions} executions)"
                )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
