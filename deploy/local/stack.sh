#!/usr/bin/env bash
# deploy/local/stack.sh - local backing services (PostgreSQL, Redis) for onsale.
#
# Usage:
#   deploy/local/stack.sh up            make sure PostgreSQL and Redis answer, write .run/env,
#                                       start the apps (bin/stack) on their well-known ports
#   deploy/local/stack.sh down          stop exactly what `up` started (safe to repeat), and
#                                       what killed runs left running
#   deploy/local/stack.sh run -- CMD..  services of this run's own, run CMD with them, stop
#                                       them, exit with CMD's status
#   deploy/local/stack.sh env           up, then print the export lines:
#                                         eval "$(deploy/local/stack.sh env)"
#
# DATABASE_URL / REDIS_URL from the environment win over the defaults below. A URL that
# already answers is used as is. Otherwise a throwaway server is started on the URL's
# port (local hosts only) with everything it owns under the run directory.
#
# `up` / `down` / `env` use .run/ and the fixed ports 15432 (PostgreSQL) and 16379 (Redis).
# Each `run` (make test / bench / demo) is a run of its own: its directory is
# .run/runs/NAME-PID/ (NAME from CMD; exported to CMD as ONSALE_RUN_DIR) and its default
# servers are throwaways on free ports, so a run never shares a database, a Redis or a port
# with `make up` or with another run. The run directory is removed when CMD succeeds and
# kept (with its logs) when it fails.
#
# In the run directory (.run/ for up):
#   env                       export lines (DATABASE_URL, REDIS_URL)
#   started/NAME              marker: "NAME was started by this tool" (key=value lines)
#   NAME.pid, NAME.log        pid file and log of each started service / process
#   pg                        PostgreSQL data dir (or a symlink to /tmp/onsale-pg-<hash> when
#                             the unprivileged postgres user cannot reach it)
#   redis                     Redis working dir
#   apps/                     (up) the apps' logs and keys: apps/keys/admit.key, ticket.key,
#                             admin.token, operator.password; apps/stack.env: their URLs (STACK_*)
#
# Status lines go to stderr, so stdout stays clean for `env` and for `run`'s command.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
RUN_DIR=$ROOT/.run
set_run_dir() {
	RUN_DIR=$1
	STARTED_DIR=$RUN_DIR/started
	ENV_FILE=$RUN_DIR/env
}
set_run_dir "$ROOT/.run"

DEFAULT_DATABASE_URL='postgres://postgres@127.0.0.1:15432/onsale?sslmode=disable'
DEFAULT_REDIS_URL='redis://127.0.0.1:16379/0'

# Server options for the throwaway PostgreSQL; ONSALE_PG_OPTS is appended (e.g.
# ONSALE_PG_OPTS='-c fsync=off' for faster, non-durable test runs).
PG_OPTS='-c max_connections=300 -c shared_buffers=256MB -c unix_socket_directories='"''"
STOP_TIMEOUT=10 # seconds between SIGTERM and SIGKILL for start_bg processes

STARTED_NOW=() # names started by this invocation (stopped again by `run` / a failed `up`)
# PICKED=1: up_postgres / up_redis get a URL whose port this run picked itself (free_port):
# whatever answers there now is not ours (another run's throwaway took the port since), so
# they set TAKEN=1 and return without using it, and do_up picks again
PICKED=0
TAKEN=0
LOCKED=0
MODE='' # up | env | run | down

# fd 8 = the caller's stderr, for messages from traps that fire while fd 2 is
# redirected into a log file
exec 8>&2

log() { printf '%s\n' "$*" >&2; }
# the run directory as shown in messages (.run or .run/runs/NAME-PID)
rel() { printf '%s' "${RUN_DIR#"$ROOT"/}"; }
die() {
	printf 'stack.sh: error: %s\n' "$*" >&2
	exit 1
}

usage() {
	sed -n '2,14s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

# ---------------------------------------------------------------- locking

# One stack.sh at a time per repo while starting/stopping. Long-lived servers are
# launched with 8>&- 9>&- so they never inherit the lock (fd 9) or our saved stderr
# (fd 8; a server holding it would keep e.g. `make test | tee` from seeing EOF).
lock() {
	((LOCKED)) && return 0
	mkdir -p "$RUN_DIR"
	exec 9>"$RUN_DIR/lock"
	flock -w 300 9 || die "timed out waiting for $RUN_DIR/lock"
	LOCKED=1
}

unlock() {
	((LOCKED)) || return 0
	flock -u 9 || true
	exec 9>&-
	LOCKED=0
}

# ---------------------------------------------------------------- small helpers

# shell-quote for the env file ('...' form, valid for sh and bash)
squote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

urldecode() { printf '%b' "${1//%/\\x}"; }

is_local_host() { [[ $1 == 127.0.0.1 || $1 == localhost ]]; }

# something accepts TCP connections on 127.0.0.1:PORT
# shellcheck disable=SC2016 # $1 is expanded by the inner bash
port_busy() { timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null; }

# a port in 20000-29999 nothing listens on now (a throwaway server takes it moments later;
# Redis Cluster bus ports are +10000, so stay below 30000 for them to stay clear)
free_port() {
	local i p
	for ((i = 0; i < 200; i++)); do
		p=$((20000 + RANDOM % 10000))
		port_busy "$p" || port_busy "$((p + 10000))" || {
			printf '%s\n' "$p"
			return 0
		}
	done
	die "no free port found"
}

# "host:port", "[v6]:port" or "host" -> HP_HOST, HP_PORT (default $2)
split_hostport() {
	local hp=$1
	if [[ $hp =~ ^\[([^]]*)\](:([0-9]*))?$ ]]; then
		HP_HOST=${BASH_REMATCH[1]} HP_PORT=${BASH_REMATCH[3]}
	elif [[ $hp =~ ^([^:,]*)(:([0-9]*))?$ ]]; then
		HP_HOST=${BASH_REMATCH[1]} HP_PORT=${BASH_REMATCH[3]}
	else
		return 1
	fi
	HP_PORT=${HP_PORT:-$2}
}

