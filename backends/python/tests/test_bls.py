"""BLS: models calling other loaded models through the server."""

from __future__ import annotations

import numpy as np
import pytest
from python_backend_servers import bytes_array

from naiad import ErrorCode

A = np.array([1, 2, 3, 4], dtype=np.float32)
B = np.array([10, 20, 30, 40], dtype=np.float32)


@pytest.mark.parametrize("caller", ["bls_sync", "bls_in_process"])
def test_sync_exec_calls_another_model(served, caller):
    response = served.infer(caller, {"INPUT0": A, "INPUT1": B, "MODEL_NAME": bytes_array(b"add_sub_flat")})
    np.testing.assert_array_equal(response.output("OUTPUT0").data, A + B)
    np.testing.assert_array_equal(response.output("OUTPUT1").data, A - B)


@pytest.mark.parametrize("caller", ["bls_sync", "bls_in_process"])
def test_bls_errors_come_back_as_error_responses(served, caller):
    error = served.infer_error(caller, {"INPUT0": A, "INPUT1": B, "MODEL_NAME": bytes_array(b"no_such_model")})
    # The caller passed the callee's error on; as in Triton, a BLS error's code is INTERNAL.
    assert error.code is ErrorCode.INTERNAL
    assert "no_such_model" in error.message


@pytest.mark.parametrize("caller", ["bls_async", "bls_async_in_process", "bls_async_inline"])
def test_async_exec_and_decoupled_async_exec(served, caller):
    response = served.infer(caller, {"INPUT0": A, "INPUT1": B})
    np.testing.assert_array_equal(response.output("OUTPUT0").data, A + B)
    np.testing.assert_array_equal(response.output("SUM").data, [10])


@pytest.mark.parametrize("caller", ["bls_decoupled_sync", "bls_decoupled_sync_in_process"])
@pytest.mark.parametrize("items", [[], [4], [1, 2, 3]])
def test_decoupled_exec_iterates_every_response(served, caller, items):
    response = served.infer(caller, {"IN": np.array(items, dtype=np.int32)})
    np.testing.assert_array_equal(response.output("COUNT").data, [len(items)])
    np.testing.assert_array_equal(response.output("SUM").data, [sum(items)])


@pytest.mark.parametrize("caller", ["bls_inline", "bls_decoupled_sync_inline"])
def test_blocking_bls_is_refused_inline_and_the_server_keeps_serving(served, caller):
    """execute runs on the server's loop in 'inline' mode: a blocking exec() there would wait
    on that same loop forever, so it fails at once with a message naming the way out."""
    if caller == "bls_inline":
        inputs = {"INPUT0": A, "INPUT1": B, "MODEL_NAME": bytes_array(b"add_sub_flat")}
    else:
        inputs = {"IN": np.array([1, 2], dtype=np.int32)}
    error = served.infer_error(caller, inputs)
    assert "cannot run in execution_mode 'inline'" in error.message
    assert "async_exec" in error.message
    response = served.infer("bls_async_inline", {"INPUT0": A, "INPUT1": B})
    np.testing.assert_array_equal(response.output("OUTPUT0").data, A + B)


def test_blocking_bls_from_the_models_own_threads(served):
    # Eight calls from four threads while execute waits on them in the stub's one thread.
    for _ in range(3):
        response = served.infer("bls_threads", {"INPUT0": A, "INPUT1": B})
        np.testing.assert_array_equal(response.output("OUTPUT0").data, 8 * (A + B))
