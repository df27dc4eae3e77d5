"""ModelStreamInfer keeps a stream's order, as Triton does: requests reach the model in the
order they arrive (a sequence's requests are never reordered), and the responses of a model
that is not decoupled come back in request order, whichever instance finishes first."""

from __future__ import annotations

import queue
import time

import numpy as np
import pytest
import tritonclient.grpc as tg
from tritonclient.utils import InferenceServerException


def _stream(url, send):
    """Open a stream, let `send(client)` queue its requests, wait for every answer; returns
    (response or None, error message or None) in arrival order."""
    received: queue.Queue = queue.Queue()
    with tg.InferenceServerClient(url) as client:
        client.start_stream(callback=lambda result, error: received.put((result, error)))
        send(client)
        client.stop_stream()
    out = []
    while not received.empty():
        result, error = received.get()
        out.append((result, None if error is None else error.message()))
    return out


def _delayed_inputs(value, delay_ms):
    tensors = [tg.InferInput("INPUT0", [1, 1], "FP32"), tg.InferInput("DELAY_MS", [1, 1], "INT32")]
    tensors[0].set_data_from_numpy(np.array([[value]], np.float32))
    tensors[1].set_data_from_numpy(np.array([[delay_ms]], np.int32))
    return tensors


def test_responses_of_a_non_decoupled_model_come_back_in_request_order(url):
    # The first request sleeps on one instance while the next ones finish on the other.
    delays = [400, 0, 0, 200, 0, 0]

    def send(client):
        for i, delay in enumerate(delays):
            client.async_stream_infer("delayed", _delayed_inputs(i, delay), request_id=f"d{i}")

    results = _stream(url, send)
    assert [error for _, error in results] == [None] * len(delays)
    assert [result.get_response().id for result, _ in results] == [f"d{i}" for i in range(len(delays))]
    assert [float(result.as_numpy("OUTPUT0")[0, 0]) for result, _ in results] == [float(i) for i in range(6)]


def _step(value):
    tensor = tg.InferInput("INPUT", [1, 1], "INT32")
    tensor.set_data_from_numpy(np.array([[value]], np.int32))
    return [tensor]


def test_a_hundred_interleaved_sequences_on_one_stream(url):
    """100 sequences of 4 requests, sent round-robin on one stream (every sequence's START,
    then every second request, ...): each request sees its own sequence's running sum, and
    the answers come back in the order the requests were sent."""
    sequences, length = 100, 4
    order = [(seq, step) for step in range(length) for seq in range(sequences)]

    def value(seq, step):
        return seq * 10 + step + 1

    def send(client):
        for seq, step in order:
            client.async_stream_infer(
                "accumulate",
                _step(value(seq, step)),
                request_id=f"s{seq}-{step}",
                sequence_id=5000 + seq,
                sequence_start=step == 0,
                sequence_end=step == length - 1,
            )

    results = _stream(url, send)
    assert [error for _, error in results if error is not None] == []
    assert [result.get_response().id for result, _ in results] == [f"s{seq}-{step}" for seq, step in order]
    for (seq, step), (result, _) in zip(order, results):
        expected = sum(value(seq, s) for s in range(step + 1))
        assert int(result.as_numpy("OUTPUT").reshape(-1)[0]) == expected, (seq, step)
        assert int(result.as_numpy("CORRID_OUT").reshape(-1)[0]) == 5000 + seq
        assert result.as_numpy("CONTROLS").reshape(-1).tolist() == [int(step == 0), int(step == length - 1), 1]


def test_cancelling_a_queued_request_of_a_sequence_cancels_the_rest_of_it(url):
    """Triton's sequence batcher drops a sequence whose queued request is cancelled: the
    requests queued behind it are cancelled too, and the sequence id needs a new START."""
    answers: dict[str, queue.Queue] = {name: queue.Queue() for name in ("first", "doomed", "behind")}
    with tg.InferenceServerClient(url) as client:

        def send(name, value, **flags):
            return client.async_infer(
                "accumulate_slow",
                _step(value),
                callback=lambda result, error: answers[name].put((result, error)),
                sequence_id=7100,
                **flags,
            )

        # Separate calls may overtake one another: each goes once the one before is in.
        send("first", 1, sequence_start=True)  # runs for a second
        time.sleep(0.25)
        doomed = send("doomed", 10)
        time.sleep(0.1)
        send("behind", 100)
        time.sleep(0.25)  # both wait behind the running request
        doomed.cancel()
        result, error = answers["behind"].get(timeout=30)
        assert result is None and error.status() == "StatusCode.CANCELLED", error.message()
        result, error = answers["first"].get(timeout=30)
        assert error is None and int(result.as_numpy("OUTPUT").reshape(-1)[0]) == 1
        with pytest.raises(InferenceServerException, match="START"):
            client.infer("accumulate_slow", _step(1000), sequence_id=7100, sequence_end=True)