# shellcheck source=deploy/local/apt.sh
. "$ROOT/deploy/local/apt.sh"

apt_install() {
	local logf=$RUN_DIR/apt.log
	mkdir -p "$RUN_DIR"
	command -v apt-get >/dev/null 2>&1 || die "missing $*; install it (no apt-get here)"
	((EUID == 0)) || command -v sudo >/dev/null 2>&1 || die "need root or sudo to install $*"
	log "installing $* with apt-get (log: $(rel)/apt.log) ..."
	: >"$logf"
	apt_get_install "$logf" "$@" && return 0
	tail -n 20 "$logf" >&2 || true
	die "apt-get install $* failed"
}

# ---------------------------------------------------------------- processes

# /proc/PID/stat fields after "(comm)": index 0 = field 3 (state), 2 = pgrp, 19 = starttime
proc_field() {
	local s f
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	read -ra f <<<"$s"
	printf '%s\n' "${f[$2]}"
}

proc_start() { proc_field "$1" 19; }

# running and not a zombie
alive() {
	local st
	[[ $1 =~ ^[0-9]+$ ]] || return 1
	st=$(proc_field "$1" 0) || return 1
	[[ $st != Z ]]
}

# alive and (if known) the same process as recorded (guards against pid reuse)
same_proc() { # PID RECORDED_START
	alive "$1" || return 1
	[[ -z $2 ]] || [[ $(proc_start "$1") == "$2" ]]
}

wait_gone() { # PID SECONDS
	local i n=$(($2 * 5))
	for ((i = 0; i < n; i++)); do
		alive "$1" || return 0
		sleep 0.2
	done
	! alive "$1"
}

# SIGTERM (whole process group if PID leads one), wait STOP_TIMEOUT, then SIGKILL
terminate() { # PID RECORDED_START
	local pid=$1 start=$2 target
	same_proc "$pid" "$start" || return 0
	target=$pid
	[[ $(proc_field "$pid" 2) == "$pid" ]] && target=-$pid
	kill -TERM -- "$target" 2>/dev/null || true
	wait_gone "$pid" "$STOP_TIMEOUT" && return 0
	log "  $pid did not exit after ${STOP_TIMEOUT}s; sending SIGKILL"
	kill -KILL -- "$target" 2>/dev/null || true
	wait_gone "$pid" 5 || log "  warning: $pid still alive"
}

marker_get() { # FILE KEY
	local line
	while IFS= read -r line; do
		if [[ $line == "$2="* ]]; then
			printf '%s\n' "${line#*=}"
			return 0
		fi
	done <"$1"
	return 1
}

# Hook for application processes (the Go services): start CMD in the background in its
# own session, output to .run/NAME.log, pid in .run/NAME.pid, marker .run/started/NAME.
# `down` (and `run`'s cleanup) stops it: SIGTERM to its process group, SIGKILL after 10s.
# The environment includes DATABASE_URL and REDIS_URL.
start_bg() { # NAME CMD...
	local name=$1 pid
	shift
	[[ $name =~ ^[A-Za-z0-9_.-]+$ && $name != postgres && $name != redis ]] ||
		die "start_bg: bad name '$name'"
	mkdir -p "$STARTED_DIR"
	if [[ -f $STARTED_DIR/$name && -f $RUN_DIR/$name.pid ]] &&
		same_proc "$(cat "$RUN_DIR/$name.pid")" "$(marker_get "$STARTED_DIR/$name" start || true)"; then
		log "$name: already running (pid $(cat "$RUN_DIR/$name.pid"))"
		return 0
	fi
	printf 'kind=process\n' >"$STARTED_DIR/$name"
	STARTED_NOW+=("$name")
	setsid "$@" </dev/null >>"$RUN_DIR/$name.log" 2>&1 8>&- 9>&- &
	pid=$!
	disown "$pid" 2>/dev/null || true # no "Killed" job notices from bash on stop
	printf '%s\n' "$pid" >"$RUN_DIR/$name.pid"
	printf 'kind=process\npid=%s\nstart=%s\n' "$pid" "$(proc_start "$pid" || true)" >"$STARTED_DIR/$name"
	log "$name: started (pid $pid, log $(rel)/$name.log)"
}

