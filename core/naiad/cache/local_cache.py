"""`--cache-config local,size=BYTES`: an in-process LRU cache of encoded responses.

`size` bounds the bytes of the stored entries; storing one that does not fit evicts the
least recently used ones, and an entry larger than the whole cache is not stored (as
Triton's local cache refuses it). Everything runs on the event loop: no lock.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

from ..errors import NaiadError

__all__ = ["LocalCache"]

log = logging.getLogger("naiad.cache")


class LocalCache:
    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[bytes, bytes] = OrderedDict()
        self._used = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.lookup_ns = 0
        self.insert_ns = 0

    @classmethod
    def from_settings(cls, settings: dict[str, str]) -> LocalCache:
        if "size" not in settings:
            raise NaiadError.invalid("Failed to initialize LocalCache: config didn't contain a valid 'size' field.")
        try:
            size = int(settings["size"])
        except ValueError:
            size = -1
        if size < 0:
            raise NaiadError.invalid(
                f"Failed to initialize LocalCache: 'size' must be a number of bytes, got '{settings['size']}'"
            )
        unknown = sorted(set(settings) - {"size"})
        if unknown:
            log.warning("local cache: setting(s) %s have no effect (it takes 'size')", ", ".join(unknown))
        log.info("Response Cache is created with size %d", size)
        return cls(size)

    @property
    def used(self) -> int:
        return self._used

    def __len__(self) -> int:
        return len(self._entries)

    async def lookup(self, key: bytes) -> bytes | None:
        started = time.monotonic_ns()
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
            self._entries.move_to_end(key)
        self.lookup_ns += time.monotonic_ns() - started
        return entry

    async def insert(self, key: bytes, entry: bytes) -> bool:
        started = time.monotonic_ns()
        try:
            if key in self._entries:
                return False
            if len(entry) > self.size:
                log.error(
                    "Failed to insert key into response cache: entry of %d bytes is greater than total cache size: %d",
                    len(entry),
                    self.size,
                )
                return True
            while self._used + len(entry) > self.size:
                _, evicted = self._entries.popitem(last=False)
                self._used -= len(evicted)
                self.evictions += 1
            self._entries[key] = entry
            self._used += len(entry)
            return True
        finally:
            self.insert_ns += time.monotonic_ns() - started

    def gauges(self) -> dict[str, float]:
        """Triton's local-cache gauges (durations in microseconds)."""
        return {
            "nv_cache_util": self._used / self.size if self.size else 0.0,
            "nv_cache_num_entries": len(self._entries),
            "nv_cache_num_hits": self.hits,
            "nv_cache_num_misses": self.misses,
            "nv_cache_num_lookups": self.hits + self.misses,
            "nv_cache_num_evictions": self.evictions,
            "nv_cache_lookup_duration": self.lookup_ns // 1000,
            "nv_cache_insertion_duration": self.insert_ns // 1000,
        }

    async def close(self) -> None:
        self._entries.clear()
        self._used = 0
