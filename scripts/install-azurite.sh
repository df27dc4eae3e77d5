#!/usr/bin/env bash
# Installs Azurite, the Azure Storage emulator the Azure repository tests start
# (tests/repository/test_azure_repository.py), into .ci/node_modules (git-ignored), with
# Node.js and npm from the system's packages where they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x .ci/node_modules/.bin/azurite-blob ]; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null) || {
    echo "install-azurite: Node.js and npm could not be installed" >&2
    exit 1
  }
fi
npm install --prefix .ci --no-save --no-package-lock --no-audit --no-fund --loglevel=error azurite@3
