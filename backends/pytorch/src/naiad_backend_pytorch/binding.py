"""How config tensor names meet forward's arguments and results, following Triton's
PyTorch backend conventions.

Inputs (config inputs, sequence control and state inputs, batch inputs alike): a name that
is one of forward's argument names binds that argument; otherwise `<anything>__<index>`
(INPUT__0, START__1) gives the argument position. Outputs: `<anything>__<index>`
picks that element of a tuple/list result; a dict result is looked up by output name;
otherwise outputs take a tuple/list result's elements in config order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from naiad.backend import ConfigError

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
    """Bind every tensor the model is fed (config inputs, sequence controls and state,
    batch inputs: `names`) to one of forward's arguments: by argument name where the name
    is one, else by its `__<index>` suffix. Each argument 0..n-1 gets exactly one tensor."""
    positions: dict[int, str] = {}
    for name in names:
        match = _INDEXED.match(name)
        if name in arg_names:
            position = arg_names.index(name)
        elif match:
            position = int(match.group(1))
        else:
            raise ConfigError(
                model,
                f"input '{name}': input names (sequence controls and state included) must follow the "
                f"<name>__<index> convention (INPUT__0) or be forward's argument names "
                f"({', '.join(arg_names) or 'none found'})",
            )
        if position in positions:
            raise ConfigError(
                model, f"input '{name}' and input '{positions[position]}' both bind forward's argument {position}"
            )
        positions[position] = name
    if arg_names and len(names) > len(arg_names):
        raise ConfigError(
            model,
            f"input: the config feeds {len(names)} tensors ({', '.join(names)}), forward takes "
            f"{len(arg_names)} ({', '.join(arg_names)})",
        )
    unbound = [position for position in range(len(names)) if position not in positions]
    if unbound:
        which = f"'{arg_names[unbound[0]]}'" if unbound[0] < len(arg_names) else str(unbound[0])
        raise ConfigError(
            model,
            f"input: forward's argument {which} (position {unbound[0]}) is fed by no input; the config "
            f"feeds {', '.join(names)}",
        )
    return InputBinding([positions[i] for i in range(len(names))])
