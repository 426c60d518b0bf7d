#!/usr/bin/env bash
# deploy/local/demo.sh - `make demo`: start the core on a fresh database, seed the
# demo catalog, storm the stadium concert's hold API with a crowd of fans, check
# that no seat is held twice, stop. Bounded: FANS fans (default 3000).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apps.sh"
trap stop_core EXIT

build
url=$(fresh_db onsale_demo)
# A short sweep interval so expired holds visibly return during the demo.
start_core "$url" 127.0.0.1:18081 -sweep-interval 5s
echo "+ seed: the demo catalog"
DATABASE_URL=$url bin/seed -onsale-in 0s
echo "+ holdstorm: ${FANS:-3000} fans with admit tokens storm the stadium concert"
DATABASE_URL=$url bin/holdstorm -core http://127.0.0.1:18081 -admit-key .run/keys/admit.key -fans "${FANS:-3000}"
echo "+ core metrics (holds by outcome)"
curl -fsS http://127.0.0.1:18081/metrics | grep -E '^onsale_core_holds_total' || true
