# shellcheck shell=bash
# deploy/local/apps.sh - helpers for bench.sh, demo.sh and test.sh (sourced, not run).
# The apps are started only by bin/stack (loadtest/cmd/stack; `make build` builds it):
# stack_start runs it in the background on a fresh database of its own and free ports,
# waits until every app answers and exports its STACK_* variables (URLs, addresses, keys,
# admin token, pids); stack_stop stops it (the apps, then the database is dropped).
# State goes to ONSALE_RUN_DIR (stack.sh run's directory for this run; .run/runs/NAME-PID).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$ROOT" || exit 1
RUN=${ONSALE_RUN_DIR:?run this through deploy/local/stack.sh run}
# shellcheck source=deploy/local/apt.sh
. deploy/local/apt.sh

# need_bin NAME...: the binaries must be there (make demo / bench / test build them first)
need_bin() {
	local b
	for b in "$@"; do
		[[ -x bin/$b ]] || {
			echo "no bin/$b: run 'make build' first" >&2
			return 1
		}
	done
}

STACK_PID=''
# stack_start NAME [bin/stack flags...]: the apps, logs and keys in $RUN/NAME/.
stack_start() {
	local name=$1 dir i
	shift
	need_bin stack
	dir=$RUN/$name
	mkdir -p "$dir"
	rm -f "$dir/stack.env"
	bin/stack -dir "$dir" -env-file "$dir/stack.env" -database-url "$DATABASE_URL" -fresh-database "onsale_$name" \
		-redis "$REDIS_URL" "$@" 2>>"$dir/stack.log" &
	STACK_PID=$!
	for ((i = 0; i < 1800; i++)); do
		[[ -f $dir/stack.env ]] && break
		kill -0 "$STACK_PID" 2>/dev/null || break
		sleep 0.1
	done
	if [[ ! -f $dir/stack.env ]]; then
		echo "the apps did not start; see $dir/stack.log and $dir/*.log" >&2
		tail -n 30 "$dir/stack.log" >&2
		stack_stop
		return 1
	fi
	# shellcheck source=/dev/null
	. "$dir/stack.env"
	echo "+ apps ($name): paysim ${STACK_PAYSIM_URL:-off}, core ${STACK_CORE_URL:-off}, gateway ${STACK_GATEWAY_URL:-off}; logs in $dir"
}

stack_stop() {
	[[ -n $STACK_PID ]] || return 0
	kill -TERM "$STACK_PID" 2>/dev/null || true
	wait "$STACK_PID" 2>/dev/null || true
	STACK_PID=''
}

# watch_list: name=pid,... of every process of the sale (for flashsale -watch): the
# apps, PostgreSQL's postmaster (its backends count with it) and the Redis server.
watch_list() {
	# shellcheck disable=SC2153 # STACK_PIDS comes from the stack's env file (stack_start)
	local out=$STACK_PIDS pg rd dir
	dir=$(psql "$STACK_DATABASE_URL" -X -Atqc 'SHOW data_directory' 2>/dev/null) &&
		pg=$(head -1 "$dir/postmaster.pid" 2>/dev/null) && out+=",postgres=$pg"
	rd=$(redis-cli -u "$REDIS_URL" info server 2>/dev/null | tr -d '\r' | sed -n 's/^process_id://p') && [[ -n $rd ]] && out+=",redis=$rd"
	printf '%s\n' "$out"
}

# need_chromium: install Debian's chromium when absent (the browser tests and the
# demo report's screenshot use it; about 35 s).
need_chromium() {
	command -v chromium >/dev/null 2>&1 && return 0
	echo "+ installing chromium (about 35 s; log in .run/apt-chromium.log)"
	mkdir -p .run
	apt_get_install .run/apt-chromium.log chromium
}

# need_promtool: install Debian's prometheus package (its promtool checks and unit-tests the
# alert rules, deploy/prometheus) when absent. Nothing is started (no systemd as PID 1).
need_promtool() {
	command -v promtool >/dev/null 2>&1 && return 0
	echo "+ installing prometheus for promtool (log in .run/apt-prometheus.log)"
	mkdir -p .run
	apt_get_install .run/apt-prometheus.log prometheus
}

# STRIPE_MOCK_VERSION: github.com/stripe/stripe-mock, the Stripe adapter's shape test
# (core/stripe) answers against it.
STRIPE_MOCK_VERSION=v0.203.0

# need_stripe_mock: install stripe-mock from the Go module proxy into .run/tools when absent
# (about 5 s) and export ONSALE_STRIPE_MOCK, its path.
need_stripe_mock() {
	local bin=$PWD/.run/tools/stripe-mock
	if [[ ! -x $bin ]] || [[ $(cat "$bin.version" 2>/dev/null) != "$STRIPE_MOCK_VERSION" ]]; then
		echo "+ go install github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION (into .run/tools)"
		mkdir -p .run/tools
		GOBIN=$PWD/.run/tools go install "github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION" || return 1
		printf '%s\n' "$STRIPE_MOCK_VERSION" >"$bin.version"
	fi
	export ONSALE_STRIPE_MOCK=$bin
}

# need_ha: install Debian's HA engines when absent (make test's failover tests, make
# cluster-up, the fault sale): patroni (3.0), etcd-server and etcd-client (3.4), haproxy
# (2.6); about 10 s. Nothing is started by the packages here (no systemd as PID 1).
need_ha() {
	local missing=() p
	for p in patroni etcd etcdctl haproxy; do command -v "$p" >/dev/null 2>&1 || missing+=("$p"); done
	((${#missing[@]} == 0)) && return 0
	echo "+ installing patroni etcd-server etcd-client haproxy (missing: ${missing[*]}; log in .run/apt-ha.log)"
	mkdir -p .run
	apt_get_install .run/apt-ha.log patroni etcd-server etcd-client haproxy
}
