"""How config tensor names meet forward's arguments and results, following Triton's
PyTorch backend conventions.

Inputs (config inputs, sequence control and state inputs, batch inputs alike): a name that
is one of forward's argument names binds that argument; otherwise `<anything>__<index>`
(INPUT__0, START__1) gives the argument position. When a name is neither, every input is
passed in config order instead, with a warning, as Triton does. Outputs: `<anything>__<index>`
picks that element of a tuple/list result; a dict result is looked up by output name;
otherwise outputs take a tuple/list result's elements in config order.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from naiad.backend import ConfigError

__all__ = ["InputBinding", "bind_inputs", "output_index"]

_INDEXED = re.compile(r"^.+__(\d+)$")

log = logging.getLogger("naiad.backends.pytorch")


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
    is one, else by its `__<index>` suffix; when a name is neither, all in config order.
    Each argument 0..n-1 gets exactly one tensor."""
    if arg_names and len(names) != len(arg_names):
        # Triton's words.
        raise ConfigError(
            model,
            f"unable to load model '{model}', configuration expects {len(names)} inputs, model provides "
            f"{len(arg_names)} (forward's arguments: {', '.join(arg_names)}; the config feeds: "
            f"{', '.join(names) or 'none'})",
        )
    positions: dict[int, str] = {}
    for name in names:
        match = _INDEXED.match(name)
        if name in arg_names:
            position = arg_names.index(name)
        elif match:
            position = int(match.group(1))
        else:
            log.warning(
                "input '%s' or previous input(s) are neither an input argument to the model '%s' nor do they "
                "follow the <name>__<index> naming convention. Falling back to enforcing strict ordering from "
                "model configuration.",
                name,
                model,
            )
            return InputBinding(list(names))
        if position in positions:
            raise ConfigError(
                model, f"input '{name}' and input '{positions[position]}' both bind forward's argument {position}"
            )
        positions[position] = name
    unbound = [position for position in range(len(names)) if position not in positions]
    if unbound:
        which = f"'{arg_names[unbound[0]]}'" if unbound[0] < len(arg_names) else str(unbound[0])
        raise ConfigError(
            model,
            f"input: forward's argument {which} (position {unbound[0]}) is fed by no input; the config "
            f"feeds {', '.join(names)}",
        )
    return InputBinding([positions[i] for i in range(len(names))])
