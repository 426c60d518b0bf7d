#!/usr/bin/env bash
# deploy/local/fuzz.sh - `make fuzz`: every Go fuzz target of the workspace (func FuzzXxx in
# the fuzz_test.go files of core, gateway, shared), one after another, each for FUZZTIME
# (default 30s; any `go test -fuzztime` value, e.g. 10s or 5000x). Run through
# `deploy/local/stack.sh run -- deploy/local/fuzz.sh`: the core/http targets send their inputs
# to the real core on the run's own PostgreSQL (DATABASE_URL).
#
# FUZZ (a regexp, default all) picks targets by name; FUZZ_PARALLEL sets the workers per target
# (go test -parallel, default 1: the machine is shared). At the end it prints, per target, the
# executions, the new interesting inputs and the finding: a failing input is written by Go to
# <package>/testdata/fuzz/<Target>/<hash>, where it then runs as an ordinary test case (commit
# it with the fix). Exit status 1 when any target found something. The log of each target is
# in .run/fuzz/<module>-<package>-<Target>.log, the table in .run/fuzz/summary.txt.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

FUZZTIME=${FUZZTIME:-30s}
FUZZ=${FUZZ:-.}
FUZZ_PARALLEL=${FUZZ_PARALLEL:-1}
out=.run/fuzz
mkdir -p "$out"

# module/package-dir target, for every fuzz target
mapfile -t targets < <(
	for m in core gateway shared; do
		find "$m" -name fuzz_test.go -not -path '*/testdata/*' | sort | while read -r file; do
			sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(f \*testing\.F).*/\1/p' "$file" | while read -r t; do
				echo "$m ./$(dirname "${file#"$m"/}") $t"
			done
		done
	done | awk -v re="$FUZZ" '$3 ~ re'
)
((${#targets[@]})) || {
	echo "fuzz.sh: no fuzz target matches FUZZ=$FUZZ" >&2
	exit 1
}
echo "fuzz.sh: ${#targets[@]} targets, $FUZZTIME each, $FUZZ_PARALLEL worker(s)"

rows=() failed=0
for line in "${targets[@]}"; do
	read -r mod pkg t <<<"$line"
	where=$mod/${pkg#./}
	where=${where%/.}
	log=$out/${where//\//-}-$t.log # FuzzVerify is in several packages
	printf '+ %-28s %s\n' "$t" "$where"
	rc=0
	(cd "$mod" && go test -run '^$' -fuzz "^$t\$" -fuzztime "$FUZZTIME" -parallel "$FUZZ_PARALLEL" "$pkg") >"$log" 2>&1 || rc=$?
	# the last progress line: "fuzz: elapsed: 10s, execs: 104567 (12131/sec), new interesting: 40 (total: 57)"
	last=$(grep -E '^fuzz: elapsed: .*execs: ' "$log" | tail -n 1 || true)
	execs=$(sed -nE 's/.*execs: ([0-9]+) .*/\1/p' <<<"$last")
	newi=$(sed -nE 's/.*new interesting: ([0-9]+).*/\1/p' <<<"$last")
	finding=none
	if ((rc != 0)); then
		failed=1
		finding=$(sed -nE 's/.*Failing input written to (.*)/\1/p' "$log" | head -n 1)
		[[ -n $finding ]] && finding="$where/$finding" || finding="FAILED (see $log)"
		grep -E -m 3 '^\s+fuzz_test\.go:[0-9]+:|panic:' "$log" | sed 's/^/    /' || true
	fi
	rows+=("$(printf '%-28s %-22s %12s %10s  %s' "$t" "$where" "${execs:-0}" "${newi:-0}" "$finding")")
done

echo
printf '%-28s %-22s %12s %10s  %s\n' target package execs 'new inter.' finding
for r in "${rows[@]}"; do echo "$r"; done | tee "$out/summary.txt"
exit "$failed"
