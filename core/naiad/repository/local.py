"""Model repositories: where model directories are found.

A repository is a directory of model directories, each holding an optional
`config.pbtxt` and numbered version directories. Several repositories may be served at
once; a model name found in two of them is an error, as in Triton.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..config.model_config import ConfigError
from ..errors import NaiadError
from ..protos import model_config_pb2 as pb

__all__ = ["ModelSource", "LocalRepository", "Repository", "find_models", "select_versions"]


@dataclass(frozen=True, slots=True)
class ModelSource:
    """One model directory: its name, where it lives, and its numbered versions."""

    name: str
    path: Path
    repository: Path

    def config_path(self, config_name: str = "") -> Path:
        """`configs/<config_name>.pbtxt` where the model has it (tritonserver's
        --model-config-name), else `config.pbtxt`."""
        if config_name:
            custom = self.path / "configs" / f"{config_name}.pbtxt"
            if custom.is_file():
                return custom
        return self.path / "config.pbtxt"

    def config_text(self, config_name: str = "") -> str | None:
        try:
            return self.config_path(config_name).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def versions(self) -> list[int]:
        """Numbered version directories, ascending (non-numeric entries are ignored,
        as Triton does)."""
        found = []
        for entry in self.path.iterdir():
            if entry.is_dir() and entry.name.isdigit() and not entry.name.startswith("0"):
                found.append(int(entry.name))
        return sorted(found)

    def version_path(self, version: int) -> Path:
        return self.path / str(version)

    def misplaced_model_file(self, filenames: list[str]) -> str | None:
        """The first of `filenames` that lies beside config.pbtxt while no version directory
        holds it: a model file copied one level too high, which would otherwise surface
        only as "no version directory" or "could not determine backend"."""
        versions = [self.version_path(v) for v in self.versions()]
        for filename in filenames:
            if (self.path / filename).exists() and not any((v / filename).exists() for v in versions):
                return filename
        return None

    def without_paths(self, message: str) -> str:
        """`message` with the model's directory and its repository cut from the paths in it
        (`<repository>/m/1/model.onnx` becomes `1/model.onnx`): a load error reaches clients,
        in the load API's answer and the repository index, and they must not learn where the
        server keeps its files. Backends name files as they like; this is the one place their
        words leave for a client (and for `naiad check`'s report)."""
        for directory in (self.path, self.repository):
            for form in dict.fromkeys((str(directory), str(directory.resolve()))):
                message = message.replace(form + os.sep, "").replace(form, ".")
        return message

    def model_fingerprint(self) -> str:
        """Changes whenever a file outside the version directories changes (config.pbtxt,
        label files)."""
        versions = {str(v) for v in self.versions()}
        return _fingerprint(self.path, lambda rel: rel.parts[0] not in versions)

    def version_fingerprint(self, version: int) -> str:
        """Changes whenever a file inside one version directory changes."""
        return _fingerprint(self.version_path(version), lambda rel: True)

    def fingerprint(self) -> str:
        """Changes whenever any file of the model changes."""
        return _fingerprint(self.path, lambda rel: True)


def _fingerprint(root: Path, include) -> str:
    """Paths, sizes and modification times of the files under `root`: cheap to compute
    on every poll, and it changes whenever a file is written, added or removed."""
    digest = hashlib.sha256()
    if not root.is_dir():
        return ""
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        # Bytecode Python writes when it imports a model.py is not a change to the model.
        if "__pycache__" in rel.parts or not include(rel) or not path.is_file():
            continue
        stat = path.stat()
        digest.update(f"{rel}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


class LocalRepository:
    """A repository directory on the local file system."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self.location = str(self.root)

    def __repr__(self) -> str:
        return f"LocalRepository({self.location!r})"

    def refresh(self) -> None:
        """Local directories are always current; remote repositories download here."""

    def list_models(self) -> dict[str, ModelSource]:
        if not self.root.is_dir():
            raise NaiadError.invalid(f"model repository '{self.root}' is not a directory")
        models = {}
        for entry in sorted(self.root.iterdir()):
            if entry.is_dir() and not entry.name.startswith("."):
                models[entry.name] = ModelSource(entry.name, entry, self.root)
        return models


class Repository(Protocol):
    """What the server needs of a repository, local or remote."""

    location: str

    def list_models(self) -> dict[str, ModelSource]: ...

    def refresh(self) -> None: ...


def find_models(repositories: list[Repository]) -> tuple[dict[str, ModelSource], dict[str, str]]:
    """Every model of every repository, and the models found twice with why they fail. A
    repository named twice (the same path, or one path and a symlink to it) is read once:
    its models are not in two repositories."""
    found: dict[str, ModelSource] = {}
    first_location: dict[str, str] = {}
    duplicates: dict[str, str] = {}
    read: set[str] = set()
    for repository in repositories:
        if repository.location in read:
            continue
        read.add(repository.location)
        for name, source in repository.list_models().items():
            if name in found or name in duplicates:
                first = found.pop(name, None)
                where = [first_location[name]] if first else []
                previous = duplicates.get(name, "")
                duplicates[name] = (
                    previous or f"model '{name}' appears in more than one model repository: " + ", ".join(where)
                ) + f", {repository.location}"
                continue
            found[name] = source
            first_location[name] = repository.location
    return found, duplicates


def select_versions(policy: pb.ModelVersionPolicy, available: list[int], model: str) -> list[int]:
    """The versions a policy serves: latest(n) (default n=1), all, or specific."""
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        chosen = list(available)
    elif choice == "specific":
        missing = [v for v in policy.specific.versions if v not in available]
        if missing:
            raise ConfigError(
                model,
                f"version_policy.specific.versions: version(s) {sorted(missing)} have no "
                f"directory (found {available or 'none'})",
            )
        chosen = sorted(set(policy.specific.versions))
    else:
        count = policy.latest.num_versions if choice == "latest" else 1
        chosen = available[-count:] if available else []
    if not chosen:
        raise NaiadError.unavailable(f"model '{model}': no numbered version directory to load")
    return chosen
