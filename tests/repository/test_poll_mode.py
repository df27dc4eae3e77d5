"""Poll mode through the in-process Server: new versions, changed configs, broken versions
and removed models are followed, while requests keep succeeding."""

import asyncio
import shutil

import numpy as np
from numpy_backend import NumpyPlugin

from naiad import InferenceRequest, Server, ServerOptions, Tensor

CONFIG = """backend: "numpy" max_batch_size: 0
input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [-1] }]
output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [-1] }]"""


def request(version=""):
    return InferenceRequest("m", [Tensor.from_numpy("INPUT0", np.arange(3, dtype=np.int32))], model_version=version)


def make(repo, versions=(1,), config=CONFIG):
    for v in versions:
        (repo / "m" / str(v)).mkdir(parents=True, exist_ok=True)
    (repo / "m" / "config.pbtxt").write_text(config)


def test_new_version_under_load_without_failures(tmp_path):
    make(tmp_path)

    async def go():
        options = ServerOptions(
            [str(tmp_path)], model_control_mode="poll", repository_poll_secs=3600, backend_plugins=[NumpyPlugin()]
        )
        async with Server(options) as server:
            versions_seen, failures = [], []
            stop = asyncio.Event()

            async def client():
                while not stop.is_set():
                    try:
                        versions_seen.append((await server.infer(request())).model_version)
                    except Exception as exc:  # noqa: BLE001 - counted, then asserted
                        failures.append(exc)
                    await asyncio.sleep(0)

            clients = [asyncio.create_task(client()) for _ in range(4)]
            await asyncio.sleep(0.05)
            first_model = server.model("m", "1").model
            make(tmp_path, versions=(2,))
            await server.poller.poll_once()
            served_after_load = len(versions_seen)
            await asyncio.sleep(0.05)
            stop.set()
            await asyncio.gather(*clients)
            assert failures == []
            assert versions_seen[0] == "1" and set(versions_seen[served_after_load:]) == {"2"}
            assert server.model_metadata("m")["versions"] == ["2"]
            assert first_model is not server.model("m").model

    asyncio.run(go())


def test_changes_broken_versions_and_removal(tmp_path):
    make(tmp_path, versions=(1, 2), config=CONFIG + " version_policy: { all: {} }")

    async def go():
        options = ServerOptions(
            [str(tmp_path)], model_control_mode="poll", repository_poll_secs=3600, backend_plugins=[NumpyPlugin()]
        )
        async with Server(options) as server:
            v1 = server.model("m", "1")
            # An unchanged repository changes nothing.
            await server.poller.poll_once()
            assert server.model("m", "1") is v1
            # A file added to version 2 reloads version 2 only.
            (tmp_path / "m" / "2" / "weights.bin").write_bytes(b"x")
            v2 = server.model("m", "2")
            await server.poller.poll_once()
            assert server.model("m", "1") is v1 and server.model("m", "2") is not v2
            # A broken version 3 leaves versions 1 and 2 serving and is reported.
            (tmp_path / "m" / "config.pbtxt").write_text(CONFIG + " version_policy: { all: {} } max_batch_size: -3")
            (tmp_path / "m" / "3").mkdir()
            await server.poller.poll_once()
            assert (await server.infer(request("2"))).model_version == "2"
            rows = server.repository_index()
            assert {r.get("version"): r["state"] for r in rows if r["name"] == "m"} == {"1": "READY", "2": "READY"}
            # Fixing it loads all three.
            (tmp_path / "m" / "config.pbtxt").write_text(CONFIG + " version_policy: { all: {} }")
            await server.poller.poll_once()
            assert server.model_metadata("m")["versions"] == ["1", "2", "3"]
            # Removing the directory unloads it.
            shutil.rmtree(tmp_path / "m")
            await server.poller.poll_once()
            assert not server.model_ready("m")

    asyncio.run(go())
