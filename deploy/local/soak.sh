#!/usr/bin/env bash
# deploy/local/soak.sh - `make soak`: steady fan traffic for a bounded time on a stack of
# its own, watching the services for growth that has no bound. Runs through stack.sh run
# (its own PostgreSQL and Redis; the apps by bin/stack on free ports), seeds the stadium
# concert with seats enough for the whole soak, and runs bin/soak (loadtest/cmd/soak):
# RATE fans a second (default 2) join the line, poll, hold, pay by UPI or card through the
# payment simulator, release or walk away, and leave, while the core's and the gateway's
# heap in use and goroutines are sampled from /metrics every few seconds. It prints the
# curves and writes them to .run/soak/ (samples.csv, summary.txt); non-zero exit when a
# curve grows without bound (the rule: loadtest/soak/growth.go).
#   make soak            20 minutes (SOAK=20m)
#   make soak SOAK=2m    a quick one
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apps.sh"
trap stack_stop EXIT

SOAK=${SOAK:-20m}
RATE=${RATE:-2}
need_bin seed soak
# seconds of SOAK (Go duration units s, m, h; one unit)
case $SOAK in
*h) secs=$((${SOAK%h} * 3600)) ;;
*m) secs=$((${SOAK%m} * 60)) ;;
*s) secs=${SOAK%s} ;;
*) echo "SOAK=$SOAK: want a whole number of s, m or h (20m, 2m, 90s)" >&2; exit 2 ;;
esac
# Seats for every fan of the soak (bin/soak refuses fewer: a sale that sells out mid-soak
# changes the load under the curves): 3.5 seats a fan, and a quarter more.
SEATS=$(awk -v r="$RATE" -v s="$secs" 'BEGIN { n = int(r * s * 3.5 * 1.25) + 1; if (n < 1600) n = 1600; if (n > 40000) n = 40000; print n }')
# Holds of 30 s and the demo's compressed payment timings; a mild payment simulator (UPI
# approved after 1-4 s, 5% of payments fail, 10% of webhooks twice, some out of order).
BEHAVIOUR='{"upi_delay_min":"1s","upi_delay_max":"4s","fail_rate":0.05,"duplicate_rate":0.1,"reorder_window":"300ms"}'
# The gateways' service token, to the stack by environment (never argv: ps shows it); bin/soak sets
# the dials with the stack's operator token (STACK_OPERATOR_TOKEN), also by environment.
ADMIN=soak-admin-$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
export ONSALE_ADMIN_TOKEN=$ADMIN
# Every fan comes from 127.0.0.1: the gateway's per-address limit is opened up (as for the demo).
stack_start soak -spread-event-ids -paysim-env ONSALE_PAYSIM_BEHAVIOUR="$BEHAVIOUR" \
	-core-env ONSALE_SWEEP_INTERVAL=5s -core-env ONSALE_EXTEND_BY=20s -core-env ONSALE_RECONCILE_AFTER=45s \
	-gateway-env ONSALE_IP_RATE=100000 -gateway-env ONSALE_TOKEN_RATE=100 -gateway-env ONSALE_LOG_LEVEL=warn
echo "+ seed: the stadium concert at $SEATS seats (holds of 30 s)"
bin/seed -database-url "$STACK_DATABASE_URL" -json -onsale-in 1m -stadium-seats "$SEATS" -concert-hold-seconds 30 >"$RUN/soak/seed.json"
EVENT=$(grep '"name":"Arijit Singh Live"' "$RUN/soak/seed.json" | grep -o '"id":[0-9]*' | cut -d: -f2)
[[ -n $EVENT ]] || { echo "seed: no stadium concert in $RUN/soak/seed.json" >&2; exit 1; }
mkdir -p .run/soak
ONSALE_OPERATOR_TOKEN=$STACK_OPERATOR_TOKEN bin/soak -gateway "$STACK_GATEWAY_URL" -admin "$STACK_GATEWAY_ADMIN_URL" -event "$EVENT" -duration "$SOAK" -rate "$RATE" \
	-metrics "core=$STACK_CORE_ADMIN_URL/metrics,gateway=$STACK_GATEWAY_ADMIN_URL/metrics" -out .run/soak
