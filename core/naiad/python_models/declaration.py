"""`naiad.model`: a Python function or class declared as a model, its config generated.

The decorator checks the declaration at once (a typo in a datatype fails where it is
written, not at load) and hangs a `ModelDeclaration` on the object it decorates, which it
returns unchanged: the function stays a function a test can call, the class a class. Nothing
is registered anywhere; whoever serves the models finds the declarations on the objects
(`declared_models_of`, an app file's module, or `ServerOptions.python_models`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from google.protobuf import text_format

from ..datatypes import DATATYPES, datatype_to_config_type
from ..errors import NaiadError
from ..protos import model_config_pb2 as pb
from ..safe_names import check_model_name

__all__ = ["BACKEND_NAME", "ModelDeclaration", "TensorDeclaration", "declaration_of", "declarations", "model"]

#: The backend that runs declared models (`backend: "naiad_function"` in their configs).
BACKEND_NAME: Final = "naiad_function"

# The attribute the decorator sets on what it decorates.
_ATTRIBUTE: Final = "__naiad_model__"

Declared = TypeVar("Declared")


@dataclass(frozen=True, slots=True)
class TensorDeclaration:
    """One input or output: its name, datatype and dims without the batch dimension."""

    name: str
    datatype: str
    dims: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ModelDeclaration:
    """What `@naiad.model(...)` declared: the model's name, tensors and scheduling, and the
    function or class that runs it."""

    name: str
    target: Callable[..., Any]
    inputs: tuple[TensorDeclaration, ...]
    outputs: tuple[TensorDeclaration, ...]
    max_batch_size: int
    instances: int
    max_queue_delay_microseconds: int

    @property
    def is_class(self) -> bool:
        """A class is instantiated once per model instance, and its instances are called."""
        return inspect.isclass(self.target)

    @property
    def is_async(self) -> bool:
        call = _class_call(self.target) if self.is_class else self.target
        return inspect.iscoroutinefunction(call)

    @property
    def directory(self) -> Path:
        """The directory of the file that declares the model (the model's directory, as a
        repository model has one); the working directory when it has no file."""
        try:
            source = inspect.getsourcefile(self.target)
        except (TypeError, OSError):  # built in, or defined where no file holds it
            source = None
        return Path(source).resolve().parent if source else Path.cwd()

    def config(self) -> pb.ModelConfig:
        """The model's config, as a config.pbtxt would declare it."""
        proto = pb.ModelConfig(name=self.name, backend=BACKEND_NAME, max_batch_size=self.max_batch_size)
        for tensor in self.inputs:
            proto.input.add(name=tensor.name, data_type=_config_type(tensor.datatype), dims=tensor.dims)
        for tensor in self.outputs:
            proto.output.add(name=tensor.name, data_type=_config_type(tensor.datatype), dims=tensor.dims)
        proto.instance_group.add(count=self.instances, kind=pb.ModelInstanceGroup.KIND_CPU)
        if self.max_batch_size > 0:
            # The point of declaring a batch dimension: the function gets batches.
            proto.dynamic_batching.max_queue_delay_microseconds = self.max_queue_delay_microseconds
        return proto

    def config_text(self) -> str:
        return text_format.MessageToString(self.config())


def model(
    name: str | None = None,
    *,
    inputs: Mapping[str, tuple[str, Sequence[int]]],
    outputs: Mapping[str, tuple[str, Sequence[int]]],
    max_batch_size: int = 0,
    instances: int = 1,
    max_queue_delay_microseconds: int = 0,
) -> Callable[[Declared], Declared]:
    """Declare a function or class as a model.

    `inputs` and `outputs` map each tensor's name to `(datatype, shape)`, the shape as a
    client sees it: with `max_batch_size` above 0 its first dimension is the batch
    dimension and must be -1, and the model batches requests dynamically (the function gets
    the whole batch, stacked along the first axis). `name` defaults to the function's or
    class's name. `instances` is the instance group's count: instances run batches in
    parallel (a class is instantiated once per instance).

    The function is called with one keyword argument per input (a numpy array) and returns
    a dict of output arrays by name; it may be `async def`. A class is instantiated without
    arguments, its `setup()` called when it has one, and then its instances are called as
    the function would be.
    """

    def declare(target: Declared) -> Declared:
        if not callable(target):
            raise TypeError(f"@naiad.model decorates a function or a class, not {type(target).__name__}")
        model_name = name if name is not None else getattr(target, "__name__", "")
        declaration = ModelDeclaration(
            name=_checked_name(model_name),
            target=target,
            inputs=_tensors(model_name, "input", inputs, max_batch_size),
            outputs=_tensors(model_name, "output", outputs, max_batch_size),
            max_batch_size=_count(model_name, "max_batch_size", max_batch_size, 0),
            instances=_count(model_name, "instances", instances, 1),
            max_queue_delay_microseconds=_count(
                model_name, "max_queue_delay_microseconds", max_queue_delay_microseconds, 0
            ),
        )
        if inspect.isclass(target) and _class_call(target) is None:
            raise TypeError(f"@naiad.model '{model_name}': the class defines no __call__ to run a batch")
        setattr(target, _ATTRIBUTE, declaration)
        return target

    return declare


