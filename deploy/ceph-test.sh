#!/bin/bash
# SPDX-License-Identifier: MIT
#
# ceph-test.sh - run the `ceph` test suite against a fresh single-node cluster:
# start deploy/ceph-dev-cluster in a temporary directory, run
# `meson test --suite ceph` with CEPH_CONF pointing at it, and stop the cluster
# afterwards, also when the tests fail or the script is interrupted.  On
# failure the cluster's logs are copied to BUILD_DIR/meson-logs/ceph-cluster/.
#
# Usage: deploy/ceph-test.sh [BUILD_DIR] [extra `meson test` arguments...]
#   BUILD_DIR defaults to ./build.  The exit status is meson's.
# The C tests skip (exit 77) without CEPH_CONF; under this script it is always
# set, so a skip here means the test binary was not built.
# The cluster's cache OSD (osd.1) is bluestore on a sparse file, so that
# ceph_osd_kill can SIGKILL and restart it with its data; set
# CEPH_DEV_CACHE_OSD_STORE=memstore to run the others on memstore (ceph_osd_kill
# then skips).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[ $# -gt 0 ] && shift
[ -d "$build" ] || { echo "ceph-test: no build directory $build (meson setup $build)" >&2; exit 2; }
build=$(cd "$build" && pwd)

dir=$(mktemp -d "${TMPDIR:-/tmp}/tierd-ceph.XXXXXX")
rc=1
# shellcheck disable=SC2317  # called from the EXIT trap
finish() {
	"$root/deploy/ceph-dev-cluster" stop "$dir" || true
	if [ "$rc" != 0 ] && [ -d "$dir/log" ]; then
		mkdir -p "$build/meson-logs"
		rm -rf "$build/meson-logs/ceph-cluster"
		cp -r "$dir/log" "$build/meson-logs/ceph-cluster" 2>/dev/null || true
		echo "ceph-test: cluster logs kept in $build/meson-logs/ceph-cluster" >&2
	fi
	rm -rf "$dir"
}
trap finish EXIT
trap 'exit 130' INT TERM

export CEPH_DEV_CACHE_OSD_STORE=${CEPH_DEV_CACHE_OSD_STORE:-bluestore}
"$root/deploy/ceph-dev-cluster" start "$dir"
eval "$("$root/deploy/ceph-dev-cluster" env "$dir")"
export CEPH_CONF
set +e
meson test -C "$build" --suite ceph --print-errorlogs "$@"
rc=$?
set -e
# The RADOS walk of docs/OPERATIONS.md as written (deploy/doc-test.sh rados),
# with the installed package (deploy/package-test.sh installs it) and this
# cluster's config as /etc/ceph/ceph.conf (an existing one is never replaced).
if [ "$rc" = 0 ] && [ "${TIER_DOCTEST_RADOS:-1}" = 1 ]; then
	if ! dpkg-query -W -f='${Status}' tierd 2>/dev/null | grep -q "ok installed"; then
		echo "ceph-test: the tierd package is not installed: the RADOS doc-test was NOT run"
	elif [ -e /etc/ceph/ceph.conf ] || [ "$(id -u)" != 0 ]; then
		echo "ceph-test: /etc/ceph/ceph.conf exists or not root: the RADOS doc-test was NOT run"
	else
		mkdir -p /etc/ceph
		install -m 0644 "$dir/ceph.conf" /etc/ceph/ceph.conf
		set +e
		TIER_DOCTEST_TIMEOUT=${TIER_DOCTEST_TIMEOUT:-300} "$root/deploy/doc-test.sh" rados
		rc=$?
		set -e
		rm -f /etc/ceph/ceph.conf /etc/ceph/ceph.client.tierd.keyring
	fi
fi
exit "$rc"
