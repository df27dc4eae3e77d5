"""The response cache in front of a model's scheduler.

A request whose key is in the cache is answered from it without reaching the model; any
other goes to the scheduler, and its successful final response is stored before it is
delivered (so its request time includes the insertion, as in Triton). Concurrent identical
requests may each run the model; the first to finish stores its answer and every one gets
its own model's answer, never a partial one. Statistics follow Triton's: a hit counts as
a success with its queue time and `cache_hit`, no inference or execution; a miss counts
`cache_miss` with the lookup and insertion time (not when another request stored the key
first, as Triton's ALREADY_EXISTS).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from ..cache.response_cache import ResponseCache, decode_response, encode_response, request_key
from ..inference import InferenceResponse
from ..observability.statistics import ModelStatistics
from .job import Job

__all__ = ["enqueue_through_cache"]

log = logging.getLogger("naiad.cache")


def enqueue_through_cache(
    cache: ResponseCache,
    statistics: ModelStatistics,
    job: Job,
    model_name: str,
    version: str,
    enqueue: Callable[[Job], None],
    tasks: set[asyncio.Task[None]],
) -> None:
    """Answer `job` from `cache`, or `enqueue` it and store what it answers. The lookup and
    insertion run as tasks held in `tasks` until done (a task nobody holds may be collected)."""
    _hold(tasks, _through_cache(cache, statistics, job, model_name, version, enqueue, tasks))


def _hold(tasks: set[asyncio.Task[None]], work: Coroutine[Any, Any, None]) -> None:
    task = asyncio.get_running_loop().create_task(work)
    tasks.add(task)
    task.add_done_callback(tasks.discard)


async def _through_cache(
    cache: ResponseCache,
    statistics: ModelStatistics,
    job: Job,
    model_name: str,
    version: str,
    enqueue: Callable[[Job], None],
    tasks: set[asyncio.Task[None]],
) -> None:
    key = request_key(job.request, model_name, version)
    started = time.monotonic_ns()
    entry = await cache.lookup(key)
    lookup_ns = time.monotonic_ns() - started
    if entry is not None:
        statistics.queue.add(started - job.enqueued_ns)
        statistics.cache_hit.add(lookup_ns)
        response = decode_response(entry)
        response.model_name, response.model_version, response.id = model_name, version, job.request.id
        job.finish(response)
        return
    deliver = job.deliver

    def store_then_deliver(response: InferenceResponse) -> None:
        if not response.final or response.error is not None:
            deliver(response)  # errors are never stored
            return
        if not all(tensor.on_host for tensor in response.outputs):
            deliver(response)  # written on the GPU into the client's region: no bytes to store
            return
        try:
            encoded = encode_response(response)
        except (TypeError, ValueError) as exc:  # parameters JSON cannot hold: answer uncached
            log.warning("model '%s': response not cached: %s", model_name, exc)
            deliver(response)
            return
        _hold(tasks, _store(encoded, response))

    async def _store(encoded: bytes, response: InferenceResponse) -> None:
        inserting = time.monotonic_ns()
        try:
            if await cache.insert(key, encoded):
                miss_ns = lookup_ns + time.monotonic_ns() - inserting
                statistics.cache_miss.add(miss_ns)
        finally:
            deliver(response)

    job.deliver = store_then_deliver
    enqueue(job)
