#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A verifying NBD workload that survives faults (a RADOS OSD or tierd killed).

usage: nbd_faults.py fill   SOCKET EXPORT STATE FIRST:COUNT...
       nbd_faults.py run    SOCKET EXPORT STATE SECONDS PHASEDIR SPEC...
       nbd_faults.py verify SOCKET EXPORT STATE
       nbd_faults.py check  FILE STATE         (an `rbd export` of the image)

Every 4 KiB block ("slot" = block number) written is stamped with
(slot, sequence).  STATE (JSON) remembers per slot the last acknowledged
sequence and the sequences that may or may not have landed (writes that failed
or were in flight when the connection ended, issued after that acknowledged
write).  A slot never written must read as zeros.

fill   writes every slot of the ranges FIRST:COUNT (4 KiB each, 64 KiB
       requests, QD 8); any failure is fatal.
run    keeps 16 requests in flight for SECONDS on the slot ranges of SPEC
       (NAME:FIRST:COUNT:MODE, MODE r = reads only, rw = reads and writes,
       w-late = writes only once PHASEDIR/killed exists).  No two requests on
       one slot at once.  Reads are checked against the state as they
       complete (a wrong read is fatal; a failed read is counted).  The phase
       of a request (before, outage, after) is the one when it was issued:
       PHASEDIR/killed and PHASEDIR/restarted, touched by the caller.  The
       connection ending (server killed) ends the run without error.  Prints
       one line per NAME and phase and a JSON summary on the last line.
verify reads every slot in STATE through the server: each must hold its last
       acknowledged block, or one that may have landed.  Exit 1 if not.