# Called at the end of `up` with DATABASE_URL / REDIS_URL exported. Only `make up`
# (MODE=up) starts the apps, so a person can use them: bin/stack runs the payment
# simulator on ONSALE_PAYSIM_ADDR (127.0.0.1:18090), the core on ONSALE_CORE_ADDR
# (127.0.0.1:8081) and the gateway on ONSALE_GATEWAY_ADDR (127.0.0.1:8080), their operators'
# listeners on ONSALE_CORE_ADMIN_ADDR (127.0.0.1:8091: /metrics) and ONSALE_ADMIN_ADDR
# (127.0.0.1:8090: the console /admin/, its API, /metrics), logs and keys in .run/apps/ (.run/keys links there); then the demo catalog is seeded (.run/seed.json).
# `run` (make test / bench / demo) starts its own.
start_apps() {
	[[ $MODE == up ]] || return 0
	local dir=$RUN_DIR/apps i bin
	for bin in stack seed; do
		[[ -x $ROOT/bin/$bin ]] || die "no bin/$bin: run 'make build' first (make up does)"
	done
	mkdir -p "$dir"
	# an older `make up` kept the keys in a real .run/keys/ directory: `ln -sfn` would put the
	# link inside it (.run/keys/keys) and leave its stale keys where docs/running.md points
	if [[ -d $RUN_DIR/keys && ! -L $RUN_DIR/keys ]]; then
		rm -rf "$RUN_DIR/keys"
	fi
	ln -sfn apps/keys "$RUN_DIR/keys"
	if [[ -f $STARTED_DIR/apps && -f $RUN_DIR/apps.pid ]] &&
		same_proc "$(cat "$RUN_DIR/apps.pid")" "$(marker_get "$STARTED_DIR/apps" start || true)"; then
		log "apps: already running (pid $(cat "$RUN_DIR/apps.pid"); logs in .run/apps/)"
		return 0
	fi
	rm -f "$dir/stack.env"
	start_bg apps "$ROOT/bin/stack" -dir "$dir" -env-file "$dir/stack.env" \
		-paysim-addr "${ONSALE_PAYSIM_ADDR:-127.0.0.1:18090}" -core-addr "${ONSALE_CORE_ADDR:-127.0.0.1:8081}" \
		-gateway-addr "${ONSALE_GATEWAY_ADDR:-127.0.0.1:8080}" \
		-core-admin-addr "${ONSALE_CORE_ADMIN_ADDR:-127.0.0.1:8091}" -gateway-admin-addr "${ONSALE_ADMIN_ADDR:-127.0.0.1:8090}"
	for ((i = 0; i < 1200; i++)); do
		[[ -f $dir/stack.env ]] && break
		alive "$(cat "$RUN_DIR/apps.pid")" || break
		sleep 0.1
	done
	[[ -f $dir/stack.env ]] || { tail -n 20 "$RUN_DIR/apps.log" >&2; die "the apps did not start; see .run/apps.log and .run/apps/*.log"; }
	"$ROOT/bin/seed" -json >"$RUN_DIR/seed.json"
	log "apps: demo catalog in .run/seed.json; $(grep -o 'ready: .*' "$RUN_DIR/apps.log" | tail -n 1)"
	log "apps: the console at http://${ONSALE_ADMIN_ADDR:-127.0.0.1:8090}/admin/: sign in as ops with the password in .run/keys/operator.password"
}

stop_process() { # NAME
	local name=$1 marker=$STARTED_DIR/$1 pidf=$RUN_DIR/$1.pid pid start
	if [[ -f $pidf ]]; then
		pid=$(cat "$pidf")
		start=$(marker_get "$marker" start || true)
		if same_proc "$pid" "$start"; then
			terminate "$pid" "$start"
			log "$name: stopped (pid $pid)"
		else
			log "$name: not running"
		fi
	fi
	rm -f "$pidf" "$marker"
}

# A throwaway NAME (postgres/redis) from an earlier `up` that is still running: starting
# another one would orphan it (one marker, one data dir per service).
refuse_second_throwaway() { # NAME PORT
	local marker=$STARTED_DIR/$1 pid port
	[[ -f $marker ]] || return 0
	pid=$(marker_get "$marker" pid || true)
	port=$(marker_get "$marker" port || true)
	if [[ -n $pid ]] && same_proc "$pid" "$(marker_get "$marker" start || true)"; then
		die "$1: a throwaway from an earlier 'up' still runs on 127.0.0.1:$port (wanted port $2); run 'deploy/local/stack.sh down' first"
	fi
}

# ---------------------------------------------------------------- PostgreSQL

PG_URL_RE='^postgres(ql)?://([^@/?#]*@)?([^/?#]*)(/([^?#]*))?([?#].*)?$'

