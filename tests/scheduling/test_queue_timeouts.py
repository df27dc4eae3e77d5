"""Queue policy timeouts of the dynamic batcher (scheduling/priority_queue.py), as Triton
applies them: a request that waits past its timeout is rejected (REJECT) or moved behind
the others (DELAY); a request may shorten its level's default, never extend it, and has no
timeout where there is no default. Each is checked at the nanosecond the timeout ends, on
a clock the test moves by hand (clocked_batcher.py), while a held execution keeps the only
instance busy."""

from __future__ import annotations

import asyncio

from clocked_batcher import MS, US, clocked_batcher

from naiad import ErrorCode


def one_at_a_time(batching: str) -> str:
    return f"""backend: "numpy" max_batch_size: 1
input [{{name:"INPUT0" data_type: TYPE_FP32 dims:[1]}}]
output [{{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}}]
dynamic_batching {{ {batching} }}"""


LONG_DEFAULT = "default_timeout_microseconds: 600000000 allow_timeout_override: true"


def test_a_request_that_waited_its_timeout_is_rejected_and_not_a_nanosecond_before():
    async def go():
        async with clocked_batcher(one_at_a_time(f"default_queue_policy {{ {LONG_DEFAULT} }}")) as batcher:
            batcher.hold()
            batcher.send("long")
            await batcher.clock.advance(0)
            # The others may wait 20 ms (a request may shorten the default timeout).
            for i in range(2):
                batcher.send(f"short{i}", timeout=20 * MS // US)
            await batcher.clock.advance(20 * MS - 1)
            assert batcher.answers == {}
            await batcher.clock.advance(1)
            for rid in ("short0", "short1"):
                error = batcher.error(rid)
                assert error.code is ErrorCode.UNAVAILABLE
                assert error.message == "model 'm': request timed out in the queue after 20000 us"
            await batcher.release()
            assert batcher.answers["long"].error is None
            assert batcher.batches == [["long"]]

    asyncio.run(go())


def test_a_request_cannot_extend_its_levels_default_timeout():
    # Level 1 has no timeout (so the first request surely runs); level 2 a 20 ms default.
    batching = """priority_levels: 2 default_priority_level: 2
        priority_queue_policy { key: 2 value { default_timeout_microseconds: 20000 allow_timeout_override: true } }"""

    async def go():
        async with clocked_batcher(one_at_a_time(batching)) as batcher:
            batcher.hold()
            batcher.send("first", priority=1)
            await batcher.clock.advance(0)
            # Asks for 600 s, but the default (20 ms) is the most it may wait.
            batcher.send("late", timeout=600_000_000)
            await batcher.clock.advance(20 * MS - 1)
            assert "late" not in batcher.answers
            await batcher.clock.advance(1)
            assert batcher.error("late").code is ErrorCode.UNAVAILABLE
            await batcher.release()
            assert batcher.batches == [["first"]]

    asyncio.run(go())


def test_a_request_timeout_needs_a_default_to_shorten():
    async def go():
        async with clocked_batcher(one_at_a_time("default_queue_policy { allow_timeout_override: true }")) as batcher:
            batcher.hold()
            batcher.send("a")
            await batcher.clock.advance(0)
            # As in Triton: with no default timeout, the request's 1 ms does not apply.
            batcher.send("b", timeout=1_000)
            await batcher.clock.advance(10_000 * MS)
            assert batcher.answers == {}
            await batcher.release()
            assert batcher.batches == [["a"], ["b"]]
            assert all(answer.error is None for answer in batcher.answers.values())

    asyncio.run(go())


def test_the_delay_action_moves_a_timed_out_request_behind_the_others():
    async def go():
        policy = f"default_queue_policy {{ timeout_action: DELAY {LONG_DEFAULT} }}"
        async with clocked_batcher(one_at_a_time(policy)) as batcher:
            batcher.hold()
            batcher.send("A")
            await batcher.clock.advance(0)
            batcher.send("B", timeout=10 * MS // US)
            batcher.send("C")
            batcher.send("D")
            # B times out while A runs: delayed, not rejected.
            await batcher.clock.advance(10 * MS)
            assert batcher.answers == {}
            await batcher.release()
            assert batcher.batches == [["A"], ["C"], ["D"], ["B"]]
            assert all(answer.error is None for answer in batcher.answers.values())

    asyncio.run(go())


def test_before_its_timeout_a_delayed_action_request_keeps_its_place():
    async def go():
        policy = f"default_queue_policy {{ timeout_action: DELAY {LONG_DEFAULT} }}"
        async with clocked_batcher(one_at_a_time(policy)) as batcher:
            batcher.hold()
            batcher.send("A")
            await batcher.clock.advance(0)
            batcher.send("B", timeout=10 * MS // US)
            batcher.send("C")
            await batcher.clock.advance(10 * MS - 1)
            await batcher.release()
            assert batcher.batches == [["A"], ["B"], ["C"]]

    asyncio.run(go())
