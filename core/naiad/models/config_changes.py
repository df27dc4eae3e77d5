"""Tells the user, at load, where the config a model runs with differs from the one written.

Auto-complete and Triton's defaults fill what a config leaves out; when one of them replaces
a value the user did write (`instance_group { count: 0 }` becomes two instances, a Python
model's `auto_complete_config` sets a max_batch_size the file gives as 0), the model serves
with a config its author never saw. A load logs each such change as a warning naming both
values (`naiad check` reports it too). A load also logs the max_batch_size auto-complete
chooses for a config that gives none, as Triton logs it, since it decides how requests must
be shaped.
"""

from __future__ import annotations

from ..config.written_fields import changed_fields
from ..protos import model_config_pb2 as pb

__all__ = ["describe_changes"]


def describe_changes(
    before: pb.ModelConfig, after: pb.ModelConfig, written: frozenset[str], by: str, source: str
) -> list[tuple[str, str]]:
    """(field path, message) for every field in `written` whose value `by` (what changed
    it, for the message) took from `before` to `after` (`source` names where the user wrote
    it), and for the max_batch_size auto-complete chose where none was written."""
    changes = []
    for path, old, new in changed_fields(before, after, written):
        if old == "KIND_AUTO":
            continue  # KIND_AUTO asks the server to choose: the choice replaces nothing
        changes.append((path, f"{by} changed {path} from {_shown(old)} (as {source} writes it) to {_shown(new)}"))
    if "max_batch_size" not in written and before.max_batch_size != after.max_batch_size:
        changes.append(
            (
                "max_batch_size",
                f"{by} set max_batch_size to {after.max_batch_size}, since the model supports batching and the "
                "config gives no max_batch_size; write max_batch_size in the config to choose another (0 turns "
                "batching off)",
            )
        )
    return changes


def _shown(value: object) -> str:
    return repr(value) if isinstance(value, str) and not value.startswith(("KIND_", "TYPE_")) else str(value)