# host:port part of the URL for messages (never the user info / password)
pg_display() {
	if [[ $1 =~ $PG_URL_RE ]]; then printf '%s\n' "${BASH_REMATCH[3]:-local socket}"; else printf 'connection string\n'; fi
}

# -> PG_HOST PG_PORT PG_USER PG_DB (strict; used before starting a throwaway)
parse_pg_url() {
	local url=$1 userinfo hostport db
	[[ $url =~ $PG_URL_RE ]] ||
		die "postgres: DATABASE_URL is not a postgres:// URL; cannot start a throwaway server for it"
	userinfo=${BASH_REMATCH[2]%@} hostport=${BASH_REMATCH[3]} db=${BASH_REMATCH[5]}
	split_hostport "$hostport" 5432 ||
		die "postgres: cannot parse host:port '$hostport' in DATABASE_URL"
	PG_HOST=$HP_HOST PG_PORT=$HP_PORT
	PG_USER=$(urldecode "${userinfo%%:*}")
	PG_USER=${PG_USER:-${PGUSER:-$(id -un)}}
	PG_DB=$(urldecode "$db")
	PG_DB=${PG_DB:-${PGDATABASE:-$PG_USER}}
}

PG_CHECK_ERR=''
pg_answers() { # URL
	PG_CHECK_ERR=$(PGCONNECT_TIMEOUT=${PGCONNECT_TIMEOUT:-3} timeout --foreground 10 \
		psql "$1" -X -w -Atq -v ON_ERROR_STOP=1 -c 'select 1' 2>&1 >/dev/null)
}

pg_admin_conn() { printf 'host=127.0.0.1 port=%s user=postgres dbname=postgres sslmode=disable connect_timeout=5' "$1"; }

pg_bindir() {
	local d
	while IFS= read -r d; do
		if [[ -x $d/initdb && -x $d/pg_ctl ]]; then
			printf '%s\n' "$d"
			return 0
		fi
	done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -rV)
	return 1
}

# Unprivileged OS user that runs the server when we are root ("" = run as ourselves).
pg_os_user() {
	((EUID == 0)) || return 0
	if id -u postgres >/dev/null 2>&1; then
		printf 'postgres\n'
		return 0
	fi
	if ! id -u onsale-pg >/dev/null 2>&1; then
		useradd --system --user-group --no-create-home --home-dir /nonexistent \
			--shell /usr/sbin/nologin onsale-pg >&2
	fi
	printf 'onsale-pg\n'
}

as_user() { # USER CMD...   (USER "" = ourselves); cwd / so unreachable cwds don't matter
	local u=$1
	shift
	if [[ -n $u ]]; then
		(cd / && runuser -u "$u" -- "$@")
	else
		"$@"
	fi
}

ensure_pg_role_db() { # PORT ROLE DB
	psql "$(pg_admin_conn "$1")" -X -w -q -v ON_ERROR_STOP=1 -v role="$2" -v db="$3" >/dev/null <<'SQL'
SELECT format('CREATE ROLE %I LOGIN SUPERUSER', :'role')
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'role')
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SQL
}

