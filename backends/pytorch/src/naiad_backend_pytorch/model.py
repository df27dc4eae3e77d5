"""`TorchModel` and `TorchInstance`: one module per device, shared by every instance on it
(forward in eval/inference mode does not mutate the module), batches stacked along axis 0.

Config `parameters` (Triton's names): how forward runs (execution.py),
`INTRA_OP_THREAD_COUNT`, `INTER_OP_THREAD_COUNT`; naiad's own
`OPTIMIZE_FOR_INFERENCE` (TorchScript through `torch.jit.optimize_for_inference`; default true
on the CPU, false on GPUs, where it is unproven). GPU instances honour Triton's
`optimization { cuda { graphs: true } }` (cuda_graphs.py).
"""

from __future__ import annotations

import logging
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from naiad.backend import (
    ConfigError,
    InferenceRequest,
    InferenceResponse,
    InstanceContext,
    Model,
    ModelConfig,
    ModelContext,
    ModelInstance,
    NaiadError,
    TensorSpec,
)
from naiad.backend.helpers import (
    Batch,
    apply_output_reshape,
    model_config_pb2,
    model_inputs,
    model_outputs,
    run_isolating_failures,
)

from .auto_complete import auto_complete, program_signature
from .binding import InputBinding, bind_inputs, output_index
from .cuda_graphs import CudaGraphs, GraphPolicy, graph_blocker
from .device_inputs import gather, placed_inputs
from .device_outputs import write_placed_outputs
from .device_views import DeviceViews
from .dtypes import datatype_of_dtype, to_numpy, to_torch
from .execution import ExecutionSettings, parameter_key
from .loading import LoadedModule, find_model_file, load_module, optimized_for_inference, torch_message
from .stacking import torch_concatenate
from .staging import PinnedStaging

if TYPE_CHECKING:
    from .backend import PyTorchBackend

__all__ = ["TorchModel", "TorchInstance"]

_HOST = torch.device("cpu")

log = logging.getLogger("naiad.backends.pytorch")


