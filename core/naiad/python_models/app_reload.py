"""`naiad serve app.py --reload`: when an app file changes, import it again and load what it
declares now: every model it still declares is built again from the new code (its config may
be the same, its function is not), a new one loads, one it no longer declares unloads. A file
that fails to import is logged and changes nothing: the models keep serving."""

from __future__ import annotations

import asyncio
import logging
import os

from ..errors import NaiadError
from ..models.manager import ModelManager
from .declared_models import DeclaredModels

__all__ = ["AppReloader"]

log = logging.getLogger("naiad.python_models")

# How often the app files' modification times are read: a stat per file, cheap enough to
# make a saved file serve within a second.
CHECK_INTERVAL_S = 0.5


class AppReloader:
    def __init__(self, declared: DeclaredModels, manager: ModelManager, load_new: bool) -> None:
        self.declared = declared
        self.manager = manager
        # In explicit model control mode a model loads when asked: one that does not serve
        # (new, or unloaded) waits for that; the others also load what failed before.
        self.load_new = load_new
        self._stamps = self._read_stamps()

    def _read_stamps(self) -> list[tuple[int, int] | None]:
        stamps: list[tuple[int, int] | None] = []
        for path in self.declared.app_files:
            try:
                stat = os.stat(path)
            except OSError:
                stamps.append(None)
            else:
                stamps.append((stat.st_mtime_ns, stat.st_size))
        return stamps

    async def run(self) -> None:
        while True:
            await asyncio.sleep(CHECK_INTERVAL_S)
            stamps = self._read_stamps()
            if stamps == self._stamps:
                continue
            self._stamps = stamps
            try:
                await self.reload()
            except Exception:  # noqa: BLE001 - one bad reload must not stop watching
                log.exception("reloading the app files failed")

    async def reload(self) -> None:
        before = set(self.declared.names())
        try:
            await asyncio.to_thread(self.declared.load)
        except NaiadError as exc:
            log.error("reload: %s; the models declared before keep serving", exc.message)
            return
        after = self.declared.names()
        log.info("reload: %s changed; loading %s", ", ".join(self.declared.app_files), ", ".join(after))
        for name in after:
            record = self.manager.known(name)
            if (record is None or not record.serving) and not self.load_new:
                continue
            try:
                await self.manager.load(name)
            except NaiadError as exc:
                log.error("reload: %s", exc.message)
        for name in sorted(before - set(after)):
            record = self.manager.known(name)
            if record is not None and record.serving:
                log.info("reload: model '%s' is no longer declared; unloading it", name)
                await self.manager.unload(name)
