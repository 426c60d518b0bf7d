#!/usr/bin/env bash
# deploy/local/hacost.sh - `make scale-ha`: what the highly available topology costs
# beside a single node, in one session on one machine. Single node: the apps of
# bin/stack on one PostgreSQL and one Redis. HA: `bin/cluster up` (loadtest/topology:
# two cores behind HAProxy on PostgreSQL under Patroni with synchronous replication,
# three gateways behind HAProxy, a Redis Cluster of three masters and three replicas).
# On each: holdbench (the core's holds through HTTP, and pgbench on the same database:
# synchronous replication's share), then joinbench (SCALE_HA_FANS joins, then their
# status polls for 10 s, with the CPU of every app and of HAProxy per poll). The
# gateways keep their default per-address limits on both: joinbench spreads the
# joins over loopback source addresses. The cluster is stopped at the end (as
# `make cluster-down`). Results in .run/scale/ha-*.txt. About 6-8 minutes.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apps.sh"
CLUSTER_STARTED=''
cleanup() {
	stack_stop
	if [[ -n $CLUSTER_STARTED ]]; then bin/cluster down || true; fi
}
trap cleanup EXIT

need_bin seed holdbench joinbench cluster
need_ha || exit 1 # patroni, etcd, haproxy (as make cluster-up)
mkdir -p .run/scale
rounds=${SCALE_HA_ROUNDS:-3} fans=${SCALE_HA_FANS:-30000}
# the demo catalog's stadium concert (account_required switched off by joinbench)
stadium() { grep '"name":"Arijit Singh Live"' "$1" | grep -o '"id":[0-9]*' | head -1 | cut -d: -f2; }

echo "+ single node: the apps (bin/stack) on one PostgreSQL and one Redis"
stack_start hasingle -core-env ONSALE_SWEEP_INTERVAL=1h -gateway-env ONSALE_LOG_LEVEL=warn
bin/seed -database-url "$STACK_DATABASE_URL" -json >"$RUN/hasingle/seed.json"
bin/holdbench -core "$STACK_CORE_URL" -database-url "$STACK_DATABASE_URL" -admit-key "$STACK_ADMIT_KEY" \
	-rounds "$rounds" -sweeps 1 -out .run/scale/ha-single-holdbench.json | tee .run/scale/ha-single-holdbench.txt || true
ONSALE_OPERATOR_TOKEN="$STACK_OPERATOR_TOKEN" bin/joinbench -gateway "$STACK_GATEWAY_ADDR" -admin "${STACK_GATEWAY_ADMIN_URL#http://}" \
	-event "$(stadium "$RUN/hasingle/seed.json")" -fans "$fans" -joins-per-address 16 \
	-redis "$(sed -E 's#^redis://([^@/]*@)?([^/?]*).*#\2#' <<<"$REDIS_URL")" -watch "$STACK_PIDS" \
	-out .run/scale/ha-single-joinbench.json | tee .run/scale/ha-single-joinbench.txt
stack_stop

echo "+ HA: bin/cluster up (Patroni with synchronous replication, HAProxy, Redis Cluster)"
CLUSTER_STARTED=1
bin/cluster up
eval "$(bin/cluster env)"
bin/holdbench -core "$CLUSTER_CORE_URL" -database-url "$CLUSTER_DATABASE_URL" -admit-key "$CLUSTER_ADMIT_KEY" \
	-rounds "$rounds" -sweeps 1 -out .run/scale/ha-cluster-holdbench.json | tee .run/scale/ha-cluster-holdbench.txt || true
# every app and HAProxy (the Redis nodes joinbench finds itself, from INFO)
watch=$(tr ',' '\n' <<<"$CLUSTER_PIDS" | grep -v '^redis-' | paste -sd,)
read -r admin _ <<<"$CLUSTER_GATEWAY_ADMIN_URLS"
ONSALE_OPERATOR_TOKEN_FILE="$CLUSTER_OPERATOR_TOKEN_FILE" bin/joinbench -gateway "${CLUSTER_GATEWAY_URL#http://}" -admin "${admin#http://}" \
	-event "$(stadium .run/cluster/seed.json)" -fans "$fans" -joins-per-address 16 -redis "$CLUSTER_REDIS" -watch "$watch" \
	-out .run/scale/ha-cluster-joinbench.json | tee .run/scale/ha-cluster-joinbench.txt
