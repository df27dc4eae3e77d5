"""The ONNX Runtime backend's settings: the process-wide `--backend-config
onnxruntime,KEY=VALUE` ones (`OnnxBackendSettings`), and each model's session options and
execution providers from its config (`SessionSettings`, `choose_providers`).

Config facts follow Triton's onnxruntime backend:

* `optimization { graph { level: N } }`: -1 basic, 1 extended, 2 (or unset/0) all. naiad also
  reads a `graph_optimization_level` parameter (`disable`, `basic`, `extended`, `all`).
* `parameters`: `intra_op_thread_count`, `inter_op_thread_count`, `execution_mode`
  (0 sequential, 1 parallel), `enable_mem_arena`, `enable_mem_pattern`; anything named
  `session.*` is passed to ORT as a session config entry.
* `optimization { execution_accelerators { gpu_execution_accelerator [{ name: "tensorrt" }] } }`
  puts the TensorRT EP before CUDA for GPU instances (its `parameters` become provider
  options: `precision_mode` FP16/FP32, `max_workspace_size_bytes`, `trt_*` passed as given);
  `name: "cuda"` passes CUDA EP options. CPU instances use the CPU EP, after OpenVINO when
  `cpu_execution_accelerator [{ name: "openvino" }]` asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from naiad.backend import ConfigError, ModelConfig
from naiad.backend.helpers import read_settings, setting

__all__ = [
    "OnnxBackendSettings",
    "read_backend_settings",
    "SessionSettings",
    "read_session_settings",
    "choose_providers",
]

_LEVELS = {"disable": 0, "basic": 1, "extended": 2, "all": 99}


@dataclass(frozen=True, slots=True)
class OnnxBackendSettings:
    """`--backend-config onnxruntime,KEY=VALUE`, in the keys of Triton's onnxruntime backend."""

    default_max_batch_size: int = setting(
        4, "default-max-batch-size", "max_batch_size auto-complete gives batching models", minimum=0
    )
    intra_op_threads: int = setting(
        0, "intra_op_thread_count", "threads of one operator, for models that set none; 0: ORT's choice", minimum=0
    )
    inter_op_threads: int = setting(
        0, "inter_op_thread_count", "threads across operators, for models that set none; 0: ORT's choice", minimum=0
    )
    global_thread_pool: bool = setting(False, "enable-global-threadpool", "sessions share ORT's global thread pools")


def read_backend_settings(config: dict[str, str]) -> OnnxBackendSettings:
    return read_settings(OnnxBackendSettings, "onnxruntime", config)


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """What every session of one model is built with (providers aside)."""

    graph_level: str = "all"  # disable | basic | extended | all
    intra_op_threads: int = 0
    inter_op_threads: int = 0
    parallel_execution: bool = False
    mem_arena: bool = True
    mem_pattern: bool = True
    global_thread_pool: bool = False
    config_entries: dict[str, str] = field(default_factory=dict)

    def build(self) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[self.graph_level]
        if self.global_thread_pool:
            options.use_per_session_threads = False
        else:
            options.intra_op_num_threads = self.intra_op_threads
            options.inter_op_num_threads = self.inter_op_threads
        options.execution_mode = (
            ort.ExecutionMode.ORT_PARALLEL if self.parallel_execution else ort.ExecutionMode.ORT_SEQUENTIAL
        )
        options.enable_cpu_mem_arena = self.mem_arena
        options.enable_mem_pattern = self.mem_pattern
        for key, value in self.config_entries.items():
            options.add_session_config_entry(key, value)
        return options


def _graph_level(config: ModelConfig) -> str:
    named = config.parameter("graph_optimization_level")
    if named:
        level = named.strip().lower()
        if level not in _LEVELS:
            raise ConfigError(
                config.name,
                f"parameters.graph_optimization_level: expected one of {', '.join(_LEVELS)}, got '{named}'",
            )
        return level
    proto = config.proto
    if proto.HasField("optimization") and proto.optimization.HasField("graph"):
        number = proto.optimization.graph.level
        levels = {-1: "basic", 0: "all", 1: "extended", 2: "all"}
        if number not in levels:
            raise ConfigError(config.name, f"optimization.graph.level: expected -1, 0, 1 or 2, got {number}")
        return levels[number]
    return "all"


