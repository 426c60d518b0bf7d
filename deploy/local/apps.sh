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
