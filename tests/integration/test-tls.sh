#!/bin/bash
# SPDX-License-Identifier: MIT
# NBD over TLS (NBD_OPT_STARTTLS, GnuTLS): X.509 and PSK with libnbd
# (nbdinfo, nbdcopy: nbds+unix:// and nbds://), qemu-img with tls-creds
# objects, client certificates (tls_verify_peer), plaintext refused under
# tls = require, tls = on serving both, tls = off answering POLICY, and
# raw-socket STARTTLS cases with TLS garbage (nbd_tls.py).
. "$(dirname "$0")/lib.sh"
for p in certtool psktool; do
	command -v "$p" >/dev/null || { echo "SKIP: $p not installed (gnutls-bin, deploy/install-deps.sh)"; exit 77; }
done
HERE=$(dirname "$0")
IMAGE_SIZE=64M
PKI=$WORK/pki
PORT=$((20000 + RANDOM % 20000))

# ---- a CA, a server certificate for localhost/127.0.0.1, a client certificate
mkdir -p "$PKI" "$WORK/cacert"
(
	cd "$PKI"
	certtool --generate-privkey --outfile ca-key.pem
	printf 'cn = tierd test CA\nca\ncert_signing_key\nexpiration_days = 2\n' > ca.info
	certtool --generate-self-signed --load-privkey ca-key.pem --template ca.info --outfile ca-cert.pem
	certtool --generate-privkey --outfile server-key.pem
	printf 'cn = localhost\ndns_name = localhost\nip_address = 127.0.0.1\ntls_www_server\nencryption_key\nsigning_key\nexpiration_days = 2\n' > server.info
	certtool --generate-certificate --load-ca-certificate ca-cert.pem --load-ca-privkey ca-key.pem \
		--load-privkey server-key.pem --template server.info --outfile server-cert.pem
	certtool --generate-privkey --outfile client-key.pem
	printf 'cn = client\ntls_www_client\nencryption_key\nsigning_key\nexpiration_days = 2\n' > client.info
	certtool --generate-certificate --load-ca-certificate ca-cert.pem --load-ca-privkey ca-key.pem \
		--load-privkey client-key.pem --template client.info --outfile client-cert.pem
) >/dev/null 2>&1 || fail "certtool"
cp "$PKI/ca-cert.pem" "$WORK/cacert/"     # a client with no certificate of its own
psktool -u alice -p "$WORK/keys.psk" >/dev/null || fail "psktool"
mkdir -p "$WORK/qpsk" && cp "$WORK/keys.psk" "$WORK/qpsk/keys.psk"

X509="tls-certificates=$PKI"
turi() { echo "nbds+unix:///${1:-disk}?socket=$SOCK&$X509"; }

# start_tls MODE [extra [global] lines]
start_tls() {
	rm -f "$CONF"
	write_config
	sed -i "s|^\[global\]\$|[global]\nlisten = 127.0.0.1:$PORT\ntls = $1\ntls_certificates = $PKI\ntls_psk_file = $WORK/keys.psk\nhandshake_timeout = 2s\n${2:-}|" "$CONF"
	"$TIERD" --config "$CONF" 2>>"$LOG" &
	TIERD_PID=$!
	for _ in $(seq 1 200); do
		nbdinfo --size "$(turi)" >/dev/null 2>&1 && { log "tierd $TIERD_PID up (tls = $1)"; return 0; }
		kill -0 "$TIERD_PID" 2>/dev/null || fail "tierd exited during start-up (tls = $1)"
		sleep 0.1
	done
	fail "tierd (tls = $1) did not serve TLS within 20 s"
}

