#!/usr/bin/env bash
# deploy/local/bench.sh - `make bench`: the hold path and the sweeper against
# baselines measured in the same run (pgbench on the same server), and the
# gateway's status polls against a fasthttp hello-world on the same machine.
# Results go to the terminal and to .run/bench/. Bounded: about three minutes.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apps.sh"
trap stop_all EXIT

build
# pgbench ships with the PostgreSQL server package on Debian.
if ! ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1 && ! command -v pgbench >/dev/null; then
	echo "installing postgresql for pgbench" >&2
	sudo=""
	((EUID == 0)) || sudo=sudo
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql >/dev/null
fi
url=$(fresh_db onsale_bench)
start_core "$url" 127.0.0.1:18181 -sweep-interval 1h -redis "" # the hold path alone: no seat-map upkeep
mkdir -p .run/bench
DATABASE_URL=$url bin/holdbench -core http://127.0.0.1:18181 -admit-key .run/keys/admit.key \
	-rounds "${BENCH_ROUNDS:-8}" -out .run/bench/holdbench.json | tee .run/bench/holdbench.txt
echo "+ go test -run XXX -bench . ./core/postgres (the hold path below HTTP)"
DATABASE_URL=$url go test -run XXX -bench CreateHold -benchtime 5000x ./core/postgres | tee .run/bench/gobench.txt
stop_core
psql "$DATABASE_URL" -X -q -c "DROP DATABASE IF EXISTS onsale_bench WITH (FORCE)"

echo "+ pollbench: the gateway's queue-status polls beside a fasthttp hello-world"
url=$(fresh_db onsale_pollbench)
admin=bench-admin-$RANDOM
start_stack "$url" "$admin"
DATABASE_URL=$url bin/seed -stadium-seats 1600 >/dev/null
bin/pollbench -gateway "$GATEWAY_ADDR" -admin-token "$admin" -gateway-pid "${PIDS[1]}" -out .run/bench/pollbench.json |
	tee .run/bench/pollbench.txt
stop_all
psql "$DATABASE_URL" -X -q -c "DROP DATABASE IF EXISTS onsale_pollbench WITH (FORCE)"
