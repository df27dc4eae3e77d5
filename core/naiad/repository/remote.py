"""Model repositories on object stores (S3 and S3-compatible, GCS, Azure) through fsspec.

The remote tree is mirrored into a local cache directory and served from there like a local
repository. `refresh` brings the mirror up to date, downloading only files whose size or
ETag/modification time changed, each written to a temporary name and renamed into place.

S3 endpoints: the standard AWS environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_DEFAULT_REGION, AWS_ENDPOINT_URL) applies; as in Triton, `s3://host:port/bucket/path`
names an S3-compatible endpoint explicitly (http unless the host is given as https://...).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..errors import NaiadError
from ..safe_names import inside_directory
from .local import LocalRepository, ModelSource

__all__ = ["RemoteRepository", "is_remote", "open_repository"]

# URL scheme -> (fsspec protocol, the package that provides it)
SCHEMES: dict[str, tuple[str, str]] = {
    "s3": ("s3", "s3fs"),
    "gs": ("gcs", "gcsfs"),
    "as": ("abfs", "adlfs"),
}


def is_remote(location: str) -> bool:
    return location.split("://", 1)[0] in SCHEMES and "://" in location


def open_repository(location: str, cache_root: Path | None = None) -> LocalRepository | RemoteRepository:
    return RemoteRepository(location, cache_root) if is_remote(location) else LocalRepository(location)


def _filesystem(location: str) -> tuple[Any, str]:
    """An fsspec filesystem and the root path inside it."""
    scheme, rest = location.split("://", 1)
    protocol, package = SCHEMES[scheme]
    try:
        import fsspec  # noqa: PLC0415 - optional dependency, imported only for remote repositories
    except ImportError:
        raise NaiadError.unavailable(
            f"model repository '{location}' needs fsspec and {package}: pip install 'naiad[remote]' {package}"
        ) from None
    options: dict[str, Any] = {}
    if scheme == "s3":
        first, _, path = rest.partition("/")
        if ":" in first:  # s3://host:port/bucket/path
            endpoint = first if first.startswith("http") else f"http://{first}"
            options["client_kwargs"] = {"endpoint_url": endpoint}
            rest = path
        elif os.environ.get("AWS_ENDPOINT_URL"):
            options["client_kwargs"] = {"endpoint_url": os.environ["AWS_ENDPOINT_URL"]}
    elif scheme == "as":
        account, _, path = rest.partition("/")
        options["account_name"] = account
        rest = path
    try:
        fs = fsspec.filesystem(protocol, **options)
    except (ImportError, ValueError) as exc:
        raise NaiadError.unavailable(
            f"model repository '{location}' needs {package}: pip install {package} ({exc})"
        ) from None
    return fs, rest.rstrip("/")


class RemoteRepository:
    """A remote repository mirrored into a local cache directory."""

    def __init__(self, location: str, cache_root: Path | None = None) -> None:
        self.location = location
        self._fs, self._root = _filesystem(location)
        base = cache_root or Path(tempfile.gettempdir()) / "naiad-repository-cache"
        digest = hashlib.sha256(location.encode()).hexdigest()[:16]
        self.cache = base / digest
        self.cache.mkdir(parents=True, exist_ok=True)
        self._manifest_path = self.cache.parent / f"{digest}.manifest.json"
        self._local = LocalRepository(self.cache)
        self.root = self._local.root
        self.refresh()

    def __repr__(self) -> str:
        return f"RemoteRepository({self.location!r})"

    def list_models(self) -> dict[str, ModelSource]:
        return self._local.list_models()

    def refresh(self) -> None:
        """Mirror the remote tree: new and changed files downloaded, removed ones deleted."""
        try:
            self._fs.invalidate_cache()
            listing = self._fs.find(self._root, detail=True)
        except (OSError, ValueError) as exc:
            raise NaiadError.unavailable(f"cannot list model repository '{self.location}': {exc}") from None
        manifest = self._load_manifest()
        wanted: dict[str, str] = {}
        for path, info in listing.items():
            if info.get("type") == "directory":
                continue
            relative = path[len(self._root) :].lstrip("/") if path.startswith(self._root) else None
            # An object key is not ours to trust: one that would land outside the mirror is skipped.
            if not relative or inside_directory(relative) is None:
                continue
            stamp = f"{info.get('size')}:{info.get('ETag') or info.get('etag') or info.get('LastModified') or info.get('mtime')}"
            wanted[relative] = stamp
            target = self.cache / relative
            if manifest.get(relative) == stamp and target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.partial")
            try:
                self._fs.get_file(path, str(partial))
            except (OSError, ValueError) as exc:
                raise NaiadError.unavailable(f"cannot download '{path}' from '{self.location}': {exc}") from None
            os.replace(partial, target)
        for relative in set(manifest) - set(wanted):
            (self.cache / relative).unlink(missing_ok=True)
        for directory in sorted((p for p in self.cache.rglob("*") if p.is_dir()), reverse=True):
            if not any(directory.iterdir()):
                directory.rmdir()
        self._manifest_path.write_text(json.dumps(wanted))

    def _load_manifest(self) -> dict[str, str]:
        try:
            return json.loads(self._manifest_path.read_text())
        except (OSError, ValueError):
            return {}
