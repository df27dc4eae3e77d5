#!/usr/bin/env bash
# The one GPU check, run on a lent GPU machine from the checkout's root (docs/gpu.md):
#   run(command="bash scripts/gpu-check.sh", carry=[".whl"], timeout_s=540)
# after `bash scripts/gpu-wheels.sh` here. In order, each step bounded by `timeout`:
#   1. prints the date and `nvidia-smi -L` (no GPU: says so, writes the summary, exits 3);
#   2. installs .whl/*.whl into a target folder and puts it first on PYTHONPATH (the machine's
#      own torch, CuPy, cuda-bindings and NVML stay in use);
#   3. prints the versions that matter (Python, torch and its CUDA, cuda-bindings, CuPy, NVML);
#   4. runs every GPU test: pytest -m gpu tests/gpu;
#   5. runs Triton's two CUDA shared-memory client examples, unchanged, when .whl/client_examples
#      holds them (TRITON_CLIENT=... bash scripts/gpu-wheels.sh copies them);
#   6. runs bench/gpu_bench.py (HTTP, gRPC, gRPC + CUDA shared memory beside torch's ceiling),
#      with py-spy on the model home during each protocol's top row; then its 1 and 64
#      connection rows again without CUDA graphs, to show what the graphs change; then the
#      same network in a model.py (--backend python) over HTTP and gRPC + CUDA shared memory;
#   7. with the time left, experiments that do not decide the outcome: the server's own
#      ceiling on that machine (the benchmark's --quick network, which costs the GPU next to
#      nothing, over gRPC with and without CUDA shared memory: what serving a request costs
#      when the model does not), the model.py's HTTP rows again with OMP_WAIT_POLICY=ACTIVE
#      (its OpenMP threads spinning without end, the opposite of the PASSIVE a GPU instance's
#      process now gets: the comparison within one run), and the PyTorch backend's
#      64-connection rows with the server's interpreter switching threads every 0.5 ms instead
#      of 5 (how long an instance thread can wait to take the lock back beside the home's busy
#      loop); docs/history/gpu.md says why.
# Everything it prints goes to $OUT/gpu-check.log too; $OUT/summary.md holds the GPU, the date,
# each step's outcome and time, the test counts, failures, and the benchmark's table;
# $OUT/details.tar.gz the rest (pytest.xml, versions.txt, each benchmark's .json and .log).
# It ends within 8 minutes: each step's limit is cut to what is left of BUDGET_S (470 s, or
# GPU_CHECK_BUDGET_S: less where the session has less device time left), keeping time for the
# summary; the experiments come last, so a smaller budget cuts them first.
# Exit status: 0 when the tests and the benchmark passed, 3 without a GPU, 4 without .whl/, 1
# otherwise. OUT defaults to ./gpu-check-out where the device tool does not set it.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-check-out}
mkdir -p "$out"
log=$out/gpu-check.log
summary=$out/summary.md
: >"$log"
exec > >(tee -a "$log") 2>&1
py=${PYTHON:-python3}
site=${NAIAD_GPU_SITE:-/tmp/naiad-gpu-site}
export PYTHONUNBUFFERED=1
declare -a steps=()
BUDGET_S=${GPU_CHECK_BUDGET_S:-470}

# On stderr: a step's stdout may be its own file (versions.txt, bench.log).
say() { printf '\n== gpu-check.sh [%4d s] %s\n' "$SECONDS" "$*" >&2; }
# step NAME SECONDS COMMAND...: runs it under timeout, records "NAME: outcome (time)".
step() {
  local name=$1 limit=$2 started=$SECONDS status
  shift 2
  local left=$((BUDGET_S - SECONDS - 10))
  [ "$limit" -le "$left" ] || limit=$left
  if [ "$limit" -le 0 ]; then
    steps+=("$name: not run, no time left")
    return 124
  fi
  say "$name (at most ${limit} s)"
  timeout --kill-after=10 "$limit" "$@"
  status=$?
  local outcome="passed"
  [ "$status" -eq 0 ] || outcome="FAILED (exit $status)"
  [ "$status" -eq 124 ] || [ "$status" -eq 137 ] && outcome="TIMED OUT after ${limit} s"
  steps+=("$name: $outcome, $((SECONDS - started)) s")
  return "$status"
}