up_postgres() { # URL
	local url=$1 shown u bindir link=$RUN_DIR/pg target='' data hash pid listen owner
	local marker=$STARTED_DIR/postgres logf=$RUN_DIR/postgres.log
	shown=$(pg_display "$url")
	TAKEN=0
	if ((PICKED)); then
		parse_pg_url "$url"
		if port_busy "$PG_PORT"; then
			log "postgres: 127.0.0.1:$PG_PORT, picked for this run, was taken meanwhile; picking another port"
			TAKEN=1
			return 0
		fi
	fi
	if pg_answers "$url"; then
		log "postgres: using existing DATABASE_URL ($shown)"
		return 0
	fi
	parse_pg_url "$url"
	is_local_host "$PG_HOST" ||
		die "postgres: DATABASE_URL ($shown) does not answer and its host is not 127.0.0.1/localhost; not starting a throwaway server. psql said: $PG_CHECK_ERR"

	if pg_isready -q -h 127.0.0.1 -p "$PG_PORT" -t 3; then
		# Something answers on the port but the URL fails (missing database or role?).
		if [[ -f $marker && $(marker_get "$marker" port || true) == "$PG_PORT" ]]; then
			ensure_pg_role_db "$PG_PORT" "$PG_USER" "$PG_DB"
			pg_answers "$url" || die "postgres: throwaway on 127.0.0.1:$PG_PORT still rejects DATABASE_URL: $PG_CHECK_ERR"
			log "postgres: using throwaway already started on 127.0.0.1:$PG_PORT ($(rel)/pg)"
			return 0
		fi
		die "postgres: a server answers on 127.0.0.1:$PG_PORT but DATABASE_URL ($shown) fails: $PG_CHECK_ERR"
	fi
	if port_busy "$PG_PORT"; then
		die "postgres: 127.0.0.1:$PG_PORT is in use by something that is not PostgreSQL; pick another port in DATABASE_URL"
	fi

	refuse_second_throwaway postgres "$PG_PORT"
	bindir=$(pg_bindir) || {
		apt_install postgresql
		bindir=$(pg_bindir) || die "postgres: no initdb/pg_ctl under /usr/lib/postgresql/*/bin after install"
	}
	u=$(pg_os_user)
	if [[ -n $u ]] && ! as_user "$u" test -x "$RUN_DIR"; then
		# e.g. a clone inside a 0700 root-owned mktemp dir: keep the data where $u can reach it
		hash=$(printf '%s' "$RUN_DIR" | sha256sum | cut -c1-16)
		target=/tmp/onsale-pg-$hash
	fi
	data=${target:-$link}

	mkdir -p "$STARTED_DIR"
	# marker first: from here on `down` / rollback owns (and cleans) the data dir
	printf 'kind=postgres\nport=%s\nuser=%s\nbindir=%s\ndata=%s\nlink=%s\ntarget=%s\n' \
		"$PG_PORT" "$u" "$bindir" "$data" "$link" "$target" >"$marker"
	STARTED_NOW+=(postgres)

	if [[ -n $target ]]; then
		if [[ -L $link ]]; then
			[[ $(readlink "$link") == "$target" ]] || rm -f "$link"
		elif [[ -e $link ]]; then
			rm -rf "$link"
		fi
		if [[ -L $target || (-e $target && ! -d $target) ]]; then
			die "postgres: $target exists and is not a plain directory; remove it"
		fi
		if [[ -d $target ]]; then
			owner=$(stat -c %U "$target")
			[[ $owner == "$u" ]] || die "postgres: $target is owned by $owner, not $u; remove it"
		else
			mkdir -m 0700 "$target"
			chown "$u:" "$target"
		fi
		[[ -L $link ]] || ln -s "$target" "$link"
	else
		[[ -L $link ]] && rm -f "$link"
		mkdir -p "$link"
		[[ -z $u ]] || chown "$u:" "$link"
		chmod 0700 "$link"
	fi

	: >"$logf"
	# reuse a leftover cluster of the same major version, else start from scratch
	if [[ ! -f $data/PG_VERSION || $(cat "$data/PG_VERSION") != "$(basename "$(dirname "$bindir")")" ]]; then
		find "$data" -mindepth 1 -delete
		as_user "$u" "$bindir/initdb" -D "$data" --auth=trust -U postgres -E UTF8 --locale=C \
			>>"$logf" 2>&1 || {
			tail -n 20 "$logf" >&2
			die "postgres: initdb failed (log: $(rel)/postgres.log)"
		}
	fi

	# stale lock of a crashed server (a zombie pid still looks alive to postgres)
	if [[ -f $data/postmaster.pid ]] && ! alive "$(head -n 1 "$data/postmaster.pid")"; then
		rm -f "$data/postmaster.pid"
	fi
	listen=127.0.0.1
	[[ $PG_HOST == localhost ]] && listen=localhost
	# no -l: the server inherits this (root-opened) log fd, so the log can live in .run/
	# even when $u cannot reach .run/
	if ! as_user "$u" "$bindir/pg_ctl" start -D "$data" -w -t 60 \
		-o "-p $PG_PORT -c listen_addresses=$listen $PG_OPTS ${ONSALE_PG_OPTS:-}" \
		</dev/null >>"$logf" 2>&1 8>&- 9>&-; then
		tail -n 20 "$logf" >&2
		die "postgres: failed to start on 127.0.0.1:$PG_PORT (log: $(rel)/postgres.log)"
	fi
	pid=$(head -n 1 "$data/postmaster.pid")
	printf '%s\n' "$pid" >"$RUN_DIR/postgres.pid"
	printf 'pid=%s\nstart=%s\n' "$pid" "$(proc_start "$pid" || true)" >>"$marker"

	ensure_pg_role_db "$PG_PORT" "$PG_USER" "$PG_DB" ||
		die "postgres: could not create role/database $PG_USER/$PG_DB"
	pg_answers "$url" || die "postgres: throwaway started but DATABASE_URL fails: $PG_CHECK_ERR"
	if [[ -n $target ]]; then
		log "postgres: started throwaway on 127.0.0.1:$PG_PORT ($(rel)/pg -> $target)"
	else
		log "postgres: started throwaway on 127.0.0.1:$PG_PORT ($(rel)/pg)"
	fi
}

