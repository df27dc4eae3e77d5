"""What Python models cost in memory and in start-up time, with their processes forked from
the stub template (`--backend-config python,stub-start=fork`, the default) and spawned as
fresh interpreters (`stub-start=spawn`), measured in one run:

    .venv/bin/python backends/python/bench/stub_memory.py [--models 50] [--rounds 1]

For each way it serves a repository of N add_sub-sized Python models (each imports numpy; two
FP32 [16] inputs, two outputs, one CPU instance) with `naiad serve --workers 1
--model-control-mode explicit`, then:

- loads the models one after another through the HTTP API, timing each load (starting the
  model's process and running its `initialize`);
- sends each model one request;
- sums the proportional set size (PSS, from /proc/PID/smaps_rollup) of the server and every
  process under it. PSS splits each shared page evenly among the processes that map it, so
  the sum is what the whole server costs the machine, and one process's PSS is its share.
  USS (Private_Clean + Private_Dirty) is what a process holds alone: what ending it frees;
- unloads the models and loads them all again at once (N concurrent load calls), timing that.

With `--rounds 2` or more the two ways alternate, fork first, and every round is printed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from naiad.testing import ServerProcess

MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT0", (a + b).astype(np.float32)),
                pb_utils.Tensor("OUTPUT1", (a - b).astype(np.float32)),
            ]))
        return responses
"""

CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }}, {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }}, {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""

WAYS = ("fork", "spawn")


@dataclass
class Memory:
    pss_kib: int
    uss_kib: int


@dataclass
class Figures:
    way: str
    total: Memory
    server: Memory
    template: Memory | None
    stubs: list[Memory]
    load_s: list[float]  # one after another
    concurrent_load_s: float  # all at once


def build_repository(root: Path, count: int) -> list[str]:
    names = [f"add_sub_{i:03d}" for i in range(count)]
    for name in names:
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(MODEL)
        (root / name / "config.pbtxt").write_text(CONFIG.format(name=name))
    return names


def memory_of(pid: int) -> Memory:
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                fields[parts[0].rstrip(":")] = int(parts[1])
    return Memory(fields["Pss"], fields["Private_Clean"] + fields["Private_Dirty"])


def process_tree(root: int) -> dict[int, int]:
    """Every process under `root` (and root itself): pid -> parent pid."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree = {root: parents.get(root, 0)}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree[pid] = parent
                grew = True
    return tree


def is_template(pid: int) -> bool:
    try:
        return b"model_side.stub_template" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def infer(client: httpclient.InferenceServerClient, name: str) -> None:
    a = np.arange(16, dtype=np.float32)
    inputs = [httpclient.InferInput("INPUT0", [16], "FP32"), httpclient.InferInput("INPUT1", [16], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(a)
    result = client.infer(name, inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), np.zeros(16, dtype=np.float32))


def load_over_http(url: str, name: str) -> None:
    """One load call on a connection of its own (a tritonclient client is bound to its thread)."""
    request = urllib.request.Request(f"http://{url}/v2/repository/models/{name}/load", data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=600) as answer:
        answer.read()


def measure(repository: Path, names: list[str], way: str) -> Figures:
    flags = ("--model-control-mode", "explicit", "--backend-config", f"python,stub-start={way}")
    with ServerProcess(repository, *flags, workers=1, timeout=600) as server:
        assert server.process is not None
        client = httpclient.InferenceServerClient(server.http_url, network_timeout=600)
        load_s = []
        for name in names:
            started = time.perf_counter()
            client.load_model(name)
            load_s.append(time.perf_counter() - started)
        for name in names:
            infer(client, name)
        tree = process_tree(server.process.pid)
        memory = {pid: memory_of(pid) for pid in tree}
        templates = [
            pid for pid in tree if pid != server.process.pid and is_template(pid) and tree[pid] == server.process.pid
        ]
        stubs = [memory[pid] for pid in tree if pid != server.process.pid and pid not in templates]
        if len(stubs) != len(names):
            raise RuntimeError(f"{len(stubs)} model processes for {len(names)} models")
        for name in names:
            client.unload_model(name)
        # Unloading returns once the versions are gone; their processes end just after.
        deadline = time.monotonic() + 60
        while len(process_tree(server.process.pid)) > 1 + len(templates) and time.monotonic() < deadline:
            time.sleep(0.05)
        started = time.perf_counter()
        with ThreadPoolExecutor(len(names)) as pool:
            list(pool.map(lambda name: load_over_http(server.http_url, name), names))
        concurrent_load_s = time.perf_counter() - started
        client.close()
    return Figures(
        way=way,
        total=Memory(sum(m.pss_kib for m in memory.values()), sum(m.uss_kib for m in memory.values())),
        server=memory[server.process.pid],
        template=memory[templates[0]] if templates else None,
        stubs=stubs,
        load_s=load_s,
        concurrent_load_s=concurrent_load_s,
    )


def mib(kib: float) -> str:
    return f"{kib / 1024:,.1f} MiB"


def report(figures: Figures) -> None:
    pss = [m.pss_kib for m in figures.stubs]
    uss = [m.uss_kib for m in figures.stubs]
    count = len(figures.stubs)
    print(f"stub-start={figures.way}, {count} models")
    print(f"  PSS, server and every process under it: {mib(figures.total.pss_kib)}")
    print(f"  server process:  PSS {mib(figures.server.pss_kib)}, USS {mib(figures.server.uss_kib)}")
    if figures.template is not None:
        print(f"  stub template:   PSS {mib(figures.template.pss_kib)}, USS {mib(figures.template.uss_kib)}")
    print(
        f"  model processes: PSS {mib(sum(pss))} in all; each: mean {mib(statistics.mean(pss))}, "
        f"min {mib(min(pss))}, max {mib(max(pss))}; USS mean {mib(statistics.mean(uss))}"
    )
    print(
        f"  loads one after another: {sum(figures.load_s):.2f} s in all, "
        f"first {figures.load_s[0] * 1000:.0f} ms, median {statistics.median(figures.load_s) * 1000:.0f} ms, "
        f"max {max(figures.load_s) * 1000:.0f} ms"
    )
    print(f"  {count} loads at once: {figures.concurrent_load_s:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="naiad-stub-memory-") as directory:
        repository = Path(directory)
        names = build_repository(repository, args.models)
        for round_number in range(args.rounds):
            if args.rounds > 1:
                print(f"round {round_number + 1}")
            for way in WAYS:
                report(measure(repository, names, way))


if __name__ == "__main__":
    main()
