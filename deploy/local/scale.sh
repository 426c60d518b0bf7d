#!/usr/bin/env bash
# deploy/local/scale.sh - `make scale`: what a fan in line costs, for sizing
# (deploy/README.md, "Machines and sizing"). SCALE_FANS (default 100,000) fresh
# visitors join the stadium concert through the gateway's HTTP join route, then
# their status is polled for 10 s (loadtest/cmd/joinbench): joins a second,
# Redis used_memory per fan, Redis commands and the gateway's and Redis's CPU
# per join and per poll. SCALE_MODE prequeue (default: the draw before onsale,
# where seed 001's 2,000,000 fans wait) or line (after onsale). Runs through
# stack.sh run: its own PostgreSQL, Redis and apps. Results in .run/scale/.
# Bounded: about a minute at 100,000 fans; the joins stop after SCALE_JOIN_TIME (10m).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apps.sh"
trap stack_stop EXIT

need_bin seed joinbench
mkdir -p .run/scale
# Every fan joins from 127.0.0.1: the per-address limits opened up, as bench.sh does.
stack_start scale -spread-event-ids -core-env ONSALE_SWEEP_INTERVAL=5s -gateway-env ONSALE_IP_RATE=10000000 \
	-gateway-env ONSALE_TOKEN_RATE=100 -gateway-env ONSALE_LOG_LEVEL=warn
bin/seed -database-url "$STACK_DATABASE_URL" -json >"$RUN/scale/seed.json"
# The stadium concert: 40,000 seats, the largest bin/seed makes (seed 001 has 50,000;
# neither a join nor a poll touches a seat). Its account_required default is
# switched off by joinbench: guests join.
EVENT=$(grep '"name":"Arijit Singh Live"' "$RUN/scale/seed.json" | grep -o '"id":[0-9]*' | cut -d: -f2)
REDIS_ADDR=$(sed -E 's#^redis://([^@/]*@)?([^/?]*).*#\2#' <<<"$REDIS_URL")
fans=${SCALE_FANS:-100000}
ONSALE_OPERATOR_TOKEN="$STACK_OPERATOR_TOKEN" bin/joinbench -gateway "$STACK_GATEWAY_ADDR" -admin "${STACK_GATEWAY_ADMIN_URL#http://}" \
	-event "$EVENT" -fans "$fans" -join-time "${SCALE_JOIN_TIME:-10m}" -mode "${SCALE_MODE:-prequeue}" -redis "$REDIS_ADDR" \
	-watch "gateway=$(tr ',' '\n' <<<"$STACK_PIDS" | sed -n 's/^gateway=//p')" \
	-out ".run/scale/joinbench-$fans.json" | tee ".run/scale/joinbench-$fans.txt"