stop_postgres() {
	local marker=$STARTED_DIR/postgres u bindir data link target port pid start rc=0
	u=$(marker_get "$marker" user || true)
	bindir=$(marker_get "$marker" bindir || true)
	data=$(marker_get "$marker" data || true)
	link=$(marker_get "$marker" link || true)
	target=$(marker_get "$marker" target || true)
	port=$(marker_get "$marker" port || true)
	pid=$(marker_get "$marker" pid || true)
	start=$(marker_get "$marker" start || true)

	if [[ -n $data && -f $data/postmaster.pid && -x $bindir/pg_ctl ]]; then
		as_user "$u" "$bindir/pg_ctl" stop -D "$data" -m fast -w -t 60 \
			</dev/null >>"$RUN_DIR/postgres.log" 2>&1 || rc=$?
	fi
	if [[ -n $pid ]] && same_proc "$pid" "$start"; then
		# pg_ctl could not do it (data dir gone?): fast shutdown by signal, then SIGKILL
		kill -INT "$pid" 2>/dev/null || true
		wait_gone "$pid" 30 || { kill -KILL "$pid" 2>/dev/null || true; }
	elif ((rc != 0)); then
		log "postgres: pg_ctl stop failed (see $(rel)/postgres.log); continuing"
	fi

	if [[ -n $target && $target == /tmp/onsale-pg-* && -d $target && ! -L $target ]]; then
		rm -rf "$target"
	fi
	if [[ -n $link && $link == "$RUN_DIR/pg" ]]; then
		if [[ -L $link ]]; then rm -f "$link"; elif [[ -d $link ]]; then rm -rf "$link"; fi
	fi
	rm -f "$RUN_DIR/postgres.pid" "$marker"
	log "postgres: stopped throwaway on 127.0.0.1:${port:-?} and removed its data"
}

# ---------------------------------------------------------------- Redis

REDIS_URL_RE='^(rediss?)://(([^@/?#]*)@)?([^/?#]*)(/([0-9]*))?([?#].*)?$'

redis_display() {
	if [[ $1 =~ $REDIS_URL_RE ]]; then printf '%s\n' "${BASH_REMATCH[4]}"; else printf 'unparsed URL\n'; fi
}

# -> R_SCHEME R_HOST R_PORT R_USER R_PASS R_DB
parse_redis_url() {
	local userinfo
	[[ $1 =~ $REDIS_URL_RE ]] || return 1
	R_SCHEME=${BASH_REMATCH[1]} userinfo=${BASH_REMATCH[3]} R_DB=${BASH_REMATCH[6]:-0}
	split_hostport "${BASH_REMATCH[4]}" 6379 || return 1
	R_HOST=${HP_HOST:-127.0.0.1} R_PORT=$HP_PORT R_USER='' R_PASS=''
	if [[ $userinfo == *:* ]]; then
		R_USER=$(urldecode "${userinfo%%:*}") R_PASS=$(urldecode "${userinfo#*:}")
	elif [[ -n $userinfo ]]; then
		R_PASS=$(urldecode "$userinfo")
	fi
}

# PING via parsed fields: the password goes through REDISCLI_AUTH (not argv), and
# "redis://:pw@" means password-only (redis-cli -u would send an empty username).
redis_answers() { # URL
	local out args env=()
	if parse_redis_url "$1"; then
		args=(-h "$R_HOST" -p "$R_PORT" -n "$R_DB")
		[[ $R_SCHEME == rediss ]] && args+=(--tls)
		[[ -n $R_USER && $R_USER != default ]] && args+=(--user "$R_USER")
		[[ -n $R_PASS ]] && env=(REDISCLI_AUTH="$R_PASS")
	else
		args=(--no-auth-warning -u "$1")
	fi
	out=$(env "${env[@]}" timeout --foreground 3 redis-cli "${args[@]}" ping 2>/dev/null) || return 1
	[[ $out == PONG ]]
}

