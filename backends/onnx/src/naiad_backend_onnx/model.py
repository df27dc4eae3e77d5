"""`OnnxModel` and `OnnxInstance`: one ONNX Runtime session per device, shared by every
instance on it (`InferenceSession.run` is thread-safe), batches stacked along axis 0."""

from __future__ import annotations

import ctypes
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnxruntime as ort

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
from naiad.backend.helpers import (
    Batch,
    apply_output_reshape,
    check_model_shape,
    datatype_to_config_type,
    model_inputs,
    model_outputs,
    run_isolating_failures,
)

from .auto_complete import ModelTensor, auto_complete
from .settings import SessionSettings, choose_providers, read_session_settings

if TYPE_CHECKING:
    from .backend import OnnxRuntimeBackend

__all__ = ["OnnxModel", "OnnxInstance"]

log = logging.getLogger("naiad.backends.onnxruntime")

# ORT's own error classes; the ones that mean "these inputs are wrong" become INVALID_ARG.
_ORT_ERRORS = ort.capi.onnxruntime_pybind11_state
_INPUT_ERRORS = tuple(getattr(_ORT_ERRORS, name) for name in ("InvalidArgument",) if hasattr(_ORT_ERRORS, name))


# TensorProto.BFLOAT16; onnx itself is not a runtime dependency.
_ONNX_BFLOAT16 = 16


def _ort_message(exc: BaseException) -> str:
    """ORT prefixes messages with '[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : '; drop it."""
    text = str(exc).strip()
    if text.startswith("[ONNXRuntimeError]"):
        parts = text.split(" : ", 3)
        text = parts[-1] if len(parts) == 4 else text
    return " ".join(text.split())


