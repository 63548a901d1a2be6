# SPDX-License-Identifier: MIT
# Shared helpers for the NBD integration tests: a throwaway tierd on the
# local backend in a temp dir.  Source it; TIERD must name the binary.
set -euo pipefail

: "${TIERD:?set TIERD to the tierd binary}"
for p in nbdinfo nbdcopy qemu-io qemu-img fio; do
	command -v "$p" >/dev/null || { echo "SKIP: $p not installed (deploy/install-deps.sh)"; exit 77; }
done
WORK=$(mktemp -d /tmp/tierd-it.XXXXXX)
SOCK=$WORK/nbd.sock
ASOK=$WORK/tierd.asok
CONF=$WORK/tierd.conf
LOG=$WORK/tierd.log
TIERD_PID=
IMAGE_SIZE=${IMAGE_SIZE:-512M}

log() { echo "[$(date +%T)] $*"; }
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

cleanup() {
	local rc=$?
	if [ -n "$TIERD_PID" ] && kill -0 "$TIERD_PID" 2>/dev/null; then
		kill -KILL "$TIERD_PID" 2>/dev/null || true
		wait "$TIERD_PID" 2>/dev/null || true
	fi
	if [ "$rc" -ne 0 ] && [ -f "$LOG" ]; then
		echo "---- tierd log (tail) ----" >&2
		tail -n 40 "$LOG" >&2
	fi
	rm -rf "$WORK"
	exit "$rc"
}
trap cleanup EXIT

# write_config [extra lines for [tier]]
write_config() {
	cat > "$CONF" <<CFG
[global]
backend = local
listen = unix:$SOCK
admin_socket = $ASOK
log_level = ${LOG_LEVEL:-info}
max_requests_per_conn = 32
max_bytes_per_conn = 16M

[local]
data_dir = $WORK/data
base_profile = ${BASE_PROFILE:-none}
cache_profile = ${CACHE_PROFILE:-none}

[tier]
target_max_bytes = ${TARGET_MAX:-128M}
hit_set_period = 2s
${1:-}

[image.disk]
size = $IMAGE_SIZE

[image.ro]
size = 16M
read_only = true
CFG
}

uri() { echo "nbd+unix:///${1:-disk}?socket=$SOCK"; }

start_tierd() {
	[ -f "$CONF" ] || write_config
	"$TIERD" --config "$CONF" 2>>"$LOG" &
	TIERD_PID=$!
	local i
	for i in $(seq 1 200); do
		if [ -S "$SOCK" ] && nbdinfo --size "$(uri)" >/dev/null 2>&1; then
			log "tierd $TIERD_PID up"
			# the thread matrix (meson.build): tierd runs what it was told
			[ -z "${TIERD_THREADS:-}" ] || grep -q "info: threads $TIERD_THREADS: " "$LOG" ||
				fail "TIERD_THREADS=$TIERD_THREADS: no 'threads $TIERD_THREADS' line"
			return 0
		fi
		kill -0 "$TIERD_PID" 2>/dev/null || fail "tierd exited during start-up"
		sleep 0.1
	done
	fail "tierd did not start serving within 20 s"
}

# stop_tierd: SIGTERM, and the exit status must be 0
stop_tierd() {
	local rc=0
	kill -TERM "$TIERD_PID"
	wait "$TIERD_PID" || rc=$?
	TIERD_PID=
	[ "$rc" -eq 0 ] || fail "tierd exited with status $rc after SIGTERM"
	log "tierd stopped cleanly"
}
