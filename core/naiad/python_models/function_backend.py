"""The `naiad_function` backend: runs the models declared with `@naiad.model` on naiad's
backend ABI, like any framework backend. The requests of a batch are stacked into one array
per input, the function is called once with them, and its outputs are split back.

A declared model runs in the server process: a plain function in its instance's thread, an
`async def` one on the server's event loop (it must not block it). The backend finds a
model's function by the model's name in the `DeclaredModels` it was made for
(`function_backend_for`): one server's declarations, never a global table.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol

import numpy as np

from ..backend import (
    Backend,
    InferenceRequest,
    InferenceResponse,
    InstanceContext,
    Model,
    ModelContext,
    ModelInstance,
    NaiadError,
)
from ..backend.helpers import Batch
from .declaration import BACKEND_NAME, ModelDeclaration

__all__ = ["DeclarationLookup", "FunctionBackend", "function_backend_for"]


class DeclarationLookup(Protocol):
    """Where the backend finds the declaration of a model it is asked to load."""

    def declaration(self, name: str) -> ModelDeclaration | None: ...


class FunctionBackend(Backend):
    name = BACKEND_NAME
    abi_version = (2, 0)
    #: Set by `function_backend_for`: the declarations this backend serves.
    declarations: ClassVar[DeclarationLookup | None] = None

    def create_model(self, context: ModelContext) -> Model:
        declaration = self.declarations.declaration(context.name) if self.declarations is not None else None
        if declaration is None:
            raise NaiadError.invalid(
                f"model '{context.name}': backend '{BACKEND_NAME}' runs only models declared in Python with "
                "@naiad.model (naiad serve app.py, or ServerOptions.python_models); no such model is declared"
            )
        return FunctionModel(context, declaration)


def function_backend_for(declarations: DeclarationLookup) -> type[FunctionBackend]:
    """A backend class serving `declarations` (the registry instantiates a class without
    arguments, so what it serves is the class's own)."""
    return type("FunctionBackend", (FunctionBackend,), {"declarations": declarations, "__module__": __name__})


class FunctionModel(Model):
    def __init__(self, context: ModelContext, declaration: ModelDeclaration) -> None:
        super().__init__(context)
        self.declaration = declaration

    def create_instance(self, context: InstanceContext) -> ModelInstance:
        if self.declaration.is_async:
            return AsyncFunctionInstance(self, context)
        return FunctionInstance(self, context)


class FunctionInstance(ModelInstance):
    """One instance: the function itself, or one object of the declared class."""

    model: FunctionModel
    # A declared function has no tie to a thread (a class's setup already runs in the
    # loading thread, not the one that calls it): short batches may run on the loop,
    # saving the two thread wake-ups of a hand-off (scheduling/inline_execution.py); a
    # function measured slow keeps to its instance thread.
    runs_on_any_thread = True

    def initialize(self) -> None:
        declaration = self.model.declaration
        self.call: Callable[..., Any] = declaration.target
        if declaration.is_class:
            # Raising fails the load with the exception's text, as a Model.initialize does.
            obj = declaration.target()
            setup = getattr(obj, "setup", None)
            if callable(setup):
                setup()
            self.call = obj

    def execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse]:  # type: ignore[override]
        batch = Batch.stack(requests, self.model.context.config)
        try:
            returned = self.call(**batch.inputs)
        except NaiadError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the user's code raises fails the batch
            raise _failure(self.model.declaration, exc) from exc
        return batch.responses(_outputs(self.model.declaration, returned))

    def finalize(self) -> None:
        # `call` is missing when initialize failed before it was set.
        obj = getattr(self, "call", None)
        teardown = getattr(obj, "teardown", None) if self.model.declaration.is_class else None
        if callable(teardown):
            teardown()


class AsyncFunctionInstance(FunctionInstance):
    """An `async def` function (or `async def __call__`): awaited on the server's loop."""

    async def execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse]:  # type: ignore[override]
        batch = Batch.stack(requests, self.model.context.config)
        try:
            returned = await self.call(**batch.inputs)
        except NaiadError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the user's code raises fails the batch
            raise _failure(self.model.declaration, exc) from exc
        return batch.responses(_outputs(self.model.declaration, returned))


def _failure(declaration: ModelDeclaration, exc: Exception) -> NaiadError:
    return NaiadError.internal(f"model '{declaration.name}' raised {type(exc).__name__}: {exc}")


def _outputs(declaration: ModelDeclaration, returned: object) -> Mapping[str, np.ndarray]:
    """The outputs a call returned, checked against the declaration: a dict naming each
    declared output (a bare array stands for the one output of a model that has one)."""
    declared = [t.name for t in declaration.outputs]
    if not isinstance(returned, Mapping):
        if len(declared) == 1 and not inspect.isawaitable(returned) and returned is not None:
            return {declared[0]: np.asarray(returned)}
        raise NaiadError.internal(
            f"model '{declaration.name}' returned {type(returned).__name__}; expected a dict of its "
            f"outputs by name ({', '.join(declared)})"
        )
    missing = [name for name in declared if name not in returned]
    extra = [str(name) for name in returned if name not in declared]
    if missing or extra:
        problems = ([f"no output {', '.join(map(repr, missing))}"] if missing else []) + (
            [f"undeclared output(s) {', '.join(map(repr, extra))}"] if extra else []
        )
        raise NaiadError.internal(
            f"model '{declaration.name}' returned {' and '.join(problems)}; it declares {', '.join(declared)}"
        )
    return {name: np.asarray(returned[name]) for name in declared}
