"""Model files sent with a load request (`"file:<version>/<name>"` parameters).

They are written only inside a fresh directory the server owns, one per load; a path that
would leave it (`..`, absolute paths) is refused by `safe_names` before anything is written.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

from ..errors import NaiadError
from ..safe_names import check_model_file, check_model_name
from .local import ModelSource

__all__ = ["UploadedModels"]

log = logging.getLogger("naiad.uploads")


class UploadedModels:
    """Owns the directories uploaded models are written to; `close` removes them all."""

    def __init__(self) -> None:
        self._root: Path | None = None

    def write(self, name: str, files: dict[str, bytes]) -> ModelSource:
        """Write `files` (relative path -> content) into a new model directory."""
        check_model_name(name)
        checked = {check_model_file(name, f"file:{path}"): content for path, content in files.items()}
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
            except (FileExistsError, NotADirectoryError, IsADirectoryError):
                # One parameter names a file where another needs a directory ("file:1" and
                # "file:1/model.py"); Triton's words, without the server's path.
                raise NaiadError.invalid(
                    f"Invalid file parameter 'file:{relative}', directory has been created as a file"
                ) from None
            except OSError as exc:
                shutil.rmtree(repository, ignore_errors=True)
                # Triton answers a file it cannot write as a failed poll. The OS's words stay in
                # the log: they may name the server's paths.
                log.error("writing the uploaded file '%s' of model '%s' failed: %s", relative, name, exc)
                raise NaiadError.internal(
                    f"failed to load '{name}', failed to poll from model repository: "
                    f"file 'file:{relative}' could not be written"
                ) from None
        return ModelSource(name, model_dir, repository)

    def close(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None
