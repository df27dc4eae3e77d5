"""Model warmup: the `model_warmup` samples of a config, run on every instance at load,
before the model serves (Triton's ModelWarmup).

Each sample is `batch_size` requests (each of batch 1 when the model batches) executed
together on the instance `count` times; inputs are zeros, random bytes, or the contents of
a file in the model's `warmup/` directory. A sample that fails fails the load with
Triton's words. As in Triton, warmup requests count in the model's statistics.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import numpy as np

from ..config.model_config import ModelConfig
from ..datatypes import config_type_to_datatype, deserialize_bytes_tensor, element_size, numpy_dtype
from ..errors import NaiadError
from ..inference import InferenceRequest, InferenceResponse
from ..observability.statistics import ModelStatistics, failure_reason
from ..protos import model_config_pb2 as pb
from ..safe_names import inside_directory
from ..scheduling.instance_runner import InstanceRunner
from ..scheduling.job import Job
from ..tensor import Tensor

__all__ = ["warm_up"]

log = logging.getLogger("naiad.models")

WARMUP_DIRECTORY = "warmup"


async def warm_up(
    config: ModelConfig, version: int, model_dir: Path, runners: list[InstanceRunner], statistics: ModelStatistics
) -> None:
    """Run every warmup sample on every instance; raise NaiadError on the first failure."""
    samples = [s for s in config.proto.model_warmup if s.batch_size > 0]
    for runner in runners:
        for sample in samples:
            # Data is drawn once per instance and sample, as in Triton.
            inputs = _sample_inputs(config, sample, model_dir)
            for iteration in range(1, max(sample.count, 1) + 1):
                log.info(
                    "model '%s' instance %s is running warmup sample '%s' for iteration %d",
                    config.name,
                    runner.name,
                    sample.name,
                    iteration,
                )
                errors = await _run(runner, statistics, config.name, inputs, sample.batch_size)
                if errors:
                    raise NaiadError.invalid(
                        f"load failed for model '{config.name}': version {version} is at UNAVAILABLE state: "
                        f"Invalid argument: failed to run warmup sample '{sample.name}': "
                        + "".join(f"{error}; " for error in errors)
                    )


async def _run(
    runner: InstanceRunner, statistics: ModelStatistics, model: str, inputs: list[Tensor], batch_size: int
) -> list[str]:
    """One execution of `batch_size` identical requests; the errors their responses carry."""
    loop = asyncio.get_running_loop()
    finals: list[asyncio.Future[InferenceResponse]] = []
    jobs = []
    for _ in range(batch_size):
        final: asyncio.Future[InferenceResponse] = loop.create_future()
        started = time.monotonic_ns()

        def deliver(
            response: InferenceResponse, final: asyncio.Future[InferenceResponse] = final, started: int = started
        ) -> None:
            if (response.final or response.error is not None) and not final.done():
                final.set_result(response)
            if response.final:
                elapsed = time.monotonic_ns() - started
                if response.error is None:
                    statistics.record_success(elapsed)
                else:
                    statistics.record_failure(elapsed, failure_reason(response.error))

        finals.append(final)
        jobs.append(Job(InferenceRequest(model, inputs=list(inputs)), 1, deliver))
    statistics.pending += len(jobs)  # the runner counts them out as it takes them
    await runner.run(jobs)
    responses = await asyncio.gather(*finals)
    return [r.error.message for r in responses if r.error is not None]


def _sample_inputs(config: ModelConfig, sample: pb.ModelWarmup, model_dir: Path) -> list[Tensor]:
    batched = config.max_batch_size > 0
    known_inputs = {i.name for i in config.proto.input}
    tensors = []
    for name in sorted(sample.inputs):
        spec = sample.inputs[name]
        dims = tuple(int(d) for d in spec.dims)
        if any(d < 0 for d in dims):
            raise NaiadError.invalid(
                f"warmup setting expects all variable-size dimensions are specified for input '{name}'"
            )
        # Inputs of the model get the batch dimension; control tensors are given whole.
        shape = ((1,) if batched and name in known_inputs else ()) + dims
        datatype = config_type_to_datatype(pb.DataType.Name(spec.data_type))
        kind = spec.WhichOneof("input_data_type")
        if kind is None:
            raise NaiadError.invalid(f"warmup setting expects input '{name}' to have input_data_type set")
        count = int(np.prod(shape, dtype=np.int64))
        if kind == "input_data_file":
            data = _from_file(config.name, sample.name, name, spec.input_data_file, model_dir, datatype, count)
        elif datatype == "BYTES":  # Triton sends empty strings for zero and random BYTES alike
            data = np.array([b""] * count, dtype=object)
        elif kind == "random_data" and spec.random_data:
            if datatype == "BOOL":
                data = np.random.default_rng().integers(0, 2, count).astype(bool)
            else:
                data = np.frombuffer(np.random.bytes(count * element_size(datatype)), numpy_dtype(datatype))
        else:
            data = np.zeros(count, numpy_dtype(datatype))
        tensors.append(Tensor(name, datatype, shape, data.reshape(shape)))
    return tensors


def _from_file(model: str, sample: str, name: str, file: str, model_dir: Path, datatype: str, count: int) -> np.ndarray:
    relative = inside_directory(file)
    if relative is None:
        raise NaiadError.invalid(
            f"model '{model}' warmup sample '{sample}': input_data_file '{file}' must be a relative path inside "
            f"the model's {WARMUP_DIRECTORY}/ directory"
        )
    try:
        raw = (model_dir / WARMUP_DIRECTORY / relative).read_bytes()
    except OSError:
        raise NaiadError.invalid(
            f"model '{model}' warmup sample '{sample}': cannot read input_data_file '{file}' for input '{name}' "
            f"from the model's {WARMUP_DIRECTORY}/ directory"
        ) from None
    if datatype == "BYTES":
        try:
            return deserialize_bytes_tensor(raw, count)
        except ValueError as exc:
            raise NaiadError.invalid(f"model '{model}' warmup sample '{sample}': input '{name}': {exc}") from None
    needed = count * element_size(datatype)
    if len(raw) < needed:
        raise NaiadError.invalid(
            f"warmup setting expects {needed} bytes, but the data provided from {file} only has {len(raw)} bytes"
        )
    return np.frombuffer(raw[:needed], numpy_dtype(datatype))
