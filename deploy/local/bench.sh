#!/usr/bin/env bash
# deploy/local/bench.sh - `make bench`: the hold path and the sweeper against
# baselines measured in the same run (pgbench on the same server), and the
# gateway's status polls against a fasthttp hello-world on the same machine, and the
# gateway's admission rate and dial propagation (go test -bench ./gateway/cmd/gateway), and what
# ticking costs Redis per event with 1, 3 and 10 gateways (BenchmarkTickCost).
# Runs through stack.sh run: its own PostgreSQL and Redis, the apps (bin/stack) on
# free ports. Results go to the terminal and to .run/bench/. Bounded: about five
# minutes; BENCH_ROUNDS (default 8) and BENCH_SWEEPS (default 5) shorten it, and
# ONSALE_TICKCOST_WINDOW (default 10s) the tick cost's six measurement windows.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apps.sh"
trap stack_stop EXIT

need_bin seed holdbench pollbench
# pgbench ships with the PostgreSQL server package on Debian.
if ! ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1 && ! command -v pgbench >/dev/null; then
	echo "installing postgresql for pgbench (log in $RUN/apt.log)" >&2
	apt_get_install "$RUN/apt.log" postgresql || { tail -n 20 "$RUN/apt.log" >&2; exit 1; }
fi
mkdir -p .run/bench
# The hold path alone: the core only, no seat-map upkeep, no sweeps during the rounds
# (holdbench starts a sweeping core of its own for the sweeper's measurement).
stack_start holdbench -apps core -redis '' -core-env ONSALE_SWEEP_INTERVAL=1h
bin/seed -database-url "$STACK_DATABASE_URL" >/dev/null
bin/holdbench -core "$STACK_CORE_URL" -database-url "$STACK_DATABASE_URL" -admit-key "$STACK_ADMIT_KEY" \
	-rounds "${BENCH_ROUNDS:-8}" -sweeps "${BENCH_SWEEPS:-5}" -out .run/bench/holdbench.json | tee .run/bench/holdbench.txt
echo "+ go test -run XXX -bench . ./core/postgres (the hold path below HTTP)"
DATABASE_URL=$STACK_DATABASE_URL go test -run XXX -bench CreateHold -benchtime 5000x ./core/postgres | tee .run/bench/gobench.txt
stack_stop

echo "+ the gateway's admission rate across three gateways against the dial, and how fast a dial change reaches them"
# (the run's own Redis; each fails on a breach: more than 5% off the dial, a change later than 1 s)
go test -run '^$' -bench 'AdmissionRate|DialPropagation' -benchtime 1x ./gateway/cmd/gateway | tee .run/bench/gatewaybench.txt

echo "+ pollbench: the gateway's queue-status polls beside a fasthttp hello-world"
# The gateway's per-IP and per-token limits opened up: every fan polls from 127.0.0.1.
stack_start pollbench -spread-event-ids -core-env ONSALE_SWEEP_INTERVAL=5s -gateway-env ONSALE_IP_RATE=100000 \
	-gateway-env ONSALE_TOKEN_RATE=100 -gateway-env ONSALE_LOG_LEVEL=warn
bin/seed -database-url "$STACK_DATABASE_URL" -json -stadium-seats 1600 >"$RUN/pollbench/seed.json"
EVENT=$(grep '"name":"Arijit Singh Live"' "$RUN/pollbench/seed.json" | grep -o '"id":[0-9]*' | cut -d: -f2)
ONSALE_OPERATOR_TOKEN="$STACK_OPERATOR_TOKEN" bin/pollbench -gateway "$STACK_GATEWAY_ADDR" -admin "${STACK_GATEWAY_ADMIN_URL#http://}" -event "$EVENT" \
	-gateway-pid "$(tr ',' '\n' <<<"$STACK_PIDS" | sed -n 's/^gateway=//p')" -out .run/bench/pollbench.json |
	tee .run/bench/pollbench.txt
stack_stop

echo "+ ticking's Redis cost per event on sale with 1, 3 and 10 gateway processes, nobody polling"
# (the run's own Redis, nothing else using it; ONSALE_BASELINE_BIN=dir measures another
# build's gateway first, in the same run: the ratio is what counts)
go test -run '^$' -bench 'TickCost' -benchtime 1x -timeout 20m ./gateway/cmd/gateway | tee .run/bench/tickcost.txt
