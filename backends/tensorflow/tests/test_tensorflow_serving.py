"""SavedModel and frozen GraphDef models served in process; outputs equal TensorFlow's own."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from naiad import ErrorCode, InferenceRequest, NaiadError, Tensor


def expected(module, x, s):
    result = module.serve(x, s)
    return result["y"].numpy(), result["upper"].numpy()


X = np.array([[1, 2, 3, 4], [0.5, -1, 0, 2]], dtype=np.float32)
S = np.array([b"ab", "\u00e9t\u00e9".encode()], dtype=object)


def test_savedmodel_without_config_serves_auto_completed_model(served, module):
    response = served.infer("sm_auto", x=X, s=S.reshape(2, 1))
    y, upper = expected(module, X, S)
    np.testing.assert_allclose(response.output("y").data, y, rtol=1e-6)
    assert response.output("upper").datatype == "BYTES"
    assert list(response.output("upper").data) == list(upper)


def test_auto_complete_reads_the_signature(served):
    config = served.server.model_config("sm_auto").to_json_dict()
    assert config["platform"] == "tensorflow_savedmodel"
    assert config["backend"] == "tensorflow"
    assert config["max_batch_size"] == 4
    inputs = {i["name"]: (i["data_type"], i["dims"]) for i in config["input"]}
    outputs = {o["name"]: (o["data_type"], o["dims"]) for o in config["output"]}
    assert inputs == {"x": ("TYPE_FP32", [4]), "s": ("TYPE_STRING", [1])}
    assert outputs == {"y": ("TYPE_FP32", [3]), "upper": ("TYPE_STRING", [1])}
    assert "dynamic_batching" in config
    metadata = served.server.model_metadata("sm_auto")
    assert {i["name"]: i["shape"] for i in metadata["inputs"]} == {"x": [-1, 4], "s": [-1, 1]}


def test_unbatched_savedmodel_takes_full_shapes(served, module):
    config = served.server.model_config("sm_unbatched")
    assert config.max_batch_size == 0
    assert {o.name: o.dims for o in config.outputs} == {"y": (-1, 3), "upper": (-1,)}
    response = served.infer("sm_unbatched", x=X, s=S)
    y, upper = expected(module, X, S)
    np.testing.assert_allclose(response.output("y").data, y, rtol=1e-6)
    assert list(response.output("upper").data) == list(upper)


def test_partial_config_is_completed_and_backend_only_config_gets_platform(served, module):
    config = served.server.model_config("sm_partial")
    assert config.platform == "tensorflow_savedmodel" and config.max_batch_size == 2
    assert [(o.name, o.datatype, o.dims) for o in config.outputs] == [("y", "FP32", (3,))]
    response = served.infer("sm_partial", x=X, s=S.reshape(2, 1))
    assert [t.name for t in response.outputs] == ["y"]
    np.testing.assert_allclose(response.output("y").data, expected(module, X, S)[0], rtol=1e-6)


def test_signature_chosen_by_parameter(served):
    x = np.array([[1, -2], [3, 40]], dtype=np.int64)
    response = served.infer("sm_double", x=x)
    assert response.output("doubled").datatype == "INT64"
    np.testing.assert_array_equal(response.output("doubled").data, x * 2)


def test_frozen_graphdef_by_tensor_names(served, module):
    strings = np.array([[b"hello"], [b"w"]], dtype=object)
    response = served.infer("gd_scores", x=X, s=strings)
    y, upper = expected(module, X, strings.reshape(-1))
    np.testing.assert_allclose(response.output("scores").data, y, rtol=1e-6)
    assert response.output("upper:0").data.shape == (2, 1)
    assert list(response.output("upper:0").data.reshape(-1)) == list(upper)


def test_backend_only_config_serves_a_graphdef_on_two_instances(served, module):
    config = served.server.model_config("gd_backend_only")
    assert config.platform == "tensorflow_graphdef"
    assert len(served.server.model("gd_backend_only").runners) == 2
    rng = np.random.default_rng(3)
    batches = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(6)]
    strings = np.array([[b"a"], [b"b"]], dtype=object)

    async def many():
        requests = [
            InferenceRequest("gd_backend_only", [Tensor.from_numpy("x", b), Tensor.from_numpy("s", strings)])
            for b in batches
        ]
        return await asyncio.gather(*(served.server.infer(r) for r in requests))

    for b, response in zip(batches, served.run(many())):
        np.testing.assert_allclose(
            response.output("scores").data, expected(module, b, strings.reshape(-1))[0], rtol=1e-5
        )


def test_bf16_in_and_out(served, module):
    import tensorflow as tf

    values = tf.constant([[1.5, -2.0, 0.25], [3.0, 0.0, -0.5]], tf.bfloat16)
    words = values.numpy().view(np.uint16)
    request = InferenceRequest("sm_half", [Tensor.from_numpy("h", words, "BF16")])
    response = served.run(served.server.infer(request))
    reference = module.half(values)
    halved = response.output("halved")
    assert halved.datatype == "BF16"
    np.testing.assert_array_equal(halved.data, reference["halved"].numpy().view(np.uint16))
    assert response.output("positive").datatype == "BOOL"
    np.testing.assert_array_equal(response.output("positive").data, reference["positive"].numpy())


def test_requested_outputs_only(served, module):
    from naiad import RequestedOutput

    request = InferenceRequest(
        "gd_scores",
        [Tensor.from_numpy("x", X), Tensor.from_numpy("s", S.reshape(2, 1))],
        outputs=[RequestedOutput("scores")],
    )
    response = served.run(served.server.infer(request))
    assert [t.name for t in response.outputs] == ["scores"]
    np.testing.assert_allclose(response.outputs[0].data, expected(module, X, S)[0], rtol=1e-6)


def test_several_requests_in_one_execute_are_stacked_and_split(served, module):
    """The instance gets a batch of three requests (as the dynamic batcher hands it);
    each answer equals TensorFlow's for that request alone."""
    instance = served.server.model("sm_auto").runners[0].instance
    rng = np.random.default_rng(1)
    batches = [rng.standard_normal((n, 4)).astype(np.float32) for n in (1, 3, 2)]
    strings = [np.array([f"r{i}-{j}".encode() for j in range(len(b))], dtype=object) for i, b in enumerate(batches)]
    requests = [
        InferenceRequest("sm_auto", [Tensor.from_numpy("x", b), Tensor.from_numpy("s", s.reshape(-1, 1))])
        for b, s in zip(batches, strings)
    ]
    # sm_auto's config reshapes s to [batch]; the server applies that before execute.
    for request in requests:
        request.inputs[1] = Tensor.from_numpy("s", request.inputs[1].data.reshape(-1))
    responses = instance.execute(requests)
    assert len(responses) == 3
    for response, b, s in zip(responses, batches, strings):
        y, upper = expected(module, b, s)
        assert response.error is None
        np.testing.assert_allclose(response.output("y").data, y, rtol=1e-5)
        assert list(response.output("upper").data) == list(upper)