check  the same against an image file.
"""
import json
import os
import random
import select
import socket
import struct
import sys
import time

REQ_MAGIC, SIMPLE_MAGIC = 0x25609513, 0x67446698
BS = 4096
CMD_READ, CMD_WRITE = 0, 1


def recvn(s, n):
    buf = bytearray()
    while len(buf) < n:
        c = s.recv(n - len(buf))
        if not c:
            raise EOFError
        buf += c
    return bytes(buf)


def connect(path, name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(300)   # never forever; the caller's timeout bounds us too
    s.connect(path)
    recvn(s, 18)
    s.sendall(struct.pack(">I", 3))
    n = name.encode()
    s.sendall(struct.pack(">QII", 0x49484156454F5054, 7, 6 + len(n)) +
              struct.pack(">I", len(n)) + n + b"\0\0")
    while True:
        _, _, rep, ln = struct.unpack(">QIII", recvn(s, 20))
        recvn(s, ln)
        if rep == 1:
            return s
        if rep != 3:
            raise SystemExit("GO refused: %x" % rep)


def block(slot, seq):
    return struct.pack(">QQ", slot, seq) * (BS // 16)


def load(state):
    if not os.path.exists(state):
        return {}, 0
    st = json.load(open(state))
    return {int(k): v for k, v in st["slots"].items()}, st["seq"]


def save(state, slots, seq):
    tmp = state + ".tmp"
    json.dump({"slots": {str(k): v for k, v in slots.items()}, "seq": seq}, open(tmp, "w"))
    os.replace(tmp, state)


def allowed(slots, slot):
    """The blocks slot may hold: [acked, maybe...]; acked 0 = zeros."""
    a, maybe = slots.get(slot, [0, []])
    out = [b"\0" * BS if a == 0 else block(slot, a)]
    out += [block(slot, m) for m in maybe]
    return out


def describe(data):
    if data == b"\0" * BS:
        return "zeros"
    return "(slot,seq)=%r" % (struct.unpack(">QQ", data[:16]),)


def do_fill(path, name, state, ranges):
    slots, seq = load(state)
    s = connect(path, name)
    todo = []
    for r in ranges:
        first, count = (int(x) for x in r.split(":"))
        for b in range(first, first + count, 16):
            todo.append((b, min(16, first + count - b)))
    inflight, h, i = {}, 0, 0
    while i < len(todo) or inflight:
        while i < len(todo) and len(inflight) < 8:
            b, n = todo[i]
            i += 1
            h += 1
            data = b""
            seqs = []
            for k in range(n):
                seq += 1
                seqs.append(seq)
                data += block(b + k, seq)
            inflight[h] = (b, seqs)
            s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_WRITE, h, b * BS, n * BS) + data)
        magic, err, hh = struct.unpack(">IIQ", recvn(s, 16))
        if magic != SIMPLE_MAGIC or err:
            raise SystemExit("fill: write failed: magic %x err %d" % (magic, err))
        b, seqs = inflight.pop(hh)
        for k, q in enumerate(seqs):
            slots[b + k] = [q, []]
    s.close()
    save(state, slots, seq)
    print("fill: %d slots written" % sum(int(r.split(":")[1]) for r in ranges))
    return 0


def do_run(path, name, state, seconds, phasedir, specs):
    slots, seq = load(state)
    regions = []
    for sp in specs:
        nm, first, count, mode = sp.split(":")
        regions.append((nm, int(first), int(count), mode))
    rnd = random.Random(4242)
    s = connect(path, name)
    s.setblocking(True)
    QD = 16
    inflight = {}      # handle -> (slot, cmd, seq, t0, phase, region)
    busy = set()
    stats = {}         # (region, phase, cmd) -> [ok, failed, max_latency]
    h = 0
    t_end = time.time() + seconds
    wrong = []
    slow = []          # requests that took over 2 s: (t_issue, latency, ...)
    ended = None

    def phase():
        if os.path.exists(os.path.join(phasedir, "restarted")):
            return "after"
        if os.path.exists(os.path.join(phasedir, "killed")):
            return "outage"
        return "before"

    def st(key):
        return stats.setdefault(key, [0, 0, 0.0])

    try:
        while True:
            now = time.time()
            ph = phase()
            # a "stop" file in the phase dir ends the run early (the test
            # keeps it going until well after the OSD is back, however slow
            # the restart was)
            if os.path.exists(os.path.join(phasedir, "stop")):
                t_end = min(t_end, now)
            if now < t_end:
                tries = 0
                while len(inflight) < QD and tries < 64:
                    tries += 1
                    nm, first, count, mode = regions[rnd.randrange(len(regions))]
                    if mode == "w-late" and ph == "before":
                        continue
                    slot = first + rnd.randrange(count)
                    if slot in busy:
                        continue
                    if mode == "r" or (mode == "rw" and rnd.random() < 0.3):
                        cmd = CMD_READ
                    else:
                        cmd = CMD_WRITE
                    h += 1
                    busy.add(slot)
                    if cmd == CMD_WRITE:
                        seq += 1
                        inflight[h] = (slot, cmd, seq, now, ph, nm)
                        s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_WRITE, h,
                                              slot * BS, BS) + block(slot, seq))
                    else:
                        inflight[h] = (slot, cmd, 0, now, ph, nm)
                        s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_READ, h,
                                              slot * BS, BS))
            if not inflight:
                break
            r, _, _ = select.select([s], [], [], 0.5)
            if not r:
                continue
            magic, err, hh = struct.unpack(">IIQ", recvn(s, 16))
            if magic != SIMPLE_MAGIC or hh not in inflight:
                raise SystemExit("bad reply magic %x handle %d" % (magic, hh))
            slot, cmd, q, t0, ph0, nm = inflight.pop(hh)
            lat = time.time() - t0
            k = st((nm, ph0, "write" if cmd == CMD_WRITE else "read"))
            k[2] = max(k[2], lat)
            if lat > 2.0:
                slow.append((t0, lat, nm, ph0, "write" if cmd == CMD_WRITE else "read",
                             slot, err))
            if cmd == CMD_READ:
                data = recvn(s, BS) if err == 0 else b""
                if err:
                    k[1] += 1
                else:
                    k[0] += 1
                    if data not in allowed(slots, slot):
                        wrong.append("read slot %d (%s, %s): got %s, want %s" %
                                     (slot, nm, ph0, describe(data), slots.get(slot, [0, []])))
            else:
                if err:
                    k[1] += 1
                    a = slots.setdefault(slot, [0, []])
                    a[1].append(q)
                else:
                    k[0] += 1
                    slots[slot] = [q, []]
            busy.discard(slot)
    except (EOFError, ConnectionResetError, BrokenPipeError):
        ended = phase()
    s.close()
    # writes still in flight when the server went away may or may not have landed
    for slot, cmd, q, t0, ph0, nm in inflight.values():
        if cmd == CMD_WRITE:
            slots.setdefault(slot, [0, []])[1].append(q)
    save(state, slots, seq)
    summ = {"acked": 0, "failed": 0, "reads_ok": 0, "reads_failed": 0, "max_latency": 0.0,
            "wrong_reads": len(wrong), "inflight_at_end": len(inflight),
            "server_closed": ended is not None, "by": {}}
    for (nm, ph, c), (ok, bad, mx) in sorted(stats.items()):
        print("run: %-6s %-7s %-5s ok %6d failed %5d max %.2f s" % (nm, ph, c, ok, bad, mx))
        summ["by"]["%s/%s/%s" % (nm, ph, c)] = [ok, bad, round(mx, 3)]
        if c == "write":
            summ["acked"] += ok
            summ["failed"] += bad
        else:
            summ["reads_ok"] += ok
            summ["reads_failed"] += bad
        summ["max_latency"] = max(summ["max_latency"], round(mx, 3))
    for w in wrong[:10]:
        print("run: WRONG " + w)
    try:
        tk = os.stat(os.path.join(phasedir, "killed")).st_mtime
    except OSError:
        tk = None
    for t0, lat, nm, ph, c, slot, err in sorted(slow)[:40]:
        print("run: slow %-5s %-6s obj %2d slot %5d issued %s took %5.2f s: %s" %
              (c, nm, slot // 1024, slot,
               "%+6.2f s after the kill" % (t0 - tk) if tk else "at %.2f" % t0,
               lat, "error %d" % err if err else "ok"))
    summ["slow"] = len(slow)
    print(json.dumps(summ))
    return 1 if wrong else 0


def check_slots(slots, read):
    bad = 0
    for slot in sorted(slots):
        data = read(slot)
        if data not in allowed(slots, slot):
            bad += 1
            if bad <= 5:
                print("slot %d: got %s, want %s" % (slot, describe(data), slots[slot]))
    maybe = sum(1 for v in slots.values() if v[1])
    print("%d slots verified (%d with a write that may or may not have landed), %d wrong" %
          (len(slots), maybe, bad))
    return 1 if bad else 0


def do_verify(path, name, state):
    slots, _ = load(state)
    s = connect(path, name)

    def read(slot):
        s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_READ, slot, slot * BS, BS))
        magic, err, _ = struct.unpack(">IIQ", recvn(s, 16))
        if err:
            raise SystemExit("read of slot %d failed: error %d" % (slot, err))
        return recvn(s, BS)
    return check_slots(slots, read)


def do_check(path, state):
    slots, _ = load(state)
    f = open(path, "rb")

    def read(slot):
        f.seek(slot * BS)
        d = f.read(BS)
        return d + b"\0" * (BS - len(d))
    return check_slots(slots, read)


if __name__ == "__main__":
    a = sys.argv[1:]
    if a and a[0] == "fill":
        sys.exit(do_fill(a[1], a[2], a[3], a[4:]))
    if a and a[0] == "run":
        sys.exit(do_run(a[1], a[2], a[3], float(a[4]), a[5], a[6:]))
    if a and a[0] == "verify":
        sys.exit(do_verify(a[1], a[2], a[3]))
    if a and a[0] == "check":
        sys.exit(do_check(a[1], a[2]))
    sys.exit(__doc__)
