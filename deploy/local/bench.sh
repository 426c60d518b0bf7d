#!/usr/bin/env bash
# deploy/local/bench.sh - `make bench` (placeholder). Runs under
# `deploy/local/stack.sh run -- deploy/local/bench.sh` with DATABASE_URL and REDIS_URL set.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

echo "bench: not yet"
