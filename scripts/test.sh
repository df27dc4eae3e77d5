#!/usr/bin/env bash
# Sets up .venv with everything (scripts/setup.sh test) and runs the whole test suite: core,
# the wire package, every backend and every integration.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
tests=(tests wire/tests)
for b in backends/*/tests integrations/*/tests; do [ -d "$b" ] && tests+=("$b"); done
exec .venv/bin/python -m pytest -q -p no:cacheprovider "${tests[@]}" "$@"
