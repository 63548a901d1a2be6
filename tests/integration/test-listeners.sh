#!/bin/bash
# SPDX-License-Identifier: MIT
# Listeners: unix socket mode and group, no takeover of a live socket (a
# second tierd on the same path refuses to start and leaves it alone), a
# stale socket is replaced, a stopping tierd never unlinks a successor's
# socket, and a non-loopback TCP address needs tls = require or
# allow_plaintext = true (then warned at start).  Files: with umask 022,
# the local backend's object files are 0600 and its directories 0700.
. "$(dirname "$0")/lib.sh"
IMAGE_SIZE=64M
PORT=$((20000 + RANDOM % 20000))

write_config
umask 022
start_tierd
[ "$(stat -c %a "$SOCK")" = 660 ] || fail "default socket mode is $(stat -c %a "$SOCK"), want 660"
ino=$(stat -c %i "$SOCK")

# ---- a second tierd on the same NBD socket (its own data dir and admin socket)
sed -e "s|^admin_socket = .*|admin_socket = $WORK/second.asok|" \
    -e "s|^data_dir = .*|data_dir = $WORK/data2|" "$CONF" > "$WORK/second.conf"
if timeout 30 "$TIERD" --config "$WORK/second.conf" 2> "$WORK/second.log"; then
	fail "a second tierd started on a live NBD socket"
fi
grep -q 'served by a running process' "$WORK/second.log" || { cat "$WORK/second.log"; fail "no takeover refusal"; }
[ -S "$SOCK" ] && [ "$(stat -c %i "$SOCK")" = "$ino" ] || fail "the live socket was replaced"
[ ! -e "$WORK/second.asok" ] || fail "the refused tierd left an admin socket"
nbdinfo --size "$(uri)" >/dev/null || fail "first tierd no longer served after the refusal"

# ---- object files 0600, directories 0700 (umask 022 would give 0644/0755)
qemu-io -f raw -c 'write -P 0x11 0 64k' -c 'write -P 0x12 8M 64k' "$(uri)" >/dev/null || fail "qemu-io write"
nfiles=$(find "$WORK/data" -type f | wc -l)
[ "$nfiles" -ge 2 ] || fail "no object files written"
bad=$(find "$WORK/data" \( -type f ! -perm 0600 \) -o \( -type d ! -perm 0700 \) | head -5)
[ -z "$bad" ] || { ls -la $bad; fail "files or directories readable by others: $bad"; }
log "$nfiles files under data_dir, all 0600, directories 0700"

# ---- a stopping tierd leaves a successor's socket alone
mv "$SOCK" "$WORK/old.sock"     # as if an operator moved it away
"$TIERD" --config "$WORK/second.conf" 2>> "$WORK/second.log" &
P2=$!
for _ in $(seq 1 100); do nbdinfo --size "$(uri)" >/dev/null 2>&1 && break; sleep 0.1; done
ino2=$(stat -c %i "$SOCK")
stop_tierd
[ -S "$SOCK" ] && [ "$(stat -c %i "$SOCK")" = "$ino2" ] || fail "the first tierd unlinked its successor's socket"
nbdinfo --size "$(uri)" >/dev/null || fail "successor not served"
kill -TERM "$P2"; wait "$P2" || fail "second tierd exit status"
[ ! -e "$SOCK" ] || fail "the second tierd left its socket behind"

# ---- a stale socket (kill -9) is replaced
start_tierd
kill -KILL "$TIERD_PID"; wait "$TIERD_PID" 2>/dev/null || true; TIERD_PID=
[ -S "$SOCK" ] || fail "no stale socket after kill -9"
start_tierd

stop_tierd

# ---- socket_mode and socket_group
grp=$(getent group daemon >/dev/null && echo daemon || id -gn)
sed -i "s|^\[global\]\$|[global]\nsocket_mode = 0600\nsocket_group = $grp|" "$CONF"
start_tierd
[ "$(stat -c %a "$SOCK")" = 600 ] || fail "socket_mode 0600 not applied: $(stat -c %a "$SOCK")"
[ "$(stat -c %G "$SOCK")" = "$grp" ] || fail "socket_group $grp not applied: $(stat -c %G "$SOCK")"
stop_tierd

# ---- a TCP listener reachable from the network
rm -f "$CONF"; write_config
sed -i "s|^\[global\]\$|[global]\nlisten = 0.0.0.0:$PORT|" "$CONF"
if "$TIERD" --check --config "$CONF" > "$WORK/check.out" 2>&1; then fail "0.0.0.0 accepted without TLS"; fi
grep -q "reachable from the network but tls is off" "$WORK/check.out" || { cat "$WORK/check.out"; fail "no clear refusal"; }
if "$TIERD" --config "$CONF" 2> "$WORK/run.out"; then fail "tierd started on 0.0.0.0 without TLS"; fi
grep -q "reachable from the network" "$WORK/run.out" || fail "start refusal not explained"
sed -i "s|^\[global\]\$|[global]\nallow_plaintext = true|" "$CONF"
: > "$LOG"
start_tierd
grep -q "0.0.0.0:$PORT serves plaintext NBD without authentication" "$LOG" || fail "allow_plaintext not warned"
nbdinfo --size "nbd://127.0.0.1:$PORT/disk" >/dev/null || fail "TCP listener not served"
stop_tierd
log "PASS"
