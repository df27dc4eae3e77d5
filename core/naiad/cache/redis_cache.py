"""`--cache-config redis,host=H --cache-config redis,port=P`: responses kept in a Redis server.

Takes Triton's redis-cache settings (`host`, `port`, `user`, `password`, `db`,
`connect_timeout` and `socket_timeout` in milliseconds, `pool_size`, `tls_enabled`,
`cert`, `key`, `cacert`) and its credential variables `TRITONCACHE_REDIS_USERNAME` /
`TRITONCACHE_REDIS_PASSWORD`. The server is pinged at start-up, so a wrong address or
password fails the start as in Triton. Memory is bounded by the Redis server's own
`maxmemory` policy, as with Triton. When Redis goes away later, requests run the model as
if there were no cache and the failure is logged.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ..errors import NaiadError

__all__ = ["RedisCache"]

log = logging.getLogger("naiad.cache")

# Keys are namespaced so a Redis shared with other applications keeps them apart.
_PREFIX = b"naiad:response:"


class RedisCache:
    def __init__(self, client: Any) -> None:
        self._client = client

    @classmethod
    async def connect(cls, settings: dict[str, str]) -> RedisCache:
        if "host" not in settings or "port" not in settings:
            raise NaiadError.invalid(
                "Failed to initialize RedisCache, didn't specify address. Must at a minimum specify 'host' and "
                "'port' in the configuration - e.g. naiad serve --cache-config redis,host=redis --cache-config "
                "redis,port=6379"
            )
        try:
            import redis.asyncio as aioredis
        except ImportError:
            raise NaiadError.invalid(
                "--cache-config redis needs the redis client library: pip install 'naiad[redis]'"
            ) from None
        host = settings["host"]
        port = _number(settings, "port", 0)
        options: dict[str, Any] = {
            "host": host,
            "port": port,
            "db": _number(settings, "db", 0),
            "username": settings.get("user", os.environ.get("TRITONCACHE_REDIS_USERNAME")),
            "password": settings.get("password", os.environ.get("TRITONCACHE_REDIS_PASSWORD")),
            "socket_connect_timeout": _seconds(settings, "connect_timeout"),
            "socket_timeout": _seconds(settings, "socket_timeout"),
            "max_connections": _number(settings, "pool_size", 0) or None,
        }
        if settings.get("tls_enabled") == "true":
            options.update(
                ssl=True,
                ssl_certfile=settings.get("cert"),
                ssl_keyfile=settings.get("key"),
                ssl_ca_certs=settings.get("cacert"),
            )
        client = aioredis.Redis(**options)
        try:
            await client.ping()
        except Exception as exc:  # noqa: BLE001 - any failure to reach Redis fails the start
            await client.aclose()
            raise NaiadError.unavailable(
                f"Failed to initialize RedisCache: failed to connect to Redis ({host}:{port}): "
                f"{type(exc).__name__}: {exc}"
            ) from None
        log.info("response cache: connected to Redis at %s:%d", host, port)
        return cls(client)

    async def lookup(self, key: bytes) -> bytes | None:
        try:
            entry = await self._client.get(_PREFIX + key)
        except Exception as exc:  # noqa: BLE001 - a cache outage must not fail requests
            log.error("Failed to retrieve key from Redis: %s", exc)
            return None
        return bytes(entry) if entry is not None else None

    async def insert(self, key: bytes, entry: bytes) -> bool:
        try:
            # NX: the first of concurrent identical requests stores its answer.
            stored = await self._client.set(_PREFIX + key, entry, nx=True)
        except Exception as exc:  # noqa: BLE001 - a cache outage must not fail requests
            log.error("Failed to insert key into Redis: %s", exc)
            return True
        return bool(stored)

    def gauges(self) -> dict[str, float]:
        return {}  # as Triton's redis cache: Redis reports its own figures

    async def close(self) -> None:
        await self._client.aclose()


def _number(settings: dict[str, str], key: str, default: int) -> int:
    if key not in settings:
        return default
    try:
        return int(settings[key])
    except ValueError:
        raise NaiadError.invalid(f"--cache-config redis,{key}: expected a number, got '{settings[key]}'") from None


def _seconds(settings: dict[str, str], key: str) -> float | None:
    """Triton's redis timeouts are milliseconds, 0 meaning wait forever."""
    ms = _number(settings, key, 0)
    return ms / 1000 if ms > 0 else None