class TorchModel(Model):
    def __init__(self, context: ModelContext, backend: PyTorchBackend) -> None:
        super().__init__(context)
        self.backend = backend
        self._modules: dict[str, LoadedModule] = {}
        self._lock = threading.Lock()

    @property
    def model_path(self) -> Path:
        return find_model_file(self.context.version_path, self.context.model_filename, self.context.name)

    def module(self, device: torch.device, *, optimize: bool = False) -> LoadedModule:
        """The module on `device`, loaded once; `optimize` replaces it with its optimized form
        (instances ask for that, auto-complete and initialize only read the signature), so
        the weights are held once."""
        key = str(device)
        with self._lock:
            loaded = self._modules.get(key)
            if loaded is None:
                loaded = load_module(self.model_path, device, self.context.name)
            if optimize:
                loaded = optimized_for_inference(loaded, self.context.name)
            self._modules[key] = loaded
            return loaded

    def auto_complete_config(self, config: ModelConfig) -> None:
        loaded = self.module(torch.device("cpu"))
        if loaded.kind != "export":
            return  # TorchScript has no tensor metadata; initialize explains what is missing.
        inputs, outputs = program_signature(loaded.program, loaded.arg_names)
        # A max_batch_size the config writes, 0 included, is the user's: only an absent one is filled.
        default = 0 if config.user_wrote("max_batch_size") else self.backend.settings.default_max_batch_size
        auto_complete(config.proto, inputs, outputs, default)
        config.refresh()

    def initialize(self) -> None:
        config = self.context.config
        loaded = self.module(torch.device("cpu"))
        if not config.inputs or not config.outputs:
            # Triton's words first, then what to do about it.
            if not config.outputs:
                fault = "model configuration must contain at least one output, none were specified"
            else:
                fault = (
                    f"unable to load model '{config.name}', configuration expects 0 inputs, model provides "
                    f"{len(loaded.arg_names)}"
                )
            raise ConfigError(
                config.name,
                f"{fault}: {self.model_path.name} is TorchScript, which records no input or output types: declare "
                "input and output in config.pbtxt (names INPUT__0, OUTPUT__0..., or forward's argument names: "
                + (", ".join(loaded.arg_names) or "none")
                + ")"
                if loaded.kind == "torchscript"
                else f"{fault}: the config declares no inputs or outputs",
            )
        # Sequence controls, implicit state and batch inputs are forward's arguments too.
        self.input_specs = {spec.name: spec for spec in model_inputs(config)}
        self.output_specs = model_outputs(config)
        self.binding: InputBinding = bind_inputs(config.name, list(self.input_specs), loaded.arg_names)
        if loaded.kind == "export":
            self._check_program(config, loaded)
        self.execution = ExecutionSettings.of(config)
        self.graph_policy = GraphPolicy.of(config)
        if self.graph_policy.enabled and (blocker := graph_blocker(self.input_specs.values())) is not None:
            log.warning(
                "model '%s': optimization.cuda.graphs is set, but %s: served without CUDA graphs", config.name, blocker
            )
            self.graph_policy = GraphPolicy()
        optimize = parameter_key(config, "OPTIMIZE_FOR_INFERENCE")
        self.optimize_on = {
            "cpu": config.bool_parameter(optimize, True),
            "cuda": config.bool_parameter(optimize, False),
        }
        self.intra_op_threads = config.int_parameter(parameter_key(config, "INTRA_OP_THREAD_COUNT"), None, minimum=1)
        if self.intra_op_threads is None:
            # Each instance's thread runs torch's parallel operations with a pool of its own:
            # share the server's CPUs among the CPU instances that may run at once.
            gpu = model_config_pb2.ModelInstanceGroup.KIND_GPU
            cpu_instances = sum(g.count or 1 for g in config.proto.instance_group if g.kind != gpu)
            self.intra_op_threads = self.backend.context.thread_budget(cpu_instances)
        inter_op = config.int_parameter(parameter_key(config, "INTER_OP_THREAD_COUNT"), None, minimum=1)
        if inter_op is not None and torch.get_num_interop_threads() != inter_op:
            try:
                torch.set_num_interop_threads(inter_op)
            except RuntimeError as exc:
                # torch fixes the inter-op pool once any parallel work has run.
                log.warning("model '%s': INTER_OP_THREAD_COUNT=%d not applied: %s", config.name, inter_op, exc)

    def _check_program(self, config: ModelConfig, loaded: LoadedModule) -> None:
        """An exported program knows its tensors: refuse a config that contradicts them."""
        inputs, outputs = program_signature(loaded.program, loaded.arg_names)
        batch = [-1] if config.max_batch_size > 0 else []
        pairs = [
            ("input", config.input_by_name[name], found)
            for name, found in zip(self.binding.order, inputs)
            if name in config.input_by_name
        ]
        by_name = {t.name: t for t in outputs}
        for position, spec in enumerate(config.outputs):
            found = by_name.get(spec.name)
            if (
                found is None
                and output_index(spec.name, position) < len(outputs)
                and not by_name.keys() - {f"OUTPUT__{i}" for i in range(len(outputs))}
            ):
                found = outputs[output_index(spec.name, position)]
            if found is not None:
                pairs.append(("output", spec, found))
        for kind, spec, found in pairs:
            if found.datatype != spec.datatype:
                raise ConfigError(
                    config.name,
                    f"{kind} '{spec.name}': the config says data_type {spec.datatype}, the program has "
                    f"{found.datatype or 'an unsupported dtype'}",
                )
            shape = batch + list(spec.reshape if spec.reshape is not None else spec.dims)
            if len(shape) != len(found.shape) or any(
                want != -1 and have != -1 and want != have for want, have in zip(shape, found.shape)
            ):
                raise ConfigError(
                    config.name,
                    f"{kind} '{spec.name}': the config's shape {shape} (batch dimension included) does not fit "
                    f"the program's {list(found.shape)}",
                )

    def device_for(self, context: InstanceContext) -> torch.device:
        if context.kind != "GPU":
            return torch.device("cpu")
        if not torch.cuda.is_available():
            raise ConfigError(
                self.context.name,
                f"instance '{context.name}' is KIND_GPU but this torch build has no CUDA "
                f"(torch {torch.__version__}); install a CUDA build of torch or use KIND_CPU",
            )
        if context.device_id >= torch.cuda.device_count():
            raise ConfigError(self.context.name, f"instance '{context.name}': torch sees no cuda:{context.device_id}")
        return torch.device("cuda", context.device_id)

    def create_instance(self, context: InstanceContext) -> ModelInstance:
        return TorchInstance(self, context)

    def finalize(self) -> None:
        with self._lock:
            self._modules.clear()


