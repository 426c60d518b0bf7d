# shellcheck shell=bash
# deploy/local/apps.sh - helpers for bench.sh and demo.sh (sourced, not run):
# build the binaries, make the development admit key, create a fresh database
# beside DATABASE_URL's, and start/stop a core on it.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$ROOT" || exit 1

build() {
	echo "+ go build -o bin/ ./core/cmd/... ./gateway/cmd/... ./loadtest/cmd/..."
	go build -o bin/ ./core/cmd/... ./gateway/cmd/... ./loadtest/cmd/...
	mkdir -p .run/keys
	bin/admitkey gen -key .run/keys/admit.key
}

# fresh_db NAME: drop and create database NAME on DATABASE_URL's server; prints its URL.
fresh_db() {
	local name=$1 admin url
	admin=$DATABASE_URL
	psql "$admin" -X -q -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $name WITH (FORCE)" -c "CREATE DATABASE $name" >&2
	url=$(python3 -c 'import sys,urllib.parse as u; p=u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/"+sys.argv[2])))' "$admin" "$name")
	printf '%s\n' "$url"
}

CORE_PID=''
# start_core URL ADDR [FLAGS...]: start bin/core on database URL at ADDR, wait until ready.
start_core() {
	local url=$1 addr=$2 i
	shift 2
	DATABASE_URL=$url bin/core -addr "$addr" -admit-public-key .run/keys/admit.key.pub "$@" >>.run/core-"${addr##*:}".log 2>&1 &
	CORE_PID=$!
	for ((i = 0; i < 100; i++)); do
		curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && return 0
		kill -0 "$CORE_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "core did not start; log:" >&2
	tail -20 .run/core-"${addr##*:}".log >&2
	return 1
}

stop_core() {
	[[ -n $CORE_PID ]] || return 0
	kill -TERM "$CORE_PID" 2>/dev/null || true
	wait "$CORE_PID" 2>/dev/null || true
	CORE_PID=''
}

PAYSIM_ADDR=127.0.0.1:18090
GATEWAY_ADDR=127.0.0.1:18080
PIDS=()

# start_stack URL ADMIN_TOKEN: the payment simulator, the core (payments, seat map)
# and the gateway, on their demo ports, each waited for.
start_stack() {
	local url=$1 admin=$2 core=127.0.0.1:18081
	mkdir -p .run/keys
	bin/admitkey gen -key .run/keys/ticket.key >/dev/null
	ONSALE_PAYSIM_ADDR=$PAYSIM_ADDR ONSALE_PAYSIM_CONTROL=true ONSALE_PAYSIM_WEBHOOK_URL="http://$core/v1/webhooks/payments" \
		ONSALE_PAYSIM_BEHAVIOUR=${PAYSIM_BEHAVIOUR:-'{"upi_delay_min":"1s","upi_delay_max":"4s","fail_rate":0.05,"duplicate_rate":0.1,"reorder_window":"300ms"}'} \
		bin/paysim >>.run/demo-paysim.log 2>&1 &
	PIDS+=($!)
	start_core "$url" "$core" -sweep-interval 5s -provider-url "http://$PAYSIM_ADDR" -provider-key sk_test_paysim \
		-webhook-secret whsec_test_paysim -ticket-key .run/keys/ticket.key -sms-url "http://$PAYSIM_ADDR/sms" -redis "$REDIS_URL"
	ONSALE_GATEWAY_ADDR=$GATEWAY_ADDR ONSALE_REDIS=$REDIS_URL ONSALE_CORE_URL="http://$core" ONSALE_ADMIT_KEYS=.run/keys/admit.key \
		ONSALE_QUEUE_SECRET="$(head -c 48 /dev/urandom | base64 | tr -d '\n')" ONSALE_ADMIN_TOKEN="$admin" \
		ONSALE_CHECKOUT_URL="http://$PAYSIM_ADDR/checkout" ONSALE_IP_RATE=100000 ONSALE_TOKEN_RATE=100 ONSALE_LOG_LEVEL=warn \
		bin/gateway >>.run/demo-gateway.log 2>&1 &
	PIDS+=($!)
	local i
	for ((i = 0; i < 100; i++)); do
		curl -fsS "http://$GATEWAY_ADDR/healthz" >/dev/null 2>&1 && curl -fsS "http://$PAYSIM_ADDR/healthz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "the gateway or the payment simulator did not start; see .run/demo-*.log" >&2
	return 1
}

stop_all() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	PIDS=()
	stop_core
}

# watch_list DATABASE_URL: name=pid,... of every process of the sale (for
# flashsale -watch): the stack started here, PostgreSQL's postmaster (its
# backends count with it) and the Redis server.
watch_list() {
	local url=$1 out pg rd dir
	out="paysim=${PIDS[0]},core=$CORE_PID,gateway=${PIDS[1]}"
	dir=$(psql "$url" -X -Atqc 'SHOW data_directory' 2>/dev/null) &&
		pg=$(head -1 "$dir/postmaster.pid" 2>/dev/null) && out+=",postgres=$pg"
	rd=$(redis-cli -u "$REDIS_URL" info server 2>/dev/null | tr -d '\r' | sed -n 's/^process_id://p') && [[ -n $rd ]] && out+=",redis=$rd"
	printf '%s\n' "$out"
}

# need_chromium: install Debian's chromium when absent (the browser tests and the
# demo report's screenshot use it; about 35 s).
need_chromium() {
	command -v chromium >/dev/null 2>&1 && return 0
	echo "+ installing chromium (about 35 s; log in .run/apt-chromium.log)"
	local sudo=""
	((EUID == 0)) || sudo=sudo
	mkdir -p .run
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >.run/apt-chromium.log 2>&1 ||
		{ $sudo apt-get update >>.run/apt-chromium.log 2>&1 &&
			$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >>.run/apt-chromium.log 2>&1; }
}