# A heading and FILE's lines, indented, where FILE holds anything.
section() {
  [ -s "$2" ] || return 0
  echo
  echo "## $1"
  echo
  sed 's/^/    /' "$2"
}

write_summary() {
  local verdict=$1
  {
    echo "# naiad GPU check"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "- GPU: ${gpu_name:-none found}"
    echo "- outcome: $verdict"
    echo "- took: $SECONDS s"
    echo
    echo "## Steps"
    echo
    for line in "${steps[@]}"; do echo "- $line"; done
    section "Versions" "$out/versions.txt"
    if [ -s "$out/pytest.xml" ]; then
      echo
      echo "## GPU tests (pytest -m gpu tests/gpu)"
      echo
      "$py" - "$out/pytest.xml" <<'EOF'
import sys
import xml.etree.ElementTree as ET

root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else list(root)
counts = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
print(f"{passed} passed, {counts['failures']} failed, {counts['errors']} errors, {counts['skipped']} skipped")
print()
for case in root.iter("testcase"):
    for kind in ("failure", "error", "skipped"):
        node = case.find(kind)
        if node is not None:
            text = (node.get("message") or "").splitlines()[0][:300] if node.get("message") else ""
            print(f"- {kind.upper()} {case.get('classname')}::{case.get('name')}: {text}")
EOF
    fi
    section "Triton's CUDA shared-memory client examples" "$out/examples.log"
    section "Benchmark (bench/gpu_bench.py)" "$out/bench.log"
    section "Benchmark without CUDA graphs (bench/gpu_bench.py --no-cuda-graphs)" "$out/bench-no-graphs.log"
    section "Benchmark, the same network in a model.py (bench/gpu_bench.py --backend python)" "$out/bench-model-py.log"
    section "Experiment: the server's own ceiling (bench/gpu_bench.py --quick)" "$out/bench-server-ceiling.log"
    section "Experiment: the model.py over HTTP with OMP_WAIT_POLICY=ACTIVE" "$out/bench-model-py-active.log"
    section "Experiment: the PyTorch backend at 64 connections, switch interval 0.5 ms" "$out/bench-switch-interval.log"
  } >"$summary"
  echo
  cat "$summary"
  bundle_details
}

# The device tool brings back at most 8 files from $OUT: the summary and the whole log stay
# files of their own, everything else travels in one archive.
bundle_details() {
  local details
  mapfile -t details < <(cd "$out" && ls | grep -vx -e summary.md -e gpu-check.log -e details.tar.gz)
  [ "${#details[@]}" -gt 0 ] || return 0
  tar -czf "$out/details.tar.gz" -C "$out" "${details[@]}" && (cd "$out" && rm -f "${details[@]}")
}

say "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), host $(hostname), checkout at $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "no GPU: nvidia-smi is not installed on this machine"
  steps+=("GPU: none (no nvidia-smi)")
  write_summary "no GPU: nothing was checked"
  exit 3
fi
if ! gpus=$(timeout 30 nvidia-smi -L 2>&1) || ! grep -q '^GPU ' <<<"$gpus"; then
  echo "no GPU: nvidia-smi -L finds none ($gpus)"
  steps+=("GPU: none (nvidia-smi -L: $gpus)")
  write_summary "no GPU: nothing was checked"
  exit 3
fi
echo "$gpus"
gpu_name=$(head -1 <<<"$gpus")
timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv || true

