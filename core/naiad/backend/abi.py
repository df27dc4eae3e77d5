"""The backend ABI: what a backend implements, and what the server promises it.

Three layers, as in Triton's backend API, because each holds different state:

* `Backend`       once per server process: framework-wide settings, thread pools.
* `Model`         once per loaded model version: weights shared by instances, parsed config.
* `ModelInstance` once per instance-group member: runs `execute(requests) -> responses`.

Each layer has `initialize` and `finalize`. The server's promises:

* `ModelInstance.execute` gets a non-empty batch as a list of requests and returns exactly
  one response per request, in order; a per-request failure is a response whose `error` is
  set. Raising fails every request of the batch with the exception's message.
* `execute` is never called concurrently on the same instance; more parallelism comes from
  more instances. A plain `def execute` runs in the instance's own thread (frameworks
  release the GIL there); an `async def execute` runs on the server's event loop and must
  not block it (backends that talk to another process use this). An instance that sets
  `runs_on_any_thread = True` (ABI 1.2) declares that its plain `execute` keeps no state
  in its thread (no thread-local framework settings, no device bound to the thread): the
  server then runs the batches measured short (about 100 us) on its event loop instead,
  saving the two thread wake-ups a hand-off costs, and longer ones in the thread.
* Inputs arrive validated against the model config: names, datatypes and shapes (batch
  dimension included) match. Outputs may be returned in any order; the server filters
  them to what the client asked for.
* Decoupled models (`model_transaction_policy { decoupled: true }`) send responses through
  `request.response_sender(response, final)` instead of returning them; their `execute`
  returns None. The last call must carry `final=True` (the response may then be None).
* A backend may set `request.reschedule = True` during `execute` (Triton's
  `TRITONSERVER_REQUEST_RELEASE_RESCHEDULE`): the request is not finished but queued
  again, and a later `execute` gets the same request (ABI 1.1). Its place in the returned
  list holds None. Only models with `sequence_batching { iterative_sequence: true }`
  take it; any other model's request fails with Triton's error.

ABI 1.3 adds `BackendContext.cpu_count` and `thread_budget`: what a backend sizes its
framework's thread pools by, so that a container's CPU limit, and instances that each run
the framework's parallel operations at once, do not oversubscribe the CPUs.

ABI 2.0 splits the namespace: `naiad.backend` holds this ABI alone and the opt-in helpers
moved to `naiad.backend.helpers`, so a backend written for 1.x no longer imports; a backend
must declare `abi_version`, and two classes make a backend (`Model` and the plugin have
defaults: `Backend.instance_class`, and an entry point that names the Backend class).

ABI 2.1 adds `ModelConfig.user_wrote(field)`: whether the user's config gives a field a
value, zero included, so that auto-complete fills only what the config leaves out.

ABI 2.2 adds `Backend.runs_on_gpus()`: whether this installation of the backend can run an
instance on a GPU. A group the config leaves to the server (`KIND_AUTO`, or no group) goes on
the GPUs only when it can, so that a CPU-only framework build on a GPU machine still serves.

ABI 2.3 adds `Tensor.placement`: on an input a client placed in CUDA shared memory, where its
bytes sit on the GPU (`data` is still their host copy). A backend on that GPU may read them
there while it holds them (`with tensor.placement.borrowed() as address`).

ABI 2.4 adds `RequestedOutput.placement`: where a client placed an output in CUDA shared memory.
A backend on that GPU may write the output's bytes there itself and answer with
`Tensor.written_on_device(name, datatype, shape, placement)`, a tensor that is not `on_host`
and whose `data` holds none of them; the server then copies nothing into the region.

ABI 2.6 adds `concatenate=` to `Batch.stack` and `stack_requests` (`naiad.backend.helpers`):
the function that copies a stacked input's arrays, so that a framework can do it in one call
that gives the interpreter lock away once (numpy gives it away around each array's copy).

ABI 2.7 adds `InferenceService.start_infer`: a request started without a coroutine, its
answer given to a callback on the event loop (the ensemble scheduler runs its steps so).

Versioning: `ABI_VERSION` is (major, minor). A backend declares the version it was built
for in `Backend.abi_version`, a literal in its own source (as Triton compiles the version
into a backend library); the server refuses a backend that declares none, or another major
version, or a newer minor version, with a message naming what to change.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from ..inference import InferenceRequest, InferenceResponse

if TYPE_CHECKING:
    from ..config.model_config import ModelConfig
    from .service import InferenceService

__all__ = [
    "ABI_VERSION",
    "Backend",
    "BackendContext",
    "Model",
    "ModelContext",
    "ModelInstance",
    "InstanceContext",
    "ExecuteResult",
]

ABI_VERSION: tuple[int, int] = (2, 7)

#: What `ModelInstance.execute` returns: one response per request in order (None in the
#: place of a rescheduled request), None for a decoupled model, or an awaitable of either
#: from an `async def execute`.
ExecuteResult: TypeAlias = "list[InferenceResponse | None] | None | Awaitable[list[InferenceResponse | None] | None]"


@dataclass(slots=True)
class BackendContext:
    """What a backend gets once at start-up.

    `config` holds the `--backend-config NAME,key=value` settings given for this backend
    (plus the global ones given without a backend name, which Triton also passes down).
    """

    name: str
    config: dict[str, str] = field(default_factory=dict)
    # CPUs' worth of work the server may do at once: the CPUs it may run on, fewer under a
    # cgroup CPU limit; 0 when unknown (ABI 1.3). Frameworks size their thread pools from
    # the machine's cores, which a container's limit does not change.
    cpu_count: int = 0

    def thread_budget(self, sharers: int = 1) -> int | None:
        """Threads for one framework thread pool used by `sharers` instances at once: the
        server's CPUs shared among them, or None where the framework's own default fits (one
        user of the pool, and no limit below the machine's CPUs, or the count unknown)."""
        if self.cpu_count <= 0:
            return None
        if sharers <= 1 and self.cpu_count >= (os.cpu_count() or 0):
            return None
        return max(1, self.cpu_count // max(1, sharers))


@dataclass(slots=True)
class ModelContext:
    """What a backend gets for one model version.

    `path` is the model's directory (`<repository>/<model>`); `version_path` the numbered
    version directory inside it; `model_filename` the model file's name in it. `config` is the validated configuration; backends read it
    and may fill it in during `auto_complete_config` only. `server` lets a model call other
    models (BLS); backends must not keep it past `finalize`.
    """

    name: str
    version: int
    path: Path
    version_path: Path
    config: ModelConfig
    model_filename: str = ""
    server: InferenceService | None = None

    @property
    def model_file(self) -> Path:
        """`version_path / model_filename`: the config's `default_model_filename`, else the
        backend's `Backend.default_model_filename`."""
        return self.version_path / self.model_filename


@dataclass(slots=True)
class InstanceContext:
    """One instance-group member: `kind` is "CPU", "GPU" or "MODEL"; `device_id` the GPU
    ordinal for GPU instances (0 otherwise); `name` is `<group>_<index>` as Triton names it."""

    name: str
    kind: str
    device_id: int
    index: int
    group_name: str


class Backend:
    """A framework backend, created once per server process by its plugin.

    A subclass sets `name` and `abi_version`, and either `instance_class` (each model
    version then gets a plain `Model` whose instances are that class) or `create_model`.
    """

    #: Name used in `backend: "..."` and `--backend-config NAME,...`.
    name: ClassVar[str] = ""
    #: The ABI version this backend was built for. Deliberately no default: a default
    #: would be the running server's own version and so always match. Declare it as a
    #: literal, e.g. `abi_version = (2, 0)`.
    abi_version: ClassVar[tuple[int, int]]
    #: The file a model directory holds when the config names none (e.g. "model.onnx").
    default_model_filename: ClassVar[str] = ""
    #: The instance class of the default `create_model` (ABI 2.0).
    instance_class: ClassVar[type[ModelInstance] | None] = None

    #: What `initialize` was given; set before any model is created.
    context: BackendContext

    def initialize(self, context: BackendContext) -> None:
        """Framework-wide set-up. The default keeps the context on `self.context`; an
        override should call it (or set `self.context` itself)."""
        self.context = context

    def runs_on_gpus(self) -> bool:
        """Whether this installation can run an instance on a GPU (ABI 2.2). Triton puts a
        KIND_AUTO group on the GPUs whenever the machine has one; naiad asks the backend
        first, so a framework built without CUDA gets CPU instances instead of a failed load.
        An explicit KIND_GPU group is the config's choice and is not affected."""
        return True

    def create_model(self, context: ModelContext) -> Model:
        """Create (not yet initialize) the Model for one version. The default is a plain
        `Model` whose instances are `instance_class`."""
        if self.instance_class is None:
            raise TypeError(
                f"backend '{self.name}' ({type(self).__qualname__}) sets no instance_class; "
                "set instance_class = <a ModelInstance subclass> or override create_model"
            )
        return Model(context, self.instance_class)

    def finalize(self) -> None:
        """Release framework-wide resources at server shutdown."""


class Model:
    """One loaded model version. Subclass it for state the instances share (weights); a
    backend without such state uses it as it is, through `Backend.instance_class`."""

    def __init__(self, context: ModelContext, instance_class: type[ModelInstance] | None = None) -> None:
        self.context = context
        self.instance_class = instance_class

    def auto_complete_config(self, config: ModelConfig) -> None:
        """Fill in what the config leaves out (inputs, outputs, max_batch_size) from the
        model file. Called before validation, only when auto-complete is enabled; the
        default does nothing."""

    def initialize(self) -> None:
        """Load weights and shared state; raise to fail the load (the message is shown)."""

    def create_instance(self, context: InstanceContext) -> ModelInstance:
        """Create (not yet initialize) one instance: by default of the `instance_class`
        this model was created with."""
        if self.instance_class is None:
            raise TypeError(
                f"{type(self).__qualname__} was created without an instance_class; "
                "pass one to Model.__init__ or override create_instance"
            )
        return self.instance_class(self, context)

    def is_ready(self) -> bool:
        """Whether the model can serve; polled by model readiness."""
        return True

    def finalize(self) -> None:
        """Release the model's resources; called after every instance is finalized."""


class ModelInstance(abc.ABC):
    """One execution unit of a model."""

    #: True when a plain `execute` may run on any thread (see the module docstring): short
    #: batches then run on the server's event loop. Thread-affine frameworks keep False.
    runs_on_any_thread: bool = False

    def __init__(self, model: Model, context: InstanceContext) -> None:
        self.model = model
        self.context = context

    def initialize(self) -> None:
        """Per-instance set-up (sessions, device placement, worker processes)."""

    @abc.abstractmethod
    def execute(self, requests: list[InferenceRequest]) -> ExecuteResult:
        """Run a batch; see the module docstring for the contract."""

    def finalize(self) -> None:
        """Release the instance's resources."""


def describe_abi_mismatch(backend_name: str, version: Any) -> str | None:
    """Why a backend built for `version` cannot run here, or None when it can. `version`
    None means the backend class declares no `abi_version`."""
    if version is None:
        return (
            f"backend '{backend_name}' declares no ABI version; add "
            f"'abi_version = ({ABI_VERSION[0]}, {ABI_VERSION[1]})' to its Backend class "
            "(the naiad backend ABI it was written for)"
        )
    try:
        major, minor = int(version[0]), int(version[1])
    except (TypeError, ValueError, IndexError):
        return f"backend '{backend_name}' declares an unreadable ABI version {version!r}"
    if major != ABI_VERSION[0] or minor > ABI_VERSION[1]:
        return (
            f"backend '{backend_name}' was built for naiad backend ABI {major}.{minor}, "
            f"this server implements {ABI_VERSION[0]}.{ABI_VERSION[1]}"
        )
    return None
