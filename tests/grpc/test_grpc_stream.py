"""ModelStreamInfer through tritonclient.grpc's start_stream and the aio stream_infer:
decoupled models answer many times, errors arrive in-stream and the stream goes on."""

from __future__ import annotations

import asyncio
import queue

import numpy as np
import tritonclient.grpc as tg
import tritonclient.grpc.aio as tga


def repeat_input(values):
    tensor = tg.InferInput("IN", [len(values)], "INT32")
    tensor.set_data_from_numpy(np.array(values, np.int32))
    return [tensor]


def add_sub_inputs(rows=1, width=4):
    a = np.arange(rows * width, dtype=np.float32).reshape(rows, width)
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        tensor = tg.InferInput(name, [rows, width], "FP32")
        tensor.set_data_from_numpy(a)
        inputs.append(tensor)
    return inputs, a


def run_stream(url, requests, empty_final=False):
    """Send every (model, inputs, request_id) on one stream; return what came back, in order:
    ("ok", id, {output: list}, final flag) or ("error", message)."""
    received: queue.Queue = queue.Queue()
    with tg.InferenceServerClient(url) as client:
        client.start_stream(callback=lambda result, error: received.put((result, error)))
        for model, inputs, request_id in requests:
            client.async_stream_infer(model, inputs, request_id=request_id, enable_empty_final_response=empty_final)
        client.stop_stream()  # waits for every response of every request
    out = []
    while not received.empty():
        result, error = received.get()
        if error is not None:
            out.append(("error", error.message()))
            continue
        response = result.get_response()
        final = response.parameters["triton_final_response"].bool_param
        outputs = {o.name: result.as_numpy(o.name).tolist() for o in response.outputs}
        out.append(("ok", response.id, outputs, final))
    return out


def test_decoupled_model_streams_every_response(url):
    assert run_stream(url, [("repeat", repeat_input([4, 5, 6]), "r1")]) == [
        ("ok", "r1", {"OUT": [4], "IDX": [0]}, False),
        ("ok", "r1", {"OUT": [5], "IDX": [1]}, False),
        ("ok", "r1", {"OUT": [6], "IDX": [2]}, False),
    ]


def test_empty_final_response_on_request(url):
    assert run_stream(url, [("repeat", repeat_input([7, 8]), "r2")], empty_final=True) == [
        ("ok", "r2", {"OUT": [7], "IDX": [0]}, False),
        ("ok", "r2", {"OUT": [8], "IDX": [1]}, False),
        ("ok", "r2", {}, True),
    ]
    # No response at all is possible: only the final flag comes, and only when asked.
    assert run_stream(url, [("repeat", repeat_input([]), "z")], empty_final=True) == [("ok", "z", {}, True)]
    assert run_stream(url, [("repeat", repeat_input([]), "z")]) == []


def test_non_decoupled_model_on_stream(url):
    inputs, a = add_sub_inputs()
    results = run_stream(url, [("add_sub", inputs, "s1")], empty_final=True)
    assert results == [("ok", "s1", {"OUTPUT0": (a + a).tolist(), "OUTPUT1": (a - a).tolist()}, True)]


def test_errors_arrive_in_stream_and_the_stream_goes_on(url):
    good, a = add_sub_inputs()
    narrow, _ = add_sub_inputs(width=3)
    results = run_stream(
        url,
        [
            ("nope", good, "e1"),
            ("add_sub", narrow, "e2"),
            ("repeat", good, "e3"),
            ("failing", [_fp32([1.0])], "e4"),
            ("add_sub", good, "ok"),
            ("repeat", repeat_input([1]), "r"),
        ],
    )
    errors = sorted(message for kind, message, *_ in results if kind == "error")
    assert len(errors) == 4
    assert any("unknown model: 'nope'" in e for e in errors)
    assert any("unexpected shape for input 'INPUT0'" in e and "got [1,3]" in e for e in errors)
    assert any("expected 1 inputs but got 2 inputs for model 'repeat'" in e for e in errors)
    assert any("failed on purpose" in e for e in errors)
    oks = [r for r in results if r[0] == "ok"]
    assert ("ok", "ok", {"OUTPUT0": (a + a).tolist(), "OUTPUT1": (a - a).tolist()}, True) in oks
    assert ("ok", "r", {"OUT": [1], "IDX": [0]}, False) in oks


def _fp32(values):
    tensor = tg.InferInput("INPUT0", [len(values)], "FP32")
    tensor.set_data_from_numpy(np.array(values, np.float32))
    return tensor


def test_many_requests_on_one_stream_keep_their_ids(url):
    requests = [("repeat", repeat_input([i, i + 1]), f"id{i}") for i in range(10)]
    results = run_stream(url, requests)
    assert len(results) == 20
    for i in range(10):
        mine = [r for r in results if r[1] == f"id{i}"]
        assert [r[2] for r in mine] == [{"OUT": [i], "IDX": [0]}, {"OUT": [i + 1], "IDX": [1]}]


def test_aio_stream_infer(url):
    async def go():
        async with tga.InferenceServerClient(url) as client:

            async def requests():
                yield {"model_name": "repeat", "inputs": repeat_input([3, 2, 1]), "request_id": "a"}
                yield {"model_name": "nope", "inputs": repeat_input([1]), "request_id": "b"}

            got = []
            async for result, error in client.stream_infer(requests()):
                if error is not None:
                    got.append(("error", error.message()))
                else:
                    got.append((result.get_response().id, result.as_numpy("OUT").tolist()))
                if len(got) == 4:
                    break
            return got

    got = asyncio.run(go())
    assert sorted(g for g in got if g[0] != "error") == [("a", [1]), ("a", [2]), ("a", [3])]
    assert ("error", "Request for unknown model: 'nope' is not found") in got
