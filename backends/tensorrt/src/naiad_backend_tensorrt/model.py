"""A TensorRT model version (engines per GPU) and its instances (an execution context and
a CUDA stream each)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

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
)
from naiad.backend.helpers import execute_by_name

from .auto_complete import auto_complete_from_engine
from .compute_capability import format_compute_capability, select_plan_filename
from .config_check import check_config_against_engine
from .cuda_runtime import (
    CudaError,
    DeviceBuffer,
    Stream,
    compute_capability,
    set_device,
)
from .dtypes import numpy_dtype_of
from .engine_description import EngineDescription, describe_engine
from .gpu_check import require_gpu, require_tensorrt
from .profiles import allowed_profiles, choose_profile

if TYPE_CHECKING:
    from .backend import TensorRTBackend

__all__ = ["TensorRTModel", "TensorRTInstance"]


def _first_gpu(config: ModelConfig) -> int:
    for group in config.proto.instance_group:
        if group.gpus:
            return int(group.gpus[0])
    return 0


class TensorRTModel(Model):
    """Deserializes the engine once per GPU that has instances (an engine belongs to one
    device); the file comes from `cc_model_filenames` for that GPU's compute capability."""

    def __init__(self, context: ModelContext, backend: TensorRTBackend) -> None:
        super().__init__(context)
        self.backend = backend
        self._engines: dict[int, tuple[Any, EngineDescription]] = {}
        self._lock = threading.Lock()
        self._trt: Any = None

    def _prepare(self) -> None:
        name = self.context.name
        require_gpu(name)
        self._trt = require_tensorrt(name)

    def engine_for(self, device: int) -> tuple[Any, EngineDescription]:
        with self._lock:
            found = self._engines.get(device)
            if found is None:
                found = self._engines[device] = self._load_engine(device)
            return found

    def _load_engine(self, device: int) -> tuple[Any, EngineDescription]:
        name = self.context.name
        set_device(device)
        capability = compute_capability(device)
        cc = format_compute_capability(capability)
        filename = select_plan_filename(
            self.context.config.proto.cc_model_filenames, capability, self.context.model_filename
        )
        path = self.context.version_path / filename
        if not path.is_file():
            hint = (
                ""
                if self.context.config.proto.cc_model_filenames
                else ('; list per-GPU engines with cc_model_filenames { key: "' + cc + '" value: "..." }')
            )
            raise ConfigError(name, f"no engine file {path} for GPU {device} (compute capability {cc}){hint}")
        runtime = self.backend.runtime(self._trt)
        engine = runtime.deserialize_cuda_engine(path.read_bytes())
        if engine is None:
            why = getattr(self.backend.logger, "last_error", "")
            raise NaiadError.invalid(
                f"model '{name}': TensorRT {self._trt.__version__} cannot deserialize {path} on GPU {device} "
                f"(compute capability {cc}); an engine loads only with the TensorRT version and GPU "
                f"architecture it was built for" + (f": {why}" if why else "")
            )
        return engine, describe_engine(engine)

    def auto_complete_config(self, config: ModelConfig) -> None:
        self._prepare()
        _, description = self.engine_for(_first_gpu(config))
        auto_complete_from_engine(config, description, self.context.name)

    def initialize(self) -> None:
        if self._trt is None:
            self._prepare()
        _, description = self.engine_for(_first_gpu(self.context.config))
        check_config_against_engine(self.context.config, description, self.context.name)

    def create_instance(self, context: InstanceContext) -> ModelInstance:
        if context.kind != "GPU":
            raise ConfigError(
                self.context.name,
                f"instance_group: TensorRT engines run on GPUs only; instance {context.name} is KIND_{context.kind} "
                "(use KIND_GPU or KIND_AUTO)",
            )
        return TensorRTInstance(self, context)

    def finalize(self) -> None:
        with self._lock:
            self._engines.clear()


