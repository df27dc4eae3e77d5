"""How many of each resource the rate limiter makes available, by Triton's rules: the
counts `--rate-limit-resource` gives per device, per every device or (for a global
resource) anywhere; without the flag, the most any instance asks for."""

from __future__ import annotations

import asyncio

import pytest
from google.protobuf import text_format

from naiad.errors import NaiadError
from naiad.protos import model_config_pb2 as pb
from naiad.scheduling.rate_limiter import InstanceGate, RateLimiter, parse_rate_limit_resource


def _config(name: str, resources: str) -> pb.ModelConfig:
    return text_format.Parse(
        f'name: "{name}" instance_group [{{name: "g" rate_limiter {{ resources [{resources}] }} }}]', pb.ModelConfig()
    )


def _admit(limiter: RateLimiter, name: str, resources: str, device: int = 0) -> None:
    limiter.admit(_config(name, resources), [("g", device)])


def _limiter(*flags: str) -> RateLimiter:
    return RateLimiter("execution_count", [parse_rate_limit_resource(flag) for flag in flags])


def _gate(limiter: RateLimiter, name: str, resources: str, device: int = 0) -> InstanceGate:
    (gate,) = limiter.admit(_config(name, resources), [("g", device)])
    assert gate is not None
    return gate


async def _one_after_the_other(first: InstanceGate, second: InstanceGate) -> None:
    """`second` cannot run beside `first`: it gets its resources once `first` gives them back."""
    await first.acquire()
    waiting = asyncio.ensure_future(second.acquire())
    await asyncio.sleep(0.05)
    assert not waiting.done()
    first.release()
    await asyncio.wait_for(waiting, 5)
    second.release()


async def _side_by_side(first: InstanceGate, second: InstanceGate) -> None:
    await first.acquire()
    await asyncio.wait_for(second.acquire(), 5)
    first.release()
    second.release()


def test_without_flags_a_resource_has_the_most_any_instance_asks_for():
    limiter = _limiter()
    a = _gate(limiter, "a", '{name: "R" count: 4}')
    b = _gate(limiter, "b", '{name: "R" count: 5}')  # raises the count, never fails
    # Five of R: either runs alone (b's five included), never both (nine).
    asyncio.run(_one_after_the_other(a, b))
    asyncio.run(_one_after_the_other(b, a))


@pytest.mark.parametrize(
    "flags, resources, device, limit",
    [
        (("R2:5:0", "R2:8:1"), '{name: "R2" count: 8}', 0, 5),  # device 0 has 5
        (("R1:10",), '{name: "R1" count: 11}', 1, 10),  # no device: every device
        (("R1:10",), '{name: "R9" count: 1}', 0, 0),  # a resource no flag names has none
        (("R3:2:1",), '{name: "R3" global: true count: 3}', 0, 2),  # global: the count given anywhere
    ],
)
def test_flags_set_the_counts_and_a_model_asking_for_more_fails(flags, resources, device, limit):
    limiter = _limiter(*flags)
    with pytest.raises(NaiadError) as info:
        _admit(limiter, "greedy", resources, device)
    name = resources.split('"')[1]
    needed = int(resources.rsplit("count: ", 1)[1].rstrip("}"))
    assert info.value.message == (
        f"failed to load 'greedy': Resource count for \"{name}\" is limited to {limit} which will prevent "
        f"scheduling of one or more model instances, the minimum required count is {needed}"
    )


def test_device_counts_apply_to_their_device():
    limiter = _limiter("R2:5:0", "R2:8:1", "R3:2")
    on_one = _gate(limiter, "on_one", '{name: "R2" count: 8}', device=1)
    again_on_one = _gate(limiter, "again_on_one", '{name: "R2" count: 1}', device=1)
    on_zero = _gate(limiter, "on_zero", '{name: "R2" count: 5}', device=0)
    first_global = _gate(limiter, "global", '{name: "R3" global: true count: 2}')
    second_global = _gate(limiter, "global_too", '{name: "R3" global: true count: 1}', device=1)
    # Device 1's eight are all taken by one instance; device 0's five are its own.
    asyncio.run(_one_after_the_other(on_one, again_on_one))
    asyncio.run(_side_by_side(on_one, on_zero))
    # A global resource is one pool whatever the device: two of R3, not two per device.
    asyncio.run(_one_after_the_other(first_global, second_global))


def test_the_limiter_off_admits_anything():
    limiter = RateLimiter("off", [parse_rate_limit_resource("R:1")])
    assert limiter.admit(_config("greedy", '{name: "R" count: 9}'), [("g", 0)]) == [None]
