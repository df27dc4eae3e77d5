"""Models declared in Python: `@naiad.model` on a function or class, the `naiad_function`
backend that runs them, app files (`naiad serve app.py`) and their reloading."""

from .app_reload import AppReloader
from .declaration import BACKEND_NAME, ModelDeclaration, TensorDeclaration, declaration_of, model
from .declared_models import DeclaredModels

__all__ = [
    "AppReloader",
    "BACKEND_NAME",
    "DeclaredModels",
    "ModelDeclaration",
    "TensorDeclaration",
    "declaration_of",
    "model",
]
