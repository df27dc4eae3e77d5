"""Unloading releases a model's memory: 50 load/unload cycles of a model holding 32 MiB
leave the server's resident memory where a few cycles left it."""

from pathlib import Path

import tritonclient.http as httpclient

from naiad.testing import ServerProcess

TESTS = Path(__file__).resolve().parents[1]
CONFIG = """backend: "numpy" max_batch_size: 0
input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [-1] }]
output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [-1] }]
parameters { key: "allocate_mb" value { string_value: "32" } }
"""


def resident_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_fifty_load_unload_cycles_do_not_grow_memory(tmp_path):
    (tmp_path / "big" / "1").mkdir(parents=True)
    (tmp_path / "big" / "config.pbtxt").write_text(CONFIG)
    with ServerProcess(
        tmp_path,
        "--backend-plugin",
        "numpy_backend:NumpyPlugin",
        "--model-control-mode",
        "explicit",
        env={"PYTHONPATH": str(TESTS)},
    ) as server:
        client = httpclient.InferenceServerClient(server.http_url)

        def cycle():
            client.load_model("big")
            assert client.is_model_ready("big")
            client.unload_model("big")

        for _ in range(5):
            cycle()
        settled = resident_bytes(server.process.pid)
        for _ in range(45):
            cycle()
        grown = resident_bytes(server.process.pid) - settled
        # One leaked copy of the weights per cycle would be 45 x 32 MiB; allow less than two.
        assert grown < 64 * 2**20, f"resident memory grew by {grown / 2**20:.0f} MiB over 45 cycles"
