"""Model repositories on object stores (S3 and S3-compatible, GCS, Azure) through fsspec.

The remote tree is mirrored into a local cache directory and served from there like a local
repository. `refresh` brings the mirror up to date, downloading only files whose size or
version stamp (ETag, generation, modification time) changed, each written to a temporary
name and renamed into place, so a model never loads half a file. Which store a URL names,
its endpoint and its credentials: `object_stores`.

Every call to the store is bounded by `timeout_secs` (`--repository-timeout-secs`): a
listing must finish within it, a download must receive data at least that often (a large
file on a slow link may take longer in all). A stalled store fails one refresh instead of
hanging it, and the mirror keeps what it had.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..errors import NaiadError
from ..safe_names import inside_directory
from .local import LocalRepository, ModelSource
from .object_stores import SCHEMES, StoreAccess, resolve_store

__all__ = ["RemoteRepository", "is_remote", "open_repository", "DEFAULT_TIMEOUT_SECS"]

# Long enough for one large model file on a slow link, short enough that a stalled store
# gives its poll back within minutes.
DEFAULT_TIMEOUT_SECS = 300.0

# The fields fsspec's stores report that change when an object is written again: S3's ETag,
# GCS's generation and md5Hash, Azure's etag and last_modified. All present ones count.
_VERSION_FIELDS = ("ETag", "etag", "generation", "md5Hash", "LastModified", "last_modified", "updated", "mtime")


def is_remote(location: str) -> bool:
    return location.split("://", 1)[0] in SCHEMES and "://" in location


def open_repository(
    location: str, cache_root: Path | None = None, timeout_secs: float = DEFAULT_TIMEOUT_SECS
) -> LocalRepository | RemoteRepository:
    return RemoteRepository(location, cache_root, timeout_secs) if is_remote(location) else LocalRepository(location)


def _filesystem(access: StoreAccess) -> Any:
    try:
        import fsspec  # noqa: PLC0415 - optional dependency, imported only for remote repositories
    except ImportError:
        raise NaiadError.unavailable(
            f"model repository '{access.url}' needs fsspec and {access.package}: pip install 'naiad[{access.extra}]'"
        ) from None
    try:
        # skip_instance_cache: each repository owns its client; a cached one would keep the
        # endpoint and credentials of another repository with the same options.
        if access.filesystem_class:
            module, _, name = access.filesystem_class.rpartition(".")
            filesystem = getattr(importlib.import_module(module), name)
            return filesystem(skip_instance_cache=True, **access.options)
        return fsspec.filesystem(access.protocol, skip_instance_cache=True, **access.options)
    except ImportError:
        raise NaiadError.unavailable(
            f"model repository '{access.url}' needs {access.package}: pip install 'naiad[{access.extra}]'"
        ) from None
    except ValueError as exc:
        raise NaiadError.invalid(f"model repository '{access.url}' ({access.describe()}): {exc}") from None


def _version_stamp(info: dict[str, Any]) -> str:
    return ":".join([str(info.get("size"))] + [str(info[key]) for key in _VERSION_FIELDS if info.get(key)])


def _reason(exc: BaseException, timeout_secs: float) -> str:
    if isinstance(exc, TimeoutError):  # fsspec's FSTimeoutError is one
        return f"no answer within {timeout_secs:g} s (--repository-timeout-secs)"
    return str(exc) or type(exc).__name__


class RemoteRepository:
    """A remote repository mirrored into a local cache directory."""

    def __init__(
        self, location: str, cache_root: Path | None = None, timeout_secs: float = DEFAULT_TIMEOUT_SECS
    ) -> None:
        if timeout_secs <= 0:
            raise NaiadError.invalid(f"--repository-timeout-secs must be positive, got {timeout_secs:g}")
        self.location = location
        self.timeout_secs = timeout_secs
        self.access = resolve_store(location, os.environ)
        self._fs = _filesystem(self.access)
        self._root = self.access.root
        base = cache_root or Path(tempfile.gettempdir()) / "naiad-repository-cache"
        digest = hashlib.sha256(location.encode()).hexdigest()[:16]
        self.cache = base / digest
        self.cache.mkdir(parents=True, exist_ok=True)
        self._manifest_path = self.cache.parent / f"{digest}.manifest.json"
        self._local = LocalRepository(self.cache)
        self.root = self._local.root
        # A poll and an explicit load may refresh at once, from two threads.
        self._refreshing = threading.Lock()
        self.refresh()

    def __repr__(self) -> str:
        return f"RemoteRepository({self.location!r})"

    def list_models(self) -> dict[str, ModelSource]:
        return self._local.list_models()

    def refresh(self) -> None:
        """Mirror the remote tree: new and changed files downloaded, removed ones deleted.
        On failure the mirror keeps every file it had and those downloaded so far."""
        with self._refreshing:
            self._mirror()

    def _mirror(self) -> None:
        listing = self._list()
        manifest = self._load_manifest()
        wanted: dict[str, str] = {}
        for path, info in listing.items():
            if info.get("type") == "directory":
                continue
            relative = path[len(self._root) :].lstrip("/") if path.startswith(self._root) else None
            # An object key is not ours to trust: one that would land outside the mirror is skipped.
            if not relative or inside_directory(relative) is None:
                continue
            wanted[relative] = _version_stamp(info)
        try:
            for relative, stamp in sorted(wanted.items()):
                target = self.cache / relative
                if manifest.get(relative) == stamp and target.exists():
                    continue
                self._download(f"{self._root}/{relative}", target)
                manifest[relative] = stamp
        finally:
            # What landed before a failure is recorded: the next refresh does not fetch it again.
            self._save_manifest(manifest)
        for relative in set(manifest) - set(wanted):
            (self.cache / relative).unlink(missing_ok=True)
            del manifest[relative]
        for directory in sorted((p for p in self.cache.rglob("*") if p.is_dir()), reverse=True):
            if not any(directory.iterdir()):
                directory.rmdir()
        self._save_manifest(manifest)

    def _list(self) -> dict[str, dict[str, Any]]:
        try:
            self._fs.invalidate_cache()
            listing: dict[str, dict[str, Any]] = self._fs.find(self._root, detail=True, **self._bound())
        except Exception as exc:  # noqa: BLE001 - every client library raises its own types
            raise NaiadError.unavailable(
                f"cannot list model repository '{self.location}' ({self.access.describe()}): "
                f"{_reason(exc, self.timeout_secs)}"
            ) from None
        bucket = self._root.split("/", 1)[0]
        if not listing and not self._exists(bucket):
            # Some stores list a missing bucket as empty; an empty prefix of a bucket that is
            # there is a repository without models (all removed, in poll mode).
            raise NaiadError.unavailable(
                f"cannot list model repository '{self.location}' ({self.access.describe()}): "
                f"no bucket or container '{bucket}'"
            )
        return listing

    def _exists(self, path: str) -> bool:
        try:
            return bool(self._fs.exists(path, **self._bound()))
        except Exception:  # noqa: BLE001 - the listing already answered; this only words the error
            return False

    def _download(self, path: str, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial")
        try:
            if getattr(self._fs, "async_impl", False):
                import fsspec.asyn  # noqa: PLC0415 - present whenever a remote store is open

                fsspec.asyn.sync(
                    self._fs.loop, download_while_progressing, self._fs, path, str(partial), self.timeout_secs
                )
            else:
                self._fs.get_file(path, str(partial))
        except Exception as exc:  # noqa: BLE001 - every client library raises its own types
            partial.unlink(missing_ok=True)
            raise NaiadError.unavailable(
                f"cannot download '{path}' from model repository '{self.location}' ({self.access.describe()}): "
                f"{_reason(exc, self.timeout_secs)}"
            ) from None
        os.replace(partial, target)

    def _bound(self) -> dict[str, Any]:
        """fsspec's bound on one whole call, for listings (small answers)."""
        # fsspec's asynchronous stores (s3fs, gcsfs, adlfs) cancel a call that outlives `timeout`.
        return {"timeout": self.timeout_secs} if getattr(self._fs, "async_impl", False) else {}

    def _load_manifest(self) -> dict[str, str]:
        try:
            loaded = json.loads(self._manifest_path.read_text())
        except (OSError, ValueError):
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def _save_manifest(self, manifest: dict[str, str]) -> None:
        partial = self._manifest_path.with_name(f".{self._manifest_path.name}.partial")
        partial.write_text(json.dumps(manifest))
        os.replace(partial, self._manifest_path)


async def download_while_progressing(fs: Any, path: str, local_path: str, stall_secs: float) -> None:
    """`fs._get_file`, cancelled once no data arrived for `stall_secs`: the clients report
    each chunk they receive through fsspec's callback."""
    import fsspec.callbacks  # noqa: PLC0415 - optional dependency, present with any remote store

    loop = asyncio.get_running_loop()
    last_progress = loop.time()

    class Progress(fsspec.callbacks.Callback):  # type: ignore[misc]
        def call(self, *args: Any, **kwargs: Any) -> None:
            nonlocal last_progress
            last_progress = loop.time()

    task = asyncio.ensure_future(fs._get_file(path, local_path, callback=Progress()))
    try:
        while True:
            quiet_until = last_progress + stall_secs
            done, _ = await asyncio.wait({task}, timeout=max(0.0, quiet_until - loop.time()))
            if done:
                task.result()
                return
            if loop.time() >= last_progress + stall_secs:
                raise TimeoutError(f"no data for {stall_secs:g} s")
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
