#!/bin/bash
# SPDX-License-Identifier: MIT
# package-test.sh - the Debian package end to end, on this machine (root):
# removes an installed tierd package (a new operator's machine), runs the
# walk of docs/OPERATIONS.md as written (deploy/doc-test.sh local: install
# deps, dpkg-buildpackage -us -uc -b, apt-get install of the .deb, tierd
# --check of the shipped config as the tierd user, an image served, written
# and read with qemu-io, tierctl status, SIGTERM) and its quick start
# (doc-test quick), then checks what the package put on the machine.  The
# package stays installed (the ceph suite's doc-test uses it).
#
# Usage: deploy/package-test.sh        Env: as deploy/doc-test.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
SUDO=""
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null || { echo "package-test: needs root or sudo" >&2; exit 1; }
	SUDO=sudo
fi
fail() { echo "package-test: FAIL: $*" >&2; exit 1; }

if dpkg-query -W -f='${Status}' tierd 2>/dev/null | grep -q installed; then
	echo "package-test: purging the installed tierd package first"
	$SUDO dpkg --purge tierd >/dev/null
fi
# The export's data of an earlier run (the walk writes a fresh image)
$SUDO rm -rf /var/lib/tierd

export DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-"nocheck parallel=$(nproc)"}
"$top/deploy/doc-test.sh" local
# the quick start of "Running", with the installed binaries in PATH
"$top/deploy/doc-test.sh" quick

# ---- what the package installed
ver=$(dpkg-parsechangelog -l "$top/debian/changelog" -S Version)
[ "$(dpkg-query -W -f='${Status} ${Version}' tierd)" = "install ok installed $ver" ] ||
	fail "tierd $ver is not installed"
[ "$(/usr/sbin/tierd --version)" = "tierd ${ver%%-*}" ] || fail "tierd --version: $(/usr/sbin/tierd --version)"
IFS=: read -r _ _ uid _ _ home shell < <(getent passwd tierd) || fail "no tierd user"
[ "$uid" -lt 1000 ] && [ "$home" = /var/lib/tierd ] && [ "$shell" = /usr/sbin/nologin ] ||
	fail "tierd user: uid $uid home $home shell $shell (want a system user, /var/lib/tierd, nologin)"
getent group tierd >/dev/null || fail "no tierd group"
[ "$(stat -c '%U:%G %a' /var/lib/tierd)" = "tierd:tierd 700" ] ||
	fail "/var/lib/tierd: $(stat -c '%U:%G %a' /var/lib/tierd)"
[ "$(stat -c '%U:%G %a' /run/tierd)" = "tierd:tierd 711" ] || fail "/run/tierd: $(stat -c '%U:%G %a' /run/tierd)"
dpkg-query -W -f='${Conffiles}\n' tierd | grep -q '^ /etc/tierd/tierd.conf ' ||
	fail "/etc/tierd/tierd.conf is not a conffile"
cmp -s "$top/deploy/tierd.conf.example" /usr/share/doc/tierd/examples/tierd.conf.example ||
	fail "examples/tierd.conf.example differs from deploy/tierd.conf.example"
for f in /usr/sbin/tierd /usr/bin/tierctl /usr/bin/tier-sim /usr/share/doc/tierd/OPERATIONS.md \
	/usr/share/doc/tierd/SECURITY.md /usr/lib/tmpfiles.d/tierd.conf; do
	[ -e "$f" ] || fail "$f not installed"
done
# the man pages, generated from the parameter and config-key tables
for page in tierd.conf tierd tierctl; do
	out=$(man -w "$page" 2>&1) || fail "man -w $page: $out"
	case $out in /usr/share/man/*) ;; *) fail "man -w $page: $out (not the package's)" ;; esac
done
out=$(man 5 tierd.conf 2>/dev/null) || fail "man 5 tierd.conf did not format"
grep -q '^ *target_max_bytes$' <<<"$out" || fail "man 5 tierd.conf: no target_max_bytes entry"
unit=/lib/systemd/system/tierd.service
grep -qx 'ExecStart=/usr/sbin/tierd --config /etc/tierd/tierd.conf' "$unit" || fail "$unit: ExecStart"
grep -qx 'Documentation=file:///usr/share/doc/tierd/OPERATIONS.md' "$unit" || fail "$unit: Documentation"
out=$(systemd-analyze verify "$unit" 2>&1) && [ -z "$out" ] || fail "systemd-analyze verify $unit: $out"
[ ! -e /etc/systemd/system/multi-user.target.wants/tierd.service ] ||
	fail "the unit was enabled by the install"
# the shipped file as shipped, checked as the service's user
cp /usr/share/doc/tierd/examples/tierd.conf.example /tmp/tierd-shipped.conf
chmod 0644 /tmp/tierd-shipped.conf
out=$($SUDO runuser -u tierd -- /usr/sbin/tierd --config /tmp/tierd-shipped.conf --check 2>&1) ||
	fail "tierd --check of the shipped config as tierd: $out"
rm -f /tmp/tierd-shipped.conf
echo "package-test: tierd $ver installed: user, directories, conffile, unit (verified), docs, man pages; the walk ran"
