"""Restricted endpoint groups, one definition for both protocols: `--http-restricted-api
GROUPS:KEY=VALUE` and `--grpc-restricted-protocol GROUPS:KEY=VALUE` (tritonserver's flags)
make the named groups answer only requests carrying the header KEY (gRPC: prefixed with
`triton-grpc-protocol-`) with VALUE, e.g. to keep model loading for an operator while
inference stays open. Each frontend says which of its endpoints belong to which group and
how it refuses (HTTP 403, gRPC UNAVAILABLE, as Triton does)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["GROUPS", "Restriction", "parse_restrictions"]

# Triton's restricted categories, in its order.
GROUPS = (
    "health",
    "metadata",
    "inference",
    "shared-memory",
    "model-config",
    "model-repository",
    "statistics",
    "trace",
    "logging",
)


@dataclass(frozen=True)
class Restriction:
    header: str  # as the flag spells it (with the protocol's prefix); matched case-insensitively
    value: str

    def allows(self, headers: Iterable[tuple[str, str]]) -> bool:
        """Whether the request's headers (name, value pairs) carry the expected value."""
        wanted = self.header.lower()
        return any(name.lower() == wanted and value == self.value for name, value in headers)


def parse_restrictions(specs: Iterable[str], flag: str, what: str, header_prefix: str = "") -> dict[str, Restriction]:
    """Flag values -> {group: restriction}. Raises ValueError naming the fault, in Triton's
    words where it has them (`what` is "api" for HTTP, "protocol" for gRPC)."""
    by_group: dict[str, Restriction] = {}
    for spec in specs:
        groups, sep, setting = spec.partition(":")
        key, eq, value = setting.partition("=")
        if not sep or not eq or not key or not groups:
            raise ValueError(f"{flag}: expected {what.upper()}S:KEY=VALUE, got '{spec}'")
        restriction = Restriction(header_prefix + key, value)
        for group in (g.strip() for g in groups.split(",")):
            if group not in GROUPS:
                raise ValueError(
                    f"{flag}: unknown restricted {what} '{group}' in '{spec}'; expected one of " + ", ".join(GROUPS)
                )
            if group in by_group:
                raise ValueError(f"{flag}: restricted {what} '{group}' can not be specified in multiple config groups")
            by_group[group] = restriction
    return by_group
