"""A TensorFlow model version and its instances."""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Any

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
from naiad.backend.helpers import execute_by_name, model_inputs, model_outputs
from naiad.backend.helpers import model_config_pb2 as pb

from .auto_complete import auto_complete_from_signature
from .config_check import check_config_against_model
from .graphdef_signature import graphdef_signature, require_graph_inputs
from .model_tensors import ModelSignature
from .savedmodel_signature import (
    DEFAULT_SIGNATURE,
    choose_meta_graph,
    read_saved_model,
    signature_of,
)
from .session import (
    ModelSession,
    import_graphdef,
    open_graphdef,
    open_savedmodel,
    read_graphdef,
    read_init_ops,
    session_config,
)
from .settings import BackendSettings, ModelSettings, parse_model_settings

__all__ = ["TensorFlowModel", "TensorFlowInstance", "GRAPHDEF", "SAVEDMODEL", "choose_platform"]

log = logging.getLogger("naiad.backends.tensorflow")

GRAPHDEF = "tensorflow_graphdef"
SAVEDMODEL = "tensorflow_savedmodel"
DEFAULT_FILENAMES = {GRAPHDEF: "model.graphdef", SAVEDMODEL: "model.savedmodel"}


def choose_platform(config: ModelConfig, version_path: Path) -> str:
    """The config's platform; a config that names only `backend: "tensorflow"` gets the
    platform of the model file it points at (or the version directory holds)."""
    platform = config.platform
    if platform in DEFAULT_FILENAMES:
        return platform
    if platform:
        raise ConfigError(
            config.name, f"platform: the tensorflow backend serves {SAVEDMODEL} and {GRAPHDEF}, not '{platform}'"
        )
    filename = config.proto.default_model_filename
    if filename:
        return SAVEDMODEL if (version_path / filename).is_dir() else GRAPHDEF
    if (
        not (version_path / DEFAULT_FILENAMES[SAVEDMODEL]).exists()
        and (version_path / DEFAULT_FILENAMES[GRAPHDEF]).exists()
    ):
        return GRAPHDEF
    return SAVEDMODEL


