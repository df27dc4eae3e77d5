"""`histogram_latencies=true`: nv_inference_first_response_histogram_ms for decoupled
models, with buckets from the model's `model_metrics` block."""

import asyncio

import numpy as np
from metrics_server import MetricsServer, make_model
from prometheus_text import value

from naiad import Backend, InferenceRequest, InferenceResponse, Model, ModelInstance, Tensor, hookimpl


class StreamingInstance(ModelInstance):
    def execute(self, requests):
        for request in requests:
            data = request.input("INPUT0").data
            request.response_sender(InferenceResponse(outputs=[Tensor.from_numpy("OUTPUT0", data)]), False)
            request.response_sender(None, True)
        return None


class StreamingModel(Model):
    def create_instance(self, context):
        return StreamingInstance(self, context)


class StreamingBackend(Backend):
    name = "streaming"
    abi_version = (2, 0)

    def create_model(self, context):
        return StreamingModel(context)


class StreamingPlugin:
    @hookimpl
    def naiad_backends(self):
        return [StreamingBackend]


STREAMING = """backend: "streaming" max_batch_size: 0
model_transaction_policy { decoupled: true }
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[4]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[4]}]
model_metrics { metric_control [{ metric_identifier { family: "nv_inference_first_response_histogram_ms" }
                                   histogram_options { buckets: [ 1000, 60000 ] } }] }"""


def test_first_response_histogram_for_decoupled_models(repo):
    make_model(repo, "streaming", STREAMING)

    async def go():
        async with MetricsServer(
            repo, "--metrics-config", "histogram_latencies=true", plugins=[StreamingPlugin()]
        ) as ms:
            for _ in range(3):
                r = InferenceRequest("streaming", [Tensor.from_numpy("INPUT0", np.ones(4, np.float32))])
                await ms.server.infer(r)
            await ms.server.infer(
                InferenceRequest(
                    "add_sub",
                    [
                        Tensor.from_numpy("INPUT0", np.ones((1, 4), np.float32)),
                        Tensor.from_numpy("INPUT1", np.ones((1, 4), np.float32)),
                    ],
                )
            )
            _, samples, types = await ms.scrape()
            name = "nv_inference_first_response_histogram_ms"
            assert types[name] == "histogram"
            labels = {"model": "streaming", "version": "1"}
            assert value(samples, f"{name}_count", **labels) == 3
            assert value(samples, f"{name}_bucket", le="+Inf", **labels) == 3
            assert value(samples, f"{name}_bucket", le="60000.0", **labels) == 3
            assert value(samples, f"{name}_sum", **labels) > 0
            # Only decoupled models get one, as in Triton.
            assert not [k for k in samples if k[0].startswith(name) and ("model", "add_sub") in k[1]]
            assert value(samples, "nv_inference_request_success", **labels) == 3

    asyncio.run(go())
