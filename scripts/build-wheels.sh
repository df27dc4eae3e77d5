#!/usr/bin/env bash
# Builds a wheel of every naiad distribution (the core, each backend, each integration, and
# any sibling distribution with its own pyproject.toml) into DIR (default dist/), ready for
#   pip install --find-links DIR naiad naiad-backend-onnx ...
# Usage: bash scripts/build-wheels.sh [DIR]
# Uses .venv's Python when there is one, else python3; each build runs in pip's isolated
# build environment (setuptools from the package index or pip's cache), as many at once as
# there are CPUs. A line on stderr says which wheel is being started, with the seconds since
# the script began.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-dist}")
py=.venv/bin/python
[ -x "$py" ] || py=${PYTHON:-python3}
dists=(.)
for d in */ backends/*/ integrations/*/; do
  # "./": pip reads a bare name ("wire") as a requirement, not a directory.
  if [[ -f "$d/pyproject.toml" ]]; then dists+=("./${d%/}"); fi
done
mkdir -p "$out"
# As many builds at once as there are CPUs. The core comes first: naiad, naiad-wire and
# naiad-backend-python compile their hot modules with mypyc, the slow builds.
cpus=$(nproc)
pids=()
failed=0
finish_one() {
  # Whichever build ends first frees its CPU. `wait -n` would miss one that ended while
  # nothing was waiting; `wait PID` still has its status.
  while :; do
    for i in "${!pids[@]}"; do
      if ! kill -0 "${pids[i]}" 2>/dev/null; then
        wait "${pids[i]}" || failed=1
        unset 'pids[i]'
        return
      fi
    done
    sleep 0.2
  done
}
for d in "${dists[@]}"; do
  if ((${#pids[@]} == cpus)); then finish_one; fi
  printf 'build-wheels.sh [%4d s] building %s\n' "$SECONDS" "$( [ "$d" = . ] && echo "the core (naiad)" || echo "${d#./}")" >&2
  "$py" -m pip wheel -q --no-deps --wheel-dir "$out" "$d" &
  pids+=($!)
done
while ((${#pids[@]})); do finish_one; done
if ((failed)); then
  echo "build-wheels.sh: a wheel failed to build (pip's message is above)" >&2
  exit 1
fi
printf 'build-wheels.sh [%4d s] done: %d wheels in %s\n' "$SECONDS" "${#dists[@]}" "$out" >&2
ls "$out"/*.whl
