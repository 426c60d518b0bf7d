#!/usr/bin/env bash
# deploy/local/faultsale.sh - `make fault-sale`: the noon sale of `make demo` on the HA
# topology (TOPOLOGY=cluster), twice in one session: first without faults, then with FAULTS
# (default all: the PostgreSQL primary and the sale's Redis master killed, every gateway
# restarted at once, one core killed three times, one gateway killed, the payment provider
# down for 30 s, a core frozen for 25 s) injected back to back from FAULT_AT after onsale
# (FAULT_GAP apart at least). Same crowd, stadium and dials (FANS, SEATS, PER_MINUTE, ... as
# make demo). Each sale runs the checker; the script prints the sell-out times side by side
# and each fault's effect, and fails when either sale broke an invariant. Reports:
# .run/fault-sale/{clean,faults}/index.html (and report.png beside each); each sale's
# topology (logs of every engine and app) stays in the run's directory when a sale fails.
#   make fault-sale                      the demo's size: 24,000 fans, 1,600 seats
#   make fault-sale FANS=3000 SEATS=1600 a quick one
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$ROOT"
: "${ONSALE_RUN_DIR:?run this through deploy/local/stack.sh run}"
OUT=$PWD/.run/fault-sale
rm -rf "$OUT"
mkdir -p "$OUT/clean" "$OUT/faults"
export TOPOLOGY=cluster FAULT_AT=${FAULT_AT:-5s} FAULT_GAP=${FAULT_GAP:-5s}
FAULTS=${FAULTS:-all}

# load: the machine's load average (other work on it slows the sale and its engines).
load() { cut -d' ' -f1-3 /proc/loadavg; }
status=0
echo "=== 1 of 2: the sale without faults (load average $(load))"
FAULTS='' REPORT=$OUT/clean/index.html RESULT=$OUT/clean/result.txt CLUSTER_DIR=$ONSALE_RUN_DIR/clean \
	deploy/local/demo.sh 2>&1 | tee "$OUT/clean/sale.log" || status=1
echo "load average after it: $(load)" | tee -a "$OUT/clean/result.txt"
echo
echo "=== 2 of 2: the same sale with faults: $FAULTS (load average $(load))"
FAULTS=$FAULTS REPORT=$OUT/faults/index.html RESULT=$OUT/faults/result.txt CLUSTER_DIR=$ONSALE_RUN_DIR/faults \
	deploy/local/demo.sh 2>&1 | tee "$OUT/faults/sale.log" || status=1
echo "load average after it: $(load)" | tee -a "$OUT/faults/result.txt"

# value FILE KEY: the value of a "key value" line of a result file ("?" when absent).
value() { awk -v k="$2" '$1 == k { print $2; f = 1 } END { if (!f) print "?" }' "$1" 2>/dev/null || echo '?'; }
echo
echo "=== fault sale: ${FANS:-24000} fans, ${SEATS:-1600} seats"
for run in clean faults; do
	r=$OUT/$run/result.txt
	printf '  %-7s sold out %s s after onsale (every seat taken after %s s; the sale took %s s); invariants broken: %s\n' \
		"$run" "$(value "$r" sold_out_s)" "$(value "$r" all_taken_s)" "$(value "$r" took_s)" "$(value "$r" failed)"
done
echo "  (sold out 0 s: not sold out before the deadline)"
echo "  faults (at_s after onsale, back_s after the injection, error_s: the longest seconds of errors of one endpoint, stall_s: admission stood still while fans waited):"
grep '^fault ' "$OUT/faults/result.txt" 2>/dev/null | sed 's/^/    /' || echo "    none recorded"
echo "  reports: ${OUT#"$PWD"/}/clean/index.html, ${OUT#"$PWD"/}/faults/index.html"
exit $status
