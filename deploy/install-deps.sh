#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs everything tierd needs to build, run and test on Debian 12.
# Idempotent: packages already present are skipped; safe to run many times.
# Usage: deploy/install-deps.sh [--no-ceph]
set -eu

build_pkgs="build-essential meson ninja-build pkg-config libuv1-dev libzstd-dev
libcmocka-dev libinih-dev libnbd-dev libsystemd-dev librados-dev librbd-dev
libgnutls28-dev libjansson-dev debhelper dpkg-dev"
test_pkgs="fio libnbd-bin python3-libnbd nbdkit qemu-utils python3 procps
gnutls-bin clang libclang-rt-14-dev prometheus python3-prometheus-client
systemd nbd-client man-db"
# tools/bench/bench-nbdkit.sh BENCH_PRELOADS: the allocator check in docs/BENCHMARKS.md
bench_pkgs="libjemalloc2 libtcmalloc-minimal4 linux-perf"
ceph_pkgs="ceph-mon ceph-osd ceph-mgr ceph-common"

want="$build_pkgs $test_pkgs $bench_pkgs"
[ "${1:-}" = "--no-ceph" ] || want="$want $ceph_pkgs"

missing=""
for p in $want; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "install-deps: all packages present"
	exit 0
fi

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
# prometheus is here for promtool (tests/integration/test-prometheus.sh): its
# server, enabled by the package, is not wanted on a build or CI machine
case " $missing " in *" prometheus "*)
	if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
		$SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
	fi ;;
esac
echo "install-deps: done"