if ! ls .whl/*.whl >/dev/null 2>&1; then
  echo "no .whl/: build it here with 'bash scripts/gpu-wheels.sh' and carry it (carry=[\".whl\"])"
  steps+=("install: no .whl/ carried")
  write_summary "not run: the wheels were not carried"
  exit 4
fi
rm -rf "$site"
if ! step "install the carried wheels" 90 "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target "$site" .whl/*.whl; then
  write_summary "FAILED: the wheels did not install"
  exit 1
fi
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
export PATH=$site/bin:$PATH # py-spy, for the benchmark's profile

step "versions" 45 "$py" - >"$out/versions.txt" <<'EOF'
import importlib.metadata as md
import platform

import naiad
import naiad.scheduling.instance_runner as runner
import torch

print(f"python {platform.python_version()}, naiad {naiad.__version__} from {naiad.__file__}")
compiled = runner.__file__.endswith(".so")
print(f"naiad's hot modules: {'compiled with mypyc' if compiled else 'pure Python (no CPython 3.12 where the wheels were built)'}")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
      f"devices: {[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}")
for name in ("cuda-bindings", "cupy-cuda13x", "cupy-cuda12x", "nvidia-ml-py", "tritonclient", "grpcio", "protobuf",
             "numpy", "onnxruntime", "pytest"):
    try:
        print(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        pass
EOF
cat "$out/versions.txt"

step "GPU tests: pytest -m gpu tests/gpu" 170 "$py" -m pytest -m gpu -p no:cacheprovider -q -rsfE \
  --junitxml="$out/pytest.xml" tests/gpu
tests_status=$?
# A GPU test that skips on a GPU machine proved nothing: count it as a failure.
skipped=$("$py" -c "import sys, xml.etree.ElementTree as ET; r = ET.parse(sys.argv[1]).getroot(); print(sum(1 for _ in r.iter('skipped')))" "$out/pytest.xml" 2>/dev/null || echo "?")
if [ "$tests_status" -eq 0 ] && [ "$skipped" != 0 ]; then
  echo "$skipped GPU test(s) skipped on a machine with a GPU: see the reasons above"
  steps+=("GPU tests: $skipped skipped on a GPU machine, counted as a failure")
  tests_status=5
fi

examples_status=0
if ls .whl/client_examples/*.py >/dev/null 2>&1; then
  step "Triton's CUDA shared-memory client examples" 70 "$py" scripts/client_examples/run_examples.py \
    .whl/client_examples "$site/bin/naiad" > >(tee "$out/examples.log")
  examples_status=$?
else
  steps+=("Triton's CUDA shared-memory client examples: not carried (TRITON_CLIENT=... bash scripts/gpu-wheels.sh)")
fi

step "benchmark: bench/gpu_bench.py" 220 "$py" bench/gpu_bench.py --profile --json "$out/bench.json" > >(tee "$out/bench.log")
bench_status=$?
sleep 1 # tee's last lines
step "benchmark without CUDA graphs" 90 "$py" bench/gpu_bench.py --no-cuda-graphs --concurrency 1 64 --duration 3 \
  --json "$out/bench-no-graphs.json" > >(tee "$out/bench-no-graphs.log")
[ "$?" -eq 0 ] || bench_status=1
sleep 1
step "benchmark, a model.py" 100 "$py" bench/gpu_bench.py --backend python --protocols http grpc+cudashm \
  --profile --concurrency 1 64 --duration 3 --json "$out/bench-model-py.json" > >(tee "$out/bench-model-py.log")
[ "$?" -eq 0 ] || bench_status=1
sleep 1

# Their outcomes are in the summary's steps; they do not decide the check's.
step "experiment: the server's own ceiling, a network that costs next to nothing" 60 "$py" bench/gpu_bench.py \
  --quick --protocols grpc grpc+cudashm --concurrency 1 64 --duration 3 --json "$out/bench-server-ceiling.json" \
  > >(tee "$out/bench-server-ceiling.log")
sleep 1
OMP_WAIT_POLICY=ACTIVE step "experiment: a model.py over HTTP, OpenMP threads spinning" 70 "$py" bench/gpu_bench.py \
  --backend python --protocols http --concurrency 1 64 --duration 3 --json "$out/bench-model-py-active.json" \
  > >(tee "$out/bench-model-py-active.log")
sleep 1
# The workers and the model home are forked from the process the wrapper starts: they keep
# its switch interval.
switching="$py -c 'import runpy, sys; sys.setswitchinterval(0.0005); runpy.run_module(\"naiad.cli\", run_name=\"__main__\")'"
step "experiment: the PyTorch backend, switch interval 0.5 ms" 70 "$py" bench/gpu_bench.py --protocols http grpc+cudashm \
  --concurrency 64 --duration 3 --naiad "$switching" --json "$out/bench-switch-interval.json" \
  > >(tee "$out/bench-switch-interval.log")
sleep 1

if [ "$tests_status" -eq 0 ] && [ "$examples_status" -eq 0 ] && [ "$bench_status" -eq 0 ]; then
  write_summary "passed"
  exit 0
fi
write_summary "FAILED (tests: exit $tests_status, client examples: exit $examples_status, benchmark: exit $bench_status)"
exit 1
