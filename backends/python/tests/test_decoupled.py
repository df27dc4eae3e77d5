"""Decoupled models send zero, one or many responses through the response sender."""

from __future__ import annotations

import numpy as np
import pytest

from naiad import ErrorCode, NaiadError


def values(responses):
    return [int(r.output("OUT").data[0]) for r in responses if r.outputs]


@pytest.mark.parametrize("model", ["repeat_decoupled", "repeat_decoupled_in_process", "repeat_decoupled_inline"])
@pytest.mark.parametrize("items", [[], [7], [5, 6, 7, 8, 9]])
def test_zero_one_or_many_responses_in_order(served, model, items):
    responses = served.stream(model, {"IN": np.array(items, dtype=np.int32)})
    assert values(responses) == items
    assert [int(r.output("IDX").data[0]) for r in responses if r.outputs] == list(range(len(items)))
    assert responses[-1].final
    assert all(not r.final for r in responses[:-1])
    assert all(r.error is None for r in responses)


def test_infer_takes_a_decoupled_models_single_response(served):
    response = served.infer("repeat_decoupled", {"IN": np.array([3], dtype=np.int32)})
    np.testing.assert_array_equal(response.output("OUT").data, [3])


def test_infer_refuses_many_responses(served):
    with pytest.raises(NaiadError) as caught:
        served.infer("repeat_decoupled", {"IN": np.array([1, 2], dtype=np.int32)})
    assert caught.value.code is ErrorCode.UNSUPPORTED


def test_responses_sent_after_execute_returned_arrive(served):
    responses = served.stream(
        "repeat_decoupled", {"IN": np.array([1, 2, 3], dtype=np.int32), "DELAY_MS": np.array([20], dtype=np.int32)}
    )
    assert values(responses) == [1, 2, 3]


def test_a_crash_mid_stream_ends_the_stream_with_an_error(served):
    responses = served.stream("repeat_decoupled", {"IN": np.array([1, 2, -1, 3], dtype=np.int32)})
    assert values(responses) == [1, 2]
    last = responses[-1]
    assert last.final and last.error is not None
    assert last.error.code is ErrorCode.INTERNAL
    assert "exited unexpectedly (exit code 5)" in last.error.message
    # The model was restarted and streams again.
    assert values(served.stream("repeat_decoupled", {"IN": np.array([8, 9], dtype=np.int32)})) == [8, 9]


def test_the_model_sees_the_client_cancel(served):
    from python_backend_servers import make_request

    request = make_request("cancellable", {"IN": np.array([0], dtype=np.int32)})

    async def run():
        seen = []
        async for response in served.server.infer_stream(request):
            seen.append(int(response.output("OUT").data[0]))
            # What the server does when the client goes away mid-stream.
            request.cancelled = True
        return seen

    assert served.run(run()) == [1, -1]
