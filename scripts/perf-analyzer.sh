#!/usr/bin/env bash
# perf-analyzer.sh — runs Triton's perf_analyzer against naiad serving the example model "simple"
# (scripts/client_examples/models/simple), over HTTP and gRPC, each without and with
# `--shared-memory system`; prints each command and its output, and exits 1 if any run fails.
#
# perf_analyzer: $PERF_ANALYZER (a command line), else `perf_analyzer` on PATH. It ships in
# PyPI's perf-analyzer wheels since 2.58 (they need glibc >= 2.38 and GLIBCXX_3.4.32; on older
# systems pip picks the placeholder release 0.1.0, which has no binary) and before that in
# tritonclient's manylinux wheels (e.g. 2.40.0: bin/perf_analyzer, which needs libb64.so.0d and
# libcudart.so.12 on the library path). Both ran this script. On an older system, run the newer
# binary with newer libraries beside it, e.g. Debian trixie's libc6 and libstdc++6 under $ROOT:
#   PERF_ANALYZER="$ROOT/usr/lib64/ld-linux-x86-64.so.2 --library-path \
#     $ROOT/usr/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu .../perf_analyzer/bin/perf_analyzer"
# Without perf_analyzer the script says so and exits 0.
set -uo pipefail
cd "$(dirname "$0")/.."
read -r -a pa <<< "${PERF_ANALYZER:-$(command -v perf_analyzer || true)}"
if [ ${#pa[@]} -eq 0 ] || ! "${pa[@]}" --version >/dev/null 2>&1; then
  echo "SKIP: perf_analyzer is not installed (set PERF_ANALYZER or put it on PATH; see this script's header)"
  exit 0
fi
[ -x .venv/bin/python ] || bash scripts/setup.sh
work=$(mktemp -d)
cp -r scripts/client_examples/models/simple "$work/simple"
read -r http grpc metrics < <(.venv/bin/python -c "from naiad.testing import free_port as f; print(f(), f(), f())")
shm=()  # client shared memory is opt-in where naiad has the flag
.venv/bin/naiad serve --help | grep -q -- --allow-client-shm && shm=(--allow-client-shm true)
.venv/bin/naiad serve --model-repository "$work" --http-address 127.0.0.1 --grpc-address 127.0.0.1 \
  --metrics-address 127.0.0.1 --http-port "$http" --grpc-port "$grpc" --metrics-port "$metrics" \
  "${shm[@]}" > "$work/naiad.log" 2>&1 &
naiad=$!
trap 'kill $naiad 2>/dev/null; wait $naiad 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 120); do
  curl -sf "127.0.0.1:$http/v2/models/simple/ready" >/dev/null && break
  kill -0 $naiad 2>/dev/null || { cat "$work/naiad.log"; exit 1; }
  sleep 0.5
done
"${pa[@]}" --version | head -1
failed=0
profile() {  # profile NAME HTTP_PORT GRPC_PORT
  local run args
  for run in "-u 127.0.0.1:$2" "-u 127.0.0.1:$2 --shared-memory system" \
             "-i grpc -u 127.0.0.1:$3" "-i grpc -u 127.0.0.1:$3 --shared-memory system"; do
    read -r -a args <<< "$run"
    # A busy shared machine needs a wide stability margin (-s) and more trials to settle.
    echo; echo "[$1] \$ perf_analyzer -m simple $run -s 100 --max-trials 20 --measurement-interval 2000"
    "${pa[@]}" -m simple "${args[@]}" -s 100 --max-trials 20 --measurement-interval 2000 || failed=1
  done
}
profile naiad "$http" "$grpc"
# The same runs against the real Triton serving the same directory, where the bench has it.
triton=../shared/bench/triton.sh
if [ -x "$triton" ]; then
  read -r thttp tgrpc tmetrics < <(.venv/bin/python -c "from naiad.testing import free_port as f; print(f(), f(), f())")
  # The bench's Triton (2.51) allows client shared memory without a flag, and refuses --allow-client-shm.
  if tpid=$("$triton" "$work" "$thttp" "$tgrpc" "$tmetrics"); then
    trap 'kill $naiad $tpid 2>/dev/null; wait $naiad 2>/dev/null; rm -rf "$work"' EXIT
    profile triton "$thttp" "$tgrpc"
  else
    echo "Triton did not start; naiad's figures only"
  fi
fi
exit $failed
