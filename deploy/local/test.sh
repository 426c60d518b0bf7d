#!/usr/bin/env bash
# deploy/local/test.sh - `make test`: go mod tidy check, vet, staticcheck, then race tests
# against real PostgreSQL and Redis and the binaries in bin/ (make test builds them first).
# Run through `deploy/local/stack.sh run -- deploy/local/test.sh`, which provides this
# run's own DATABASE_URL and REDIS_URL. A missing service is a failure here, never a skip.
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

. deploy/local/apps.sh
# The end-to-end tests (loadtest/proof, loadtest/browser) run these; they never build.
need_bin core gateway paysim seed ticketverify || fail "missing binaries: run 'make build'"
export ONSALE_BIN=$PWD/bin

# The systemd units an operator installs (deploy/systemd), where systemd-analyze exists.
deploy/systemd/verify.sh bin || fail "systemd-analyze verify: deploy/systemd/*.service (above)"

modules=(core gateway loadtest shared)
echo "+ go mod tidy -diff (${modules[*]})"
for m in "${modules[@]}"; do
	(cd "$m" && go mod tidy -diff) || fail "$m/go.mod is not tidy: run 'cd $m && go mod tidy'"
done

# The browser tests drive Debian's Chromium.
need_chromium || fail "could not install chromium (see .run/apt-chromium.log)"
# The alert rules are checked and unit-tested with promtool (loadtest/obs runs it too).
need_promtool || fail "could not install prometheus for promtool (see .run/apt-prometheus.log)"
echo "+ promtool check rules, test rules (deploy/prometheus)"
(cd deploy/prometheus && promtool check rules onsale.rules.yml && promtool test rules onsale.rules.test.yml) ||
	fail "deploy/prometheus: the alert rules do not check or their unit tests fail"
# The Stripe adapter's requests are checked against stripe-mock (core/stripe).
need_stripe_mock || fail "could not install stripe-mock from the Go module proxy"
# The failover tests start the HA engines: Patroni on etcd, HAProxy (Debian's packages).
need_ha || fail "could not install patroni, etcd-server, etcd-client, haproxy (see .run/apt-ha.log)"
export ONSALE_SCREENSHOTS=${ONSALE_SCREENSHOTS:-$PWD/.run/screenshots}

# The gateway's Redis tests run against a single server and a 3-master cluster.
# Its ports (3 masters from a free base, bus ports +10000) are this run's own. The base is
# drawn from 2000-4997 (bus ports 12000-14999), a range no other port of the harness uses:
# stack.sh's free_port takes 20000-29999 (and keeps 30000-39999 clear for bus ports),
# make up has 8080, 8081, 8090, 8091, 15432, 16379 and 18090, and the kernel hands out 32768-60999 to
# outgoing connections.
cluster_dir=$RUN/redis-cluster
cluster_base() {
	local i b p busy
	for ((i = 0; i < 200; i++)); do
		b=$((2000 + RANDOM % 2998)) busy=0
		for p in "$b" "$((b + 1))" "$((b + 2))" "$((b + 10000))" "$((b + 10001))" "$((b + 10002))"; do
			# shellcheck disable=SC2016 # $1 is expanded by the inner bash
			timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$p" 2>/dev/null && busy=1
		done
		((busy)) || { printf '%s\n' "$b"; return 0; }
	done
	return 1
}
if [[ -z ${ONSALE_CLUSTER_PORT:-} ]]; then
	ONSALE_CLUSTER_PORT=$(cluster_base) || fail "no free ports for the Redis Cluster (3 in 2000-4999 and their bus ports +10000)"
fi
export ONSALE_CLUSTER_PORT
trap 'deploy/redis-cluster/cluster.sh down "$cluster_dir"' EXIT
deploy/redis-cluster/cluster.sh down "$cluster_dir"
cluster_env=$(deploy/redis-cluster/cluster.sh up "$cluster_dir") || fail "could not start the Redis Cluster"
export "${cluster_env?}"
echo "test.sh: Redis Cluster at $REDIS_CLUSTER_ADDRS"

pkgs=(./core/... ./shared/... ./gateway/... ./loadtest/...)
echo "+ go vet ${pkgs[*]}"
go vet "${pkgs[@]}"
# staticcheck, installed once from the Go module proxy into .run/tools
STATICCHECK=honnef.co/go/tools/cmd/staticcheck@v0.8.2
if [[ ! -x .run/tools/staticcheck ]] || ! .run/tools/staticcheck -version | grep -q '(0.8.2)'; then
	echo "+ go install $STATICCHECK (into .run/tools)"
	GOBIN=$PWD/.run/tools go install "$STATICCHECK" || fail "could not install $STATICCHECK"
fi
# Findings fail the run, after the tests (so one run shows both).
echo "+ staticcheck ${pkgs[*]}"
staticcheck_ok=1
.run/tools/staticcheck "${pkgs[@]}" || staticcheck_ok=0
# The end-to-end packages (loadtest: real processes, browsers) run after the rest, so they
# never share the machine and the database server with the timing-sensitive race suite
# (core/postgres); they may take more than go test's default 10 minutes a package on a
# busy two-core machine.
tests_ok=1
echo "+ go test -race -count=1 -timeout 30m ${pkgs[*]:0:3}"
go test -race -count=1 -timeout 30m "${pkgs[@]:0:3}" || tests_ok=0
echo "+ go test -race -count=1 -timeout 30m ./loadtest/..."
go test -race -count=1 -timeout 30m ./loadtest/... || tests_ok=0
((tests_ok)) || fail "tests failed (above)"
((staticcheck_ok)) || fail "staticcheck has findings (listed before the tests)"