class TensorFlowModel(Model):
    """Reads the model's description once; instances each get a session (or share one,
    `MAX_SESSION_SHARE_COUNT`)."""

    def __init__(self, context: ModelContext, backend_settings: BackendSettings) -> None:
        super().__init__(context)
        self.backend_settings = backend_settings
        self.platform = choose_platform(context.config, context.version_path)
        # Reported by model metadata, with or without auto-complete.
        context.config.proto.platform = self.platform
        if not context.config.proto.default_model_filename:
            context.model_filename = DEFAULT_FILENAMES[self.platform]
        self._sessions: dict[tuple[int | None, int], ModelSession] = {}
        self._lock = threading.Lock()
        self._graph_def: Any = None
        self._tags: list[str] = []
        self._init_ops: list[str] = []

    # -- load ----------------------------------------------------------------------------

    def _saved_model_signature(self, config: ModelConfig, settings: ModelSettings) -> ModelSignature:
        name = self.context.name
        saved_model = read_saved_model(self.context.model_file, name)
        meta_graph = choose_meta_graph(saved_model, settings.graph_tag, name)
        self._tags = list(meta_graph.meta_info_def.tags)
        return signature_of(meta_graph, settings.signature, name)

    def auto_complete_config(self, config: ModelConfig) -> None:
        if self.platform == GRAPHDEF:
            return  # a GraphDef has no signature to read: its config lists inputs and outputs
        settings = parse_model_settings(config, self.backend_settings, self.context.name)
        signature = self._saved_model_signature(config, settings)
        # A max_batch_size the config writes, 0 included, is the user's: only an absent one is filled.
        default = 0 if config.user_wrote("max_batch_size") else self.backend_settings.default_max_batch_size
        auto_complete_from_signature(config, signature, default, SAVEDMODEL, self.context.name)

    def initialize(self) -> None:
        config = self.context.config
        self.settings = parse_model_settings(config, self.backend_settings, self.context.name)
        if not config.inputs or not config.outputs:
            what = "inputs" if not config.inputs else "outputs"
            hint = (
                "a GraphDef carries no signature, so config.pbtxt must list them by tensor name"
                if self.platform == GRAPHDEF
                else "list them in config.pbtxt or let auto-complete fill them in"
            )
            raise ConfigError(config.name, f"{what[:-1]}: the config lists no {what}; {hint}")
        if self.platform == SAVEDMODEL:
            signature = self._saved_model_signature(config, self.settings)
            source = f"SavedModel signature '{self.settings.signature or DEFAULT_SIGNATURE}'"
            check_config_against_model(config, signature, source, require_every_input=True)
        else:
            self._graph_def = read_graphdef(self.context.model_file, config.name)
            graph = import_graphdef(self._graph_def, None)
            signature = graphdef_signature(graph, config)
            check_config_against_model(config, signature, "GraphDef", require_every_input=False)
            require_graph_inputs(graph, config)
            self._init_ops = read_init_ops(
                self.settings.init_ops_file, self.context.version_path, self.context.path, config.name
            )
        # Sequence controls, implicit state and batch inputs are fed (and state outputs
        # fetched) by name, like the config's own tensors.
        inputs, outputs = model_inputs(config), model_outputs(config)
        self._feeds = {spec.name: signature.inputs[spec.name].tensor_name for spec in inputs}
        self._fetches = {spec.name: signature.outputs[spec.name].tensor_name for spec in outputs}
        self._bf16 = frozenset(spec.name for spec in inputs if spec.datatype == "BF16")

    def session_for(self, context: InstanceContext, gpu_id: int | None) -> ModelSession:
        """The session instance `context` runs on, opened on first use. Instances share a
        session in groups of MAX_SESSION_SHARE_COUNT (default 1: one session each)."""
        key = (gpu_id, context.index // self.settings.session_share_count)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                session = self._open_session(gpu_id)
                self._sessions[key] = session
            return session

    def _open_session(self, gpu_id: int | None) -> ModelSession:
        config = session_config(self.backend_settings, self.settings, gpu_id)
        if self.platform == SAVEDMODEL:
            session = open_savedmodel(self.context.model_file, self._tags, self._feeds, self._fetches, config, gpu_id)
        else:
            session = open_graphdef(self._graph_def, self._feeds, self._fetches, config, gpu_id, self._init_ops)
        session.bf16_inputs = self._bf16
        return session

    def create_instance(self, context: InstanceContext) -> ModelInstance:
        return TensorFlowInstance(self, context)

    def finalize(self) -> None:
        with self._lock:
            for session in self._sessions.values():
                session.close()
            self._sessions.clear()


def _readable_tf_message(message: str) -> str:
    """TensorFlow's runtime errors as one line: no "Graph execution error" banner, the
    failing node named once instead of its `[[{{node ...}}]]` annotation."""
    nodes = re.findall(r"\{\{node ([^}]+)\}\}", message)
    lines = [
        line.strip()
        for line in message.replace("Graph execution error:", "").splitlines()
        if line.strip() and not line.strip().startswith("[[")
    ]
    text = "; ".join(lines) or message
    return f"{text} (node {nodes[0]})" if nodes else text


def _tensorflow_sees_gpus() -> bool:
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


def _group_kind(config: ModelConfig, group_name: str) -> int:
    for index, group in enumerate(config.proto.instance_group):
        if (group.name or f"{config.name}_{index}") == group_name:
            return group.kind
    return pb.ModelInstanceGroup.KIND_AUTO


class TensorFlowInstance(ModelInstance):
    model: TensorFlowModel

    def initialize(self) -> None:
        gpu_id: int | None = None
        if self.context.kind == "GPU":
            if _tensorflow_sees_gpus():
                gpu_id = self.context.device_id
            elif _group_kind(self.model.context.config, self.context.group_name) == pb.ModelInstanceGroup.KIND_GPU:
                raise NaiadError.unavailable(
                    f"model '{self.model.context.name}': instance {self.context.name} is KIND_GPU, but this "
                    "TensorFlow build sees no GPU (tensorflow-cpu?); install naiad-backend-tensorflow[gpu] "
                    "or use KIND_CPU"
                )
            else:
                log.info(
                    "model '%s': TensorFlow sees no GPU, instance %s runs on the CPU",
                    self.model.context.name,
                    self.context.name,
                )
        self.session = self.model.session_for(self.context, gpu_id)

    def execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse]:
        return execute_by_name(requests, self.model.context.config, self.session.run, self._error_of)

    def _error_of(self, exc: Exception) -> NaiadError:
        name = self.model.context.name
        message = _readable_tf_message(getattr(exc, "message", None) or str(exc))
        # TensorFlow's InvalidArgumentError is the request's fault (bad values for an op).
        if type(exc).__name__ == "InvalidArgumentError":
            return NaiadError.invalid(f"model '{name}': TensorFlow rejected the input: {message}")
        return NaiadError.internal(f"model '{name}': TensorFlow failed: {type(exc).__name__}: {message}")
