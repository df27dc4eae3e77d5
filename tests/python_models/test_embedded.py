"""Models declared with @naiad.model served by the in-process `Server` (no app file): the
declaration, its generated config, batching, classes with setup, async functions, and what
a bad declaration or a bad return value is told."""

import asyncio

import numpy as np
import pytest

import naiad
from naiad import InferenceRequest, NaiadError, Server, ServerOptions, Tensor


@naiad.model(inputs={"x": ("FP32", [-1, 4])}, outputs={"y": ("FP32", [-1, 4])}, max_batch_size=8)
def double(x: np.ndarray) -> dict:
    return {"y": x * 2}


@naiad.model(
    "scale",
    inputs={"x": ("FP32", [2])},
    outputs={"y": ("FP32", [2]), "calls": ("INT64", [1])},
)
class Scale:
    def __init__(self) -> None:
        self.factor = 0
        self.calls = 0

    def setup(self) -> None:
        self.factor = 10

    def __call__(self, x: np.ndarray) -> dict:
        self.calls += 1
        return {"y": x * self.factor, "calls": np.array([self.calls])}


@naiad.model(inputs={"text": ("BYTES", [-1, 1])}, outputs={"length": ("INT32", [-1, 1])}, max_batch_size=4)
async def length(text: np.ndarray) -> dict:
    await asyncio.sleep(0)
    return {"length": np.array([[len(t)] for t in text.reshape(-1)])}


def infer(server: Server, model: str, **inputs: np.ndarray):
    tensors = [Tensor.from_numpy(name, array) for name, array in inputs.items()]
    return server.infer(InferenceRequest(model, tensors))


def test_a_decorated_function_stays_callable_and_declares_its_config():
    np.testing.assert_array_equal(double(np.ones((1, 4), np.float32))["y"], np.full((1, 4), 2, np.float32))
    config = naiad.python_models.declaration_of(double).config_text()
    assert config == (
        'name: "double"\n'
        "max_batch_size: 8\n"
        'input {\n  name: "x"\n  data_type: TYPE_FP32\n  dims: 4\n}\n'
        'output {\n  name: "y"\n  data_type: TYPE_FP32\n  dims: 4\n}\n'
        "instance_group {\n  count: 1\n  kind: KIND_CPU\n}\n"
        "dynamic_batching {\n}\n"
        'backend: "naiad_function"\n'
    )


def test_function_class_and_async_models_in_process():
    async def go():
        options = ServerOptions(python_models=[double, Scale, length])
        async with Server(options) as server:
            response = await infer(server, "double", x=np.arange(8, dtype=np.float32).reshape(2, 4))
            np.testing.assert_array_equal(response.output("y").data, np.arange(8, dtype=np.float32).reshape(2, 4) * 2)
            assert server.model_config("double").max_batch_size == 8
            assert server.model_config("double").proto.HasField("dynamic_batching")

            # The class was set up once (setup ran after __init__), and its one instance is kept.
            for call in (1, 2):
                response = await infer(server, "scale", x=np.array([1, 2], np.float32))
                np.testing.assert_array_equal(response.output("y").data, [10, 20])
                assert response.output("calls").data.tolist() == [call]

            response = await infer(server, "length", text=np.array([[b"abc"], [b"hello"]], dtype=object))
            assert response.output("length").datatype == "INT32"
            assert response.output("length").data.tolist() == [[3], [5]]
            metadata = server.model_metadata("length")
            assert metadata["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": [-1, 1]}]
            assert metadata["platform"] == "naiad_function"

    asyncio.run(go())


def test_the_function_gets_the_batch():
    seen: list[int] = []

    @naiad.model(
        inputs={"x": ("INT32", [-1, 1])},
        outputs={"y": ("INT32", [-1, 1])},
        max_batch_size=16,
        max_queue_delay_microseconds=200_000,
    )
    def rows(x: np.ndarray) -> dict:
        seen.append(x.shape[0])
        return {"y": x + 1}

    async def go():
        async with Server(ServerOptions(python_models=[rows])) as server:
            responses = await asyncio.gather(*(infer(server, "rows", x=np.array([[i]], np.int32)) for i in range(6)))
            assert [r.output("y").data.tolist() for r in responses] == [[[i + 1]] for i in range(6)]
            stats = server.statistics("rows")[0]
            assert stats["inference_count"] == 6
            assert stats["execution_count"] == len(seen)

    asyncio.run(go())
    # The queue delay holds the six requests long enough to meet in fewer batches.
    assert sum(seen) == 6 and max(seen) > 1


