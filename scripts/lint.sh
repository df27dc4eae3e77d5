#!/usr/bin/env bash
# The checked habits CI runs: ruff's lint and format check over the whole checkout, and mypy
# (strict on naiad.backend and naiad.backend.helpers with the core modules they reach, and on
# naiad_wire).
# `bash scripts/lint.sh --fix` applies ruff's fixes and formatting first.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
if [ "${1:-}" = "--fix" ]; then
  "$bin/ruff" check --fix --quiet . || true
  "$bin/ruff" format --quiet .
fi
"$bin/ruff" check .
"$bin/ruff" format --check .
"$bin/mypy"                                        # [tool.mypy] in pyproject.toml
"$bin/mypy" --strict wire/src/naiad_wire