def test_bad_request_is_refused_and_server_keeps_serving(served, module):
    with pytest.raises(NaiadError) as info:
        served.infer("sm_auto", x=np.ones((2, 5), np.float32), s=S.reshape(2, 1))
    assert info.value.code is ErrorCode.INVALID_ARG and "'x'" in info.value.message
    with pytest.raises(NaiadError) as info:
        served.infer("sm_auto", x=X.astype(np.float64), s=S.reshape(2, 1))
    assert "FP64" in info.value.message
    response = served.infer("sm_auto", x=X, s=S.reshape(2, 1))
    np.testing.assert_allclose(response.output("y").data, expected(module, X, S)[0], rtol=1e-6)


def test_session_share_count_groups_instances(served):
    # MAX_SESSION_SHARE_COUNT 2: both instances of gd_backend_only run on one session;
    # gd_scores (default 1) has one session per instance.
    shared = [r.instance.session for r in served.server.model("gd_backend_only").runners]
    assert shared[0] is shared[1]


def test_tensorflow_error_answers_only_the_bad_request(served):
    """A value the graph rejects fails its own request with INVALID_ARG; the request batched
    beside it still gets its answer, and the model keeps serving."""
    good = np.array([[b"1.5"], [b"-2"]], dtype=object)
    bad = np.array([[b"twelve"]], dtype=object)
    with pytest.raises(NaiadError) as info:
        served.infer("sm_parse", text=bad)
    assert info.value.code is ErrorCode.INVALID_ARG
    assert "sm_parse" in info.value.message and "twelve" in info.value.message

    instance = served.server.model("sm_parse").runners[0].instance
    requests = [InferenceRequest("sm_parse", [Tensor.from_numpy("text", a.reshape(-1))]) for a in (good, bad)]
    first, second = instance.execute(requests)
    np.testing.assert_array_equal(first.output("number").data, [[1.5], [-2.0]])
    assert second.error is not None and second.error.code is ErrorCode.INVALID_ARG

    response = served.infer("sm_parse", text=good)
    np.testing.assert_array_equal(response.output("number").data, [[1.5], [-2.0]])