class TensorRTInstance(ModelInstance):
    """One execution context and one CUDA stream on the instance's GPU; device buffers per
    IO tensor, grown on demand and reused across batches."""

    model: TensorRTModel

    def initialize(self) -> None:
        self.device = self.context.device_id
        set_device(self.device)
        engine, self.description = self.model.engine_for(self.device)
        config = self.model.context.config
        self.profiles = allowed_profiles(
            config, self.context.group_name, self.description.num_profiles, self.model.context.name
        )
        check_config_against_engine(config, self.description, self.model.context.name, self.profiles)
        self.execution = engine.create_execution_context()
        if self.execution is None:
            raise NaiadError.unavailable(
                f"model '{self.model.context.name}': TensorRT could not create an execution context on GPU {self.device} "
                "(out of device memory?)"
            )
        self.stream = Stream()
        self.buffers = {t.name: DeviceBuffer() for t in self.description.tensors if not t.on_host}
        self.profile: int | None = None

    def execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse]:
        set_device(self.device)
        return execute_by_name(requests, self.model.context.config, self._run, self._error_of)

    def _run(self, inputs: dict[str, np.ndarray], wanted: list[str]) -> dict[str, np.ndarray]:
        description, execution, stream = self.description, self.execution, self.stream
        profile = choose_profile(description, self.profiles, {n: tuple(a.shape) for n, a in inputs.items()})
        if profile != self.profile:
            if not execution.set_optimization_profile_async(profile, stream.handle):
                raise NaiadError.internal(f"TensorRT refused to switch to optimization profile {profile}")
            self.profile = profile
        host: list[np.ndarray] = []  # kept alive until the stream is synchronized
        for tensor in description.inputs:
            array = np.ascontiguousarray(inputs[tensor.name], dtype=numpy_dtype_of(tensor.datatype or "FP32"))
            host.append(array)
            if not execution.set_input_shape(tensor.name, array.shape):
                raise NaiadError.invalid(f"input '{tensor.name}': the engine does not accept shape {list(array.shape)}")
            if tensor.on_host:
                execution.set_tensor_address(tensor.name, array.ctypes.data)
            else:
                buffer = self.buffers[tensor.name]
                buffer.ensure(array.nbytes)
                buffer.upload(array.ctypes.data, array.nbytes, stream)
                execution.set_tensor_address(tensor.name, buffer.pointer)
        outputs: dict[str, np.ndarray] = {}
        for tensor in description.outputs:
            shape = tuple(int(d) for d in execution.get_tensor_shape(tensor.name))
            if any(d < 0 for d in shape):
                raise NaiadError.unsupported(
                    f"output '{tensor.name}' has a data-dependent shape {list(shape)}, which naiad's TensorRT backend "
                    "does not support yet"
                )
            array = np.empty(shape, dtype=numpy_dtype_of(tensor.datatype or "FP32"))
            outputs[tensor.name] = array
            if tensor.on_host:
                execution.set_tensor_address(tensor.name, array.ctypes.data)
            else:
                execution.set_tensor_address(tensor.name, self.buffers[tensor.name].ensure(array.nbytes))
        if not execution.execute_async_v3(stream.handle):
            raise NaiadError.internal("TensorRT failed to enqueue the batch (execute_async_v3 returned false)")
        for tensor in description.outputs:
            if not tensor.on_host:
                array = outputs[tensor.name]
                self.buffers[tensor.name].download(array.ctypes.data, array.nbytes, stream)
        stream.synchronize()
        return {name: outputs[name] for name in wanted}

    def _error_of(self, exc: Exception) -> NaiadError:
        name = self.model.context.name
        if isinstance(exc, CudaError):
            return NaiadError.internal(f"model '{name}' on GPU {self.device}: {exc}")
        return NaiadError.internal(f"model '{name}': TensorRT failed: {type(exc).__name__}: {exc}")

    def finalize(self) -> None:
        stream = getattr(self, "stream", None)
        if stream is not None:
            set_device(self.device)
            stream.synchronize()
            for buffer in self.buffers.values():
                buffer.free()
            stream.destroy()
        self.execution = None