def read_session_settings(config: ModelConfig, backend: OnnxBackendSettings) -> SessionSettings:
    """Validate and collect the session settings; ConfigError names the bad field."""
    mode = config.int_parameter("execution_mode", 0)
    if mode not in (0, 1):
        raise ConfigError(
            config.name, f"parameters.execution_mode: expected 0 (sequential) or 1 (parallel), got {mode}"
        )
    entries = {k: v for k, v in config.parameters.items() if k.startswith("session.")}
    return SessionSettings(
        graph_level=_graph_level(config),
        intra_op_threads=config.int_parameter("intra_op_thread_count", backend.intra_op_threads),
        inter_op_threads=config.int_parameter("inter_op_thread_count", backend.inter_op_threads),
        parallel_execution=mode == 1,
        mem_arena=config.bool_parameter("enable_mem_arena", True),
        mem_pattern=config.bool_parameter("enable_mem_pattern", True),
        global_thread_pool=backend.global_thread_pool,
        config_entries=entries,
    )


_TRT_OPTION_NAMES = {
    "precision_mode": None,  # translated below
    "max_workspace_size_bytes": "trt_max_workspace_size",
    "max_cached_engines": None,
    "trt_engine_cache_enable": "trt_engine_cache_enable",
    "trt_engine_cache_path": "trt_engine_cache_path",
}


def _tensorrt_options(parameters: dict[str, str], device_id: int) -> dict[str, str]:
    options: dict[str, str] = {"device_id": str(device_id)}
    for key, value in parameters.items():
        if key == "precision_mode":
            options["trt_fp16_enable"] = "True" if value.upper() == "FP16" else "False"
            options["trt_int8_enable"] = "True" if value.upper() == "INT8" else "False"
        elif key in _TRT_OPTION_NAMES and _TRT_OPTION_NAMES[key]:
            options[_TRT_OPTION_NAMES[key]] = value
        elif key.startswith("trt_"):
            options[key] = value
    return options


def choose_providers(
    config: ModelConfig, kind: str, device_id: int, available: list[str]
) -> list[tuple[str, dict[str, str]]]:
    """The (provider, options) list for a session of one instance kind and device.

    CPU instances get the CPU EP alone. GPU instances get TensorRT (when the config asks for
    it), then CUDA, then CPU for the operators the GPU EPs do not cover. A GPU instance
    whose EP is missing from this onnxruntime build is a load error that says which
    package provides it.
    """
    cpu = ("CPUExecutionProvider", {})
    proto = config.proto
    has_accelerators = proto.HasField("optimization") and proto.optimization.HasField("execution_accelerators")
    if kind != "GPU":
        providers_cpu: list[tuple[str, dict[str, str]]] = []
        cpu_accelerators = (
            proto.optimization.execution_accelerators.cpu_execution_accelerator if has_accelerators else []
        )
        for index, accelerator in enumerate(cpu_accelerators):
            where = f"optimization.execution_accelerators.cpu_execution_accelerator[{index}]"
            if accelerator.name.lower() != "openvino":
                raise ConfigError(
                    config.name, f"{where}.name: unknown accelerator '{accelerator.name}' (known: openvino)"
                )
            if "OpenVINOExecutionProvider" not in available:
                raise ConfigError(
                    config.name,
                    f"{where}: the OpenVINO execution provider is not in this onnxruntime build "
                    f"(available: {', '.join(available)}); install onnxruntime-openvino",
                )
            providers_cpu.append(("OpenVINOExecutionProvider", dict(accelerator.parameters)))
        return providers_cpu + [cpu]
    accelerators = list(proto.optimization.execution_accelerators.gpu_execution_accelerator) if has_accelerators else []
    providers: list[tuple[str, dict[str, str]]] = []
    cuda_options: dict[str, str] = {"device_id": str(device_id)}
    for index, accelerator in enumerate(accelerators):
        name = accelerator.name.lower()
        parameters = dict(accelerator.parameters)
        if name == "tensorrt":
            if "TensorrtExecutionProvider" not in available:
                raise ConfigError(
                    config.name,
                    f"optimization.execution_accelerators.gpu_execution_accelerator[{index}]: the TensorRT "
                    f"execution provider is not in this onnxruntime build (available: {', '.join(available)}); "
                    "install onnxruntime-gpu with TensorRT",
                )
            providers.append(("TensorrtExecutionProvider", _tensorrt_options(parameters, device_id)))
        elif name == "cuda":
            cuda_options.update(parameters)
        else:
            raise ConfigError(
                config.name,
                f"optimization.execution_accelerators.gpu_execution_accelerator[{index}].name: unknown "
                f"accelerator '{accelerator.name}' (known: tensorrt, cuda)",
            )
    if "CUDAExecutionProvider" not in available:
        raise ConfigError(
            config.name,
            "instance_group: KIND_GPU needs onnxruntime's CUDA execution provider, which this onnxruntime "
            f"build lacks (available: {', '.join(available)}); install naiad-backend-onnx[gpu]",
        )
    providers.append(("CUDAExecutionProvider", cuda_options))
    providers.append(cpu)
    return providers
