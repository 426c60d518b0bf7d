#!/usr/bin/env bash
# deploy/systemd/verify.sh [BIN_DIR] - check the onsale units with `systemd-analyze verify`
# (make test runs it where systemd-analyze exists).
#
# verify wants every ExecStart binary to exist, and the targets a service depends on, so the
# units are checked inside a throwaway root (--root): BIN_DIR's core, gateway and paysim (default
# bin/) at the units' paths (/usr/local/bin/onsale-*), the units in etc/systemd/system, and
# copies of the few targets they reach. systemd-analyze only warns (exit 0) about an unknown
# key or a bad value, so any line it prints fails the check too.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bin=${1:-bin}
command -v systemd-analyze >/dev/null 2>&1 || {
	echo "verify.sh: no systemd-analyze here; units not checked" >&2
	exit 0
}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/local/bin" "$root/etc/systemd/system" "$root/usr/lib/systemd/system"
units=()
for app in core gateway paysim; do
	[[ -x $bin/$app ]] || {
		echo "verify.sh: no $bin/$app: run 'make build' first" >&2
		exit 1
	}
	cp "$bin/$app" "$root/usr/local/bin/onsale-$app"
	cp "deploy/systemd/onsale-$app.service" "$root/etc/systemd/system/"
	units+=("onsale-$app.service")
done
for t in sysinit.target basic.target shutdown.target network-online.target multi-user.target; do
	for d in /usr/lib/systemd/system /lib/systemd/system; do
		[[ -f $d/$t ]] && { cp -L "$d/$t" "$root/usr/lib/systemd/system/"; break; }
	done
done
out=$(systemd-analyze verify --root="$root" "${units[@]}" 2>&1) && rc=0 || rc=$?
if ((rc != 0)) || [[ -n $out ]]; then
	printf '%s\n' "$out" >&2
	echo "verify.sh: systemd-analyze verify found problems in deploy/systemd (above)" >&2
	exit 1
fi
echo "verify.sh: ${units[*]}: systemd-analyze verify found nothing to fix"
