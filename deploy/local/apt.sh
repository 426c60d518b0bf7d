# shellcheck shell=bash
# deploy/local/apt.sh - apt_get_install, sourced by stack.sh and apps.sh (not run).
#
# Runs of make test / bench / demo go side by side (and beside other clones on the same
# machine), and two of them may install a missing package at once: dpkg allows one apt-get
# at a time and fails the other at once. So installs from these scripts queue on one
# machine-wide lock file, and apt-get itself waits up to 5 minutes for a dpkg lock held by
# anything else (DPkg::Lock::Timeout).
ONSALE_APT_LOCK=${ONSALE_APT_LOCK:-/tmp/onsale-apt.lock}

# apt_get_install LOG PKG...: install PKG (after an `apt-get update` when the first try
# fails), output appended to LOG; as root, or through sudo
apt_get_install() {
	local logf=$1 apt=()
	shift
	((EUID == 0)) || apt=(sudo)
	apt+=(env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300)
	(
		# opened read-only: flock needs no write access, and a lock file another user
		# created in sticky /tmp can still be opened; no lock file, no queue (apt still waits)
		[[ -e $ONSALE_APT_LOCK ]] || : >>"$ONSALE_APT_LOCK" 2>/dev/null || true
		if [[ -r $ONSALE_APT_LOCK ]] && exec 7<"$ONSALE_APT_LOCK"; then
			flock -w 900 7 || echo "apt_get_install: waited 15 min for $ONSALE_APT_LOCK; going on" >&2
		fi
		"${apt[@]}" install -y --no-install-recommends "$@" ||
			{ "${apt[@]}" update && "${apt[@]}" install -y --no-install-recommends "$@"; }
	) >>"$logf" 2>&1 8>&- 9>&-
}
