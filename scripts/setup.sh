#!/usr/bin/env bash
# Creates .venv in the checkout and installs naiad into it, editable.
#
#   bash scripts/setup.sh serve   what serving examples/models needs: the core, the Python and
#                                 ONNX backends, and onnx (examples/build_models.py writes the
#                                 example's model files with it), and Swagger UI's files. No test tools, no torch, no
#                                 TensorFlow.
#   bash scripts/setup.sh [test]  everything: every distribution with its test tools, torch as
#                                 its CPU-only build, tensorflow-cpu.
#
# A second run with this script and every pyproject.toml unchanged installs nothing (the
# inputs' digest is kept in .venv/.setup-<mode>); `rm -rf .venv` starts afresh.
# Each step prints a line on stderr as it starts, with the seconds since the script began: pip
# runs quietly, and a step can take minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-test}
case "$mode" in serve | test) ;; *) echo "usage: $0 [serve|test]" >&2; exit 2 ;; esac
PY=${PYTHON:-python3}
step() { printf 'setup.sh [%4d s] %s\n' "$SECONDS" "$*" >&2; }
# PyPI's Linux torch wheels are the CUDA build: they pull ~3.4 GB of nvidia-* packages and
# triton, even where a range such as torch>=2.3 is all that is asked. The CPU build has the
# local version +cpu; pinning it exactly keeps pip's resolver from trading it for the CUDA
# wheel of the same version while it backtracks. It comes from a configured index or
# find-links directory, else from PyTorch's CPU index.
TORCH_CPU="torch==2.13.0+cpu"
TORCH_CPU_INDEX="https://download.pytorch.org/whl/cpu"

# Distributions other than the backends (the core, and any sibling such as the wire package)
# are part of every mode; the core may depend on them.
core=(.)
for d in */; do
  if [[ "$d" != backends/ && -f "$d/pyproject.toml" ]]; then core+=("${d%/}"); fi
done

backends=()
for d in backends/*; do
  if [ -f "$d/pyproject.toml" ]; then backends+=("$d"); fi
done
# Optional integrations with other serving stacks (Ray Serve, ...): tested, never needed to serve.
integrations=()
for d in integrations/*; do
  if [ -f "$d/pyproject.toml" ]; then integrations+=("$d"); fi
done
# The core, naiad-wire and the Python backend compile their hot modules into extensions that
# import in place of the sources (setup.py, mypyc_build.py): a source edited since must build
# them again.
digest=$(for d in "${core[@]}" "${backends[@]}" "${integrations[@]}"; do cat "$d/pyproject.toml"; done |
  cat scripts/setup.sh setup.py wire/setup.py backends/python/setup.py wire/mypyc_build.py - | sha256sum | cut -c1-16)
stale_extension() {
  local so
  for so in $(find core wire/src backends/python/src -name '*.so' 2>/dev/null); do
    [ "${so%%.*}.py" -nt "$so" ] && return 0
  done
  return 1
}
installed() { [ -f ".venv/.setup-$1" ] && [ "$(cat ".venv/.setup-$1")" = "$digest" ] && ! stale_extension; }
if installed "$mode" || { [ "$mode" = serve ] && installed test; }; then
  step ".venv is up to date for '$mode': nothing to install"
  exit 0
fi

if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $("$PY" --version 2>&1) and upgrading pip"
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
names() { local d; for d in "$@"; do [ "$d" = . ] && d=naiad; printf '%s ' "${d##*/}"; done; }
if [ "${NAIAD_PURE_PYTHON:-}" = 1 ]; then
  compiling="naiad, naiad-wire and the Python backend as pure Python: NAIAD_PURE_PYTHON=1"
else
  compiling="naiad, naiad-wire and the Python backend compile their hot modules with mypyc; NAIAD_PURE_PYTHON=1 skips that"
fi
pip=(.venv/bin/python -m pip install -q)

if [ "$mode" = serve ]; then
  pkgs=()
  for d in "${core[@]}"; do pkgs+=(-e "$d"); done
  step "installing, editable: $(names "${core[@]}")+ backends python onnx + onnx, swagger-ui-bundle ($compiling)"
  # swagger-ui-bundle: Swagger UI at /v2/docs (the extra naiad[docs]).
  "${pip[@]}" "${pkgs[@]}" -e backends/python -e backends/onnx onnx swagger-ui-bundle
else
  step "installing $TORCH_CPU (the CPU-only build)"
  if ! "${pip[@]}" "$TORCH_CPU"; then
    echo "setup.sh: $TORCH_CPU is in no configured index; trying PyTorch's CPU index" >&2
    "${pip[@]}" --extra-index-url "$TORCH_CPU_INDEX" "$TORCH_CPU"
  fi
  pkgs=()
  # Each with its test extra: its tests build models with tools its runtime needs not. One
  # command for all, so the resolver sees every pin at once (alone, ray's would lift protobuf
  # past the core's <7).
  for d in "${core[@]}" "${backends[@]}" "${integrations[@]}"; do pkgs+=(-e "$d[test]"); done
  step "installing, editable, with their test tools: $(names "${core[@]}")+ backends $(names "${backends[@]}")+ integrations $(names "${integrations[@]}")(TensorFlow is the largest download; $compiling)"
  "${pip[@]}" "$TORCH_CPU" "${pkgs[@]}"
fi
# A rebuild whose C came out the same keeps the old files: they stand for today's sources.
find core wire/src backends/python/src -name '*.so' -exec touch {} +
echo "$digest" > ".venv/.setup-$mode"
step "done: .venv is ready for '$mode'"
