# onsale - local developer entry points. Services (PostgreSQL, Redis) are managed by
# deploy/local/stack.sh, the apps by bin/stack (loadtest/cmd/stack). `make up` keeps its
# state in .run/ (see the header of stack.sh); `make demo`, `make bench` and `make test` each
# run in a directory of their own under .run/runs/ with their own servers and ports, so any of
# them can run beside `make up` and beside each other.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

STACK := deploy/local/stack.sh
# every command of the four modules; the only `go build` of the harness
CMDS := ./core/cmd/... ./gateway/cmd/... ./loadtest/cmd/...

.PHONY: all build up down test vuln bench demo soak clean cluster-up cluster-down fault-sale fuzz scale scale-ha

all: build

build:
	@mkdir -p bin
	go build -o bin/ $(CMDS)

up: build
	$(STACK) up

down:
	$(STACK) down

test: build
	$(STACK) run -- deploy/local/test.sh

# The highly available topology (loadtest/topology, bin/cluster) on 127.0.0.1:7400-7499, in the
# background: 3 gateways and 2 cores behind HAProxy, PostgreSQL under Patroni on etcd, a Redis
# Cluster of 3 masters and 3 replicas, the payment simulator. State and logs in .run/cluster/.
# It runs beside `make up` and the runs of test, demo and bench (other ports). Debian's engines
# are installed when missing.
cluster-up: build
	@ONSALE_RUN_DIR=$(CURDIR)/.run bash -c '. deploy/local/apps.sh && need_ha || exit 1; \
		if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then \
			echo "+ installing redis-server redis-tools (log in .run/apt-redis.log)"; \
			apt_get_install .run/apt-redis.log redis-server redis-tools || exit 1; fi; \
		if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then \
			echo "+ installing postgresql (log in .run/apt-postgresql.log)"; \
			apt_get_install .run/apt-postgresql.log postgresql || exit 1; fi'
	bin/cluster up

cluster-down:
	@if [ -x bin/cluster ]; then bin/cluster down; else echo "no bin/cluster: nothing was started by make cluster-up"; fi

# The noon sale of `make demo` on the HA topology twice in one session, without faults and then
# with FAULTS (default all) injected mid-sale; both checked, sell-out times side by side
# (deploy/local/faultsale.sh; reports in .run/fault-sale/).
fault-sale: build
	$(STACK) run -- deploy/local/faultsale.sh

# govulncheck against a vulnerability database built locally from golang.org/x/vulndb
vuln:
	deploy/local/vuln.sh

bench: build
	$(STACK) run -- deploy/local/bench.sh

# What a fan in line costs, for sizing (deploy/README.md, "Machines and sizing"): SCALE_FANS
# (default 100000) visitors join through the gateway, then are polled for 10 s; joins/s, Redis
# memory per fan, CPU per join and per poll (deploy/local/scale.sh, loadtest/cmd/joinbench;
# results in .run/scale/). SCALE_FANS=2000000 is seed 001's crowd (5-10 minutes);
# SCALE_MODE=line joins after onsale instead of into the pre-queue draw.
SCALE_FANS ?= 100000
SCALE_MODE ?= prequeue
scale: build
	SCALE_FANS=$(SCALE_FANS) SCALE_MODE=$(SCALE_MODE) $(STACK) run -- deploy/local/scale.sh

# What the HA topology costs beside a single node, in one session: holdbench (holds through the
# core, pgbench on its database) and joinbench (joins, polls, CPU per poll of every app and of
# HAProxy) on the single-node apps, then on `bin/cluster up` (synchronous replication, HAProxy,
# Redis Cluster), which is stopped at the end (deploy/local/hacost.sh; .run/scale/ha-*.txt).
# It uses the cluster's ports (7400-7499): not beside `make cluster-up`.
scale-ha: build
	$(STACK) run -- deploy/local/hacost.sh

# Every Go fuzz target (the fuzz_test.go files), one after another, FUZZTIME each (default 30s),
# with executions and findings per target at the end (deploy/local/fuzz.sh; logs in .run/fuzz/).
# FUZZ=regexp picks targets. The seed corpora (testdata/fuzz/) run in `make test` as it is.
FUZZTIME ?= 30s
fuzz:
	FUZZTIME=$(FUZZTIME) $(STACK) run -- deploy/local/fuzz.sh

demo: build
	$(STACK) run -- deploy/local/demo.sh

# Steady fan traffic for SOAK (default 20m; SOAK=2m for a quick one) on a stack of its own,
# sampling the core's and the gateway's heap and goroutines; fails when either grows without
# bound (deploy/local/soak.sh; curves in .run/soak/).
soak: build
	$(STACK) run -- deploy/local/soak.sh

# bin/ always; .run/ only when nothing started by stack.sh is still up. A run directory
# (.run/runs/NAME-PID/) whose PID is gone is a finished (failed) run: pruned, unless it still
# records services (a killed run); `make down` stops those.
clean:
	rm -rf bin
	@keep=; \
	for d in .run/runs/*/; do \
		[ -d "$$d" ] || continue; \
		d=$${d%/}; pid=$${d##*-}; \
		if [ -n "$$pid" ] && [ -d "/proc/$$pid" ]; then \
			keep="$$keep $$d (run still going, pid $$pid)"; \
		elif [ -n "$$(ls -A "$$d/started" 2>/dev/null)" ]; then \
			keep="$$keep $$d (services of a killed run; 'make down' stops them)"; \
		else \
			rm -rf "$$d"; \
		fi; \
	done; \
	rmdir .run/runs 2>/dev/null || true; \
	if [ -n "$$(ls -A .run/started 2>/dev/null)" ]; then \
		keep="$$keep .run/started (make up; 'make down' stops it)"; \
	fi; \
	if [ -f .run/cluster/cluster.pid ] && [ -d "/proc/$$(cut -d' ' -f1 .run/cluster/cluster.pid)" ]; then \
		keep="$$keep .run/cluster (make cluster-up; 'make cluster-down' stops it)"; \
	fi; \
	if [ -n "$$keep" ]; then \
		echo "clean: keeping .run/:$$keep"; \
	else \
		rm -rf .run; \
	fi
