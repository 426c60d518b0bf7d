#!/usr/bin/env bash
# deploy/local/demo.sh - `make demo`: the noon concert sale, end to end. Starts the
# payment simulator, the core and the gateway on a fresh database, seeds the stadium
# concert (SEATS seats, default 1600: every block, one row), requires an account to
# join it, runs the crowd (FANS fans, default 24000: the seeds' 15 fans a seat, each
# signing in with a code by SMS first; bots that never sign in), waits for every
# payment to settle, runs the invariant checker (non-zero exit on any failure),
# prints a summary, writes the HTML report (.run/report/index.html) and a screenshot
# of it in headless Chromium (.run/report/report.png; chromium is installed when
# missing), stops.
# Full size: make demo FANS=600000 SEATS=40000.
#
# TOPOLOGY=cluster: the same sale on the HA topology, started by flashsale in its own
# process (loadtest/topology: PostgreSQL under Patroni, a Redis Cluster with replicas,
# HAProxy, GATEWAYS gateways and CORES cores, the payment simulator; Debian's patroni, etcd
# and haproxy are installed when missing), seeded the same way, stopped at the end.
# FAULTS=all (or pg-primary,redis-master,core,gateway,freeze-core,provider,gateways-restart,
# each optionally @its time after onsale: core@60s) injects faults during the sale
# (loadtest/faults; FAULT_AT, FAULT_GAP place those without a time; all but provider need
# TOPOLOGY=cluster), and the summary and the report show what each did.
#   make demo TOPOLOGY=cluster FAULTS=all
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apps.sh"
trap stack_stop EXIT

SEATS=${SEATS:-1600}
REPORT=${REPORT:-$PWD/.run/report/index.html} # the screenshot goes beside it
mkdir -p "$(dirname "$REPORT")"
FANS=${FANS:-24000}
need_bin seed flashsale
# The gateways' service token, to the stack by environment (never argv: ps shows it); flashsale sets
# the dials with the stack's operator token (STACK_OPERATOR_TOKEN), also by environment.
ADMIN=demo-admin-$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
export ONSALE_ADMIN_TOKEN=$ADMIN
# Compressed like the holds: Pay extends a hold by 20 s (not 2 minutes). The simulated
# provider: UPI payers approve after 1-4 s, 2% only after 75 s (their webhooks come
# after the hold and its extension ran out: the payment is refunded); 5% of payments
# fail; 10% of webhooks are delivered twice; webhooks within 300 ms go out in any order.
# Accounts: the event requires one (the account_required dial, on by default only for
# seated events of 5,000 seats or more: flashsale sets it for the demo's smaller
# stadium), so every fan signs in with a code by SMS before joining, ahead of the sale
# (flashsale -sign-in-ahead). The fans come from this one host: ADDRS loopback addresses
# (default 1: every fan from 127.0.0.1, like fans behind one carrier NAT; ADDRS=64:
# 127.0.0.1 up), far fewer than a real crowd's, so the
# core's per-address sign-in limits (defaults: 20 codes and 60 verifies an hour per
# address, against code-spraying from one host) are raised for the demo; the per-phone
# limits stay (each fan has its own number).
ADDRS=${ADDRS:-1}
SIGNIN_PER_ADDR=${SIGNIN_PER_ADDR:-$((FANS * 4 + 1000))}
echo "+ accounts: the demo event requires one; every fan signs in from one of $ADDRS loopback addresses, so the"
echo "  per-address sign-in limits are raised for this run: $SIGNIN_PER_ADDR codes and $SIGNIN_PER_ADDR verifies an hour"
echo "  per address (ONSALE_SIGNIN_SENDS_PER_ADDR, ONSALE_SIGNIN_VERIFIES_PER_ADDR; defaults 20 and 60)"
BEHAVIOUR='{"upi_delay_min":"1s","upi_delay_max":"4s","upi_slow_fraction":0.02,"upi_slow_delay":"75s","fail_rate":0.05,"duplicate_rate":0.1,"reorder_window":"300ms"}'
# The reconciler (ONSALE_RECONCILE_AFTER, 10 min by default: longer than a real hold and
# its extension) is compressed with the holds: it asks the provider about bookings pending
# over 45 s, and fails one that no payment reached in twice that (a UPI payment started
# while the provider was down, whose hold ran out before the provider came back).
CORE_ENV=(ONSALE_SWEEP_INTERVAL=5s ONSALE_EXTEND_BY="${EXTEND_BY:-20s}" ONSALE_RECONCILE_AFTER="${RECONCILE_AFTER:-45s}"
	ONSALE_SIGNIN_SENDS_PER_ADDR="$SIGNIN_PER_ADDR" ONSALE_SIGNIN_VERIFIES_PER_ADDR="$SIGNIN_PER_ADDR")
