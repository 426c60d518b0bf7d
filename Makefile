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

.PHONY: all build up down test vuln bench demo clean

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

# govulncheck against a vulnerability database built locally from golang.org/x/vulndb
vuln:
	deploy/local/vuln.sh

bench: build
	$(STACK) run -- deploy/local/bench.sh

demo: build
	$(STACK) run -- deploy/local/demo.sh

# bin/ always; .run/ only when nothing started by stack.sh is still recorded as up
clean:
	rm -rf bin
	@if [ -n "$$(ls -A .run/started 2>/dev/null)" ] || [ -n "$$(ls -A .run/runs 2>/dev/null)" ]; then \
		echo "clean: keeping .run/ (services or runs still up; run 'make down' first)"; \
	else \
		rm -rf .run; \
	fi