class OnnxModel(Model):
    def __init__(self, context: ModelContext, backend: OnnxRuntimeBackend) -> None:
        super().__init__(context)
        self.backend = backend
        self._sessions: dict[tuple[str, int], Any] = {}
        self._lock = threading.Lock()
        self._settings: SessionSettings | None = None
        self.inputs: list[ModelTensor] = []
        self.outputs: list[ModelTensor] = []

    # -- model file and sessions ---------------------------------------------------------

    @property
    def model_path(self) -> Path:
        """`model.onnx`, or `model.onnx/model.onnx` when the model is a directory holding
        its external data files beside the graph."""
        path = self.context.model_file
        if path.is_dir():
            path = path / "model.onnx"
        if not path.is_file():
            raise ConfigError(
                self.context.name,
                f"model file not found: {path} (version {self.context.version}; set default_model_filename "
                "in the config if the file has another name)",
            )
        return path

    def session(self, config: ModelConfig, kind: str = "CPU", device_id: int = 0) -> Any:
        """The session for one kind of device, created once and shared."""
        key = (kind, device_id if kind == "GPU" else 0)
        with self._lock:
            session = self._sessions.get(key)
            if session is not None:
                return session
            if self._settings is None:
                self._settings = read_session_settings(config, self.backend.settings)
            if self._settings.global_thread_pool:
                self.backend.ensure_global_thread_pool()
            providers = choose_providers(config, kind, device_id, ort.get_available_providers())
            options = self._settings.build()
            try:
                session = self._create_session(options, providers)
            except RuntimeError as exc:
                if "use_per_session_threads must be false" not in str(exc):
                    raise ConfigError(
                        self.context.name, f"onnxruntime cannot load {self.model_path.name}: {_ort_message(exc)}"
                    ) from None
                # Once anything in this process created ORT's global thread pools, every
                # later session must use them.
                log.info(
                    "model '%s': onnxruntime's global thread pools exist; the session uses them", self.context.name
                )
                options.use_per_session_threads = False
                session = self._create_session(options, providers)
            wanted = [name for name, _ in providers if name != "CPUExecutionProvider"]
            missing = [name for name in wanted if name not in session.get_providers()]
            if missing:
                # ORT falls back to the CPU quietly when a provider cannot start (missing
                # libraries); an instance must not silently run somewhere else.
                raise ConfigError(
                    self.context.name,
                    f"onnxruntime could not start {', '.join(missing)} for {kind} instances"
                    + (f" on GPU {device_id}" if kind == "GPU" else "")
                    + " (check the libraries the provider needs: CUDA, cuDNN, TensorRT, OpenVINO)",
                )
            self._sessions[key] = session
            if not self.inputs and not self.outputs:
                self.inputs = [ModelTensor.from_node_arg(a) for a in session.get_inputs()]
                self.outputs = [ModelTensor.from_node_arg(a) for a in session.get_outputs()]
            return session

    def _create_session(self, options: Any, providers: list[tuple[str, dict[str, str]]]) -> Any:
        path = str(self.model_path)  # raises its own clear error when the file is missing
        try:
            return ort.InferenceSession(
                path,
                sess_options=options,
                providers=[name for name, _ in providers],
                provider_options=[provider_options for _, provider_options in providers],
            )
        except RuntimeError:
            raise
        except Exception as exc:  # noqa: BLE001 - ORT raises its own classes
            raise ConfigError(
                self.context.name, f"onnxruntime cannot load {self.model_path.name}: {_ort_message(exc)}"
            ) from None

    # -- the Model ABI -------------------------------------------------------------------

    def auto_complete_config(self, config: ModelConfig) -> None:
        self.session(config)
        auto_complete(config.proto, self.inputs, self.outputs, self.backend.settings.default_max_batch_size)
        config.refresh()

    def initialize(self) -> None:
        config = self.context.config
        # Read the model's signature (the auto-complete session is reused when there was one).
        self.session(config)
        self._check_config(config)

    def _check_config(self, config: ModelConfig) -> None:
        """Refuse configs that disagree with the model, naming the tensor and the fault."""
        name = config.name
        batching = config.max_batch_size > 0
        # Every input the model declares must be fed (a config may leave outputs out);
        # Triton's onnxruntime backend counts them first, in these words.
        expected = len(model_inputs(config))
        if expected != len(self.inputs):
            raise ConfigError(
                name,
                f"unable to load model '{name}', configuration expects {expected} inputs, "
                f"model provides {len(self.inputs)}",
            )
        for kind, specs, found_list in (
            ("input", config.inputs, self.inputs),
            ("output", config.outputs, self.outputs),
        ):
            found_by_name = {t.name: t for t in found_list}
            for index, spec in enumerate(specs):
                found = found_by_name.get(spec.name)
                if found is None:
                    # Triton's words.
                    raise ConfigError(
                        name,
                        f"unexpected inference {kind} '{spec.name}', allowed {kind}s are: "
                        + ", ".join(sorted(found_by_name)),
                    )
                if found.datatype is None:
                    raise ConfigError(
                        name, f"{kind} '{spec.name}': the model's type {found.ort_type} has no Triton datatype"
                    )
                if found.datatype != spec.datatype:
                    # Triton's words.
                    raise ConfigError(
                        name,
                        f"unable to load model '{name}', configuration expects datatype "
                        f"{datatype_to_config_type(spec.datatype)} for {kind} '{spec.name}', model provides "
                        f"{datatype_to_config_type(found.datatype)}",
                    )
                # An ONNX scalar (shape []) may stand for config dims [1] without batching.
                if found.shape or batching or spec.allow_ragged_batch:
                    where = f"{kind} '{spec.name}' ({kind}[{index}]"
                    check_model_shape(name, where, spec, list(found.shape), batching, self.model_path.name)

        # Sequence controls, implicit state and batch inputs are fed by name too.
        for kind, specs, found_list in (
            ("input", model_inputs(config), self.inputs),
            ("output", model_outputs(config), self.outputs),
        ):
            found_names = {t.name for t in found_list}
            for spec in specs:
                if spec.name not in found_names:
                    raise ConfigError(
                        name,
                        f"{kind} '{spec.name}' (a sequence control, state or batch input of the config): not an "
                        f"{kind} of {self.model_path.name}, whose {kind}s are "
                        + ", ".join(f"'{t}'" for t in sorted(found_names)),
                    )

    def create_instance(self, context: InstanceContext) -> ModelInstance:
        return OnnxInstance(self, context)

    def finalize(self) -> None:
        with self._lock:
            self._sessions.clear()


