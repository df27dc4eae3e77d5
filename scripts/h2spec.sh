#!/usr/bin/env bash
# Runs h2spec (summerwind/h2spec: the generic, http2 and hpack sections, h2c with prior
# knowledge) against naiad's gRPC port and prints its report. h2spec is taken from $H2SPEC,
# else from PATH; without it this prints why and exits 0 (CI does not need it: the raw-frame
# tests in tests/grpc/test_grpc_h2spec_cases.py, one per h2spec case, and
# tests/grpc/test_grpc_http2_rules.py check the same rules).
# Extra arguments go to h2spec (e.g. `-v`, `-j report.xml`, a section such as `http2/8.1`).
# docs/grpc.md lists what h2spec reports and why.
set -euo pipefail
cd "$(dirname "$0")/.."

H2SPEC=${H2SPEC:-$(command -v h2spec || true)}
if [ -z "$H2SPEC" ] || [ ! -x "$H2SPEC" ]; then
  echo "h2spec.sh: skipped: no h2spec executable (set H2SPEC=/path/to/h2spec or put it on PATH)"
  exit 0
fi
PYTHON=${PYTHON:-.venv/bin/python}

work=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

port=$("$PYTHON" -c 'from naiad.testing import free_port; print(free_port())')
mkdir "$work/models"  # no model is needed: h2spec's requests are answered by the transport
"$PYTHON" -m naiad.cli serve --model-repository "$work/models" --allow-http false --allow-metrics false \
  --grpc-address 127.0.0.1 --grpc-port "$port" >"$work/naiad.log" 2>&1 &
server_pid=$!
for _ in $(seq 600); do
  grep -q "naiad is ready" "$work/naiad.log" && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/naiad.log"; echo "h2spec.sh: naiad did not start" >&2; exit 1; }
  sleep 0.1
done
grep -q "naiad is ready" "$work/naiad.log" || { cat "$work/naiad.log"; echo "h2spec.sh: naiad was not ready" >&2; exit 1; }

status=0
"$H2SPEC" -h 127.0.0.1 -p "$port" -o 2 "$@" | tee "$work/report.txt" || status=$?
echo
grep -E "^[0-9]+ tests, " "$work/report.txt" || true
exit "$status"
