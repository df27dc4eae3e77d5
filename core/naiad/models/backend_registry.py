"""Finds backend plugins through pluggy and hands out one initialized Backend per name."""

from __future__ import annotations

import threading

import pluggy

from ..backend import hookspecs
from ..backend.abi import Backend, BackendContext, describe_abi_mismatch
from ..cpu_affinity import usable_cpu_count
from ..errors import NaiadError

__all__ = ["BackendRegistry", "BACKEND_PACKAGES", "RETIRED_BACKENDS"]

# The distribution that provides each backend, for the "pip install ..." hint.
BACKEND_PACKAGES: dict[str, str] = {
    "python": "naiad-backend-python",
    "onnxruntime": "naiad-backend-onnx",
    "pytorch": "naiad-backend-pytorch",
    "tensorflow": "naiad-backend-tensorflow",
    "tensorrt": "naiad-backend-tensorrt",
}

# Backends Triton had whose framework is gone: no package can provide them, so a model
# naming one gets the way forward instead of a "pip install" hint.
RETIRED_BACKENDS: dict[str, str] = {
    "caffe2": (
        "Caffe2 NetDef models (platform caffe2_netdef) cannot be served: Caffe2 is no longer "
        "shipped by PyTorch, so no naiad backend runs them. Convert the model to ONNX with a "
        "PyTorch 1.x install that still has Caffe2 (convert-caffe2-to-onnx model.netdef "
        "--caffe2-init-net init_model.netdef --value-info '{\"INPUT\": [1, [1, 3, 224, 224]]}' "
        "-o model.onnx), put model.onnx in the version directory and set platform: "
        '"onnxruntime_onnx"; see docs/backends/caffe2.md'
    ),
}


def _backend_class(plugin: object) -> type[Backend] | None:
    """The Backend class a plugin object is (or is an instance of), else None."""
    if isinstance(plugin, type):
        return plugin if issubclass(plugin, Backend) else None
    return type(plugin) if isinstance(plugin, Backend) else None


class BackendRegistry:
    """Backend classes by name, from entry points and from plugins passed in directly
    (applications embedding the server register their own backends that way)."""

    def __init__(
        self,
        backend_config: dict[str, dict[str, str]] | None = None,
        plugins: list[object] = (),  # type: ignore[assignment]
        load_entry_points: bool = True,
    ) -> None:
        self._manager = pluggy.PluginManager(hookspecs.PROJECT)
        self._manager.add_hookspecs(hookspecs.BackendHookSpecs)
        if load_entry_points:
            self._manager.load_setuptools_entrypoints(hookspecs.ENTRY_POINT_GROUP)
        for plugin in plugins:
            self._manager.register(plugin)
        self._classes: dict[str, type[Backend]] = {}
        # An entry point (or plugin) that is a Backend class is its own plugin: the default
        # plugin of a one-class backend (hookspecs.py). `--backend-plugin` instantiates the
        # class it names, so an instance stands for its class too.
        provided = [[cls for p in self._manager.get_plugins() if (cls := _backend_class(p)) is not None]]
        for classes in provided + self._manager.hook.naiad_backends():
            for cls in classes:
                if not cls.name:
                    raise NaiadError.internal(f"backend class {cls.__qualname__} has no name")
                if cls.name in self._classes and self._classes[cls.name] is not cls:
                    raise NaiadError.internal(
                        f"two plugins provide backend '{cls.name}': "
                        f"{self._classes[cls.name].__module__} and {cls.__module__}"
                    )
                self._classes[cls.name] = cls
        self._config = backend_config or {}
        self._instances: dict[str, Backend] = {}
        self._settings: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        return sorted(self._classes)

    def backend_class(self, name: str) -> type[Backend]:
        try:
            return self._classes[name]
        except KeyError:
            if name in RETIRED_BACKENDS:
                raise NaiadError.unsupported(RETIRED_BACKENDS[name]) from None
            package = BACKEND_PACKAGES.get(name)
            known = ", ".join(self.names) or "none"
            if package is None:
                # A name no package provides is the config's error, INVALID_ARG as in Triton
                # ("unable to find backend library"): a load API caller gets 400, not 503.
                raise NaiadError.invalid(
                    f"backend '{name}' is not installed (installed backends: {known}): unable to find backend "
                    f"library for backend '{name}', try specifying runtime on the model configuration."
                ) from None
            raise NaiadError.unavailable(
                f"backend '{name}' is not installed (installed backends: {known}); install it with 'pip install {package}'"
            ) from None

    def get(self, name: str) -> Backend:
        """The initialized backend named `name`, created on first use."""
        with self._lock:
            backend = self._instances.get(name)
            if backend is not None:
                return backend
            cls = self.backend_class(name)
            mismatch = describe_abi_mismatch(name, getattr(cls, "abi_version", None))
            if mismatch:
                raise NaiadError.unavailable(mismatch)
            settings = dict(self._config.get("", {}))
            settings.update(self._config.get(name, {}))
            backend = cls()
            backend.initialize(BackendContext(name=name, config=settings, cpu_count=usable_cpu_count()))
            self._instances[name] = backend
            self._settings[name] = settings
            return backend

    def initialized(self) -> list[tuple[str, str, dict[str, str]]]:
        """(name, providing module, settings) of each backend initialized so far."""
        with self._lock:
            return [
                (name, type(backend).__module__, dict(self._settings[name]))
                for name, backend in sorted(self._instances.items())
            ]

    def finalize(self) -> None:
        with self._lock:
            for backend in self._instances.values():
                backend.finalize()
            self._instances.clear()
