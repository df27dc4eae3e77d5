#!/usr/bin/env bash
# Builds .whl/ (git-ignored), the wheels scripts/gpu-check.sh installs on a lent GPU machine,
# which has Python 3.12, CUDA PyTorch, CuPy, cuda-bindings, nvidia-ml-py, onnxruntime (CPU),
# grpcio, protobuf, pluggy, uvloop and pytest, and no network (docs/gpu.md):
#   - naiad's own distributions that the GPU checks use (the core, naiad-wire, the PyTorch,
#     Python and ONNX backends). The core, naiad-wire and the Python backend are compiled with mypyc, as a user's
#     install compiles them, by a CPython 3.12 found here (PYTHON312, else python3.12 on PATH,
#     else pyenv's newest 3.12): the machine's interpreter is 3.12. Without one they are built
#     as pure Python (NAIAD_PURE_PYTHON=1), which behaves the same, slower;
#   - the packages they and tritonclient[all] need that the machine lacks, as cp312
#     manylinux x86-64 wheels, at the versions this checkout's .venv tests with (grpcio and
#     protobuf too: naiad's generated modules need protobuf 6, whatever the machine has).
# Then it checks the set: every wheel installs for CPython 3.12 on x86-64 (pip --dry-run), every
# requirement of every wheel is carried or on the machine (IMAGE below), and the total is at
# most 64 MiB (what a device call carries); it prints the total and exits 1 on any failure.
# With TRITON_CLIENT=<a checkout or bare clone of github.com/triton-inference-server/client>, Triton's two CUDA
# shared-memory client examples are copied into .whl/client_examples/ too, and gpu-check.sh runs
# them, unchanged, against naiad (they are Triton's code: carried, never committed).
# Usage: [TRITON_CLIENT=DIR] bash scripts/gpu-wheels.sh   (then run(command="bash scripts/gpu-check.sh", carry=[".whl"]))
set -euo pipefail
cd "$(dirname "$0")/.."
out=.whl
limit=$((64 * 1024 * 1024))
py=.venv/bin/python
[ -x "$py" ] || py=${PYTHON:-python3}
step() { printf 'gpu-wheels.sh [%4d s] %s\n' "$SECONDS" "$*" >&2; }

# naiad's distributions the checks install (build-wheels.sh builds every one).
OWN=(naiad naiad_wire naiad_backend_pytorch naiad_backend_python naiad_backend_onnx)
# The rest, pinned as .venv has them (the versions the suite passes with here); py-spy profiles
# the model home during the benchmark's top rows (bench/gpu_bench.py --profile).
THIRD_PARTY=(
  starlette httptools orjson protobuf grpcio
  tritonclient python-rapidjson geventhttpclient gevent greenlet zope.event zope.interface brotli
  py-spy
)
# What the machine's image holds (its Python packages, as the device notes list them; names
# normalised as pip does): a requirement in this list needs no wheel.
IMAGE="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage
cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops
equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio
h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna imageio iniconfig
interface-meta jax jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning
lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe
matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions
nanobind narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-ml-py onnx onnx-ir
onnxruntime onnxscript opencv-python-headless optax opt-einsum orbax-checkpoint packaging pandas
pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil
pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks python-dateutil pyyaml regex
requests rich safetensors scikit-learn scipy setuptools six sortedcontainers sympy tabulate
threadpoolctl toolz torch torchvision tqdm triton typing-extensions typing-inspection urllib3
uvloop wheel wrapt yarl zipp pytest pytest-timeout"

version_of() { "$py" -m pip show "$1" 2>/dev/null | sed -n 's/^Version: //p'; }

