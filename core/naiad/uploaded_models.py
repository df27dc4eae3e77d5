"""Model files sent with a load request (`"file:<version>/<name>"` parameters).

They are written only inside a fresh directory the server owns, one per load; a path that
would leave it (`..`, absolute paths, links) is refused before anything is written.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path, PurePosixPath

from .errors import NaiadError
from .repository import ModelSource

__all__ = ["UploadedModels"]


class UploadedModels:
    """Owns the directories uploaded models are written to; `close` removes them all."""

    def __init__(self) -> None:
        self._root: Path | None = None

    def write(self, name: str, files: dict[str, bytes]) -> ModelSource:
        """Write `files` (relative path -> content) into a new model directory."""
        checked = {self._check(name, path): content for path, content in files.items()}
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="naiad-uploads-"))
        repository = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self._root))
        model_dir = repository / name
        model_dir.mkdir()
        for relative, content in checked.items():
            target = model_dir.joinpath(*relative.parts)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
            except OSError as exc:
                shutil.rmtree(repository, ignore_errors=True)
                # Triton answers a file it cannot write as a failed poll; the OS's text would name
                # the server's path, so only its reason is kept.
                raise NaiadError.internal(
                    f"failed to load '{name}', failed to poll from model repository: "
                    f"file 'file:{relative}' could not be written: {exc.strerror}"
                ) from None
        return ModelSource(name, model_dir, repository)

    @staticmethod
    def _check(name: str, path: str) -> PurePosixPath:
        relative = PurePosixPath(path)
        if (
            not path
            or relative.is_absolute()
            or "\\" in path
            or any(part in ("..", "") for part in path.split("/"))
        ):
            raise NaiadError.invalid(
                f"failed to load '{name}': file path '{path}' must be relative and stay inside the model directory"
            )
        return relative

    def close(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None