def test_what_a_function_returns_is_checked():
    @naiad.model(inputs={"x": ("FP32", [1])}, outputs={"y": ("FP32", [1])})
    def wrong_name(x):
        return {"z": x}

    @naiad.model(inputs={"x": ("FP32", [1])}, outputs={"y": ("FP32", [1])})
    def raises(x):
        raise ValueError("no good")

    async def go():
        async with Server(ServerOptions(python_models=[wrong_name, raises])) as server:
            with pytest.raises(NaiadError) as info:
                await infer(server, "wrong_name", x=np.ones(1, np.float32))
            assert (
                info.value.message
                == "model 'wrong_name' returned no output 'y' and undeclared output(s) 'z'; it declares y"
            )
            with pytest.raises(NaiadError) as info:
                await infer(server, "raises", x=np.ones(1, np.float32))
            assert info.value.message == "model 'raises' raised ValueError: no good"
            # And the server keeps serving.
            assert server.model_ready("raises")

    asyncio.run(go())


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"inputs": {"x": ("FLOAT32", [1])}, "outputs": {"y": ("FP32", [1])}},
            "@naiad.model 'f': input 'x' has datatype 'FLOAT32'; expected one of",
        ),
        (
            {"inputs": {"x": ("FP32", [4])}, "outputs": {"y": ("FP32", [-1, 4])}, "max_batch_size": 8},
            "@naiad.model 'f': input 'x' has shape [4]; with max_batch_size 8 its first dimension is the batch "
            "dimension and must be -1",
        ),
        (
            {"inputs": {}, "outputs": {"y": ("FP32", [1])}},
            "@naiad.model 'f': inputs must be a dict of {name: (datatype, shape)} with at least one input",
        ),
        (
            {"inputs": {"x": ("FP32", [1])}, "outputs": {"y": "FP32"}},
            "@naiad.model 'f': output 'y' must be (datatype, shape), got 'FP32'",
        ),
        (
            {"inputs": {"x": ("FP32", [1])}, "outputs": {"y": ("FP32", [1])}, "max_batch_size": -1},
            "@naiad.model 'f': max_batch_size must be an integer of at least 0, got -1",
        ),
    ],
)
def test_a_bad_declaration_is_refused_where_it_is_written(arguments, message):
    with pytest.raises(ValueError) as info:

        @naiad.model(**arguments)
        def f(x):
            return {"y": x}

    assert str(info.value).startswith(message)


def test_an_undecorated_object_is_refused_at_start():
    def plain(x):
        return x

    async def go():
        with pytest.raises(NaiadError) as info:
            await Server(ServerOptions(python_models=[plain])).start()
        assert info.value.message.startswith("ServerOptions.python_models: <function")
        assert info.value.message.endswith("is not decorated with @naiad.model")

    asyncio.run(go())


def test_a_class_is_torn_down_on_unload_and_a_failing_setup_fails_its_load():
    events: list[str] = []

    @naiad.model(inputs={"x": ("FP32", [1])}, outputs={"y": ("FP32", [1])}, instances=2)
    class Counted:
        def setup(self) -> None:
            events.append("setup")

        def __call__(self, x):
            return {"y": x}

        def teardown(self) -> None:
            events.append("teardown")

    @naiad.model(inputs={"x": ("FP32", [1])}, outputs={"y": ("FP32", [1])})
    class Broken:
        def setup(self) -> None:
            raise FileNotFoundError("weights.bin")

        def __call__(self, x):
            return {"y": x}

    async def go():
        options = ServerOptions(python_models=[Counted, Broken], exit_on_error=False)
        async with Server(options) as server:
            assert events == ["setup", "setup"]  # one object per instance
            assert server.startup_failures == ["failed to load 'Broken': FileNotFoundError: weights.bin"]
            await server.unload_model("Counted")
            assert events == ["setup", "setup", "teardown", "teardown"]

    asyncio.run(go())


def test_an_ensemble_over_declared_models_in_process(tmp_path):
    @naiad.model(inputs={"x": ("INT32", [-1, 2])}, outputs={"y": ("INT32", [-1, 2])}, max_batch_size=4)
    def increment(x):
        return {"y": x + 1}

    (tmp_path / "twice" / "1").mkdir(parents=True)
    (tmp_path / "twice" / "config.pbtxt").write_text(
        'platform: "ensemble" max_batch_size: 4\n'
        'input [{name: "IN" data_type: TYPE_INT32 dims: [2]}] output [{name: "OUT" data_type: TYPE_INT32 dims: [2]}]\n'
        "ensemble_scheduling { step [\n"
        '  {model_name: "increment" model_version: -1 input_map {key: "x" value: "IN"} output_map {key: "y" value: "mid"}},\n'
        '  {model_name: "increment" model_version: -1 input_map {key: "x" value: "mid"} output_map {key: "y" value: "OUT"}}\n'
        "] }\n"
    )

    async def go():
        async with Server(ServerOptions([str(tmp_path)], python_models=[increment])) as server:
            response = await infer(server, "twice", IN=np.array([[1, 2]], np.int32))
            assert response.output("OUT").data.tolist() == [[3, 4]]
            assert server.statistics("increment")[0]["inference_count"] == 2

    asyncio.run(go())


def test_a_repository_poll_leaves_declared_models_as_they_are():
    async def go():
        async with Server(ServerOptions(python_models=[double], model_control_mode="poll")) as server:
            serving = server.model("double")
            await server.poller.poll_once()
            assert server.model("double") is serving

    asyncio.run(go())
