"""`LoadSession`: everything a step needs before its first request, for one `LoadSpec`: the
model's metadata and config, its inputs made and encoded, shared-memory regions registered,
one request tried (so a request the server refuses is reported before any load), and the
way to open lanes of the spec's protocol. Closing it removes what it registered."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .control import Control
from .grpc_control import GrpcControl
from .grpc_lane import GrpcLane
from .grpc_requests import GrpcRequestEncoder
from .http_control import HttpControl
from .http_lane import HttpLane
from .http_requests import HttpRequestEncoder
from .input_shapes import input_dims
from .input_tensors import request_inputs
from .lane import Lane, RequestFailed
from .load_error import LoadError, ServerUnreachable
from .load_spec import LoadSpec
from .model_info import ModelInfo
from .request_source import Encoder, RequestSource
from .sequence_flags import SequenceCounter
from .system_shm import SystemShmRegions
from .target import Target

__all__ = ["DEFAULT_SEQUENCE_LENGTH", "LoadSession"]

# perf_analyzer's --sequence-length default ("average length of a sentence").
DEFAULT_SEQUENCE_LENGTH = 20
_DEFAULT_PORTS = {"http": 8000, "grpc": 8001}


@dataclass
class LoadSession:
    spec: LoadSpec
    target: Target
    control: Control
    model: ModelInfo
    encoders: list[Encoder]
    sequence_length: int
    regions: SystemShmRegions | None = None
    # The server has the statistics extension (Triton's; a plain KServe v2 server may not).
    has_statistics: bool = True
    # One counter for the session's steps, so a sequence id is never used twice in it.
    _sequences: SequenceCounter | None = None

    def __post_init__(self) -> None:
        if self.sequence_length:
            self._sequences = SequenceCounter(self.sequence_length)

    @classmethod
    async def open(cls, spec: LoadSpec) -> LoadSession:
        if spec.protocol not in _DEFAULT_PORTS:
            raise LoadError(f"-i {spec.protocol}: the protocol must be http or grpc")
        if spec.batch_size < 1:
            raise LoadError(f"-b {spec.batch_size}: the batch size must be 1 or more")
        target = Target.parse(spec.url, _DEFAULT_PORTS[spec.protocol])
        control: Control = (
            HttpControl(target, spec.model, spec.model_version)
            if spec.protocol == "http"
            else GrpcControl(target, spec.model, spec.model_version)
        )
        try:
            return await cls._prepare(spec, target, control)
        except BaseException:
            await control.close()
            raise

    @classmethod
    async def _prepare(cls, spec: LoadSpec, target: Target, control: Control) -> LoadSession:
        try:
            metadata = await control.model_metadata()
        except ServerUnreachable:
            raise
        except LoadError as exc:
            raise LoadError(f"model '{spec.model}' is not available at {target}: {_reason(exc)}") from None
        try:
            config = await control.model_config()
        except ServerUnreachable:
            raise
        except LoadError:
            config = {}  # a KServe v2 server without Triton's model configuration extension
        try:
            await control.model_statistics()
            has_statistics = True
        except ServerUnreachable:
            raise
        except LoadError:
            has_statistics = False  # nor its statistics extension: no server columns
        model = ModelInfo.read(metadata, config)
        if model.decoupled:
            raise LoadError(f"model '{spec.model}' is decoupled: naiad perf measures one response per request")
        if spec.batch_size > 1 and model.max_batch_size == 0:
            raise LoadError(f"-b {spec.batch_size}: model '{spec.model}' does not batch (max_batch_size 0)")
        if spec.batch_size > model.max_batch_size > 0:
            raise LoadError(
                f"-b {spec.batch_size}: more than model '{spec.model}''s max_batch_size {model.max_batch_size}"
            )
        steps = request_inputs(
            model, input_dims(model, spec.shapes), spec.input_data, spec.batch_size, spec.string_length
        )
        regions = None
        if spec.shared_memory == "system":
            regions = await SystemShmRegions.create(
                control, model, steps, spec.batch_size, spec.output_shared_memory_size
            )
        outputs = [t.name for t in model.outputs]
        encoders: list[Encoder] = []
        for index, step in enumerate(steps):
            placed_in = regions.inputs[index] if regions is not None else None
            placed_out = regions.outputs if regions is not None else None
            if spec.protocol == "http":
                binary_output = spec.binary if spec.binary_output is None else spec.binary_output
                encoders.append(
                    HttpRequestEncoder(
                        str(target),
                        spec.model,
                        spec.model_version,
                        step,
                        outputs,
                        spec.binary,
                        binary_output,
                        placed_in,
                        placed_out,
                    )
                )
            else:
                encoders.append(
                    GrpcRequestEncoder(spec.model, spec.model_version, step, outputs, placed_in, placed_out)
                )
        length = (spec.sequence_length or DEFAULT_SEQUENCE_LENGTH) if model.is_sequence else 0
        session = cls(spec, target, control, model, encoders, length, regions, has_statistics)
        try:
            await session._try_one_request()
        except BaseException:
            await session.close()
            raise
        return session

    def open_lane(self) -> Awaitable[Lane]:
        opener: Callable[[Target], Awaitable[Lane]] = HttpLane.open if self.spec.protocol == "http" else GrpcLane.open
        return opener(self.target)

    def new_source(self, sequences: SequenceCounter | None) -> RequestSource:
        return RequestSource(self.encoders, sequences)

    def sequences(self) -> SequenceCounter | None:
        """The session's sequence ids (None for a model that is not a sequence model)."""
        return self._sequences

    async def _try_one_request(self) -> None:
        lane = await self.open_lane()
        try:
            # A sequence model's first request must start a sequence: one of length 1.
            # Its id is the session's, so no step reuses it.
            trial = SequenceCounter(1, first_id=self._sequences.take()) if self._sequences is not None else None
            request = self.encoders[0].encode(trial.slot().next()) if trial is not None else self.encoders[0].request
            await lane.infer(request)
        except RequestFailed as exc:
            raise LoadError(f"model '{self.spec.model}' refused the request: {exc.message}") from None
        finally:
            await lane.close()

    async def close(self) -> None:
        if self.regions is not None:
            await self.regions.remove(self.control)
        await self.control.close()


def _reason(exc: LoadError) -> str:
    """The server's words, without the method and path the control call adds."""
    text = str(exc)
    return text.split(": ", 1)[1] if ": " in text else text