rm -rf "$out"
mkdir -p "$out"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# A CPython 3.12 that runs, to compile naiad's hot modules for the machine's Python.
find_python312() {
  local candidate
  for candidate in "${PYTHON312:-}" python3.12 $(ls -d "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.12.*/bin/python3.12 2>/dev/null | sort -V -r); do
    [ -n "$candidate" ] && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null && { echo "$candidate"; return; }
  done
}

step "building naiad's wheels as pure Python"
NAIAD_PURE_PYTHON=1 bash scripts/build-wheels.sh "$scratch/own" >/dev/null
for name in "${OWN[@]}"; do cp "$scratch/own/$name"-*-py3-none-any.whl "$out/"; done
python312=$(find_python312)
if [ -n "$python312" ]; then
  step "compiling the core, naiad-wire and the Python backend with mypyc for CPython 3.12 ($python312, about 2 min)"
  "$python312" -m pip wheel -q --no-deps --wheel-dir "$scratch/compiled" . ./wire ./backends/python
  for name in naiad naiad_wire naiad_backend_python; do
    rm "$out/$name"-*-py3-none-any.whl
    cp "$scratch/compiled/$name"-*-cp312-*.whl "$out/"
  done
else
  step "no CPython 3.12 here (PYTHON312=...): the compiled distributions go as pure Python, slower than a user's install"
fi

pins=()
for name in "${THIRD_PARTY[@]}"; do
  version=$(version_of "$name")
  [ -n "$version" ] || { echo "gpu-wheels.sh: $name is not installed in $py's environment (bash scripts/setup.sh)" >&2; exit 1; }
  pins+=("$name==$version")
done
step "downloading for CPython 3.12, manylinux x86-64: ${pins[*]}"
platforms=()
for p in linux_x86_64 manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
  "${platforms[@]}" -d "$out" "${pins[@]}" 2> >(grep -v "^WARNING: Location" >&2)

step "checking the set"
"$py" -m pip install -q --dry-run --no-index --no-deps --find-links "$out" --python-version 3.12 --implementation cp \
  --only-binary=:all: "${platforms[@]}" --target "$scratch/dry" "$out"/*.whl 2> >(grep -v "^WARNING: Location" >&2)
"$py" - "$out" "$IMAGE" <<'EOF'
"""Every requirement of every carried wheel (with the extras the checks use) is carried or on
the machine's image."""
import re
import sys
import zipfile
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

folder, image = Path(sys.argv[1]), sys.argv[2].split()
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()  # noqa: E731
environment = {**default_environment(), "python_version": "3.12", "python_full_version": "3.12.3",
               "platform_machine": "x86_64", "sys_platform": "linux", "platform_system": "Linux",
               "implementation_name": "cpython"}
extras = {"tritonclient": {"all", "grpc", "http", "cuda"}}
carried, needs = set(), []
for wheel in sorted(folder.glob("*.whl")):
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(metadata).decode()
    name = norm(re.search(r"^Name: (.+)$", text, re.M).group(1).strip())
    carried.add(name)
    for line in re.findall(r"^Requires-Dist: (.+)$", text, re.M):
        requirement = Requirement(line)
        wanted = extras.get(name, set()) | {""}
        if requirement.marker is None or any(requirement.marker.evaluate({**environment, "extra": e}) for e in wanted):
            needs.append((name, norm(requirement.name)))
known = carried | {norm(n) for n in image}
missing = sorted({(who, what) for who, what in needs if what not in known})
# Not needed there: cuda-python is tritonclient[cuda]'s meta-package (the cuda.bindings module
# it imports comes with cuda-bindings, which the image holds); perf-analyzer is the load tool
# tritonclient[all] names, which no check runs.
missing = [(who, what) for who, what in missing if what not in ("cuda-python", "perf-analyzer")]
for who, what in missing:
    print(f"gpu-wheels.sh: {who} needs {what}, neither carried nor on the machine", file=sys.stderr)
sys.exit(1 if missing else 0)
EOF

if [ -n "${TRITON_CLIENT:-}" ]; then
  mkdir -p "$out/client_examples"
  for example in simple_http_cudashm_client.py simple_grpc_cudashm_client.py; do
    if [ -f "$TRITON_CLIENT/src/python/examples/$example" ]; then
      cp "$TRITON_CLIENT/src/python/examples/$example" "$out/client_examples/"
    else # a bare clone (a mirror): the files of its HEAD
      git -C "$TRITON_CLIENT" show "HEAD:src/python/examples/$example" >"$out/client_examples/$example"
    fi
  done
  step "copied Triton's CUDA shared-memory client examples into $out/client_examples"
else
  step "TRITON_CLIENT not set: gpu-check.sh will not run Triton's CUDA shared-memory client examples"
fi

total=$(find "$out" -type f -print0 | xargs -0 cat | wc -c)
ls -l "$out"
printf 'gpu-wheels.sh: %d wheels, %.1f MiB in all with the examples (the limit is 64 MiB)\n' "$(ls "$out"/*.whl | wc -l)" "$(echo "$total / 1048576" | bc -l)"
[ "$total" -le "$limit" ] || { echo "gpu-wheels.sh: over 64 MiB" >&2; exit 1; }
