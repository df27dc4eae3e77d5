"""How config tensor names meet forward's arguments and results, following Triton's
PyTorch backend conventions.

Inputs: names `<anything>__<index>` (INPUT__0, INPUT__1) give the argument position;
otherwise every name must be one of forward's argument names. Outputs: `<anything>__<index>`
picks that element of a tuple/list result; a dict result is looked up by output name;
otherwise outputs take a tuple/list result's elements in config order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from naiad import ConfigError

__all__ = ["InputBinding", "bind_inputs", "output_index"]

_INDEXED = re.compile(r"^.+__(\d+)$")


def output_index(name: str, position: int) -> int:
    """Where an output sits in a tuple/list result: its `__<index>` suffix, else its
    position in the config."""
    match = _INDEXED.match(name)
    return int(match.group(1)) if match else position


@dataclass(frozen=True, slots=True)
class InputBinding:
    """`order[i]` is the config input passed as forward's i-th positional argument."""

    order: list[str]


def bind_inputs(model: str, names: list[str], arg_names: list[str]) -> InputBinding:
    if not names:
        return InputBinding([])
    matches = [_INDEXED.match(name) for name in names]
    if all(matches):
        positions = {int(m.group(1)): name for m, name in zip(matches, names) if m}
        if len(positions) != len(names) or sorted(positions) != list(range(len(names))):
            raise ConfigError(
                model,
                "input: names with the __<index> convention must number the arguments 0.."
                f"{len(names) - 1} exactly once, got {', '.join(names)}",
            )
        if arg_names and len(names) > len(arg_names):
            raise ConfigError(
                model, f"input: the config declares {len(names)} inputs, forward takes {len(arg_names)} ({', '.join(arg_names)})"
            )
        return InputBinding([positions[i] for i in range(len(names))])
    unknown = [name for name in names if name not in arg_names]
    if unknown:
        raise ConfigError(
            model,
            f"input '{unknown[0]}': input names must follow the <name>__<index> convention (INPUT__0) or be "
            f"forward's argument names ({', '.join(arg_names) or 'none found'})",
        )
    ordered = [name for name in arg_names if name in names]
    skipped = arg_names[: len(ordered)] != ordered
    if skipped:
        missing = [name for name in arg_names[: arg_names.index(ordered[-1])] if name not in names]
        raise ConfigError(model, f"input: forward's argument '{missing[0]}' comes before declared inputs but is not declared")
    return InputBinding(ordered)
