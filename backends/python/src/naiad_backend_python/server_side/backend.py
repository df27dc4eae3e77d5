"""The `python` backend: `PythonBackend` (once per server) and `PythonModel` (one per
loaded version), which picks the instance kind the model's settings ask for."""

from __future__ import annotations

import ast
import json
import logging
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from google.protobuf import json_format

import naiad_backend_python
import naiad_wire
from naiad.backend import (
    Backend,
    BackendContext,
    ConfigError,
    InstanceContext,
    Model,
    ModelConfig,
    ModelContext,
    ModelInstance,
)
from naiad.backend.helpers import gpu_ids, model_config_pb2

from ..model_side.model_host import run_auto_complete
from .in_process_instance import InProcessInstance
from .process_instance import ProcessInstance
from .settings import ModelSettings, read_settings
from .stub_connection import StubLaunch
from .stub_forker import StubForker

__all__ = ["PythonBackend", "PythonModel"]

log = logging.getLogger("naiad.backends.python")


class PythonBackend(Backend):
    name = "python"
    abi_version = (2, 5)  # CudaPlacement.borrowed_handle: regions lent to the model's process
    default_model_filename = "model.py"

    def initialize(self, context: BackendContext) -> None:
        super().initialize(context)
        self._stub_path: str | None = None
        # Started at the first model process it forks (stub_forker.py).
        self.stub_forker = StubForker()
        # Models load in parallel threads: this guards the lazy stub directory, and parsing,
        # because CPython 3.11's ast.parse is not thread-safe ("AST constructor recursion
        # depth mismatch"), so files are parsed one at a time.
        self.parse_lock = threading.Lock()

    def stub_python_path(self) -> str:
        """A directory holding only this package, `triton_python_backend_utils` and
        `naiad_wire` (whose `interprocess` messages the stub speaks), put on the model
        process's PYTHONPATH: a foreign interpreter (EXECUTION_ENV_PATH) then sees the stub
        without seeing the rest of the server's site-packages."""
        with self.parse_lock:  # models load in parallel threads
            if self._stub_path is None:
                directory = Path(tempfile.mkdtemp(prefix="naiad-python-stub-"))
                package = Path(naiad_backend_python.__file__).resolve().parent
                (directory / "naiad_backend_python").symlink_to(package)
                (directory / "triton_python_backend_utils.py").symlink_to(
                    package.parent / "triton_python_backend_utils.py"
                )
                (directory / "naiad_wire").symlink_to(Path(naiad_wire.__file__).resolve().parent)
                self._stub_path = str(directory)
            return self._stub_path

    def create_model(self, context: ModelContext) -> PythonModel:
        return PythonModel(context, self)

    def finalize(self) -> None:
        self.stub_forker.close()
        if self._stub_path is not None:
            shutil.rmtree(self._stub_path, ignore_errors=True)
            self._stub_path = None


class PythonModel(Model):
    def __init__(self, context: ModelContext, backend: PythonBackend) -> None:
        super().__init__(context)
        self.backend = backend
        self.settings: ModelSettings | None = None

    def _settings(self, config: ModelConfig) -> ModelSettings:
        return read_settings(config, self.context.path, self.backend.context.config)

    def auto_complete_config(self, config: ModelConfig) -> None:
        """Run the model's static `auto_complete_config`, when model.py defines one, in a
        short-lived process of the model's interpreter (or here, for in-process models)."""
        model_file = self.context.model_file
        with self.backend.parse_lock:
            defines = _defines_auto_complete(model_file)
        if not defines:
            return
        settings = self._settings(config)
        current = config.to_json_dict()
        if settings.in_process:
            try:
                completed = run_auto_complete(model_file, current, in_server=True)
            except Exception as exc:  # noqa: BLE001
                raise ConfigError(config.name, f"auto_complete_config failed: {type(exc).__name__}: {exc}") from exc
        else:
            completed = self._auto_complete_in_process_of_model(model_file, current, settings, config.name)
        config.proto.Clear()
        try:
            json_format.ParseDict(completed, config.proto)
        except json_format.ParseError as exc:
            raise ConfigError(config.name, f"auto_complete_config produced an invalid config: {exc}") from None
        config.refresh()

    def _auto_complete_in_process_of_model(
        self, model_file: Path, current: dict, settings: ModelSettings, name: str
    ) -> dict:
        import os

        env = dict(os.environ)
        path = self.backend.stub_python_path()
        env["PYTHONPATH"] = path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        done = subprocess.run(
            [settings.python, "-m", "naiad_backend_python.model_side.stub", "--auto-complete", str(model_file)],
            input=json.dumps(current).encode(),
            capture_output=True,
            env=env,
            timeout=settings.start_timeout_s or None,
        )
        try:
            answer = json.loads(done.stdout.decode() or "{}")
        except ValueError:
            answer = {}
        if "config" not in answer:
            reason = answer.get("error") or done.stderr.decode(errors="replace").strip()[-2000:]
            raise ConfigError(name, f"auto_complete_config failed: {reason}")
        return answer["config"]

    def initialize(self) -> None:
        self.settings = self._settings(self.context.config)
        model_file = self.context.model_file
        if not model_file.is_file():
            # Named inside the model's directory: a load API caller must not learn where the
            # server keeps its repository.
            try:
                shown = model_file.relative_to(self.context.path).as_posix()
            except ValueError:
                shown = model_file.name
            raise ConfigError(self.context.name, f"model file '{shown}' does not exist in the model's directory")

    def stub_launch(self, instance: InstanceContext, label: str) -> StubLaunch:
        config = self.context.config
        assert self.settings is not None
        args = {
            "model_config": json.dumps(config.to_json_dict()),
            "model_instance_kind": instance.kind,
            "model_instance_name": instance.name,
            "model_instance_device_id": str(instance.device_id),
            "model_repository": str(self.context.path),
            "model_version": str(self.context.version),
            "model_name": self.context.name,
        }
        return StubLaunch(
            label=label,
            model_file=self.context.model_file,
            args=args,
            decoupled=config.decoupled,
            settings=self.settings,
            python_path=self.backend.stub_python_path(),
            server=self.context.server,
            cwd=self.context.version_path,
            forker=self.backend.stub_forker if self.settings.forks_stub else None,
            threads=self.backend.context.thread_budget(_process_count(config)),
        )

    def create_instance(self, context: InstanceContext) -> ModelInstance:
        assert self.settings is not None
        if self.settings.in_process:
            return InProcessInstance(self, context)
        return ProcessInstance(self, context)


def _defines_auto_complete(model_file: Path) -> bool:
    """Whether TritonPythonModel defines auto_complete_config, read from the source so no
    model code runs in the server to find out."""
    try:
        tree = ast.parse(model_file.read_text())
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "TritonPythonModel":
            return any(
                isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "auto_complete_config"
                for item in node.body
            )
    return False


def _process_count(config: ModelConfig) -> int:
    """The model processes the config asks for: each runs its framework's pools at once with
    the others, whatever its kind (a GPU instance's model also works on the CPU). A GPU group
    is `count` per GPU it lists, or per GPU of the machine when it lists none."""
    total = 0
    for group in config.proto.instance_group:
        gpus = len(group.gpus) or (len(gpu_ids()) if group.kind == model_config_pb2.ModelInstanceGroup.KIND_GPU else 1)
        total += (group.count or 1) * max(1, gpus)
    return total or 1
