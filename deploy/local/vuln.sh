#!/usr/bin/env bash
# deploy/local/vuln.sh - `make vuln`: govulncheck over the four modules against a
# vulnerability database built here from golang.org/x/vulndb (the online database,
# vuln.go.dev, is not reachable from the build machines). The Go module proxy serves
# golang.org/x/vulndb with its reports (data/osv) and the tool that builds a database
# from them (cmd/gendb, which reads a git checkout: the module is committed into a
# scratch repository first). Tools and the database are cached in .run/tools/ and
# rebuilt when the pinned versions change.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

VULN=golang.org/x/vuln/cmd/govulncheck@v1.9.0
VULNDB=golang.org/x/vulndb@v0.0.0-20261105234957-e22db6528018
tools=$PWD/.run/tools
db=$tools/vulndb-${VULNDB##*@}

fail() {
	printf 'vuln.sh: FAIL: %s\n' "$*" >&2
	exit 1
}

mkdir -p "$tools"
if [[ ! -x $tools/govulncheck ]] || ! "$tools/govulncheck" -version 2>/dev/null | grep -q 'v1.9.0'; then
	echo "+ go install $VULN (into .run/tools)"
	GOBIN=$tools go install "$VULN" || fail "could not install $VULN"
fi
if [[ ! -f $db/index/db.json ]]; then
	echo "+ go mod download $VULNDB"
	src=$(go mod download -json "$VULNDB" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[[ -d $src/data/osv ]] || fail "no data/osv in $VULNDB"
	repo=$(mktemp -d)
	trap 'rm -rf "$repo"' EXIT
	cp -r "$src/." "$repo/"
	chmod -R u+w "$repo"
	echo "+ git commit of the module (cmd/gendb reads a git checkout)"
	git -C "$repo" init -q
	git -C "$repo" add -A
	git -C "$repo" -c user.name=vuln -c user.email=vuln@localhost commit -qm "$VULNDB" --date=2026-11-05T23:49:57Z
	echo "+ gendb: building the database in $db"
	rm -rf "$db.tmp"
	(cd "$repo" && go run ./cmd/gendb -repo . -out "$db.tmp") || fail "gendb could not build the database"
	mv "$db.tmp" "$db"
fi
bad=()
for m in core gateway loadtest shared; do
	echo "+ govulncheck -db file://$db ./... (in $m)"
	(cd "$m" && "$tools/govulncheck" -db "file://$db" ./...) || bad+=("$m")
done
((${#bad[@]} == 0)) || fail "govulncheck reports vulnerabilities in: ${bad[*]} (above)"
echo "vuln.sh: no known vulnerabilities reached from the code"