class OnnxInstance(ModelInstance):
    model: OnnxModel
    # `InferenceSession.run` may be called from any thread (ORT binds devices per run), so
    # short batches run on the event loop without a hop to the instance thread.
    runs_on_any_thread = True

    def initialize(self) -> None:
        config = self.model.context.config
        self.config = config
        self.session = self.model.session(config, self.context.kind, self.context.device_id)
        inputs, outputs = model_inputs(config), model_outputs(config)
        self.input_datatypes = {spec.name: spec.datatype for spec in inputs}
        self.output_datatypes = {spec.name: spec.datatype for spec in outputs}
        self.uses_bf16 = "BF16" in self.input_datatypes.values() or "BF16" in self.output_datatypes.values()
        self.all_outputs = [spec.name for spec in outputs]
        # State outputs are fetched for every batch: the sequence batcher keeps them.
        self.state_outputs = [spec.name for spec in outputs if spec.name not in config.output_by_name]

    def execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse]:
        return run_isolating_failures(requests, self._run)

    def _run(self, requests: list[InferenceRequest]) -> list[InferenceResponse]:
        batch = Batch.stack(requests, self.config)
        feed = {name: self._to_ort(name, array) for name, array in batch.inputs.items()}
        wanted = self._outputs_for(requests)
        try:
            arrays = self._run_bf16(wanted, feed) if self.uses_bf16 else self.session.run(wanted, feed)
        except _INPUT_ERRORS as exc:
            raise NaiadError.invalid(
                f"model '{self.config.name}': onnxruntime rejected the input: {_ort_message(exc)}"
            ) from None
        except Exception as exc:  # noqa: BLE001 - ORT raises its own classes
            raise NaiadError.internal(f"model '{self.config.name}': onnxruntime failed: {_ort_message(exc)}") from None
        outputs = {name: self._from_ort(array, self.output_datatypes[name]) for name, array in zip(wanted, arrays)}
        responses = batch.responses(outputs)
        apply_output_reshape(responses, self.config)
        return responses

    def _run_bf16(self, wanted: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        """numpy has no bfloat16, so BF16 tensors cross as OrtValues: inputs are typed
        from their uint16 words, outputs copied out of ORT's buffer as uint16 words."""
        values = {}
        for name, array in feed.items():
            array = np.ascontiguousarray(array)
            if self.input_datatypes.get(name) == "BF16":
                values[name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array, _ONNX_BFLOAT16)
            else:
                values[name] = ort.OrtValue.ortvalue_from_numpy(array)
        results = []
        for value in self.session.run_with_ort_values(wanted, values):
            if value.data_type() != "tensor(bfloat16)":
                results.append(value.numpy())
                continue
            shape = tuple(value.shape())
            count = int(np.prod(shape))
            words = np.empty(count, np.uint16)
            if count:
                ctypes.memmove(words.ctypes.data, value.data_ptr(), count * 2)
            results.append(words.reshape(shape))
        return results

    def _outputs_for(self, requests: list[InferenceRequest]) -> list[str]:
        """Run only what someone in the batch asked for (all outputs for a request that
        named none)."""
        if any(not r.outputs for r in requests):
            return self.all_outputs
        asked = {o.name for r in requests for o in r.outputs}.union(self.state_outputs)
        return [name for name in self.all_outputs if name in asked]

    @staticmethod
    def _to_ort(name: str, array: np.ndarray) -> np.ndarray:
        if array.dtype != object:
            return array
        # ORT string tensors take Python str; naiad carries BYTES as bytes.
        flat = array.reshape(-1)
        text = np.empty(flat.shape, dtype=object)
        for index, item in enumerate(flat):
            if isinstance(item, (bytes, bytearray)):
                try:
                    text[index] = bytes(item).decode("utf-8")
                except UnicodeDecodeError:
                    raise NaiadError.invalid(
                        f"input '{name}': element {index} is not UTF-8 text, which ONNX Runtime string tensors need"
                    ) from None
            else:
                text[index] = str(item)
        return text.reshape(array.shape)

    @staticmethod
    def _from_ort(array: np.ndarray, datatype: str) -> np.ndarray:
        if datatype != "BYTES":
            return array
        flat = array.reshape(-1)
        data = np.empty(flat.shape, dtype=object)
        for index, item in enumerate(flat):
            data[index] = item.encode("utf-8") if isinstance(item, str) else bytes(item)
        return data.reshape(array.shape)