up_redis() { # URL
	local url=$1 shown marker=$STARTED_DIR/redis dir=$RUN_DIR/redis pidf=$RUN_DIR/redis.pid
	local logf=$RUN_DIR/redis.log conf='' i pid='' bind=(127.0.0.1)
	shown=$(redis_display "$url")
	TAKEN=0
	if ((PICKED)); then
		parse_redis_url "$url" || die "redis: bad URL $shown"
		if port_busy "$R_PORT"; then
			log "redis: 127.0.0.1:$R_PORT, picked for this run, was taken meanwhile; picking another port"
			TAKEN=1
			return 0
		fi
	fi
	if redis_answers "$url"; then
		log "redis: using existing REDIS_URL ($shown)"
		return 0
	fi
	parse_redis_url "$url" || die "redis: REDIS_URL is not a redis:// URL; cannot start a throwaway server for it"
	[[ $R_SCHEME == redis ]] || die "redis: REDIS_URL ($shown) does not answer; not starting a throwaway server for rediss://"
	is_local_host "$R_HOST" ||
		die "redis: REDIS_URL ($shown) does not answer and its host is not 127.0.0.1/localhost; not starting a throwaway server"
	if timeout --foreground 3 redis-cli -h 127.0.0.1 -p "$R_PORT" ping 2>&1 | grep -qE 'PONG|NOAUTH|WRONGPASS'; then
		die "redis: a server answers on 127.0.0.1:$R_PORT but REDIS_URL ($shown) fails (password?)"
	fi
	if port_busy "$R_PORT"; then
		die "redis: 127.0.0.1:$R_PORT is in use by something that is not Redis; pick another port in REDIS_URL"
	fi
	refuse_second_throwaway redis "$R_PORT"
	command -v redis-server >/dev/null 2>&1 || apt_install redis-server

	mkdir -p "$STARTED_DIR" "$dir"
	printf 'kind=redis\nport=%s\ndir=%s\n' "$R_PORT" "$dir" >"$marker"
	STARTED_NOW+=(redis)
	rm -f "$pidf"
	: >"$logf"
	if [[ -n $R_PASS ]]; then
		if [[ -n $R_USER && $R_USER != default ]]; then
			conf="user $R_USER on >$R_PASS ~* &* +@all"
		else
			conf="requirepass \"$R_PASS\""
		fi
	fi
	[[ $R_HOST == localhost ]] && bind+=(-::1)
	# config from stdin keeps a password out of argv; early output (before daemonizing)
	# is appended to the same log redis-server later writes itself
	# shellcheck disable=SC2094
	printf '%s\n' "$conf" | redis-server - --port "$R_PORT" --bind "${bind[@]}" --daemonize yes \
		--pidfile "$pidf" --dir "$dir" --save '' --appendonly no --logfile "$logf" \
		>>"$logf" 2>&1 8>&- 9>&- || die "redis: redis-server failed (log: $(rel)/redis.log)"
	for ((i = 0; i < 50; i++)); do
		if [[ -s $pidf ]]; then
			alive "$(cat "$pidf")" || break
			if redis_answers "$url"; then
				pid=$(cat "$pidf")
				break
			fi
		fi
		grep -q 'aborting' "$logf" && break
		sleep 0.2
	done
	if [[ -z $pid ]]; then
		tail -n 20 "$logf" >&2 || true
		die "redis: throwaway on 127.0.0.1:$R_PORT did not answer (log: $(rel)/redis.log)"
	fi
	printf 'pid=%s\nstart=%s\n' "$pid" "$(proc_start "$pid" || true)" >>"$marker"
	log "redis: started throwaway on 127.0.0.1:$R_PORT ($(rel)/redis)"
}

stop_redis() {
	local marker=$STARTED_DIR/redis pidf=$RUN_DIR/redis.pid pid start port dir
	port=$(marker_get "$marker" port || true)
	dir=$(marker_get "$marker" dir || true)
	start=$(marker_get "$marker" start || true)
	pid=$(marker_get "$marker" pid || true)
	[[ -n $pid ]] || pid=$(cat "$pidf" 2>/dev/null || true)
	if [[ -n $pid ]] && same_proc "$pid" "$start"; then
		terminate "$pid" "$start" # SIGTERM = shutdown; nothing is saved (--save '')
	elif [[ -z $pid && -n $port ]] && timeout 5 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
		# crashed before the pid was recorded? only if it is really ours: same dir
		if [[ $(timeout 5 redis-cli -h 127.0.0.1 -p "$port" config get dir 2>/dev/null | tail -n 1) == "$dir" ]]; then
			timeout 10 redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true
		fi
	fi
	if [[ -n $dir && $dir == "$RUN_DIR/redis" ]]; then rm -rf "$dir"; fi
	rm -f "$pidf" "$marker"
	log "redis: stopped throwaway on 127.0.0.1:${port:-?}"
}

# ---------------------------------------------------------------- stop by name

stop_name() { # NAME
	local marker=$STARTED_DIR/$1
	[[ -f $marker ]] || return 0
	case $(marker_get "$marker" kind || true) in
	postgres) stop_postgres ;;
	redis) stop_redis ;;
	*) stop_process "$1" ;;
	esac
}

