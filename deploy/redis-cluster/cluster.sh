#!/usr/bin/env bash
# deploy/redis-cluster/cluster.sh - a local 3-master Redis Cluster for development and tests.
#
#   deploy/redis-cluster/cluster.sh up [DIR]    start 3 masters on ports ${ONSALE_CLUSTER_PORT:-17001}.. +2
#                                               with their files under DIR (default .run/redis-cluster),
#                                               create the cluster, wait until it is ok; prints
#                                               REDIS_CLUSTER_ADDRS=host:port,host:port,host:port
#   deploy/redis-cluster/cluster.sh down [DIR]  stop those masters and remove DIR
#
# Ports stay below 32768 (clear of the kernel's ephemeral client ports).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cmd=${1:-}
dir=${2:-$ROOT/.run/redis-cluster}
base=${ONSALE_CLUSTER_PORT:-17001}
ports=("$base" "$((base + 1))" "$((base + 2))")

die() { echo "cluster.sh: $*" >&2; exit 1; }

up() {
	command -v redis-server >/dev/null || die "redis-server is not installed (make up installs it)"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd -P) # redis-server resolves paths after changing to --dir
	local p addrs=()
	for p in "${ports[@]}"; do
		if redis-cli -p "$p" ping >/dev/null 2>&1; then
			die "port $p already answers: another cluster is running (cluster.sh down $dir)"
		fi
		mkdir -p "$dir/$p"
		redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file "$dir/$p/nodes.conf" \
			--cluster-node-timeout 2000 --dir "$dir/$p" --save '' --appendonly no --daemonize yes \
			--pidfile "$dir/$p/redis.pid" --logfile "$dir/$p/redis.log"
		addrs+=("127.0.0.1:$p")
	done
	for p in "${ports[@]}"; do
		for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
	done
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$dir/create.log" 2>&1 ||
		{ cat "$dir/create.log" >&2; down; die "cluster create failed"; }
	for _ in $(seq 100); do
		if redis-cli -p "${ports[0]}" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; then
			local IFS=,
			echo "REDIS_CLUSTER_ADDRS=${addrs[*]}"
			return 0
		fi
		sleep 0.1
	done
	down
	die "cluster did not reach cluster_state:ok"
}

down() {
	local p
	for p in "${ports[@]}"; do
		if [[ -f $dir/$p/redis.pid ]]; then
			redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || kill "$(cat "$dir/$p/redis.pid")" 2>/dev/null || true
		fi
	done
	rm -rf "$dir"
}

case $cmd in
up) up ;;
down) down ;;
*) sed -n '2,10s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
esac
