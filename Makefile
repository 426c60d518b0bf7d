# onsale - local developer entry points. Services (PostgreSQL, Redis) are managed by
# deploy/local/stack.sh; state lives in .run/ (see the header of that script).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

STACK := deploy/local/stack.sh
# cmd folders that exist right now (others may not have been written yet)
CMD_DIRS := $(wildcard core/cmd gateway/cmd loadtest/cmd)

.PHONY: all build up down test bench demo clean

all: build

build:
	@mkdir -p bin
	@pkgs=(); \
	for d in $(CMD_DIRS); do \
		if [ -n "$$(find "$$d" -name '*.go' -print -quit)" ]; then pkgs+=("./$$d/..."); fi; \
	done; \
	if [ $${#pkgs[@]} -eq 0 ]; then echo "build: no Go files under core|gateway|loadtest/cmd yet; nothing to build"; exit 0; fi; \
	echo "go build -o bin/ $${pkgs[*]}"; \
	go build -o bin/ "$${pkgs[@]}"

up:
	$(STACK) up

down:
	$(STACK) down

test:
	$(STACK) run -- deploy/local/test.sh

bench:
	$(STACK) run -- deploy/local/bench.sh

demo:
	$(STACK) run -- deploy/local/demo.sh

# bin/ always; .run/ only when nothing started by stack.sh is still recorded as up
clean:
	rm -rf bin
	@if [ -n "$$(ls -A .run/started 2>/dev/null)" ]; then \
		echo "clean: keeping .run/ (services still up; run 'make down' first)"; \
	else \
		rm -rf .run; \
	fi
