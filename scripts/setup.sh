#!/usr/bin/env bash
# Creates .venv and installs naiad, every backend package and the test tools, editable.
# torch is pinned: an unpinned torch pulls gigabytes of CUDA packages.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
pkgs=(-e ".[test]")
for b in backends/*/; do
  # Each backend's [test] extra brings what its tests build models with (e.g. onnx).
  [ -f "$b/pyproject.toml" ] && pkgs+=(-e "${b%/}[test]")
done
.venv/bin/python -m pip install -q "torch==2.13.0" "${pkgs[@]}"
