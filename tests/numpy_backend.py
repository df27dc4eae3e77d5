"""A tiny backend written in numpy, registered as a plugin object, so core tests exercise
the real server path without any framework. Models pick an operation with the config
parameter `op`: `add_sub` (OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1),
`identity` (OUTPUTi = INPUTi), `fail` (raises; `fail_loads` with `load_log`: the first loads fail; any op with `load_ms` takes that long to load), `sleep` (touches `started_file` if set, sleeps `sleep_ms`, then identity),
`scale` (OUTPUTi = INPUTi * `factor`), `echo_parameters` (OUTPUT0 = the request's parameters as one
JSON string, BYTES [1]), `reassign_sequence` (OUTPUT0 = INPUT0, with the response parameters
`sequence_id` = INPUT0's first value and `sequence_start` / `sequence_end` from the config
parameters `start` / `end`: how a model hands its outputs to another sequence), `rendezvous` (identity, after every model naming the same `barrier`
with `parties` has reached it: proves that executions overlap without timing them), and for
decoupled models `repeat` (one response per element of input IN: OUT = [value],
IDX = [index], then a bare final flag) and `count_up` (`count` responses per request, the
i-th with OUTPUT0 = INPUT0 + i). Any op with the config parameter `execution_log` PATH appends
one JSON line per execution to PATH (`requests`: how many, `inputs`: the first request's
inputs as lists), so a test counts executions, and sees their data, from outside the server;
with `timing_log` PATH, one JSON line per execution as it ends (`start`, `end`: the server's
monotonic clock), so a test sees whether executions overlapped."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from naiad.backend import Backend, InferenceResponse, Model, ModelInstance, Tensor, hookimpl
from naiad.backend.helpers import Batch

# The sequence batcher's control inputs, under the names `accumulate` reads; `%s` is the
# CORRID datatype (e.g. TYPE_UINT64 or TYPE_STRING).
SEQUENCE_CONTROLS = """control_input [
  {name: "START" control [{kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1]}]},
  {name: "END" control [{kind: CONTROL_SEQUENCE_END int32_false_true: [0, 1]}]},
  {name: "READY" control [{kind: CONTROL_SEQUENCE_READY int32_false_true: [0, 1]}]},
  {name: "CORRID" control [{kind: CONTROL_SEQUENCE_CORRID data_type: %s}]}]"""


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
            started = config.parameter("started_file")
            if started:  # lets a test act while the execution is surely in flight
                Path(started).touch()
            time.sleep(int(config.parameter("sleep_ms", "50")) / 1000)
        if op == "rendezvous":
            # Raises BrokenBarrierError when the other party never comes (no overlap).
            _barrier(config.parameter("barrier", "b"), int(config.parameter("parties", "2"))).wait(timeout=30)
        if op == "repeat":
            return self._repeat(requests)
        if op == "count_up":
            return self._count_up(requests, int(config.parameter("count", "3")))
        responses = []
        for request in requests:
            if op == "reassign_sequence":
                responses.append(self._reassign_sequence(request, config))
                continue
            if op == "echo_parameters":
                text = json.dumps(request.parameters, sort_keys=True).encode()
                outputs = [Tensor.from_numpy("OUTPUT0", np.array([text], dtype=object))]
            elif op == "add_sub":
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

    @staticmethod
    def _reassign_sequence(request, config):
        data = request.input("INPUT0").data
        parameters = {
            "sequence_id": int(data.reshape(-1)[0]),
            "sequence_start": config.parameter("start") == "true",
            "sequence_end": config.parameter("end") == "true",
        }
        return InferenceResponse(outputs=[Tensor.from_numpy("OUTPUT0", data)], parameters=parameters)

    def _count_up(self, requests, count):
        for request in requests:
            data = request.input("INPUT0").data
            for i in range(count):
                out = data + np.asarray(i, data.dtype)
                request.response_sender(InferenceResponse(outputs=[Tensor.from_numpy("OUTPUT0", out)]), False)
            request.response_sender(None, True)
        return None

    def _repeat(self, requests):
        for request in requests:
            send = request.response_sender
            for index, value in enumerate(request.input("IN").data.reshape(-1)):
                send(
                    InferenceResponse(
                        outputs=[
                            Tensor.from_numpy("OUT", np.array([value], np.int32)),
                            Tensor.from_numpy("IDX", np.array([index], np.uint32)),
                        ]
                    ),
                    False,
                )
            send(None, True)
        return None


@dataclass(frozen=True)
class Execution:
    instance: str
    start: float
    end: float
    requests: int
    batch_size: int
    ids: tuple[str, ...] = ()


class RecordingInstance(NumpyInstance):
    """Records every execution on the model and adds the scheduling tests' ops:

    * `add_sub` runs batched through the core's batch helpers, so one execution computes
      the whole batch; `sleep` with a DELAY_MS input sleeps the largest value in the batch.
    * `accumulate`: a sequence model without implicit state. Per correlation id it keeps a
      running sum of INPUT (reset by START; requests whose READY is false are padding and
      change nothing; `sleep_ms` slows each execution). OUTPUT is the sum, CONTROLS echoes
      [START, END, READY] and CORRID_OUT the correlation id it received. Control input
      names are START, END, READY and CORRID.
    * `state_add`: a sequence model with implicit state: OUTPUT = OUTPUT_STATE = INPUT +
      INPUT_STATE (its state input).

    Records go to the model (`NumpyModel.executions`): instance name, monotonic start and
    end times, the batch's request count and total batch size, and the request ids;
    `started` lists request ids as executions begin. Tests check overlap and batch
    formation with these, without timing anything.
    """

    def initialize(self):
        # Sums by correlation id; a sequence always runs on the same instance.
        self.sums: dict[object, np.ndarray] = {}

    def execute(self, requests):
        config = self.model.context.config
        op = config.parameter("op", "identity")
        start = time.monotonic()
        execution_log = config.parameter("execution_log")
        if execution_log:
            first = {
                t.name: [v.decode() if isinstance(v, bytes) else v for v in t.data.reshape(-1).tolist()]
                for t in requests[0].inputs
            }
            with open(execution_log, "a") as log:
                log.write(json.dumps({"requests": len(requests), "inputs": first}) + "\n")
        self.model.started.extend(r.id for r in requests)
        try:
            if op == "add_sub":
                batch = Batch.stack(requests, config)
                a, b = batch.inputs["INPUT0"], batch.inputs["INPUT1"]
                return batch.responses({"OUTPUT0": a + b, "OUTPUT1": a - b})
            if op == "sleep" and any(r.input("DELAY_MS") is not None for r in requests):
                time.sleep(max(int(r.input("DELAY_MS").data.max()) for r in requests) / 1000)
                return [
                    InferenceResponse(
                        outputs=[Tensor("OUTPUT0", t.datatype, t.shape, t.data) for t in r.inputs if t.name == "INPUT0"]
                    )
                    for r in requests
                ]
            if op == "accumulate":
                time.sleep(int(config.parameter("sleep_ms", "0")) / 1000)
                return [self._accumulate(request) for request in requests]
            if op == "state_add":
                return [self._state_add(request) for request in requests]
            return super().execute(requests)
        finally:
            end = time.monotonic()
            batch_size = sum(int(r.inputs[0].shape[0]) if config.max_batch_size > 0 else 1 for r in requests)
            self.model.record(
                Execution(self.context.name, start, end, len(requests), batch_size, tuple(r.id for r in requests))
            )
            timing_log = config.parameter("timing_log")
            if timing_log:
                with open(timing_log, "a") as log:
                    log.write(json.dumps({"start": start, "end": end}) + "\n")

    def _accumulate(self, request):
        for name in ("START", "END", "READY", "CORRID"):
            self.model.control_datatypes[name] = request.input(name).datatype
        value = request.input("INPUT").data
        flags = [int(np.asarray(request.input(name).data).reshape(-1)[0]) for name in ("START", "END", "READY")]
        corrid = request.input("CORRID").data.reshape(-1)[0]
        key = corrid.decode() if isinstance(corrid, bytes) else int(corrid)
        start, _, ready = flags
        if ready:
            if start or key not in self.sums:
                self.sums[key] = np.zeros_like(value)
            self.sums[key] = self.sums[key] + value
            total = self.sums[key]
        else:
            total = np.zeros_like(value)
        controls = np.asarray(flags, dtype=np.int32).reshape(value.shape[:-1] + (3,))
        return InferenceResponse(
            outputs=[
                Tensor.from_numpy("OUTPUT", total),
                Tensor.from_numpy("CONTROLS", controls),
                Tensor(
                    "CORRID_OUT",
                    request.input("CORRID").datatype,
                    request.input("CORRID").shape,
                    request.input("CORRID").data,
                ),
            ]
        )

    def _state_add(self, request):
        total = request.input("INPUT").data + request.input("INPUT_STATE").data
        return InferenceResponse(outputs=[Tensor.from_numpy("OUTPUT", total), Tensor.from_numpy("OUTPUT_STATE", total)])


class NumpyModel(Model):
    def initialize(self):
        # `fail_loads` N with `load_log` PATH: the first N loads of the model fail (each load
        # appends a line to PATH), for load retries.
        load_log = self.context.config.parameter("load_log")
        if load_log:
            with open(load_log, "a") as log:
                log.write("load\n")
            if len(Path(load_log).read_text().splitlines()) <= int(self.context.config.parameter("fail_loads", "0")):
                raise RuntimeError("the model failed to load on purpose")
        # `load_ms` stands in for a framework that takes long to load a model.
        time.sleep(int(self.context.config.parameter("load_ms", "0")) / 1000)
        # `allocate_mb` stands in for weights: memory a model holds until it is finalized.
        self.weights = np.ones(int(self.context.config.parameter("allocate_mb", "0")) * 2**20, np.uint8)
        self.executions: list[Execution] = []
        # Request ids in the order executions began (appended before the work).
        self.started: list[str] = []
        # Datatypes of the control inputs last received, by input name.
        self.control_datatypes: dict[str, str] = {}

    def record(self, execution: Execution) -> None:
        self.executions.append(execution)  # list.append is atomic: instances share this

    def create_instance(self, context):
        return RecordingInstance(self, context)


class NumpyBackend(Backend):
    name = "numpy"
    abi_version = (2, 0)

    def create_model(self, context):
        return NumpyModel(context)


class NumpyPlugin:
    @hookimpl
    def naiad_backends(self):
        return [NumpyBackend]
