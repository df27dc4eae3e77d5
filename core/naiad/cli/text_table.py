"""`text_table`: rows laid out in boxed columns, as tritonserver prints its start-up tables
(`naiad serve`'s tables and `naiad models` share it)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["text_table"]


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max([len(headers[i])] + [len(row[i]) for row in rows]) for i in range(len(headers))]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def cells(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths)) + " |"

    return "\n".join([line, cells(headers), line, *(cells(row) for row in rows), line])
