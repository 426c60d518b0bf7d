#!/usr/bin/env bash
# deploy/local/demo.sh - `make demo` (placeholder). Runs under
# `deploy/local/stack.sh run -- deploy/local/demo.sh` with DATABASE_URL and REDIS_URL set.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

echo "demo: not yet"
