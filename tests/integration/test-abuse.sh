#!/bin/bash
# SPDX-License-Identifier: MIT
# Protocol abuse with a raw socket; after each case (and at the end) real
# clients still get served.
. "$(dirname "$0")/lib.sh"

IMAGE_SIZE=64M
write_config
# a short handshake deadline, so the deadline cases run in seconds
sed -i 's/^\[global\]$/[global]\nhandshake_timeout = 1s/' "$CONF"
grep -q '^handshake_timeout = 1s$' "$CONF" || fail "test config"
start_tierd
/usr/bin/python3 "$(dirname "$0")/nbd_abuse.py" "$SOCK" disk ro 1 || fail "abuse cases"
grep -q 'handshake not finished within 1000 ms' "$LOG" || fail "no handshake timeout logged"
kill -0 "$TIERD_PID" || fail "tierd died"
nbdinfo --list "$(uri)" | grep -q 'export="disk"' || fail "nbdinfo after abuse"
qemu-io -f raw -c 'write -P 0x3c 0 64k' -c 'read -P 0x3c 0 64k' "$(uri)" > "$WORK/q.out" 2>&1
grep -q 'Pattern verification failed' "$WORK/q.out" && fail "qemu-io after abuse"
stop_tierd
log "PASS"
