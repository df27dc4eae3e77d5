"""An app file: a Python file declaring models with `@naiad.model` (`naiad serve app.py`).

It is imported as `python app.py` would run it, its directory first on `sys.path` so that
it imports its neighbours, under a module name of its own (`naiad_app_<stem>`) so that it
never shadows a package; every object in it decorated with `@naiad.model` is a model.
Importing it again (reload) runs it afresh into a new module object.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path

from ..errors import NaiadError
from .declaration import ModelDeclaration, declaration_of, declarations

__all__ = ["app_module_name", "load_app_file"]

log = logging.getLogger("naiad.python_models")


def app_module_name(path: Path) -> str:
    return "naiad_app_" + "".join(c if c.isalnum() else "_" for c in path.stem)


def load_app_file(location: str) -> list[ModelDeclaration]:
    """The models `location` declares; NaiadError naming the file and what went wrong when
    it is missing, fails to import, or declares none."""
    path = Path(location)
    if not path.is_file():
        raise NaiadError.invalid(f"app file '{location}' does not exist (expected a Python file declaring models)")
    if path.suffix != ".py":
        raise NaiadError.invalid(f"app file '{location}' is not a Python file (.py)")
    path = path.resolve()
    name = app_module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py file always has both
    module = importlib.util.module_from_spec(spec)
    directory = str(path.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    previous = sys.modules.get(name)
    # Registered while it runs, as an import would: dataclasses and pickle look it up.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        if previous is not None:
            sys.modules[name] = previous
        else:
            sys.modules.pop(name, None)
        if not isinstance(exc, Exception):
            raise
        log.exception("app file '%s' failed to import", location)
        raise NaiadError.invalid(f"app file '{location}' failed to import: {type(exc).__name__}: {exc}") from None
    found = declarations(
        (obj for obj in vars(module).values() if declaration_of(obj) is not None), f"app file '{location}'"
    )
    if not found:
        raise NaiadError.invalid(
            f"app file '{location}' declares no model: decorate a function or class in it with @naiad.model(...)"
        )
    return found
