"""Poll mode: rescan the repositories and follow what changed.

Each scan compares every model directory's fingerprint (paths, sizes, modification times)
with the one it was last loaded from: new models load, changed ones reload (new versions
beside the serving ones, unchanged versions untouched), removed ones unload. A model that
failed to load is tried again only once its files change.

A scan that cannot reach a repository (a remote store down or stalled) changes nothing: the
models loaded keep serving and readiness stays as it was. It is logged once with the reason,
and once more when a scan succeeds again, not on every interval in between.
"""

from __future__ import annotations

import asyncio
import logging

from ..errors import NaiadError
from .manager import ModelManager

__all__ = ["RepositoryPoller"]

log = logging.getLogger("naiad.poller")


class RepositoryPoller:
    def __init__(self, manager: ModelManager, interval_secs: float) -> None:
        self.manager = manager
        self.interval_secs = interval_secs
        # Why the last scan failed, while scans fail; None while they succeed.
        self.failing: str | None = None

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_secs)
            await self.poll_and_report()

    async def poll_and_report(self) -> None:
        """One scan; a run of failures is logged once, when it starts (a store that is away
        may give another reason on each try), and its end once."""
        try:
            await self.poll_once()
        except NaiadError as exc:
            if self.failing is None:
                log.error("poll: %s; the models loaded keep serving", exc.message)
            else:
                log.debug("poll: still failing: %s", exc.message)
            self.failing = exc.message
            return
        except Exception:  # noqa: BLE001 - one bad scan must not stop polling
            log.exception("repository poll failed")
            return
        if self.failing is not None:
            log.info("poll: the model repositories answer again")
            self.failing = None

    async def poll_once(self) -> None:
        manager = self.manager
        await asyncio.to_thread(manager.refresh_repositories)
        sources, duplicates = await asyncio.to_thread(manager.sources)
        changed = []
        for name, source in sources.items():
            record = manager.known(name)
            fingerprint = await asyncio.to_thread(source.fingerprint)
            if record is None or record.fingerprint != fingerprint:
                changed.append(name)
        for name in duplicates:
            record = manager.known(name)
            if record is None or record.serving or not record.states:
                changed.append(name)
        removed = [name for name in manager.loaded_names() if name not in sources and name not in duplicates]

        async def load(name: str) -> None:
            try:
                await manager.load(name, while_unchanged=True)
            except NaiadError as exc:
                log.error("poll: %s", exc.message)

        await asyncio.gather(*(load(name) for name in changed))
        for name in removed:
            log.info("poll: model '%s' left the repository; unloading it", name)
            await manager.unload(name)
