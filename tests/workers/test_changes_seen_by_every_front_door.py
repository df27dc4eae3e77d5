"""A load or unload answers its client only once every front door serves the change: the
client's next request finds the model loaded (or gone) whichever worker the kernel hands its
connection to. Without that, a request right after a load could reach a front door whose
copy of the model table was still on its way, and be told the model is unknown. A front door
that does not answer (a stopped process) holds up the answer to a change, never the model
home's event loop."""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import os
import select
import signal
import time
from dataclasses import dataclass

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess
from naiad.workers.table_confirmations import TableConfirmations
from naiad.workers.worker_server import QUICK_CALL_S

DOUBLER_PY = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() * 2)]
            )
            for r in requests
        ]
"""

DOUBLER_CONFIG = """name: "doubler"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""


@dataclass(eq=False)
class Door:
    index: int
    applied: int = 0


def test_a_wait_ends_when_every_front_door_has_applied_the_table():
    async def body() -> None:
        doors = {Door(0), Door(2)}
        tables = TableConfirmations(doors)
        number = tables.next_number()
        waiting = asyncio.ensure_future(tables.wait_for(number))
        await asyncio.sleep(0.01)
        for door in doors:
            assert not waiting.done()
            door.applied = number
            tables.changed()
            await asyncio.sleep(0)
        await asyncio.wait_for(waiting, 1)

    asyncio.run(body())


def test_a_front_door_that_goes_away_is_not_waited_for():
    async def body() -> None:
        stuck = Door(1)
        doors = {stuck}
        tables = TableConfirmations(doors)
        waiting = asyncio.ensure_future(tables.wait_for(tables.next_number()))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        doors.discard(stuck)
        tables.changed()
        await asyncio.wait_for(waiting, 1)

    asyncio.run(body())


def test_a_front_door_that_never_confirms_is_waited_for_only_until_the_timeout(caplog):
    async def body() -> None:
        tables = TableConfirmations({Door(3), Door(4, applied=5)}, timeout_s=0.05)
        await asyncio.wait_for(tables.wait_for(tables.next_number()), 2)

    with caplog.at_level(logging.WARNING, logger="naiad.workers"):
        asyncio.run(body())
    assert "front door(s) 3 did not apply the model table within 0.05 s" in caplog.text


def _connection_to_the_model_home(server: ServerProcess) -> http.client.HTTPConnection:
    """A connection the model home took while the front door sleeps: the kernel spreads new
    connections over the workers, so new ones are opened until one is answered. (Plain HTTP:
    the client must keep this very connection and then wait longer on it than on the probe.)"""
    for _ in range(64):
        connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=0.3)
        try:
            connection.request("GET", "/v2/health/live")
            if connection.getresponse().read() is not None:
                assert connection.sock is not None
                connection.sock.settimeout(60)
                return connection
        except TimeoutError:
            connection.close()  # the sleeping front door took this one: try another
    raise AssertionError("no connection reached the model home in 64 tries")


def _state(connection: http.client.HTTPConnection) -> str:
    """doubler's state in the repository index (READY; UNAVAILABLE once unloaded)."""
    connection.request("POST", "/v2/repository/index", body=b"{}")
    [row] = json.loads(connection.getresponse().read())
    return row.get("state", "")


def _change_while_the_front_door_sleeps(server: ServerProcess, front_door: int, change: str) -> None:
    """Load or unload doubler through the model home while the front door is stopped: the
    model home must not answer before the front door has woken and applied the new table."""
    os.kill(front_door, signal.SIGSTOP)
    try:
        change_on, watch_on = _connection_to_the_model_home(server), _connection_to_the_model_home(server)
        change_on.request("POST", f"/v2/repository/models/doubler/{change}", body=b"{}")
        started = time.monotonic()
        # The model home has made the change (its own connections read its own state)...
        deadline = started + 60
        while _state(watch_on) != ("READY" if change == "load" else "UNAVAILABLE"):
            assert time.monotonic() < deadline, f"the {change} did not happen in the model home"
            time.sleep(0.05)
        # ...without its event loop held while it told the sleeping front door's journal (a
        # call that waits QUICK_CALL_S for an answer: the change was seen after 5.2 s when the
        # loop made it, after 0.2 s with no front door asleep)...
        assert time.monotonic() - started < QUICK_CALL_S, f"the model home's loop was held during the {change}"
        # ...and still holds the answer back while the front door cannot have applied it.
        time.sleep(0.5)
        assert not select.select([change_on.sock], [], [], 0)[0], f"the {change} answered before the front door saw it"
    finally:
        os.kill(front_door, signal.SIGCONT)
    answer = change_on.getresponse()
    assert answer.status == 200, answer.read()
    change_on.close()
    watch_on.close()


