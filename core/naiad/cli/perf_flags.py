"""`PerfFlags`: the flags of `naiad perf`, named as perf_analyzer names them (long and short
spellings, defaults), and their values read into a `LoadSpec`, `MeasureSettings` and the
steps to measure."""

from __future__ import annotations

from dataclasses import dataclass

from ..loadgen import LoadError, LoadSpec, MeasureSettings
from ..loadgen.input_shapes import parse_shape_flag
from ..option_fields import option

__all__ = ["PerfFlags", "Steps", "parse_range"]


@dataclass(frozen=True, slots=True)
class Steps:
    """The loads to measure, in order: concurrencies, or request rates."""

    concurrencies: tuple[int, ...] = ()
    request_rates: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PerfFlags:
    model_name: str = option("", "--model-name", "the model to load (required)", aliases=("-m",), metavar="MODEL")
    model_version: str = option(
        "", "--model-version", "the version to load (default: the server's choice)", aliases=("-x",), metavar="N"
    )
    url: str = option(
        "",
        "--url",
        "the server's endpoint, HOST:PORT",
        aliases=("-u",),
        metavar="URL",
        shown="localhost:8000, or localhost:8001 with -i grpc",
    )
    protocol: str = option(
        "http", "--protocol", "the protocol: http or grpc", aliases=("-i",), choices=("http", "grpc")
    )
    batch_size: int = option(1, "--batch-size", "the batch size of each request", aliases=("-b",), metavar="N")
    concurrency_range: str = option(
        "",
        "--concurrency-range",
        "concurrencies to measure: from START to END (END defaults to START) by STEP (default 1)",
        metavar="START:END:STEP",
        shown="1",
    )
    request_rate_range: str = option(
        "",
        "--request-rate-range",
        "request rates (requests/s, sent at fixed intervals) to measure instead of concurrencies: "
        "from START to END (END defaults to START) by STEP (default 1)",
        metavar="START:END:STEP",
    )
    shape: tuple[str, ...] = option(
        (),
        "--shape",
        "the shape of an input with variable dimensions, without the batch dimension "
        "(e.g. INPUT0:3,224,224); repeat for each such input",
        metavar="NAME:DIMS",
    )
    input_data: str = option(
        "random",
        "--input-data",
        'the inputs\' values: random, zero, or a perf_analyzer JSON data file ({"data": [{"INPUT0": [...]}, ...]})',
        metavar="random|zero|FILE.json",
    )
    input_tensor_format: str = option(
        "binary",
        "--input-tensor-format",
        "how inputs travel over HTTP: binary tensors (Triton's binary-tensor extension) or JSON lists",
        choices=("binary", "json"),
    )
    output_tensor_format: str = option(
        "binary",
        "--output-tensor-format",
        "how outputs are asked for over HTTP: binary tensors or JSON lists",
        choices=("binary", "json"),
    )
    shared_memory: str = option(
        "none",
        "--shared-memory",
        "pass inputs and outputs through system shared memory (the server must be on this host "
        "and allow it: naiad serve --allow-client-shm true)",
        choices=("none", "system"),
    )
    output_shared_memory_size: int = option(
        102400,
        "--output-shared-memory-size",
        "bytes of shared memory for each output whose size is not fixed",
        metavar="BYTES",
    )
    sequence_length: int = option(
        0,
        "--sequence-length",
        "requests per sequence, for a sequence model",
        metavar="N",
        shown="20 for a sequence model",
    )
    string_length: int = option(128, "--string-length", "characters of each random BYTES element", metavar="N")
    measurement_interval: int = option(
        5000, "--measurement-interval", "the length of each measurement window, in ms", aliases=("-p",), metavar="MS"
    )
    stability_percentage: float = option(
        10.0,
        "--stability-percentage",
        "a step is stable when its last three windows are within this percentage of each other, "
        "in throughput and in latency",
        aliases=("-s",),
        metavar="PCT",
    )
    max_trials: int = option(
        10,
        "--max-trials",
        "the most windows to measure a step before giving up on stability",
        aliases=("-r",),
        metavar="N",
    )
    percentile: int | None = option(
        None,
        "--percentile",
        "watch this latency percentile for stability instead of the average (and report it)",
        metavar="P",
    )
    latency_report_file: str = option(
        "",
        "--latency-report-file",
        "write the steps to this CSV file, in perf_analyzer's columns",
        aliases=("-f",),
        metavar="FILE.csv",
    )

    def load_spec(self) -> LoadSpec:
        """The spec these flags describe; LoadError naming a flag that is wrong."""
        if not self.model_name:
            raise LoadError("-m MODEL is required: the model to load")
        shapes: dict[str, tuple[int, ...]] = {}
        for text in self.shape:
            name, dims = parse_shape_flag(text)
            shapes[name] = dims
        if self.batch_size < 1:
            raise LoadError(f"-b {self.batch_size}: the batch size must be 1 or more")
        if self.sequence_length < 0:
            raise LoadError(f"--sequence-length {self.sequence_length}: must be 1 or more")
        default_port = "8001" if self.protocol == "grpc" else "8000"
        return LoadSpec(
            url=self.url or f"localhost:{default_port}",
            model=self.model_name,
            protocol="grpc" if self.protocol == "grpc" else "http",
            model_version=self.model_version,
            batch_size=self.batch_size,
            shapes=shapes,
            input_data=self.input_data,
            binary=self.input_tensor_format == "binary",
            binary_output=self.output_tensor_format == "binary",
            shared_memory="system" if self.shared_memory == "system" else "none",
            sequence_length=self.sequence_length,
            string_length=self.string_length,
            output_shared_memory_size=self.output_shared_memory_size,
        )

    def settings(self) -> MeasureSettings:
        return MeasureSettings(
            measurement_interval_ms=self.measurement_interval,
            stability_percentage=self.stability_percentage,
            max_trials=self.max_trials,
            percentile=self.percentile,
        )

    def steps(self) -> Steps:
        if self.concurrency_range and self.request_rate_range:
            raise LoadError("--concurrency-range and --request-rate-range cannot be used together")
        if self.request_rate_range:
            rates = parse_range(self.request_rate_range, "--request-rate-range", float)
            return Steps(request_rates=tuple(float(r) for r in rates))
        return Steps(
            concurrencies=tuple(int(c) for c in parse_range(self.concurrency_range or "1", "--concurrency-range", int))
        )


def parse_range(text: str, flag: str, kind: type[int] | type[float]) -> list[float]:
    """perf_analyzer's START[:END[:STEP]]: END defaults to START, STEP to 1."""
    parts = text.split(":")
    if len(parts) > 3:
        raise LoadError(f"{flag} {text}: expected START:END:STEP")
    try:
        values = [kind(p) for p in parts]
    except ValueError:
        raise LoadError(f"{flag} {text}: expected numbers START:END:STEP") from None
    start = values[0]
    end = values[1] if len(values) > 1 else start
    step = values[2] if len(values) > 2 else 1
    if start <= 0:
        raise LoadError(f"{flag} {text}: the start of the range must be more than 0")
    if end == 0:
        raise LoadError(f"{flag} {text}: an END of 0 (search until a latency threshold) is not supported; give END")
    if end < start:
        raise LoadError(f"{flag} {text}: END is less than START")
    if step <= 0:
        raise LoadError(f"{flag} {text}: STEP must be more than 0")
    found, value, index = [], start, 0
    while value <= end + 1e-9:
        found.append(value)
        index += 1
        value = start + index * step
    return found
