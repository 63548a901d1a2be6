#!/bin/bash
# SPDX-License-Identifier: MIT
# tierd --check probes the machine, not only the file: data_dir, the socket
# directories, stale/live/foreign sockets, TCP addresses (free, in use, not on
# this host), TLS files, the Ceph config and keyring (without a cluster).
# Exit 0 and "FILE: OK" when a start would get past every probe, 78 and one
# "tierd: check: KEY: ..." line per problem otherwise; nothing is changed.
set -euo pipefail
: "${TIERD:?set TIERD to the tierd binary}"
WORK=$(mktemp -d /tmp/tierd-check.XXXXXX)
chmod 0755 "$WORK"     # the probes run as nobody too
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$WORK/out" ] && cat "$WORK/out" >&2; exit 1; }
PORT=$((20000 + RANDOM % 20000))
CONF=$WORK/tierd.conf

# conf [extra [global] lines] [data_dir]
conf() {
	cat > "$CONF" <<CFG
[global]
listen = unix:$WORK/run/nbd.sock
listen = 127.0.0.1:$PORT
admin_socket = $WORK/run/tierd.asok
$1
[local]
data_dir = ${2:-$WORK/data}
[image.disk]
size = 16M
CFG
}

# expect RC PATTERN...: run the check, want exit RC and every pattern in its output
expect() {
	local want=$1 rc=0
	shift
	"$TIERD" --config "$CONF" --check > "$WORK/out" 2>&1 || rc=$?
	[ "$rc" -eq "$want" ] || fail "--check exited $rc, want $want"
	for pat in "$@"; do
		grep -q -- "$pat" "$WORK/out" || fail "--check output lacks '$pat'"
	done
}

mkdir -p "$WORK/run"
conf "prometheus = 127.0.0.1:$((PORT + 1))"
expect 0 "check: ok: data_dir: $WORK/data does not exist yet" "127.0.0.1:$PORT (bindable)" \
	"prometheus: 127.0.0.1:$((PORT + 1)) (bindable)" "tierd.conf: OK"
[ ! -e "$WORK/data" ] || fail "--check created data_dir"
echo "ok: a good config passes, nothing created"

# each pool's directory: its filesystem and device; one device for both is noted
expect 0 "check: ok: base_dir: base pool $WORK/data/base (created at start): " \
	"check: note: cache_dir: both pools are on one filesystem"
SHM=/dev/shm/tierd-check-$$
conf ""
sed -i "s|^\[local\]|[local]\ncache_dir = $SHM|" "$CONF"
expect 0 "check: ok: cache_dir: cache pool $SHM (created at start): tmpfs filesystem on "
! grep -q "both pools are on one filesystem" "$WORK/out" || fail "two filesystems noted as one"
[ ! -e "$SHM" ] || fail "--check created cache_dir"
echo "ok: base_dir and cache_dir: each pool's filesystem reported, one shared is noted"
sed -i "s|^cache_dir = .*|cache_dir = $WORK/data/base|" "$CONF"
expect 78 "cache_dir: $WORK/data/base is the base pool's directory too"
echo "ok: one directory for both pools: refused"

conf "" "$WORK/nope/data"
expect 78 "tierd: check: data_dir: $WORK/nope/data does not exist and cannot be created" \
	"1 problem(s): a start would fail"
echo "ok: data_dir whose parent is missing: 78"

mkdir -p "$WORK/ro" && chmod 0755 "$WORK/ro"
conf "" "$WORK/ro"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	rc=0
	setpriv --reuid=65534 --regid=65534 --clear-groups "$TIERD" --config "$CONF" --check \
		> "$WORK/out" 2>&1 || rc=$?
	[ "$rc" = 78 ] && grep -q "data_dir: $WORK/ro: Permission denied" "$WORK/out" ||
		fail "data_dir not writable by the user (nobody): rc $rc"
	echo "ok: data_dir not writable by the checking user: 78"
fi

conf "" && rmdir "$WORK/run"
expect 78 "admin_socket: directory $WORK/run does not exist" \
	"listen\[0\]: directory $WORK/run does not exist" "2 problem(s)"
mkdir -p "$WORK/run"
echo "ok: socket directory missing: 78, both sockets named"

: > "$WORK/run/tierd.asok"
expect 78 "admin_socket: $WORK/run/tierd.asok exists and is not a socket"
rm "$WORK/run/tierd.asok"
echo "ok: a plain file at the admin socket path: 78"

# a stale socket (bound, closed): replaced at start, a note
/usr/bin/python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' \
	"$WORK/run/nbd.sock"
expect 0 "note: listen\[0\]: $WORK/run/nbd.sock is a stale socket"
rm "$WORK/run/nbd.sock"
echo "ok: a stale socket is a note"