GATEWAY_ENV=(ONSALE_IP_RATE=100000 ONSALE_TOKEN_RATE=100 ONSALE_LOG_LEVEL=warn)
# The sale itself, on either topology.
# The crowd's arrival is spread with its size: the pre-queue, the wall and the tail each last
# at least a second per 4,000 fans (600,000 fans: a 150 s pre-queue, 150 s wall, 150 s tail),
# so joins come at about 1,200-2,000 a second however big the crowd. `make bench`'s joinbench
# measures about 3,000 joins a second on this 2-core machine with everything on it; a 10 s
# wall of 300,000 fans would be 30,000 a second, a test of the machine rather than of onsale.
# (Real pre-queues open half an hour before onsale and walls last minutes.) The sale's deadline
# follows (5 minutes and 4 s per 4,000 fans: 600,000 fans on this machine took 442 s to take
# every seat, then rounds of lapsed holds), and fans sign in ahead 1 per 50 fans at once (at
# least 256, at most 4,096). The crowd keeps flashsale's 1,024 workers (CONNS) at any
# size: 4,000 at 600,000 fans put four times the requests in flight at once and every
# queue grew (the gateway to 1.2 GB, status p99 1.3 s, joins 4x slower).
SPREAD=$((FANS / 4000))
ONSALE_IN=${ONSALE_IN:-$((SPREAD > 10 ? SPREAD : 10))s}
WALL=${WALL:-$((SPREAD > 10 ? SPREAD : 10))s}
TAIL=${TAIL:-$((SPREAD > 30 ? SPREAD : 30))s}
DEADLINE=${DEADLINE:-$((300 + 4 * SPREAD))s}
SIGNIN_CONC=${SIGNIN_CONC:-$((FANS / 50 < 256 ? 256 : FANS / 50 > 4096 ? 4096 : FANS / 50))}
CONNS=${CONNS:-1024}
SALE=(-fans "$FANS" -per-minute "${PER_MINUTE:-6000}" -max-active "${MAX_ACTIVE:-2000}" -session "${SESSION:-90s}"
	-onsale-in "$ONSALE_IN" -wall "$WALL" -tail "$TAIL" -claim "${CLAIM:-30s}" -deadline "$DEADLINE" -sweep 5s -report "$REPORT"
	-sign-in-conc "$SIGNIN_CONC" -conns "$CONNS"
	-accounts -addrs "$ADDRS"
	-note "Settings: the per-address sign-in limits were raised for this run's $ADDRS loopback addresses: $SIGNIN_PER_ADDR codes and $SIGNIN_PER_ADDR verifies an hour per address (defaults 20 and 60).")
if [[ -n ${FAULTS:-} ]]; then
	SALE+=(-faults "$FAULTS" -fault-at "${FAULT_AT:-15s}" -fault-gap "${FAULT_GAP:-25s}")
fi
[[ -z ${RESULT:-} ]] || SALE+=(-result "$RESULT")
if [[ ${TOPOLOGY:-single} == cluster ]]; then
	need_ha
	need_bin seed flashsale core gateway paysim
	CLUSTER_DIR=${CLUSTER_DIR:-$RUN/demo/cluster}
	rm -rf "$CLUSTER_DIR" # a topology of this sale's own
	echo "+ flashsale on the HA topology: $FANS fans, the stadium at $SEATS seats${FAULTS:+, faults: $FAULTS}"
	bin/flashsale -topology cluster -dir "$CLUSTER_DIR" -gateways "${GATEWAYS:-3}" -cores "${CORES:-2}" \
		-seats "$SEATS" -hold-seconds "${HOLD_SECONDS:-30}" -paysim-behaviour "$BEHAVIOUR" \
		"${CORE_ENV[@]/#/-core-env=}" "${GATEWAY_ENV[@]/#/-gateway-env=}" "${SALE[@]}"
else
	[[ ${TOPOLOGY:-single} == single ]] || { echo "TOPOLOGY=$TOPOLOGY: single or cluster" >&2; exit 2; }
	# The run's own database, Redis and ports (stack.sh run); event ids start at a random
	# point so even a Redis shared with other runs (REDIS_URL given) holds no room of theirs.
	stack_start demo -spread-event-ids -paysim-env ONSALE_PAYSIM_BEHAVIOUR="$BEHAVIOUR" \
		"${CORE_ENV[@]/#/-core-env=}" "${GATEWAY_ENV[@]/#/-gateway-env=}"
	echo "+ seed: the demo catalog (stadium at $SEATS seats)"
	# Time is compressed: holds last 30 s (not eight minutes), sessions 90 s (not ten),
	# and fans are let in six times faster (6,000 a minute).
	bin/seed -database-url "$STACK_DATABASE_URL" -json -onsale-in 1m -stadium-seats "$SEATS" \
		-concert-hold-seconds "${HOLD_SECONDS:-30}" >"$RUN/demo/seed.json"
	EVENT=$(grep '"name":"Arijit Singh Live"' "$RUN/demo/seed.json" | grep -o '"id":[0-9]*' | cut -d: -f2)
	[[ -n $EVENT ]] || { echo "seed: no stadium concert in $RUN/demo/seed.json" >&2; exit 1; }
	echo "+ flashsale: $FANS fans, event $EVENT"
	DATABASE_URL=$STACK_DATABASE_URL ONSALE_OPERATOR_TOKEN=$STACK_OPERATOR_TOKEN bin/flashsale -gateway "$STACK_GATEWAY_URL" -admin "$STACK_GATEWAY_ADMIN_URL" -paysim "$STACK_PAYSIM_URL" \
		-event "$EVENT" -watch "$(watch_list)" -redis "$REDIS_URL" "${SALE[@]}"
fi
# The report, opened in headless Chromium: a screenshot beside it.
SHOT=$(dirname "$REPORT")/report.png
if need_chromium; then
	chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-quic --disable-background-networking \
		--disable-component-update --disable-sync --user-data-dir="$(mktemp -d)" --hide-scrollbars --window-size=1280,3200 \
		--screenshot="$SHOT" "file://$REPORT" >/dev/null 2>&1 &&
		echo "report screenshot: ${SHOT#"$PWD"/}"
fi