class TorchInstance(ModelInstance):
    model: TorchModel

    def initialize(self) -> None:
        model = self.model
        self.config = model.context.config
        self.device = model.device_for(self.context)
        self.loaded = model.module(self.device, optimize=model.optimize_on[self.device.type])
        self.batching = self.config.max_batch_size > 0
        self._threads_set = False
        # A GPU instance runs on a stream of its own (instances on one GPU overlap their copies
        # and kernels, as Triton's do) and stacks its inputs into pinned memory.
        on_gpu = self.device.type == "cuda"
        self.stream = torch.cuda.Stream(self.device) if on_gpu else None
        self.staging = PinnedStaging() if on_gpu else None
        self.views = DeviceViews(self.device) if on_gpu else None
        self._said: set[str] = set()
        self.graphs: CudaGraphs | None = None
        if self.stream is not None and model.graph_policy.enabled:
            where = f"model '{self.config.name}' instance '{self.context.name}'"
            self.graphs = CudaGraphs(
                self.loaded.module, self.device, self.stream, model.graph_policy, self.config.max_batch_size, where
            )

    def execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse]:
        if not self._threads_set:
            # torch's intra-op setting belongs to the calling thread: apply it in the
            # instance's own execution thread.
            if self.model.intra_op_threads is not None:
                torch.set_num_threads(self.model.intra_op_threads)
            self._threads_set = True
        return run_isolating_failures(requests, self._run)

    def _argument(self, name: str, array: np.ndarray, device: torch.device) -> Any:
        spec = self.model.input_specs[name]
        if spec.datatype == "BYTES":
            # TorchScript takes strings as List[str].
            items = []
            for index, item in enumerate(array.reshape(-1)):
                try:
                    items.append(item.decode("utf-8") if isinstance(item, (bytes, bytearray)) else str(item))
                except UnicodeDecodeError:
                    raise NaiadError.invalid(f"input '{name}': element {index} is not UTF-8 text") from None
            return items
        return to_torch(array, spec.datatype, device)

    def _run(self, requests: list[InferenceRequest]) -> list[InferenceResponse]:
        order = self.model.binding.order
        with ExitStack() as held:
            # Inputs the clients placed in CUDA shared memory on this GPU are read there.
            views = self.views
            placed = placed_inputs(requests, order, self.device, held) if views is not None else {}
            if placed:
                # Last in, first out: no kernel of this batch reads a region once it is given back.
                held.callback(self._synchronize)
                self._say_once(f"inputs placed in CUDA shared memory on {self.device} are read there, device to device")
            batch = Batch.stack(requests, self.config, into=self.staging, leave=placed, concatenate=torch_concatenate)
            # Inputs go to the device, forward runs and outputs come back, all on the instance's
            # stream: reading the outputs waits for that stream's work alone.
            with self.model.execution.context(self.loaded.kind == "torchscript", self.device, self.stream):
                # Graphs copy their inputs from the host into buffers of their own.
                forward, device = (self.graphs, _HOST) if self.graphs is not None else (self.loaded.module, self.device)
                args = [
                    gather(placed[name], views)
                    if views is not None and name in placed
                    else self._argument(name, batch.inputs[name], device)
                    for name in order
                ]
                try:
                    result = forward(*args)
                except (RuntimeError, ValueError, TypeError, IndexError, AssertionError) as exc:
                    raise NaiadError.invalid(
                        f"model '{self.config.name}': PyTorch failed on the inputs: {torch_message(exc)}"
                    ) from None
                values = self._outputs(result)
                # Outputs the clients placed in CUDA shared memory on this GPU are written there.
                written = (
                    write_placed_outputs(
                        requests,
                        values,
                        batch.output_datatypes,
                        batch.sizes if self.batching else [],
                        views,
                        held,
                    )
                    if views is not None
                    else {}
                )
                if written:
                    held.callback(self._synchronize)  # before the regions are given back
                    self._say_once(
                        f"outputs placed in CUDA shared memory on {self.device} are written there, device to device"
                    )
                outputs = {
                    name: value if isinstance(value, np.ndarray) else to_numpy(value)
                    for name, value in values.items()
                    if None in written.get(name, [None])
                }
        responses = batch.responses(outputs)
        for name, stand_ins in written.items():
            for response, stand_in in zip(responses, stand_ins):
                if stand_in is not None:
                    response.outputs = [t for t in response.outputs if t.name != name] + [stand_in]
        apply_output_reshape(responses, self.config)
        return responses

    def _synchronize(self) -> None:
        assert self.stream is not None
        self.stream.synchronize()

    def _say_once(self, what: str) -> None:
        """Log `what` this instance does with CUDA shared memory, the first time it does it."""
        if what not in self._said:
            self._said.add(what)
            log.info("model '%s' instance '%s': %s", self.config.name, self.context.name, what)

    def _outputs(self, result: Any) -> dict[str, Any]:
        """Config outputs picked out of forward's result (tensor, tuple/list, dict), checked:
        a tensor where it stays (the device), BYTES as a host array."""
        specs = self.model.output_specs
        model = f"model '{self.config.name}'"
        values: dict[str, Any] = {}
        for position, spec in enumerate(specs):
            if isinstance(result, dict):
                if spec.name not in result:
                    raise NaiadError.internal(
                        f"{model}: forward returned a dict without output '{spec.name}' (keys: "
                        + ", ".join(map(str, result))
                        + ")"
                    )
                value = result[spec.name]
            elif isinstance(result, (tuple, list)) and not _is_string_list(result):
                index = output_index(spec.name, position)
                if index >= len(result):
                    raise NaiadError.internal(
                        f"{model}: output '{spec.name}' wants element {index} of forward's result, which has {len(result)}"
                    )
                value = result[index]
            else:
                if output_index(spec.name, position) != 0:
                    raise NaiadError.internal(
                        f"{model}: forward returned a single value, output '{spec.name}' asks for another element"
                    )
                value = result
            values[spec.name] = self._checked(spec, value)
        return values

    def _checked(self, spec: TensorSpec, value: Any) -> Any:
        name, datatype = spec.name, spec.datatype
        model = f"model '{self.config.name}'"
        if datatype == "BYTES":
            if not _is_string_list(value):
                raise NaiadError.internal(f"{model}: output '{name}' is BYTES, forward returned {type(value).__name__}")
            array = np.empty(len(value), dtype=object)
            array[:] = [item.encode("utf-8") for item in value]
            return array.reshape(-1, 1) if self.batching and spec.dims == (1,) else array
        if not isinstance(value, torch.Tensor):
            raise NaiadError.internal(f"{model}: output '{name}' is a {type(value).__name__}, not a tensor")
        produced = datatype_of_dtype(value.dtype)
        if produced != datatype:
            raise NaiadError.internal(
                f"{model}: output '{name}' is {produced or value.dtype} from the model, the config declares {datatype}"
            )
        return value


def _is_string_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(item, str) for item in value)
