"""Instance groups: how a config's groups expand into instances, and the load errors."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from scheduling_helpers import model_of, serving, write_model

from naiad import ConfigError, InferenceRequest, Tensor
from naiad.config.model_config import parse_config_text, validate_config
from naiad.devices import gpu_ids
from naiad.models.instance_groups import expand_instance_groups

BASE = """name: "m" backend: "numpy" max_batch_size: 1
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}]
"""


def config(groups: str):
    return validate_config(parse_config_text(BASE + groups, "m"), "m")


def describe(contexts):
    return [(c.name, c.kind, c.device_id, c.group_name) for c in contexts]


def test_no_group_means_one_cpu_instance():
    assert describe(expand_instance_groups(config(""), gpus=[])) == [("m_0_0", "CPU", 0, "m_0")]


def test_counts_kinds_and_several_groups():
    groups = """instance_group [{count: 2 kind: KIND_CPU}, {name: "g" count: 1 kind: KIND_GPU gpus: [1]},
                                {count: 1 kind: KIND_MODEL}]"""
    assert describe(expand_instance_groups(config(groups), gpus=[0, 1])) == [
        ("m_0_0", "CPU", 0, "m_0"),
        ("m_0_1", "CPU", 0, "m_0"),
        ("g_0", "GPU", 1, "g"),
        ("m_2_0", "MODEL", 0, "m_2"),
    ]


def test_gpu_group_without_gpus_listed_places_count_on_every_gpu():
    contexts = expand_instance_groups(config("instance_group [{count: 2 kind: KIND_GPU}]"), gpus=[0, 1])
    assert [(c.device_id, c.name) for c in contexts] == [(0, "m_0_0"), (0, "m_0_1"), (1, "m_0_2"), (1, "m_0_3")]


def test_many_instances_expand_in_linear_time():
    """Each instance's name once counted the instances before it (quadratic: a count of
    100000 took minutes, found by tests/security/test_fuzz.py); the names stay as they were."""
    contexts = expand_instance_groups(config("instance_group [{count: 10000 kind: KIND_CPU}]"), gpus=[])
    assert len(contexts) == 10000 and contexts[-1].name == "m_0_9999" and contexts[-1].index == 9999


def test_more_instances_than_the_bound_on_this_machines_gpus_is_a_clear_error():
    # 4000 per GPU on three GPUs: the config alone (no `gpus` list) passed validate_config.
    with pytest.raises(ConfigError) as info:
        expand_instance_groups(config("instance_group [{count: 4000 kind: KIND_GPU}]"), gpus=[0, 1, 2])
    assert (
        info.value.message
        == "model 'm': instance_group: 12000 instances in all; a model version may have at most 10000"
    )


def test_auto_is_gpu_when_there_is_one_and_cpu_otherwise():
    groups = "instance_group [{count: 1 kind: KIND_AUTO}]"
    assert describe(expand_instance_groups(config(groups), gpus=[0])) == [("m_0_0", "GPU", 0, "m_0")]
    assert describe(expand_instance_groups(config(groups), gpus=[])) == [("m_0_0", "CPU", 0, "m_0")]


def test_gpu_kind_without_a_gpu_is_a_clear_error():
    with pytest.raises(ConfigError) as info:
        expand_instance_groups(config("instance_group [{kind: KIND_GPU}]"), gpus=[])
    assert "KIND_GPU" in info.value.message and "no" in info.value.message
    with pytest.raises(ConfigError) as info:
        expand_instance_groups(config("instance_group [{kind: KIND_GPU gpus: [3]}]"), gpus=[0])
    assert "[3]" in info.value.message


def test_server_creates_every_instance_of_every_group(tmp_path):
    write_model(
        tmp_path,
        "m",
        BASE
        # Each execution waits until three are running at once: only three instances can answer.
        + """parameters [{key:"op" value {string_value:"rendezvous"}}, {key:"barrier" value {string_value:"groups"}},
            {key:"parties" value {string_value:"3"}}]
instance_group [{count: 2 kind: KIND_CPU}, {name: "extra" count: 1 kind: KIND_CPU}]""",
    )

    async def go():
        async with serving(tmp_path) as server:
            assert [r.name for r in server.model("m").runners] == ["m_0_0", "m_0_1", "extra_0"]
            requests = [
                InferenceRequest("m", [Tensor.from_numpy("INPUT0", np.full((1, 1), i, np.float32))], id=str(i))
                for i in range(3)
            ]
            responses = await asyncio.gather(*(server.infer(request) for request in requests))
            assert [float(r.output("OUTPUT0").data[0, 0]) for r in responses] == [0.0, 1.0, 2.0]
            executions = model_of(server, "m").executions
            assert sorted(e.instance for e in executions) == ["extra_0", "m_0_0", "m_0_1"]

    asyncio.run(go())


@pytest.mark.skipif(bool(gpu_ids()), reason="this machine has a GPU")
def test_gpu_model_fails_to_load_on_a_machine_without_gpu(tmp_path):
    write_model(tmp_path, "m", BASE + "instance_group [{kind: KIND_GPU}]")

    async def go():
        from numpy_backend import NumpyPlugin

        from naiad import Server, ServerOptions

        server = Server(
            ServerOptions([str(tmp_path)], backend_plugins=[NumpyPlugin()], load_backend_entry_points=False)
        )
        await server.start()
        try:
            assert not server.model_ready("m")
            assert any("KIND_GPU" in failure for failure in server.startup_failures)
        finally:
            await server.stop()

    asyncio.run(go())
