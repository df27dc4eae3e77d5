"""The models declared in Python that one server serves: those its embedding program passed
(`ServerOptions.python_models`) and those its app files declare. They are listed to the model
manager as an in-memory repository beside the model repositories, and the `naiad_function`
backend finds each model's function here by name."""

from __future__ import annotations

from collections.abc import Sequence

from ..repository.in_memory import InMemoryRepository
from .app_file import load_app_file
from .declaration import ModelDeclaration, declarations
from .function_backend import FunctionBackend, function_backend_for

__all__ = ["DeclaredModels"]


class DeclaredModels:
    def __init__(self, embedded: Sequence[object], app_files: Sequence[str]) -> None:
        self.app_files = list(app_files)
        self._embedded = declarations(embedded, "ServerOptions.python_models")
        self._declarations: dict[str, ModelDeclaration] = {}
        where = ", ".join(self.app_files) if self.app_files else "python models"
        self.repository = InMemoryRepository(where)
        self.backend: type[FunctionBackend] = function_backend_for(self)

    def declaration(self, name: str) -> ModelDeclaration | None:
        return self._declarations.get(name)

    def names(self) -> list[str]:
        return sorted(self._declarations)

    def load(self) -> None:
        """Import the app files (again) and serve what they and the embedding program declare
        from now on (blocking: it runs the files). On failure what was served stays."""
        found = list(self._embedded)
        for app_file in self.app_files:
            found += load_app_file(app_file)
        every = declarations(found, ", ".join(self.app_files) or "ServerOptions.python_models")
        self._declarations = {d.name: d for d in every}
        self.repository.set_models({d.name: (d.config_text(), d.directory) for d in every})
