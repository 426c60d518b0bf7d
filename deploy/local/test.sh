#!/usr/bin/env bash
# deploy/local/test.sh - `make test`: vet + race tests against real PostgreSQL and Redis.
# Run through `deploy/local/stack.sh run -- deploy/local/test.sh`, which provides
# DATABASE_URL and REDIS_URL. A missing service is a failure here, never a skip.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

fail() {
	printf 'test.sh: FAIL: %s\n' "$*" >&2
	exit 1
}

[[ -n ${DATABASE_URL:-} ]] || fail "DATABASE_URL is not set (run via deploy/local/stack.sh run -- $0)"
[[ -n ${REDIS_URL:-} ]] || fail "REDIS_URL is not set (run via deploy/local/stack.sh run -- $0)"

PGCONNECT_TIMEOUT=5 timeout --foreground 15 psql "$DATABASE_URL" -X -w -Atq -v ON_ERROR_STOP=1 -c 'select 1' >/dev/null ||
	fail "PostgreSQL does not answer at DATABASE_URL"
pong=$(timeout --foreground 10 redis-cli --no-auth-warning -u "$REDIS_URL" ping 2>&1) || true
[[ $pong == PONG ]] || fail "Redis does not answer at REDIS_URL: $pong"
echo "test.sh: PostgreSQL and Redis answer"

# tests that need the services must fail (not skip) when they are missing
export ONSALE_REQUIRE_SERVICES=1

# The browser tests drive Debian's Chromium.
. deploy/local/apps.sh
need_chromium || fail "could not install chromium (see .run/apt-chromium.log)"
export ONSALE_SCREENSHOTS=${ONSALE_SCREENSHOTS:-$PWD/.run/screenshots}

# The gateway's Redis tests run against a single server and a 3-master cluster.
cluster_dir=.run/redis-cluster-test
export ONSALE_CLUSTER_PORT=${ONSALE_CLUSTER_PORT:-17101}
trap 'deploy/redis-cluster/cluster.sh down "$cluster_dir"' EXIT
deploy/redis-cluster/cluster.sh down "$cluster_dir"
cluster_env=$(deploy/redis-cluster/cluster.sh up "$cluster_dir") || fail "could not start the Redis Cluster"
export "${cluster_env?}"
echo "test.sh: Redis Cluster at $REDIS_CLUSTER_ADDRS"

pkgs=(./core/... ./shared/... ./gateway/... ./loadtest/...)
echo "+ go vet ${pkgs[*]}"
go vet "${pkgs[@]}"
echo "+ go test -race -count=1 ${pkgs[*]}"
go test -race -count=1 "${pkgs[@]}"
