#!/bin/bash
# SPDX-License-Identifier: MIT
# doc-test.sh - run the commands of docs/OPERATIONS.md as written.
#
# Every ```sh block that follows a line `<!-- doc-test: SECTION -->` is
# taken, in the order of the page, and all of them run in ONE bash (set -eux
# -o pipefail: the first failing command fails the test; variables carry from
# block to block), in the directory given (default: a scratch copy of this
# tree's files, so a `dpkg-buildpackage` in the walk runs in a checkout and
# leaves its .deb next to it).  The script run is kept as WORK/SECTION.sh.
#
# Usage: deploy/doc-test.sh SECTION [DIR]
# Env:   TIER_DOCTEST_TIMEOUT  seconds for the whole section (default 900)
#        TIER_DOCTEST_KEEP=1   keep the scratch directory
# As root without sudo installed, `sudo` runs its command (CI runs as root).
# The section runs in its own process group, killed when it ends: nothing it
# started in the background outlives it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
doc=$top/docs/OPERATIONS.md
section=${1:?usage: deploy/doc-test.sh SECTION [DIR]}
work=$(mktemp -d /tmp/tierd-doctest.XXXXXX)
chmod 0755 "$work"
keep=${TIER_DOCTEST_KEEP:-0}
pgid=
cleanup() {
	local rc=$?
	[ -n "$pgid" ] && kill -KILL -- "-$pgid" 2>/dev/null || true
	if [ "$keep" = 1 ] || [ "$rc" != 0 ]; then
		echo "doc-test: $section: scratch kept in $work" >&2
	else
		rm -rf "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT

script=$work/$section.sh
awk -v sec="$section" '
	$0 == "<!-- doc-test: " sec " -->" { want = 1; next }
	want && /^```sh$/ { inblk = 1; want = 0; n++; print "# ---- block " n " (docs/OPERATIONS.md line " NR ")"; next }
	inblk && /^```$/ { inblk = 0; next }
	inblk { print; next }
	want && !/^[[:space:]]*$/ { want = 0 }
	END { if (!n) exit 1 }
' "$doc" > "$script.body" || { echo "doc-test: no block marked '$section' in $doc" >&2; exit 1; }
{
	echo "set -eux -o pipefail"
	# CI runs as root; a fresh Debian has no sudo
	if [ "$(id -u)" = 0 ] && ! command -v sudo >/dev/null; then
		echo 'sudo() { "$@"; }'
	fi
	cat "$script.body"
} > "$script"
rm "$script.body"
echo "doc-test: $section: $(grep -c '^# ---- block' "$script") block(s) from docs/OPERATIONS.md"

if [ $# -ge 2 ]; then
	dir=$2
else
	dir=$work/src
	mkdir -p "$dir"
	(cd "$top" && git ls-files -z --cached --others --exclude-standard |
		tar --null -T - -cf -) | tar -C "$dir" -xf -
fi

cd "$dir"
rc=0
setsid timeout -s KILL "${TIER_DOCTEST_TIMEOUT:-900}" bash "$script" &
pgid=$!
wait "$pgid" || rc=$?
if [ "$rc" != 0 ]; then
	echo "doc-test: $section: FAILED (exit $rc); the script: $script" >&2
	exit 1
fi
echo "doc-test: $section: every command ran"