def test_a_load_and_an_unload_answer_once_the_sleeping_front_door_has_applied_them(tmp_path):
    (tmp_path / "doubler" / "1").mkdir(parents=True)
    (tmp_path / "doubler" / "1" / "model.py").write_text(DOUBLER_PY)
    (tmp_path / "doubler" / "config.pbtxt").write_text(DOUBLER_CONFIG)
    x = np.array([1.5, -2.0], dtype=np.float32)
    with ServerProcess(tmp_path, "--model-control-mode", "explicit", workers=2) as server:
        [front_door] = server.front_door_pids()
        for change in ("load", "unload"):
            _change_while_the_front_door_sleeps(server, front_door, change)
            # Every connection from now on, whichever worker takes it, sees the change.
            for _ in range(12):
                fresh = httpclient.InferenceServerClient(server.http_url)
                inputs = [httpclient.InferInput("INPUT0", [2], "FP32")]
                inputs[0].set_data_from_numpy(x)
                if change == "load":
                    assert fresh.is_model_ready("doubler")
                    np.testing.assert_array_equal(fresh.infer("doubler", inputs).as_numpy("OUTPUT0"), x * 2)
                else:
                    assert not fresh.is_model_ready("doubler")
                    with pytest.raises(InferenceServerException, match="doubler"):
                        fresh.infer("doubler", inputs)
                fresh.close()


def _answer_held_only_for_the_sleeping_front_door(
    server: ServerProcess, path: str, body: dict, what: str
) -> tuple[dict | list | None, http.client.HTTPConnection]:
    """POST `body` to `path` on the model home while its front door is stopped: the model
    home tells the front door from a thread (a call that waits QUICK_CALL_S for an answer),
    so it serves its other connections meanwhile, and holds this answer until the front door
    wakes. Returns the answer's JSON (None when empty) and a connection to the model home."""
    [front_door] = server.front_door_pids()
    os.kill(front_door, signal.SIGSTOP)
    try:
        change_on, watch_on = _connection_to_the_model_home(server), _connection_to_the_model_home(server)
        change_on.request("POST", path, body=json.dumps(body).encode())
        started = time.monotonic()
        for _ in range(5):
            watch_on.request("GET", "/v2/health/live")
            assert watch_on.getresponse().read() is not None
        assert time.monotonic() - started < QUICK_CALL_S / 2, f"the {what} held the model home's loop"
        assert not select.select([change_on.sock], [], [], 0)[0], f"the {what} answered without the front door"
    finally:
        os.kill(front_door, signal.SIGCONT)
    answer = change_on.getresponse()
    content = answer.read()
    assert answer.status == 200, content
    change_on.close()
    return (json.loads(content) if content else None), watch_on


def test_a_region_registered_while_a_front_door_sleeps_holds_up_only_its_own_answer(tmp_path):
    # Every worker maps a client's region before the register answers.
    key = f"/naiad_sleeping_{os.getpid()}"
    region = shm.create_shared_memory_region("sleeping", key, 64)
    try:
        with ServerProcess(tmp_path, "--allow-client-shm=true", workers=2) as server:
            _, watch_on = _answer_held_only_for_the_sleeping_front_door(
                server,
                "/v2/systemsharedmemory/region/sleeping/register",
                {"key": key, "offset": 0, "byte_size": 64},
                "register",
            )
            watch_on.request("GET", "/v2/systemsharedmemory/region/sleeping/status")
            [status] = json.loads(watch_on.getresponse().read())
            assert (status["name"], status["key"], status["byte_size"]) == ("sleeping", key, 64)
            watch_on.close()
    finally:
        shm.destroy_shared_memory_region(region)


def test_a_trace_setting_changed_while_a_front_door_sleeps_holds_up_only_its_own_answer(tmp_path):
    # The model home records the change in every worker's journal (for a worker started
    # again) before it answers.
    with ServerProcess(tmp_path, workers=2) as server:
        settings, watch_on = _answer_held_only_for_the_sleeping_front_door(
            server, "/v2/trace/setting", {"trace_rate": "7"}, "trace change"
        )
        assert isinstance(settings, dict) and settings["trace_rate"] == "7"
        watch_on.close()
        # Through either worker, the server's settings are the changed ones.
        client = httpclient.InferenceServerClient(server.http_url)
        for _ in range(4):
            assert client.get_trace_settings()["trace_rate"] == "7"
        client.close()
