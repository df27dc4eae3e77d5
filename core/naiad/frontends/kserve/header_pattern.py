"""`--http-header-forward-pattern` / `--grpc-header-forward-pattern`: the RE2 pattern Triton's
users write, read by Python's `re`.

Triton matches header names case-insensitively (names arrive lower-case on both protocols),
and a pattern may turn that off with RE2's flag group `(?-i)`. RE2 lets a flag group
`(?flags)` stand anywhere and apply to the rest of its group; Python takes such a group only
at the very start and as global flags, so each one is rewritten into the scoped form
`(?flags:...)` Python has, closed where its enclosing group closes. What Python cannot read
(RE2's ungreedy flag `U`, for one) is refused with a message naming the flag and the reason.
"""

from __future__ import annotations

import re

__all__ = ["compile_header_pattern"]

_FLAG_GROUP = re.compile(r"\(\?([A-Za-z]*)(?:-([A-Za-z]*))?\)")
_PYTHON_FLAGS = set("ims")


def compile_header_pattern(pattern: str, flag: str) -> re.Pattern[str]:
    """`pattern` (RE2 syntax) compiled case-insensitively unless it says otherwise; raises
    ValueError naming `flag` when it cannot be read."""
    try:
        return re.compile(_scoped_flags(pattern, flag), re.IGNORECASE)
    except re.error as exc:
        raise ValueError(f"{flag}: invalid regular expression {pattern!r}: {exc}") from None


def _scoped_flags(pattern: str, flag: str) -> str:
    """`pattern` with every `(?flags)` group turned into `(?flags:` plus a `)` where the
    group around it ends, and RE2's `\\z` (end of text) as Python's `\\Z`."""
    out: list[str] = []
    # For each open group (the outermost is the pattern itself): the scoped flag groups
    # opened inside it, which close with it.
    pending = [0]
    i, in_class = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            escape = pattern[i : i + 2]
            out.append("\\Z" if escape == "\\z" else escape)
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            # A `]` right after `[` or `[^` is a member, not the end.
            if pattern[i + 1 : i + 2] == "^":
                out.append("[^")
                i += 2
            else:
                out.append("[")
                i += 1
            if pattern[i : i + 1] == "]":
                out.append("]")
                i += 1
            continue
        elif char == "(":
            match = _FLAG_GROUP.match(pattern, i)
            if match is not None:
                on, off = match.group(1), match.group(2) or ""
                unknown = sorted(set(on + off) - _PYTHON_FLAGS)
                if unknown:
                    raise ValueError(
                        f"{flag}: the flag {unknown[0]!r} of {match.group(0)!r} in {pattern!r} is not supported "
                        "(supported: i, m, s)"
                    )
                out.append(f"(?{on}{'-' + off if off else ''}:")
                pending[-1] += 1
                i = match.end()
                continue
            pending.append(0)
        elif char == ")" and len(pending) > 1:
            out.append(")" * pending.pop())
        out.append(char)
        i += 1
    out.append(")" * pending[0])
    return "".join(out)