def declaration_of(obj: object) -> ModelDeclaration | None:
    """The declaration `@naiad.model` hung on `obj`; None for anything else (a subclass of
    a declared class included: it inherits the attribute, not the declaration)."""
    declaration = getattr(obj, _ATTRIBUTE, None)
    if isinstance(declaration, ModelDeclaration) and declaration.target is obj:
        return declaration
    return None


def declarations(objects: Iterable[object], where: str) -> list[ModelDeclaration]:
    """The declarations of `objects` (each decorated with `@naiad.model`, or a declaration),
    one per model name; `where` names their origin in the error for a name declared twice."""
    found: dict[str, ModelDeclaration] = {}
    for obj in objects:
        declaration = obj if isinstance(obj, ModelDeclaration) else declaration_of(obj)
        if declaration is None:
            raise NaiadError.invalid(f"{where}: {obj!r} is not decorated with @naiad.model")
        previous = found.get(declaration.name)
        if previous is not None and previous.target is not declaration.target:
            raise NaiadError.invalid(f"{where}: two models are named '{declaration.name}'")
        found[declaration.name] = declaration
    return list(found.values())


def _class_call(cls: type) -> Callable[..., Any] | None:
    """The `__call__` a class defines for its objects (not `type.__call__`, which a class
    reaches through its metaclass and which would make every class look callable)."""
    for klass in cls.__mro__[:-1]:  # object defines none
        if "__call__" in vars(klass):
            call: Callable[..., Any] = vars(klass)["__call__"]
            return call
    return None


def _checked_name(name: str) -> str:
    try:
        return check_model_name(name)
    except NaiadError as exc:
        raise ValueError(f"@naiad.model: {exc.message}") from None


def _count(model_name: str, field: str, value: object, least: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ValueError(f"@naiad.model '{model_name}': {field} must be an integer of at least {least}, got {value!r}")
    return value


def _config_type(datatype: str) -> pb.DataType.ValueType:
    return pb.DataType.Value(datatype_to_config_type(datatype))


def _tensors(
    model_name: str, kind: str, declared: Mapping[str, tuple[str, Sequence[int]]], max_batch_size: int
) -> tuple[TensorDeclaration, ...]:
    where = f"@naiad.model '{model_name}'"
    if not isinstance(declared, Mapping) or not declared:
        raise ValueError(f"{where}: {kind}s must be a dict of {{name: (datatype, shape)}} with at least one {kind}")
    tensors = []
    for tensor_name, spec in declared.items():
        if not isinstance(tensor_name, str) or not tensor_name:
            raise ValueError(f"{where}: {kind} name {tensor_name!r} is not a non-empty string")
        try:
            datatype, shape = spec
            dims = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: {kind} '{tensor_name}' must be (datatype, shape), got {spec!r}") from None
        if datatype not in DATATYPES:
            raise ValueError(
                f"{where}: {kind} '{tensor_name}' has datatype {datatype!r}; expected one of {', '.join(sorted(DATATYPES))}"
            )
        if any(d < -1 or d == 0 for d in dims):
            raise ValueError(
                f"{where}: {kind} '{tensor_name}' has shape {list(dims)}; each dimension is -1 or positive"
            )
        if max_batch_size > 0:
            if not dims or dims[0] != -1:
                raise ValueError(
                    f"{where}: {kind} '{tensor_name}' has shape {list(dims)}; with max_batch_size "
                    f"{max_batch_size} its first dimension is the batch dimension and must be -1"
                )
            dims = dims[1:]
        tensors.append(TensorDeclaration(tensor_name, datatype, dims))
    return tuple(tensors)
