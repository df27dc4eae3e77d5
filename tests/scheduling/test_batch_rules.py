"""The batching rules as Triton applies them (scheduling/batch_policy.py, the sequence
batcher's strategies), each checked at the nanosecond it is about: the batchers run
in-process on a clock the test moves by hand (clocked_batcher.py), so no test waits for a
delay and none depends on how loaded the machine is. One rule is also timed end to end,
through tritonclient and a server process, in test_batch_delay_end_to_end.py."""

from __future__ import annotations

import asyncio

import pytest
from clocked_batcher import MS, US, clocked_batcher

DELAY = 3_000 * MS


def dynamic(batching: str, max_batch_size: int = 8) -> str:
    return f"""backend: "numpy" max_batch_size: {max_batch_size}
input [{{name:"INPUT0" data_type: TYPE_FP32 dims:[1]}}]
output [{{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}}]
dynamic_batching {{ {batching} }}"""


def sequences(strategy: str, max_batch_size: int = 4, idle_us: int = 0) -> str:
    idle = f"max_sequence_idle_microseconds: {idle_us}" if idle_us else ""
    return f"""backend: "numpy" max_batch_size: {max_batch_size}
input [{{name:"INPUT0" data_type: TYPE_FP32 dims:[1]}}]
output [{{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}}]
sequence_batching {{ {strategy} {idle} }}"""


def test_a_batch_of_a_preferred_size_goes_at_once_and_another_waits_exactly_the_delay():
    async def go():
        config = dynamic(f"preferred_batch_size: [4, 6] max_queue_delay_microseconds: {DELAY // US}")
        async with clocked_batcher(config) as batcher:
            # 4 is a preferred size and nothing else is queued: no reason to wait.
            batcher.send("four", rows=4)
            await batcher.clock.advance(0)
            assert batcher.batches == [["four"]]
            # 5 is none: it waits the whole delay for company that never comes.
            batcher.send("five", rows=5)
            await batcher.clock.advance(DELAY - 1)
            assert batcher.batches == [["four"]] and "five" not in batcher.answers
            await batcher.clock.advance(1)
            assert batcher.batches == [["four"], ["five"]]
            assert batcher.answers["five"].error is None and batcher.answers["five"].outputs[0].shape == (5, 1)

    asyncio.run(go())


def test_a_request_that_would_pass_the_largest_preferred_size_ends_the_batch():
    async def go():
        config = dynamic(f"preferred_batch_size: [2, 6] max_queue_delay_microseconds: {DELAY // US}")
        async with clocked_batcher(config) as batcher:
            batcher.send("three", rows=3)
            await batcher.clock.advance(1 * MS)
            assert batcher.batches == []  # 3 is no preferred size: it waits
            # 3 + 4 = 7 passes the largest preferred size (6): the 3 goes alone, at once.
            batcher.send("four", rows=4)
            await batcher.clock.advance(0)
            assert batcher.batches == [["three"]]
            # Alone, 4 is no preferred size: it waits its own delay, from its own arrival.
            await batcher.clock.advance(DELAY - 1)
            assert batcher.batches == [["three"]]
            await batcher.clock.advance(1)
            assert batcher.batches == [["three"], ["four"]]

    asyncio.run(go())


def test_the_delay_counts_from_the_oldest_request_of_the_batch():
    async def go():
        config = dynamic(f"preferred_batch_size: [4] max_queue_delay_microseconds: {DELAY // US}")
        async with clocked_batcher(config) as batcher:
            batcher.send("old")
            await batcher.clock.advance(2_000 * MS)
            batcher.send("new", rows=2)
            # Three rows are no preferred size: both wait until the old one has waited the delay.
            await batcher.clock.advance(1_000 * MS - 1)
            assert batcher.batches == []
            await batcher.clock.advance(1)
            assert batcher.batches == [["old", "new"]]

    asyncio.run(go())


def test_requests_queued_together_make_a_preferred_batch_and_the_rest_waits_the_delay():
    async def go():
        config = dynamic(f"preferred_batch_size: [4] max_queue_delay_microseconds: {300 * MS // US}")
        async with clocked_batcher(config) as batcher:
            for i in range(5):
                batcher.send(f"r{i}")
            await batcher.clock.advance(300 * MS - 1)
            assert batcher.batches == [["r0", "r1", "r2", "r3"]]
            await batcher.clock.advance(1)
            assert batcher.batches == [["r0", "r1", "r2", "r3"], ["r4"]]

    asyncio.run(go())


@pytest.mark.parametrize("waited, batches", [(200 * MS - 1, [2, 2, 2, 2, 2]), (200 * MS, [8, 2])])
def test_after_the_delay_a_batch_grows_past_the_preferred_size_up_to_max_batch_size(waited, batches):
    """Ten requests queue while a batch holds the only instance. Freed before they have
    waited the delay, it takes preferred batches of 2; after, as many as max_batch_size
    allows (8, past the preferred 2), and then the last two make a preferred batch."""

    async def go():
        config = dynamic(f"preferred_batch_size: [2] max_queue_delay_microseconds: {200 * MS // US}")
        async with clocked_batcher(config) as batcher:
            batcher.hold()
            batcher.send("blocker", rows=2)
            await batcher.clock.advance(0)
            for i in range(10):
                batcher.send(f"s{i}")
            await batcher.clock.advance(waited)
            assert batcher.batches == [["blocker"]]
            await batcher.release()
            assert [len(batch) for batch in batcher.batches[1:]] == batches
            assert sum(batcher.batches, []) == ["blocker", *(f"s{i}" for i in range(10))]

    asyncio.run(go())


