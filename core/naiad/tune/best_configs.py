"""The best `config.pbtxt` per objective, written under the output directory as
`throughput/config.pbtxt` and `latency/config.pbtxt`: the user's own configuration (or the
server's reading of it) with the winning candidate's settings, never the user's file itself."""

from __future__ import annotations

from pathlib import Path

from ..protos import model_config_pb2 as pb
from .candidate_config import apply_candidate, config_pbtxt
from .objectives import Choice
from .tune_record import TuneRecord

__all__ = ["OBJECTIVES", "best_config_text", "write_best_configs"]

# Each objective's folder under the output directory, and what it means.
OBJECTIVES = {
    "throughput": "best throughput within the latency budget",
    "latency": "best p99 latency at the throughput floor",
}


def best_config_text(record: TuneRecord, base: pb.ModelConfig, objective: str, choice: Choice) -> str:
    """The config.pbtxt of a choice, headed by comments saying what it achieved and how."""
    step, candidate = choice.step, choice.result.candidate
    lines = [
        f"# naiad tune, model '{record.model}': {OBJECTIVES[objective]}",
        f"# {step.throughput:.1f} inferences/s, p99 {step.p99_ms:.2f} ms at concurrency {step.concurrency}",
        f"# candidate {candidate.key}",
    ]
    workers = candidate.get("workers")
    if workers is not None:
        lines.append(f"# serve it with: naiad serve --workers {workers} (a flag of the server, not of this file)")
    return "\n".join(lines) + "\n" + config_pbtxt(apply_candidate(base, candidate))


def write_best_configs(record: TuneRecord, base: pb.ModelConfig, directory: Path) -> dict[str, Path]:
    """The files written, by objective (an objective no candidate met gets none)."""
    written = {}
    for objective, choice in (("throughput", record.best_throughput), ("latency", record.best_latency)):
        if choice is None:
            continue
        path = directory / objective / "config.pbtxt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(best_config_text(record, base, objective, choice))
        written[objective] = path
    return written
