#!/bin/bash
# SPDX-License-Identifier: MIT
# Limits that hold (nbd_limits.py): max_connections refuses before the
# greeting and never at the expense of connected clients (also with
# RLIMIT_NOFILE at 256 and 400 idle connections); max_bytes_in_flight holds
# back a third 32 MiB payload while two are in the engine; a stalled or
# trickling WRITE payload is cut at transmission_timeout; admin and
# Prometheus clients that stay silent or do not read are closed at
# client_timeout, with bounded queues; 16 clients pipelining 32 MiB writes
# and never reading keep tierd's RSS bounded; SIGTERM with clients that never read
# their replies exits 0 within shutdown_timeout and loses no acknowledged
# write.
. "$(dirname "$0")/lib.sh"
HERE=$(dirname "$0")
IMAGE_SIZE=256M
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
lim() { /usr/bin/python3 "$HERE/nbd_limits.py" "$@"; }

write_config
sed -i -e "s|^\[global\]\$|[global]\nmax_connections = 8\ntransmission_timeout = 2s\nclient_timeout = 2s\nshutdown_timeout = 4s\nmax_bytes_in_flight = 64M\nprometheus = 127.0.0.1:$PORT|" \
	-e "s|^base_profile = .*|base_bandwidth = 8M|" -e "s|^cache_profile = .*|cache_bandwidth = 8M|" "$CONF"
start_tierd
grep -q 'at most 8 connections' "$LOG" || fail "max_connections not in force"

lim maxconn "$SOCK" disk 8 || fail "max_connections"
grep -q 'refusing new ones' "$LOG" || fail "refusal not logged"
lim stall "$SOCK" disk 2 || fail "transmission_timeout"
grep -q 'WRITE payload not received within 2000 ms' "$LOG" || fail "payload timeout not logged"
lim global_cap "$SOCK" disk || fail "max_bytes_in_flight"
lim admin "$SOCK" disk "$ASOK" 2 || fail "admin socket limits"
lim prom "$SOCK" disk "$PORT" 2 || fail "prometheus limits"

stop_tierd

# ---- memory: 16 clients x 4 x 32 MiB WRITEs, replies never read, a store
# that takes 64 MB/s: the global budget (64M) bounds what tierd holds.  Per
# connection caps alone (16M + one request each) would let ~768 MiB in.
sed -i -e "s|^base_bandwidth = .*|base_bandwidth = 64M|" -e "s|^cache_bandwidth = .*|cache_bandwidth = 64M|" \
	-e '/^max_connections = /d' "$CONF"
start_tierd
lim bigwrites "$SOCK" disk "$TIERD_PID" 400 6 || fail "memory not bounded by max_bytes_in_flight"
sleep 2     # the engine finishes what it took
stop_tierd

# ---- SIGTERM with clients that never read their replies (no device model:
# what the engine holds finishes at once; the replies cannot be delivered)
sed -i -e "s|^base_bandwidth = .*|base_profile = none|" -e "s|^cache_bandwidth = .*|cache_profile = none|" "$CONF"
start_tierd
data=$WORK/ack.bin
head -c 1M /dev/urandom > "$data"
nbdcopy "$data" "$(uri)" || fail "write before shutdown"
coproc HOLD { /usr/bin/python3 "$HERE/nbd_limits.py" unread "$SOCK" disk 4; }
read -r -t 30 ready <&"${HOLD[0]}" || true
[ "$ready" = ready ] || fail "unread clients not ready"
t0=$(date +%s%N)
stop_tierd      # fails unless the exit status is 0
took=$((($(date +%s%N) - t0) / 1000000))
log "SIGTERM with 4 clients not reading: exit 0 after $took ms"
[ "$took" -lt 8000 ] || fail "shutdown took $took ms with shutdown_timeout = 4s"
grep -q 'still open after 2000 ms: closing them' "$LOG" || fail "no cut logged"
kill "$HOLD_PID" 2>/dev/null || true
start_tierd
nbdcopy "$(uri)" "$WORK/back.bin" && cmp -n 1048576 "$WORK/back.bin" "$data" || fail "acknowledged write lost across the bounded shutdown"
stop_tierd

# ---- descriptors: RLIMIT_NOFILE 256, default max_connections, 400 idle clients
# (This part found a use-after-free in the descriptor LRU's put, fixed with
# test_fd_cache_put_after_evicting_its_bucket_neighbour in test_local.c.)
: > "$LOG"
(ulimit -n 256 && exec "$TIERD" --config "$CONF") 2>>"$LOG" &
TIERD_PID=$!
for _ in $(seq 1 200); do nbdinfo --size "$(uri)" >/dev/null 2>&1 && break; sleep 0.1; done
grep -q 'at most 192 connections' "$LOG" || { tail "$LOG"; fail "max_connections not derived from RLIMIT_NOFILE 256"; }
lim flood "$SOCK" disk 400 192 || fail "connected client hurt by a connection flood"
kill -0 "$TIERD_PID" || fail "tierd died"
nbdinfo --size "$(uri)" >/dev/null || fail "not served after the flood"
stop_tierd
log "PASS"