def test_a_batch_short_of_the_requests_last_answered_waits_out_a_sub_millisecond_delay():
    """Clients in a closed loop come back one by one after their answers. A batch with
    fewer requests than the last execution answered waits for the rest, to the microsecond
    (the precise timer), until the queue delay is over, as Triton's batcher waits: sent after
    a turn of the loop it would leave the late ones a whole execution behind. A request
    short of nobody goes after a turn of the loop."""

    async def go():
        async with clocked_batcher(dynamic("max_queue_delay_microseconds: 900")) as batcher:
            for i in range(4):
                batcher.send(f"a{i}")
            await batcher.clock.advance(0)
            assert batcher.batches == [["a0", "a1", "a2", "a3"]]
            # One of the four is back: it waits the whole delay for the other three.
            batcher.send("alone")
            await batcher.clock.advance(900 * US - 1)
            assert batcher.batches[1:] == []
            await batcher.clock.advance(1)
            assert batcher.batches[1:] == [["alone"]]
            # The last execution answered one request: the next lone one is not held.
            batcher.send("alone again")
            await batcher.clock.advance(0)
            assert batcher.batches[2:] == [["alone again"]]
            # Four again, then three back at once and the fourth 100 us later: one batch.
            for i in range(4):
                batcher.send(f"b{i}")
            await batcher.clock.advance(0)
            for i in range(3):
                batcher.send(f"c{i}")
            await batcher.clock.advance(100 * US)
            assert batcher.batches[4:] == []
            batcher.send("c3")
            await batcher.clock.advance(0)
            assert batcher.batches[3:] == [["b0", "b1", "b2", "b3"], ["c0", "c1", "c2", "c3"]]

    asyncio.run(go())


def test_direct_sequences_wait_for_the_minimum_share_of_all_slots():
    async def go():
        strategy = f"direct {{ max_queue_delay_microseconds: {DELAY // US} minimum_slot_utilization: 0.5 }}"
        async with clocked_batcher(sequences(strategy)) as batcher:
            # One ready slot of four is a quarter, under the minimum of a half: it waits the delay.
            batcher.send("a1", sequence_id=501, sequence_start=True)
            await batcher.clock.advance(DELAY - 1)
            assert batcher.batches == []
            await batcher.clock.advance(1)
            assert batcher.batches == [["a1"]]
            # Sequence 501 ready again: still a quarter (its slot is one of four), so it waits...
            batcher.send("a2", sequence_id=501)
            await batcher.clock.advance(1 * MS)
            assert batcher.batches == [["a1"]]
            # ...until a second sequence makes two of four: both go at once.
            batcher.send("b1", sequence_id=502, sequence_start=True)
            await batcher.clock.advance(0)
            assert batcher.batches == [["a1"], ["a2", "b1"]]

    asyncio.run(go())


def test_oldest_sequences_batch_by_preferred_size_and_delay():
    async def go():
        strategy = (
            "oldest { max_candidate_sequences: 4 preferred_batch_size: [2] "
            f"max_queue_delay_microseconds: {DELAY // US} }}"
        )
        async with clocked_batcher(sequences(strategy)) as batcher:
            batcher.send("a1", sequence_id=1, sequence_start=True)
            await batcher.clock.advance(DELAY - 1)
            assert batcher.batches == []
            await batcher.clock.advance(1)
            assert batcher.batches == [["a1"]]
            # Two sequences ready make the preferred size: they go at once.
            batcher.send("a2", sequence_id=1)
            batcher.send("b1", sequence_id=2, sequence_start=True)
            await batcher.clock.advance(0)
            assert batcher.batches == [["a1"], ["a2", "b1"]]

    asyncio.run(go())


def test_a_sequence_idle_for_max_sequence_idle_is_kept_and_a_nanosecond_more_is_released():
    idle = 200 * MS

    async def go():
        async with clocked_batcher(sequences("direct { }", max_batch_size=0, idle_us=idle // US)) as batcher:
            batcher.send("a1", sequence_id=1, sequence_start=True)
            await batcher.clock.advance(idle)
            batcher.send("a2", sequence_id=1)
            await batcher.clock.advance(idle + 1)
            batcher.send("a3", sequence_id=1)
            await batcher.clock.advance(0)
            assert batcher.batches == [["a1"], ["a2"]]
            assert batcher.answers["a2"].error is None
            error = batcher.error("a3")
            assert "sequence 1" in error.message and "START flag" in error.message

    asyncio.run(go())


def test_an_idle_sequence_gives_its_slot_to_a_waiting_one():
    idle = 200 * MS

    async def go():
        async with clocked_batcher(sequences("direct { }", max_batch_size=0, idle_us=idle // US)) as batcher:
            # Sequence 1 holds the only slot and never ends: sequence 2 waits for it.
            batcher.send("a1", sequence_id=1, sequence_start=True)
            batcher.send("b1", sequence_id=2, sequence_start=True, sequence_end=True)
            await batcher.clock.advance(idle)
            assert batcher.batches == [["a1"]]
            # Idle sequences are looked for every quarter of the idle time: the slot is given
            # at the first look after the sequence has been idle longer than the limit.
            await batcher.clock.advance(idle // 4)
            assert batcher.batches == [["a1"], ["b1"]]

    asyncio.run(go())
