"""One server's statistics and metrics from the shares of its worker processes.

Counts and latency sums add up; what cannot be added is chosen so the figure stays true of
the whole server: the time of the last inference is the latest, a summary's quantile is the
highest any worker saw (an upper bound; quantiles of parts do not combine), and a gauge is
worker 0's (the CPU and GPU gauges describe the machine, a load duration or a model's own
gauge one copy of the model) except the pending-request count, which adds up.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..frontends.metrics.exposition import Family

__all__ = ["merge_statistics", "merge_families"]

# Keys of a statistics entry that name it rather than count something.
_IDENTITY = ("name", "version")
# The gauges that count something every worker holds a share of.
_ADDED_GAUGES = frozenset({"nv_inference_pending_request_count"})


def merge_statistics(shares: Iterable[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Triton's `model_stats` lists of every worker -> one list, in the first share's order
    (models a later share alone holds come after)."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for share in shares:
        for entry in share:
            key = (entry["name"], entry["version"])
            if key in merged:
                _add_into(merged[key], entry)
            else:
                merged[key] = entry
    return list(merged.values())


def _add_into(total: dict[str, Any], part: dict[str, Any]) -> None:
    for key, value in part.items():
        if key in _IDENTITY:
            continue
        if key not in total:
            total[key] = value
        elif key == "last_inference":
            total[key] = max(total[key], value)
        elif isinstance(value, dict):
            _add_into(total[key], value)
        elif key == "batch_stats":
            by_size = {row["batch_size"]: row for row in total[key]}
            for row in value:
                if row["batch_size"] in by_size:
                    _add_into(by_size[row["batch_size"]], {k: v for k, v in row.items() if k != "batch_size"})
                else:
                    by_size[row["batch_size"]] = row
            total[key] = [by_size[size] for size in sorted(by_size)]
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            total[key] += value
        # lists other than batch_stats (memory_usage) describe a model, not traffic: keep one


def merge_families(own: list[Family], peers: Iterable[list[Family]]) -> list[Family]:
    """Worker 0's families (`own`, which alone carry the machine's gauges) plus each
    peer's model, cache and custom families."""
    by_name = {family.name: family for family in own}
    order = [family.name for family in own]
    for families in peers:
        for family in families:
            total = by_name.get(family.name)
            if total is None:
                by_name[family.name] = family
                order.append(family.name)
            else:
                _add_samples(total, family)
    return [by_name[name] for name in order]


def _add_samples(total: Family, part: Family) -> None:
    adding = total.type != "gauge" or total.name in _ADDED_GAUGES
    index = {(suffix, labels): i for i, (suffix, labels, _) in enumerate(total.samples)}
    for suffix, labels, value in part.samples:
        i = index.get((suffix, labels))
        if i is None:
            index[(suffix, labels)] = len(total.samples)
            total.samples.append((suffix, labels, value))
            continue
        if not adding:
            continue
        mine = total.samples[i][2]
        quantile = total.type == "summary" and suffix == "" and any(k == "quantile" for k, _ in labels)
        if quantile:
            # An empty window's quantile is NaN: any number says more.
            value = value if mine != mine else max(mine, value)
        else:
            value = mine + value
        total.samples[i] = (suffix, labels, value)
