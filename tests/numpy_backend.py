"""A tiny backend written in numpy, registered as a plugin object, so core tests exercise
the real server path without any framework. Models pick an operation with the config
parameter `op`: `add_sub` (OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1),
`identity` (OUTPUTi = INPUTi), `fail` (raises), `sleep` (sleeps `sleep_ms`, then identity),
`scale` (OUTPUTi = INPUTi * `factor`), `count_up` (decoupled: `count` responses per request, the
i-th with OUTPUT0 = INPUT0 + i), `rendezvous` (identity, after every model naming the same
`barrier` with `parties` has reached it: proves that executions overlap without timing them)."""

from __future__ import annotations

import threading
import time

import numpy as np

from naiad import Backend, InferenceResponse, Model, ModelInstance, Tensor, hookimpl


# Barriers of the `rendezvous` op, shared by every model of the process that names them.
_BARRIERS: dict[str, threading.Barrier] = {}
_BARRIERS_LOCK = threading.Lock()


def _barrier(name: str, parties: int) -> threading.Barrier:
    with _BARRIERS_LOCK:
        barrier = _BARRIERS.get(name)
        if barrier is None or barrier.broken:
            barrier = _BARRIERS[name] = threading.Barrier(parties)
        return barrier


class NumpyInstance(ModelInstance):
    def execute(self, requests):
        config = self.model.context.config
        op = config.parameter("op", "identity")
        if op == "fail":
            raise RuntimeError("the model failed on purpose")
        if op == "sleep":
            time.sleep(int(config.parameter("sleep_ms", "50")) / 1000)
        if op == "rendezvous":
            # Raises BrokenBarrierError when the other party never comes (no overlap).
            _barrier(config.parameter("barrier", "b"), int(config.parameter("parties", "2"))).wait(timeout=30)
        if op == "count_up":
            count = int(config.parameter("count", "3"))
            for request in requests:
                for i in range(count):
                    out = request.input("INPUT0").data + np.asarray(i, request.input("INPUT0").data.dtype)
                    request.response_sender(InferenceResponse(outputs=[Tensor.from_numpy("OUTPUT0", out)]), False)
                request.response_sender(None, True)
            return None
        responses = []
        for request in requests:
            if op == "add_sub":
                a, b = request.input("INPUT0").data, request.input("INPUT1").data
                outputs = [Tensor.from_numpy("OUTPUT0", a + b), Tensor.from_numpy("OUTPUT1", a - b)]
            elif op == "scale":
                factor = float(config.parameter("factor", "2"))
                outputs = [
                    Tensor.from_numpy(t.name.replace("INPUT", "OUTPUT"), (t.data * factor).astype(t.data.dtype))
                    for t in request.inputs
                ]
            else:
                outputs = [
                    Tensor(t.name.replace("INPUT", "OUTPUT"), t.datatype, t.shape, t.data) for t in request.inputs
                ]
            responses.append(InferenceResponse(outputs=outputs))
        return responses


class NumpyModel(Model):
    def create_instance(self, context):
        return NumpyInstance(self, context)


class NumpyBackend(Backend):
    name = "numpy"

    def create_model(self, context):
        return NumpyModel(context)


class NumpyPlugin:
    @hookimpl
    def naiad_backends(self):
        return [NumpyBackend]
