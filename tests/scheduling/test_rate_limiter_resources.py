"""How many of each resource the rate limiter makes available, by Triton's rules: the
counts `--rate-limit-resource` gives per device, per every device or (for a global
resource) anywhere; without the flag, the most any instance asks for."""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from naiad.errors import NaiadError
from naiad.protos import model_config_pb2 as pb
from naiad.scheduling.rate_limiter import RateLimiter, parse_rate_limit_resource


def _config(name: str, resources: str) -> pb.ModelConfig:
    return text_format.Parse(
        f'name: "{name}" instance_group [{{name: "g" rate_limiter {{ resources [{resources}] }} }}]', pb.ModelConfig()
    )


def _admit(limiter: RateLimiter, name: str, resources: str, device: int = 0) -> None:
    limiter.admit(_config(name, resources), [("g", device)])


def _limiter(*flags: str) -> RateLimiter:
    return RateLimiter("execution_count", [parse_rate_limit_resource(flag) for flag in flags])


def test_without_flags_a_resource_has_the_most_any_instance_asks_for():
    limiter = _limiter()
    _admit(limiter, "a", '{name: "R" count: 4}')
    _admit(limiter, "b", '{name: "R" count: 5}')  # raises the count, never fails


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
    _admit(limiter, "on_one", '{name: "R2" count: 8}', device=1)
    _admit(limiter, "global", '{name: "R3" global: true count: 2}')


def test_the_limiter_off_admits_anything():
    limiter = RateLimiter("off", [parse_rate_limit_resource("R:1")])
    assert limiter.admit(_config("greedy", '{name: "R" count: 9}'), [("g", 0)]) == [None]