# application processes first (newest first), then redis, then postgres
stop_names() { # NAME...
	local i n
	for ((i = $#; i >= 1; i--)); do
		n=${!i}
		[[ $n == postgres || $n == redis ]] || stop_name "$n"
	done
	for n in redis postgres; do
		for i in "$@"; do [[ $i == "$n" ]] && stop_name "$n"; done
	done
	return 0
}

# ---------------------------------------------------------------- commands

ensure_clients() {
	if ! command -v psql >/dev/null 2>&1 || ! command -v pg_isready >/dev/null 2>&1; then
		apt_install postgresql-client
	fi
	if ! command -v redis-cli >/dev/null 2>&1; then
		apt_install redis-tools
	fi
	if ((EUID == 0)) && ! command -v runuser >/dev/null 2>&1; then
		die "runuser (util-linux) is required when running as root"
	fi
}

do_up() {
	local db_url=${DATABASE_URL:-$DEFAULT_DATABASE_URL} redis_url=${REDIS_URL:-$DEFAULT_REDIS_URL} try
	lock
	ensure_clients
	# a run's own servers go on ports it picks (unless the caller named its URLs); a port
	# taken between the pick and the start is picked again, never shared
	if [[ $MODE == run && -z ${DATABASE_URL:-} ]]; then
		PICKED=1 TAKEN=1
		for ((try = 0; TAKEN && try < 5; try++)); do
			db_url="postgres://postgres@127.0.0.1:$(free_port)/onsale?sslmode=disable"
			up_postgres "$db_url"
		done
		((!TAKEN)) || die "postgres: 5 ports picked for this run were all taken before it could start"
		PICKED=0
	else
		up_postgres "$db_url"
	fi
	if [[ $MODE == run && -z ${REDIS_URL:-} ]]; then
		PICKED=1 TAKEN=1
		for ((try = 0; TAKEN && try < 5; try++)); do
			redis_url="redis://127.0.0.1:$(free_port)/0"
			up_redis "$redis_url"
		done
		((!TAKEN)) || die "redis: 5 ports picked for this run were all taken before it could start"
		PICKED=0
	else
		up_redis "$redis_url"
	fi
	{
		printf '# written by deploy/local/stack.sh up\n'
		printf 'export DATABASE_URL=%s\n' "$(squote "$db_url")"
		printf 'export REDIS_URL=%s\n' "$(squote "$redis_url")"
	} >"$ENV_FILE.tmp"
	chmod 0600 "$ENV_FILE.tmp"
	mv -f "$ENV_FILE.tmp" "$ENV_FILE"
	export DATABASE_URL=$db_url REDIS_URL=$redis_url
	start_apps
	unlock
}

do_down() {
	local f names=()
	reap_dead_runs
	lock
	if [[ -d $STARTED_DIR ]]; then
		for f in "$STARTED_DIR"/*; do
			[[ -f $f ]] && names+=("$(basename "$f")")
		done
	fi
	if ((${#names[@]} == 0)); then
		log "down: nothing was started by stack.sh; nothing to stop"
	else
		stop_names "${names[@]}"
	fi
	rmdir "$STARTED_DIR" 2>/dev/null || true
	unlock
}

# A run killed by SIGKILL (or by the OOM killer) never ran its EXIT trap:
# its PostgreSQL and Redis still run and are recorded only in its own started/. Stop them
# for every run directory whose stack.sh (the PID in NAME-PID) is gone; `down` and the
# start of every run call this. The directory itself stays (its logs; make clean prunes it).
reap_dead_runs() {
	local d pid f names saved=$RUN_DIR
	for d in "$ROOT"/.run/runs/*/; do
		[[ -d $d ]] || continue
		d=${d%/} pid=${d##*-}
		[[ $pid =~ ^[0-9]+$ && $d != "$saved" ]] || continue
		alive "$pid" && continue # still going (or its pid reused: leave it be)
		[[ -n $(ls -A "$d/started" 2>/dev/null) ]] || continue
		set_run_dir "$d"
		names=()
		for f in "$STARTED_DIR"/*; do
			[[ -f $f ]] && names+=("$(basename "$f")")
		done
		log "run $(rel) is gone (pid $pid); stopping what it left running"
		# its own lock (another reaper may be at it); a subshell, so a die stops only this one
		(
			exec 9>"$RUN_DIR/lock"
			flock -n 9 || exit 0
			stop_names "${names[@]}"
			rmdir "$STARTED_DIR" 2>/dev/null || true
		) || log "run $(rel): could not stop everything it left; see its logs"
	done
	set_run_dir "$saved"
}

# EXIT trap for up/env/run: stop whatever this invocation started and did not hand over
# (everything for `run`; only a partial start for a failed `up`).
on_exit() {
	local rc=$?
	trap '' INT TERM HUP
	exec 2>&8
	if ((${#STARTED_NOW[@]})); then
		if [[ $MODE == run ]]; then
			log "run: exit status $rc; stopping what this run started"
		elif ((rc != 0)); then
			log "$MODE: failed (exit status $rc); stopping what it had started"
		fi
		lock || true
		stop_names "${STARTED_NOW[@]}" || true
		STARTED_NOW=()
		rmdir "$STARTED_DIR" 2>/dev/null || true
	fi
	unlock
	if [[ $MODE == run && $RUN_DIR == "$ROOT/.run/runs/"* ]]; then
		if ((rc == 0)); then
			rm -rf "$RUN_DIR"
			rmdir "$ROOT/.run/runs" 2>/dev/null || true
		else
			log "run: kept $RUN_DIR (logs of the failed run)"
		fi
	fi
	exit "$rc"
}

set_traps() {
	trap on_exit EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
}

main() {
	local cmd=${1:-} rc
	(($#)) && shift
	MODE=$cmd
	case $cmd in
	up)
		set_traps
		do_up
		STARTED_NOW=() # hand over to `down`
		;;
	env)
		set_traps
		do_up
		STARTED_NOW=()
		grep '^export ' "$ENV_FILE"
		;;
	down)
		do_down
		;;
	run)
		[[ ${1:-} == -- ]] && shift
		(($#)) || usage
		local name
		name=$(basename "$1")
		set_run_dir "$ROOT/.run/runs/${name%.sh}-$$"
		export ONSALE_RUN_DIR=$RUN_DIR
		reap_dead_runs
		set_traps
		do_up
		# shellcheck source=/dev/null
		. "$ENV_FILE"
		set +e
		"$@"
		rc=$?
		set -e
		exit "$rc"
		;;
	-h | --help | help)
		usage
		;;
	*)
		usage
		;;
	esac
}

main "$@"