# a live socket and a TCP port of another process: errors naming it
/usr/bin/python3 - "$WORK/run/nbd.sock" "$PORT" <<'PY' &
import socket, sys, time
u = socket.socket(socket.AF_UNIX); u.bind(sys.argv[1]); u.listen(4)
t = socket.socket(); t.bind(("127.0.0.1", int(sys.argv[2]))); t.listen(4)
time.sleep(60)
PY
PIDS+=($!)
for _ in $(seq 50); do [ -S "$WORK/run/nbd.sock" ] && break; sleep 0.1; done
sleep 0.3
expect 78 "listen\[0\]: $WORK/run/nbd.sock is served by another process (pid ${PIDS[0]}" \
	"listen\[1\]: 127.0.0.1:$PORT is in use by another process"
kill -KILL "${PIDS[0]}"; wait "${PIDS[0]}" 2>/dev/null || true; PIDS=()
rm -f "$WORK/run/nbd.sock"
echo "ok: a foreign live socket and a TCP port in use: 78"

conf "allow_plaintext = true
listen = 10.255.255.1:$PORT"
expect 78 "listen\[2\]: 10.255.255.1:$PORT: no such address on this host"
echo "ok: an address not on this host: 78"

# a running tierd on this config: notes (a check before a reload passes)
conf ""
"$TIERD" --config "$CONF" 2> "$WORK/tierd.log" &
TPID=$!
PIDS+=($TPID)
for _ in $(seq 200); do [ -S "$WORK/run/tierd.asok" ] && [ -S "$WORK/run/nbd.sock" ] && break; sleep 0.1; done
sleep 0.5
expect 0 "note: data_dir: $WORK/data is in use by a running tierd (pid $TPID)" \
	"note: listen\[0\]: $WORK/run/nbd.sock is served by a running tierd (pid $TPID)" \
	"note: listen\[1\]: 127.0.0.1:$PORT is in use, presumably by the running tierd (pid $TPID)" \
	"tierd.conf: OK"
kill -TERM "$TPID"; wait "$TPID" || fail "tierd exited $? after SIGTERM"; PIDS=()
echo "ok: a tierd running on the config: notes, exit 0"

# TLS files
mkdir -p "$WORK/pki"
echo "not a certificate" > "$WORK/pki/server-cert.pem"
conf "tls = require
tls_certificates = $WORK/pki
tls_psk_file = $WORK/none.psk"
expect 78 "tls_certificates: $WORK/pki/server-key.pem: No such file or directory" \
	"tls_psk_file: $WORK/none.psk: No such file or directory"
if command -v certtool >/dev/null; then
	certtool --generate-privkey --outfile "$WORK/pki/server-key.pem" >/dev/null 2>&1
	expect 78 "tls_certificates: $WORK/pki/server-cert.pem, $WORK/pki/server-key.pem: "
	printf 'cn = localhost\nexpiration_days = 2\ntls_www_server\n' > "$WORK/pki/t.info"
	certtool --generate-self-signed --load-privkey "$WORK/pki/server-key.pem" \
		--template "$WORK/pki/t.info" --outfile "$WORK/pki/server-cert.pem" >/dev/null 2>&1
	conf "tls = require
tls_certificates = $WORK/pki"
	expect 0 "ok: tls_certificates: $WORK/pki/server-cert.pem and $WORK/pki/server-key.pem load"
fi
echo "ok: TLS files: missing and unparsable ones are errors"

# rados: the Ceph config and keyring, no cluster needed (nothing connects)
if ldd "$TIERD" | grep librados >/dev/null; then
	rconf() {
		cat > "$CONF" <<CFG
[global]
backend = rados
listen = unix:$WORK/run/nbd.sock
admin_socket = $WORK/run/tierd.asok
[rados]
conf = $WORK/ceph.conf
client_name = tierd
$1
[image.disk]
CFG
	}
	rconf ""
	expect 78 "rados.conf: $WORK/ceph.conf: No such file or directory"
	printf '[global]\nfsid = 00000000-0000-0000-0000-000000000000\n' > "$WORK/ceph.conf"
	expect 78 "rados.conf: $WORK/ceph.conf names no mon_host" \
		"rados.keyring: no readable keyring for client.tierd among /etc/ceph/ceph.client.tierd.keyring"
	printf '[global]\nmon_host = 127.0.0.1:1\n' > "$WORK/ceph.conf"
	printf '[client.tierd]\n\tkey = AQAAAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAAAA==\n' > "$WORK/kr"
	rconf "keyring = $WORK/kr"
	expect 0 "ok: rados.keyring: $WORK/kr (readable, for client.tierd)" "tierd.conf: OK"
	if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
		chmod 0600 "$WORK/kr"
		rc=0
		setpriv --reuid=65534 --regid=65534 --clear-groups "$TIERD" --config "$CONF" \
			--check > "$WORK/out" 2>&1 || rc=$?
		[ "$rc" = 78 ] && grep -q "rados.keyring: no readable keyring for client.tierd among $WORK/kr: Permission denied" "$WORK/out" ||
			fail "a keyring the user cannot read: rc $rc"
	fi
	echo "ok: rados: missing conf, no mon_host, unreadable keyring: 78; readable: 0"
else
	echo "note: tierd built without librados: the rados probes were NOT tested"
fi
echo "PASS"