# ---- tls = require
start_tls require
nbdinfo "$(turi)" | grep -q 'with TLS' || fail "nbdinfo does not report TLS"
[ "$(nbdinfo --size "nbds://localhost:$PORT/disk?$X509")" = 67108864 ] || fail "nbds:// X.509"
[ "$(nbdinfo --size "nbds://alice@127.0.0.1:$PORT/disk?tls-psk-file=$WORK/keys.psk")" = 67108864 ] ||
	fail "nbds:// PSK"
if nbdinfo --size "nbds://mallory@127.0.0.1:$PORT/disk?tls-psk-file=$WORK/keys.psk" >/dev/null 2>&1; then
	fail "an unknown PSK user was served"
fi
head -c 8M /dev/urandom > "$WORK/data.bin"
nbdcopy "$WORK/data.bin" "$(turi)" || fail "nbdcopy to TLS"
nbdcopy "nbds://alice@127.0.0.1:$PORT/disk?tls-psk-file=$WORK/keys.psk" "$WORK/back.bin" ||
	fail "nbdcopy from TLS (PSK)"
cmp -n $((8 << 20)) "$WORK/data.bin" "$WORK/back.bin" || fail "TLS copy differs"
# plaintext refused
if nbdinfo --size "$(uri)" >/dev/null 2>&1; then fail "plaintext served under tls = require"; fi
if nbdinfo --size "nbd://127.0.0.1:$PORT/disk" >/dev/null 2>&1; then
	fail "plaintext TCP served under tls = require"
fi
# qemu-img's tls-creds objects
qemu-img info --object "tls-creds-x509,id=t0,dir=$PKI,endpoint=client" --image-opts \
	"driver=nbd,server.type=unix,server.path=$SOCK,export=disk,tls-creds=t0,tls-hostname=localhost" \
	> "$WORK/qi.out" 2>&1 || { cat "$WORK/qi.out"; fail "qemu-img tls-creds-x509"; }
grep -q '67108864 bytes' "$WORK/qi.out" || fail "qemu-img x509 size"
qemu-img info --object "tls-creds-psk,id=t0,dir=$WORK/qpsk,endpoint=client,username=alice" --image-opts \
	"driver=nbd,server.type=inet,server.host=127.0.0.1,server.port=$PORT,export=disk,tls-creds=t0" \
	> "$WORK/qi.out" 2>&1 || { cat "$WORK/qi.out"; fail "qemu-img tls-creds-psk"; }
grep -q '67108864 bytes' "$WORK/qi.out" || fail "qemu-img psk size"
/usr/bin/python3 "$HERE/nbd_tls.py" require "$SOCK" disk "$PKI" 2 || fail "STARTTLS cases (require)"
grep -q 'TLS handshake failed' "$LOG" || fail "TLS garbage not logged"
kill -0 "$TIERD_PID" || fail "tierd died"
stop_tierd

# ---- client certificates: tls_verify_peer
start_tls require "tls_verify_peer = true"
if nbdinfo --size "nbds+unix:///disk?socket=$SOCK&tls-certificates=$WORK/cacert" >/dev/null 2>&1; then
	fail "a client without a certificate was served with tls_verify_peer"
fi
grep -q 'Certificate is required' "$LOG" || fail "missing client certificate not logged"
stop_tierd

# ---- tls = on: both
start_tls on
nbdinfo --size "$(uri)" >/dev/null || fail "plaintext refused under tls = on"
/usr/bin/python3 "$HERE/nbd_tls.py" on "$SOCK" disk "$PKI" || fail "STARTTLS cases (on)"
stop_tierd

# ---- tls = off: STARTTLS gets POLICY, nbds:// fails, plaintext works
rm -f "$CONF"
write_config
start_tierd
if nbdinfo --size "$(turi)" >/dev/null 2>&1; then fail "TLS served with tls = off"; fi
/usr/bin/python3 "$HERE/nbd_tls.py" off "$SOCK" disk "$PKI" || fail "STARTTLS case (off)"
stop_tierd

# ---- bad credentials: a clear error at start
rm -f "$CONF"
write_config
sed -i "s|^\[global\]\$|[global]\ntls = require\ntls_certificates = $WORK/cacert|" "$CONF"
if "$TIERD" --config "$CONF" 2> "$WORK/bad.log"; then fail "started without a server key"; fi
grep -q 'server-cert.pem' "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "no clear credentials error"; }
log "PASS"
