"""A served request leaves nothing for the cyclic garbage collector, and the long-lived heap is
frozen out of its way (naiad.models.heap): the two causes of the 25-35 ms pauses once measured at 64
clients. Asserted through object lifetimes, not timings."""

from __future__ import annotations

import asyncio
import gc
import weakref

import numpy as np
import pytest
from scheduling_helpers import serving, write_model

from naiad import InferenceRequest, Tensor
from naiad.models import heap

CONFIGS = {
    "direct": "",
    "dynamic": "dynamic_batching { max_queue_delay_microseconds: 100 }",
}


@pytest.mark.parametrize("batching", list(CONFIGS))
def test_a_served_request_is_freed_by_reference_counting(tmp_path, batching):
    write_model(
        tmp_path,
        "m",
        f"""backend: "numpy" max_batch_size: 8
input [{{name:"INPUT0" data_type: TYPE_FP32 dims:[4]}},{{name:"INPUT1" data_type: TYPE_FP32 dims:[4]}}]
output [{{name:"OUTPUT0" data_type: TYPE_FP32 dims:[4]}},{{name:"OUTPUT1" data_type: TYPE_FP32 dims:[4]}}]
parameters {{key:"op" value {{string_value:"add_sub"}}}}
{CONFIGS[batching]}""",
    )

    async def main() -> None:
        async with serving(tmp_path) as server:
            a = np.ones((1, 4), np.float32)
            await server.infer(InferenceRequest("m", [Tensor.from_numpy("INPUT0", a), Tensor.from_numpy("INPUT1", a)]))
            gc.collect()
            gc.disable()  # from here only reference counting frees objects
            try:
                # The request and response are slotted: watch the arrays only they hold.
                b = np.full((1, 4), 2.0, np.float32)
                request = InferenceRequest("m", [Tensor.from_numpy("INPUT0", a), Tensor.from_numpy("INPUT1", b)])
                response = await server.infer(request)
                np.testing.assert_array_equal(response.outputs[0].data, a + b)
                gone = [weakref.ref(b), weakref.ref(response.outputs[0].data)]
                del request, response, b
                await asyncio.sleep(0.05)  # let every callback of the request run
                assert [ref() is None for ref in gone] == [True, True]
            finally:
                gc.enable()

    asyncio.run(main())


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_settle_freezes_what_lives_and_frees_what_was_dropped():
    kept = _Cycle()
    dropped = _Cycle()
    watch = weakref.ref(dropped)
    heap.settle()
    assert gc.get_freeze_count() > 0
    del dropped
    gc.collect()  # a frozen cycle is out of the collector's reach...
    assert watch() is not None
    heap.settle()  # ...until the next settle returns it (an unloaded model's cycles)
    assert watch() is None
    assert kept.me is kept
    gc.unfreeze()


def test_the_server_freezes_its_heap_after_loading(tmp_path):
    write_model(
        tmp_path,
        "m",
        """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]""",
    )

    async def main() -> None:
        gc.unfreeze()
        async with serving(tmp_path) as server:
            assert server.model("m").is_ready()
            await asyncio.sleep(heap._DELAY_S + 0.3)
            assert gc.get_freeze_count() > 0
        gc.unfreeze()

    asyncio.run(main())
