#!/usr/bin/env bash
# bench/perf_vs_perf_analyzer.sh — `naiad perf` beside Triton's perf_analyzer, in one run, on
# the same server: add_sub of ../shared/bench/models served by naiad and by the real Triton
# (../shared/bench/triton.sh), over HTTP and gRPC, at concurrency 1 and 8. Each row runs the
# two tools in turn, ROUNDS times (default 2) perf_analyzer, naiad perf, naiad perf,
# perf_analyzer, so a drift of the machine falls on both, and prints each tool's mean
# throughput (read from the CSV each writes with -f, perf_analyzer's columns) and naiad perf /
# perf_analyzer.
#
# perf_analyzer: $PERF_ANALYZER (a command line), else `perf_analyzer` on PATH; see
# scripts/perf-analyzer.sh's header for running PyPI's perf-analyzer 2.60 on an older glibc.
# INTERVAL (ms, default 2000), STABILITY (%, default 25) and TRIALS (default 10) are passed to
# both tools. BENCH_DIR overrides the location of shared/bench. Without perf_analyzer the
# script says so and exits 0; without Triton it measures naiad only.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bench=${BENCH_DIR:-$root/../shared/bench}
read -r -a pa <<< "${PERF_ANALYZER:-$(command -v perf_analyzer || true)}"
if [ ${#pa[@]} -eq 0 ] || ! "${pa[@]}" --version >/dev/null 2>&1; then
  echo "SKIP: perf_analyzer is not installed (set PERF_ANALYZER or put it on PATH; see scripts/perf-analyzer.sh)"
  exit 0
fi
py=$root/.venv/bin/python
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"' EXIT
ports() { "$py" -c "from naiad.testing import free_port as f; print(f(), f(), f())"; }

read -r nhttp ngrpc nmetrics < <(ports)
"$root/.venv/bin/naiad" serve --model-repository "$bench/models" --http-address 127.0.0.1 --grpc-address 127.0.0.1 \
  --metrics-address 127.0.0.1 --http-port "$nhttp" --grpc-port "$ngrpc" --metrics-port "$nmetrics" \
  > "$work/naiad.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do
  curl -sf "127.0.0.1:$nhttp/v2/models/add_sub/ready" >/dev/null && break
  sleep 0.5
done
servers=("naiad $nhttp $ngrpc")
read -r thttp tgrpc tmetrics < <(ports)
if [ -x "$bench/triton.sh" ] && tpid=$("$bench/triton.sh" "$bench/models" "$thttp" "$tgrpc" "$tmetrics"); then
  pids+=("$tpid")
  servers+=("triton $thttp $tgrpc")
else
  echo "Triton did not start (see ../shared/bench/README.md: setup_anchors.sh); naiad only"
fi

flags=(-m add_sub -p "${INTERVAL:-2000}" -s "${STABILITY:-25}" -r "${TRIALS:-10}")
throughput() { "$py" -c 'import csv,sys; print(next(csv.DictReader(open(sys.argv[1])))["Inferences/Second"])' "$1" 2>/dev/null || echo 0; }
run_pa() {  # run_pa PROTOCOL PORT CONCURRENCY -> throughput
  rm -f "$work/pa.csv"
  "${pa[@]}" "${flags[@]}" -i "$1" -u "127.0.0.1:$2" --concurrency-range "$3" -f "$work/pa.csv" >"$work/pa.log" 2>&1
  throughput "$work/pa.csv"
}
run_naiad() {
  rm -f "$work/np.csv"
  "$root/.venv/bin/naiad" perf "${flags[@]}" -i "$1" -u "127.0.0.1:$2" --concurrency-range "$3" -f "$work/np.csv" \
    >"$work/np.log" 2>&1
  throughput "$work/np.csv"
}

"${pa[@]}" --version | head -1
printf "%-7s %-5s %3s %15s %15s %7s\n" server proto c perf_analyzer "naiad perf" ratio
for server in "${servers[@]}"; do
  read -r name http grpc <<< "$server"
  for proto in http grpc; do
    port=$http; [ "$proto" = grpc ] && port=$grpc
    for c in 1 8; do
      pas=(); ours=()
      for _ in $(seq 1 "${ROUNDS:-2}"); do
        pas+=("$(run_pa "$proto" "$port" "$c")"); ours+=("$(run_naiad "$proto" "$port" "$c")")
        ours+=("$(run_naiad "$proto" "$port" "$c")"); pas+=("$(run_pa "$proto" "$port" "$c")")
      done
      "$py" -c 'import sys
name, proto, c, pas, ours = sys.argv[1:]
a = [float(x) for x in pas.split()]; n = [float(x) for x in ours.split()]
a, n = sum(a) / len(a), sum(n) / len(n)
print(f"{name:<7} {proto:<5} {c:>3} {a:15.1f} {n:15.1f} {n / a if a else 0:7.2f}")' "$name" "$proto" "$c" "${pas[*]}" "${ours[*]}"
    done
  done
done
