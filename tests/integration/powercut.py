#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Real power cuts under the local backend (driven by test-powercut.sh).

Both pools live on ext4 on a loop device.  A libnbd client runs random 4 KiB
writes, FUA writes, reads (which promote), TRIM, WRITE_ZEROES and a FLUSH
every ~40 ops against tierd, every written block stamped with its block
number and write generation, and keeps a model of the values each block may
legally hold.  At a random instant:

  powercut  SIGKILL tierd and, in the same instant, shut the filesystem down
            without flushing anything (EXT4_IOC_SHUTDOWN, NOLOGFLUSH, as
            xfstests' godown): no write reaches the loop device after that,
            so its backing file holds exactly what a power cut leaves (the
            page cache is lost).  That file is copied, the copy is attached
            to a new loop device, e2fsck'd, mounted, and tierd restarts on it.
  kill9     SIGKILL tierd only (the page cache survives) and restart it.

Then every block of the image is read and checked against the model; the
agent flushes everything (tierctl flush --wait) and every block is read
again (it must not have changed); an NBD FLUSH makes the state just read
durable, and the workload continues on the new copy.

Legal values of a block (ops on one block never overlap):
  after a power cut: the newest value made durable -- by a completed FLUSH
    (covering writes completed before that FLUSH was sent) or a completed
    FUA write/trim/zero of the block, or observed after a restart and then
    FLUSHed -- or any value written after it (acknowledged or in flight);
  after kill -9: the last acknowledged value, or the one in flight.
TRIM and WRITE_ZEROES write zeros (tierd's TRIM zeroes; a read check during
the workload would catch it if it did not).  A never-written block is zeros.

Exit status 0: no failure; 1: failures (each printed with mode, round, cut
kind, block, what was read and the legal values); 2: harness or setup error.
"""
import argparse
import fcntl
import json
import os
import random
import resource
import signal
import struct
import subprocess
import sys
import time
import traceback
import zlib

import nbd

BS = 4096
MAGIC = b"TIERPC\x00\x01"
M64 = (1 << 64) - 1
ZERO = bytes(BS)
EXT4_IOC_SHUTDOWN = 0x8004587D            # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_NOLOGFLUSH = 2
QD = int(os.environ.get("TIER_POWERCUT_QD", "16"))   # client requests in flight
MAX_PRINT = 25                            # failure lines printed per round


def make_block(b, g):
    """4 KiB: magic, block, generation, filler derived from both, crc32."""
    body = struct.pack("<8sQQ", MAGIC, b, g) + struct.pack(
        "<QQ", (b * 0x9E3779B97F4A7C15) & M64, (g * 0xC2B2AE3D27D4EB4F + 1) & M64) * 254 + b"\0" * 4
    return body + struct.pack("<I", zlib.crc32(body))


class HarnessError(Exception):
    pass


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return -1


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def unlimit():
    """Children get the address-space hard limit back: the client runs under
    a soft one, and an ASan build (tierd, tierctl) reserves terabytes."""
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


def run(cmd, check=True, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       preexec_fn=unlimit, **kw)
    if check and r.returncode != 0:
        raise HarnessError("%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stdout.strip()[-2000:]))
    return r


# ---------------------------------------------------------------- the model

class Op:
    __slots__ = ("opid", "kind", "blk", "n", "fua", "rnd", "t_issue", "t_done", "status")

    def __init__(self, opid, kind, blk, n, fua, rnd, t):
        self.opid, self.kind, self.blk, self.n, self.fua, self.rnd = opid, kind, blk, n, fua, rnd
        self.t_issue, self.t_done, self.status = t, None, "in flight"


class Model:
    """Per block: hist = [(opid, value)] from the durable floor on (value:
    generation = opid of the write, 0 = zeros, <0 = an anomaly observed after
    a restart); floor = opid of the durable entry; acked = opid of the last
    acknowledged entry; fsrc = what made the floor durable."""

    def __init__(self, nblocks):
        self.n = nblocks
        self.hist = [[(0, 0)] for _ in range(nblocks)]
        self.floor = [0] * nblocks
        self.acked = [0] * nblocks
        self.fsrc = [("initial",)] * nblocks
        self.ops = {0: Op(0, "initial", 0, 0, False, -1, 0.0)}
        self.ops[0].status = "never written"
        self.next_opid = 1
        self.since_flush = {}          # block -> opid completed since the last FLUSH was sent
        self.pending_flushes = []      # [(flush opid, {block: opid})] in send order
        self.anomalies = {}            # negative value -> description

    def new_op(self, kind, blk, n, fua, rnd, t):
        op = Op(self.next_opid, kind, blk, n, fua, rnd, t)
        self.ops[op.opid] = op
        self.next_opid += 1
        return op

    def issue_write(self, op):
        val = op.opid if op.kind == "write" else 0
        for b in range(op.blk, op.blk + op.n):
            self.hist[b].append((op.opid, val))

    def complete_write(self, op):
        for b in range(op.blk, op.blk + op.n):
            self.acked[b] = op.opid
            self.since_flush[b] = op.opid
            if op.fua:
                self.advance(b, op.opid, ("fua", op.opid))

    def advance(self, b, opid, src):
        if opid > self.floor[b]:
            self.floor[b] = opid
            self.fsrc[b] = src
            self.hist[b] = [e for e in self.hist[b] if e[0] >= opid]

    def issue_flush(self, op):
        self.pending_flushes.append((op.opid, self.since_flush))
        self.since_flush = {}

    def complete_flush(self, op):
        # a completed FLUSH covers everything earlier FLUSHes covered too
        while self.pending_flushes and self.pending_flushes[0][0] <= op.opid:
            fid, rec = self.pending_flushes.pop(0)
            for b, opid in rec.items():
                self.advance(b, opid, ("flush", fid, op.opid))

    def legal(self, b, kind):
        if kind == "kill9":
            return [e for e in self.hist[b] if e[0] >= self.acked[b]]
        return self.hist[b]

    def reset_observed(self, obs, rnd, t, how):
        """After a restart, its verification and a completed FLUSH: the
        values read are the durable state (a FLUSH covers every write
        acknowledged before it, by this tierd or the one killed)."""
        op = self.new_op("observed", 0, self.n, False, rnd, t)
        op.status = "read back after the %s of round %d, then FLUSHed" % (how, rnd)
        src = ("observed", op.opid, rnd, how)
        for b in range(self.n):
            self.hist[b] = [(op.opid, obs[b])]
            self.floor[b] = self.acked[b] = op.opid
            self.fsrc[b] = src
        self.since_flush = {}
        self.pending_flushes = []
        # forget ops nothing refers to any more (long runs)
        seen = set(obs)
        keep = {v for v in seen if v > 0} | {0, op.opid}
        self.ops = {k: o for k, o in self.ops.items() if k in keep}
        self.anomalies = {v: d for v, d in self.anomalies.items() if v in seen}

    def note_observed(self, obs, rnd, t, how):
        """Lenient kill -9 (TIER_POWERCUT_KILL9_FLUSH=lenient): the values
        read after the restart are the newest, acknowledged but not durable
        (the durable floor stays where it was before the kill)."""
        op = self.new_op("observed", 0, self.n, False, rnd, t)
        op.status = "read back after the %s of round %d (not taken as durable)" % (how, rnd)
        for b in range(self.n):
            self.hist[b].append((op.opid, obs[b]))
            self.acked[b] = op.opid
        self.since_flush = {}
        self.pending_flushes = []

    # -- descriptions for failure reports
    def desc_value(self, v):
        if v == 0:
            return "zeros"
        if v < 0:
            return self.anomalies.get(v, "anomaly")
        return "gen %d" % v

    def desc_op(self, opid):
        op = self.ops.get(opid)
        if op is None:
            return "op#%d (unknown)" % opid
        if op.kind in ("initial", "observed"):
            return op.status
        what = "%s%s blocks %d..%d" % (op.kind, "+FUA" if op.fua else "", op.blk, op.blk + op.n - 1)
        when = "sent %.3fs" % op.t_issue + (", done %.3fs" % op.t_done if op.t_done is not None else "")
        return "op#%d %s (round %d, %s, %s)" % (opid, what, op.rnd, op.status, when)

    def desc_entry(self, opid, val):
        op = self.ops[opid]
        if op.kind == "observed":
            if val > 0:
                return "gen %d (%s), as %s" % (val, self.desc_op(val), op.status)
            return "%s, as %s" % (self.desc_value(val), op.status)
        return "%s = %s" % (self.desc_value(val), self.desc_op(opid))

    def desc_src(self, src):
        if src[0] == "flush":
            if src[1] == src[2]:
                return "durable: FLUSH op#%d completed" % src[1]
            return "durable: FLUSH op#%d (sent after it) covered by FLUSH op#%d completed" % (src[1], src[2])
        if src[0] == "fua":
            return "durable: FUA completed"
        if src[0] == "observed":
            return "durable: read back after the %s of round %d, then an NBD FLUSH completed" % (src[3], src[2])
        return "durable: never written"


# ------------------------------------------------------------ block decoding

def classify(model, b, data):
    """value: generation (>0), 0 zeros, <0 anomaly (registered with a description)."""
    if data == ZERO:
        return 0
    if data[:8] == MAGIC:
        b2, g = struct.unpack_from("<QQ", data, 8)
        if data == make_block(b2, g):
            if b2 == b:
                return g
            what = "block %d's data (gen %d) [misdirected]" % (b2, g)
        else:
            good = make_block(b2, g)
            diff = [i for i in range(0, BS, 512) if data[i:i + 512] != good[i:i + 512]]
            what = "corrupt/torn block claiming block %d gen %d, sectors differing: %s" % (
                b2, g, [i // 512 for i in diff])
    else:
        nz = BS - data.count(0)
        what = "garbage (%d non-zero bytes, first 16: %s)" % (nz, data[:16].hex())
    v = -(zlib.crc32(data) + 1)
    model.anomalies[v] = what
    return v


# ------------------------------------------------------------ the NBD client

class BufPool:
    """Reused AIO buffers: libnbd 1.14's Python binding (Debian 12) never
    releases a buffer passed to aio_pread/aio_pwrite, so a fresh one per
    command leaks its size every time."""

    def __init__(self):
        self.free = {}

    def get(self, ln):
        lst = self.free.get(ln)
        if lst:
            return lst.pop()
        return nbd.Buffer.from_buffer(bytearray(ln))

    def put(self, buf):
        self.free.setdefault(len(buf), []).append(buf)


def nbd_drop(h):
    """Close a handle (libnbd 1.14's Python binding closes on release)."""
    close = getattr(h, "close", None)
    if close:
        close()
    return None


def nbd_connect(sock):
    h = nbd.NBD()
    h.set_export_name("disk")
    h.connect_unix(sock)
    for cap in ("can_flush", "can_fua", "can_trim", "can_zero"):
        if not getattr(h, cap)():
            raise HarnessError("tierd does not advertise %s" % cap)
    return h


class Client:
    def __init__(self, args, model, rng, out):
        self.a, self.m, self.rng, self.out = args, model, rng, out
        self.nblocks = model.n
        self.busy = bytearray(model.n)
        self.failures = 0
        self.printed = 0
        self.rnd = 0
        self.mode = args.mode
        self.pool = BufPool()
        self.after_kill9 = 0       # failing blocks whose durability came from a FLUSH after kill -9

    def fail(self, msg, nblocks=1):
        self.failures += nblocks
        if self.printed < MAX_PRINT:
            print("POWERCUT FAILURE: mode=%s round=%d %s" % (self.mode, self.rnd, msg), flush=True)
        elif self.printed == MAX_PRINT:
            print("POWERCUT FAILURE: mode=%s round=%d ... (further failures of this round counted, not printed)"
                  % (self.mode, self.rnd), flush=True)
        self.printed += 1

    def pick(self, maxn):
        """A random run of blocks none of which has an op in flight."""
        n = 1 if maxn == 1 or self.rng.random() < 0.6 else self.rng.randint(2, maxn)
        for _ in range(8):
            r = self.rng.random()
            if r < 0.55:     # hot window (moves every round): cached, dirty, flushed, evicted
                b = self.hot + self.rng.randrange(self.hot_len)
            elif r < 0.7:    # a second, smaller hot spot
                b = self.hot2 + self.rng.randrange(256)
            else:
                b = self.rng.randrange(self.nblocks)
            b = min(b, self.nblocks - n)
            if not any(self.busy[b:b + n]):
                return b, n
        return None

    def workload(self, h, duration, stats):
        m, rng = self.m, self.rng
        inflight = {}
        t0 = time.monotonic()
        t_end = t0 + duration
        next_flush = rng.randint(20, 60)
        since = 0
        while True:
            now = time.monotonic()
            if now >= t_end:
                break
            while len(inflight) < QD:
                if since >= next_flush:
                    op = m.new_op("flush", 0, 0, False, self.rnd, now - t0)
                    m.issue_flush(op)
                    c = h.aio_flush()
                    inflight[c] = (op, None)
                    since, next_flush = 0, rng.randint(20, 60)
                    stats["flush"] += 1
                    continue
                since += 1
                r = rng.random()
                if r < 0.40:
                    kind, maxn, fua = "write", 8, rng.random() < 0.15
                elif r < 0.72:
                    kind, maxn, fua = "read", 16, False
                elif r < 0.86:
                    kind, maxn, fua = "trim", 16, rng.random() < 0.25
                else:
                    kind, maxn, fua = "zero", 16, rng.random() < 0.25
                if kind == "write" and fua:
                    maxn = 4
                got = self.pick(maxn)
                if got is None:
                    continue
                b, n = got
                op = m.new_op(kind, b, n, fua, self.rnd, now - t0)
                for i in range(b, b + n):
                    self.busy[i] = 1
                flags = nbd.CMD_FLAG_FUA if fua else 0
                off, ln = b * BS, n * BS
                buf = None
                if kind == "read":
                    buf = self.pool.get(ln)
                    c = h.aio_pread(buf, off)
                    op.status = "read"
                elif kind == "write":
                    m.issue_write(op)
                    buf = self.pool.get(ln)
                    buf.to_buffer()[:] = b"".join(make_block(i, op.opid) for i in range(b, b + n))
                    c = h.aio_pwrite(buf, off, flags=flags)
                elif kind == "trim":
                    m.issue_write(op)
                    c = h.aio_trim(ln, off, flags=flags)
                else:
                    m.issue_write(op)
                    if rng.random() < 0.5:
                        flags |= nbd.CMD_FLAG_NO_HOLE
                    c = h.aio_zero(ln, off, flags=flags)
                inflight[c] = (op, buf)
                stats[kind + ("_fua" if fua else "")] += 1
            h.poll(20)
            while inflight:
                c = h.aio_peek_command_completed()
                if c <= 0:
                    break
                op, buf = inflight.pop(c)
                op.t_done = time.monotonic() - t0
                try:
                    h.aio_command_completed(c)
                    err = None
                except nbd.Error as e:
                    err = e
                self.completed(op, buf, err)
        return inflight

    def completed(self, op, buf, err):
        m = self.m
        if err is not None:
            op.status = "failed: %s" % err
            self.fail("%s returned an error: %s" % (m.desc_op(op.opid), err))
            # its effect is unknown: leave its values legal (never acknowledged)
        elif op.kind == "flush":
            op.status = "completed"
            m.complete_flush(op)
        elif op.kind == "read":
            data = bytes(buf.to_buffer())
            for i in range(op.n):
                b = op.blk + i
                blk = bytes(data[i * BS:(i + 1) * BS])
                exp = m.hist[b][-1][1]
                if exp >= 0:
                    ok = blk == (ZERO if exp == 0 else make_block(b, exp))
                else:
                    ok = (-(zlib.crc32(blk) + 1)) == exp
                if not ok:
                    got = classify(m, b, blk)
                    self.fail("live read (no crash): block %d read %s, expected %s from %s" % (
                        b, m.desc_value(got), m.desc_value(exp), m.desc_op(m.hist[b][-1][0])))
        else:
            op.status = "acknowledged" + (" (FUA)" if op.fua else "")
            m.complete_write(op)
        if buf is not None:
            self.pool.put(buf)
        if op.kind != "flush":
            for i in range(op.blk, op.blk + op.n):
                self.busy[i] = 0

    def read_all(self, h):
        """Every block of the image, classified."""
        m = self.m
        obs = [0] * self.nblocks
        chunk = 256
        pending = {}
        nxt = 0
        while nxt < self.nblocks or pending:
            while nxt < self.nblocks and len(pending) < 8:
                n = min(chunk, self.nblocks - nxt)
                buf = self.pool.get(n * BS)
                c = h.aio_pread(buf, nxt * BS)
                pending[c] = (nxt, n, buf)
                nxt += n
            h.poll(-1)
            while pending:
                c = h.aio_peek_command_completed()
                if c <= 0:
                    break
                b0, n, buf = pending.pop(c)
                try:
                    h.aio_command_completed(c)
                except nbd.Error as e:
                    raise HarnessError("read of blocks %d..%d failed: %s" % (b0, b0 + n - 1, e))
                data = bytes(buf.to_buffer())
                self.pool.put(buf)
                for i in range(n):
                    blk = data[i * BS:(i + 1) * BS]
                    b = b0 + i
                    if blk == ZERO:
                        obs[b] = 0
                    elif blk[:8] == MAGIC and struct.unpack_from("<Q", blk, 8)[0] == b and \
                            blk == make_block(b, struct.unpack_from("<Q", blk, 16)[0]):
                        obs[b] = struct.unpack_from("<Q", blk, 16)[0]
                    else:
                        obs[b] = classify(m, b, blk)
        return obs

    def check(self, obs, kind, cut_desc):
        """Verify every block against the model; returns (failures, lost)
        where lost counts blocks that legally lost acknowledged writes.
        Failing blocks with the same story (one multi-block op) are
        reported as one range."""
        m = self.m
        fails = lost = 0
        groups = []                     # [first, last, got, legal]
        for b in range(self.nblocks):
            v = obs[b]
            legal = m.legal(b, kind)
            if any(e[1] == v for e in legal):
                if v != m.hist[b][-1][1] and m.ops[m.hist[b][-1][0]].status.startswith("ack"):
                    lost += 1
                continue
            fails += 1
            parts = []
            for opid, val in legal:
                tag = m.desc_entry(opid, val)
                if opid == m.floor[b]:
                    tag += " <- " + m.desc_src(m.fsrc[b])
                parts.append(tag)
            if v == 0:
                got = "ZEROS"
            elif v < 0:
                got = m.desc_value(v)
            else:
                got = "gen %d (%s)" % (v, m.desc_op(v))
                fv = max((val for opid, val in legal if opid == m.floor[b]), default=0)
                if v < fv:
                    got += " OLDER than the durable value"
            if kind == "kill9" and m.ops[m.hist[b][-1][0]].status.startswith("ack"):
                got += ", not the last acknowledged value"
            legal_s = "; ".join(parts)
            if m.fsrc[b][0] == "observed" and m.fsrc[b][3].startswith("kill"):
                self.after_kill9 += 1
                legal_s += " [kill -9 then power cut: the FLUSH sent to the restarted tierd did not make " \
                    "durable the data it had served, left in the page cache by the killed one]"
            if groups and groups[-1][1] == b - 1 and groups[-1][2] == got and groups[-1][3] == legal_s:
                groups[-1][1] = b
            else:
                groups.append([b, b, got, legal_s])
        for first, last, got, legal_s in groups:
            where = "block %d (offset %#x)" % (first, first * BS) if first == last else \
                "blocks %d..%d (%d blocks, offset %#x..%#x)" % (first, last, last - first + 1, first * BS,
                                                               (last + 1) * BS - 1)
            self.fail("%s: %s: read %s; legal: [%s]" % (cut_desc, where, got, legal_s), last - first + 1)
        return fails, lost


# ------------------------------------------------------------ the rig

class Rig:
    def __init__(self, a):
        self.a = a
        self.work = a.work
        self.mnt = os.path.join(a.work, "mnt")
        self.run_dir = os.path.join(a.work, "run")
        self.sock = os.path.join(self.run_dir, "nbd.sock")
        self.asok = os.path.join(self.run_dir, "tierd.asok")
        self.conf = os.path.join(self.run_dir, "tierd.conf")
        self.logf = os.path.join(a.work, "tierd-%s.log" % a.mode)
        self.img = None
        self.loop = None
        self.mntfd = None
        self.proc = None
        self.gen = 0
        os.makedirs(self.mnt, exist_ok=True)
        os.makedirs(self.run_dir, exist_ok=True)

    # -- filesystem
    def new_image(self):
        self.gen += 1
        return os.path.join(self.work, "%s-%03d.img" % (self.a.mode, self.gen))

    def attach(self, img):
        self.img = img
        for attempt in range(5):     # another test may grab the same free device
            r = run(["losetup", "--find", "--show", img], check=attempt == 4)
            if r.returncode == 0:
                break
            time.sleep(0.2)
        self.loop = r.stdout.strip()
        with open(os.path.join(self.work, "loops"), "a") as f:
            f.write(self.loop + "\n")

    def mkfs(self):
        if self.a.fs == "tmpfs":
            return          # mounted by mount(): nothing to make
        img = self.new_image()
        with open(img, "wb") as f:
            f.truncate(self.a.fs_size)
        self.attach(img)
        run(["mkfs.ext4", "-q", "-F", "-E", "nodiscard,lazy_itable_init=0,lazy_journal_init=0", self.loop])

    def mount(self, opts):
        if self.a.fs == "tmpfs":
            cmd = ["mount", "-t", "tmpfs", "-o", "size=%d" % self.a.fs_size, "tmpfs", self.mnt]
        else:
            cmd = ["mount", "-t", "ext4"] + (["-o", opts] if opts else []) + [self.loop, self.mnt]
        run(cmd)
        self.mntfd = os.open(self.mnt, os.O_RDONLY | os.O_DIRECTORY)
        os.makedirs(os.path.join(self.mnt, "data"), exist_ok=True)

    def umount_detach(self, remove_image):
        if self.mntfd is not None:
            os.close(self.mntfd)
            self.mntfd = None
        if run(["umount", self.mnt], check=False).returncode != 0:
            time.sleep(0.5)
            if run(["umount", self.mnt], check=False).returncode != 0:
                run(["umount", "-l", self.mnt], check=False)
        if self.loop:
            run(["losetup", "-d", self.loop], check=False)
            self.loop = None
        if remove_image and self.img:
            os.unlink(self.img)
            self.img = None

    def loop_idle(self):
        p = "/sys/block/%s/inflight" % os.path.basename(self.loop)
        deadline = time.monotonic() + 5
        quiet = 0
        while time.monotonic() < deadline:
            try:
                with open(p) as f:
                    r, w = f.read().split()
            except OSError:
                time.sleep(0.05)
                return
            quiet = quiet + 1 if r == "0" and w == "0" else 0
            if quiet >= 3:
                return
            time.sleep(0.01)

    def power_cut(self, next_opts):
        """SIGKILL tierd and at once stop every write to the device; copy the
        device (what survives a power cut), fsck the copy, mount it."""
        t0 = time.monotonic()
        os.kill(self.proc.pid, signal.SIGKILL)
        try:
            fcntl.ioctl(self.mntfd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
        except OSError as e:
            raise HarnessError("EXT4_IOC_SHUTDOWN failed (%s): cannot simulate a power cut" % e)
        self.reap()
        self.loop_idle()
        new = self.new_image()
        run(["cp", "--sparse=always", self.img, new])
        t_copy = time.monotonic() - t0
        self.umount_detach(remove_image=not self.a.keep_images)
        self.attach(new)
        r = run(["e2fsck", "-fy", self.loop], check=False)
        with open(os.path.join(self.work, "fsck-%s.log" % self.a.mode), "a") as f:
            f.write("==== %s\n%s\n" % (new, r.stdout))
        notes, odd = [], []
        replay = fixed = orphans = 0
        for line in r.stdout.splitlines():
            line = line.strip()
            if not line or line.startswith(("e2fsck ", "Pass ", "Fix? yes")) or "files (" in line \
                    or "FILE SYSTEM WAS MODIFIED" in line:
                continue
            if "recovering journal" in line:
                replay += 1
            elif line.startswith(("Free blocks count wrong", "Free inodes count wrong")):
                fixed += 1
            elif line.startswith("Clearing orphaned inode"):
                orphans += 1
            elif "could be shorter" in line or "could be narrower" in line:
                continue     # -f offers extent tree optimisations: not damage
            else:
                odd.append(line)
        if replay:
            notes.append("journal replayed")
        if fixed:
            notes.append("%d free counts fixed" % fixed)
        if orphans:
            notes.append("%d orphan inodes cleared" % orphans)
        if odd:
            notes.append("OTHER REPAIRS: " + " | ".join(odd[:8]))
        fsck_desc = "%d (%s)" % (r.returncode, ", ".join(notes) or "clean")
        if r.returncode >= 4:
            raise HarnessError("e2fsck -fy %s (copy of the cut device): exit %d:\n%s" % (
                new, r.returncode, r.stdout[-3000:]))
        self.mount(next_opts)
        return fsck_desc, t_copy

    # -- tierd
    def write_conf(self):
        a = self.a
        extra = ""
        if a.mode == "object":
            extra = "object_size = 1M\nmin_read_recency_for_promote = 0\nmin_write_recency_for_promote = 0\n"
        else:
            extra = "min_read_recency_for_promote = 1\nmin_write_recency_for_promote = 0\n"
        with open(self.conf, "w") as f:
            f.write("""# written by tests/integration/powercut.py
[global]
backend = local
listen = unix:%(sock)s
admin_socket = %(asok)s
log_level = info
max_requests_per_conn = 64

[local]
data_dir = %(data)s
base_profile = none
cache_profile = none

[tier]
promote_granularity = %(mode)s
target_max_bytes = %(cache)s
cache_target_dirty_ratio = 0.2
cache_target_dirty_high_ratio = 0.5
cache_target_full_ratio = 0.6
cache_min_flush_age = 0
cache_min_evict_age = 0
hit_set_period = 1s
hit_set_count = 4
promote_max_bytes_sec = 0
promote_max_objects_sec = 0
agent_max_ops = %(agent_ops)d
agent_max_low_ops = 4
%(extra)s
[image.disk]
size = %(size)d
""" % dict(sock=self.sock, asok=self.asok, data=os.path.join(self.mnt, "data"), mode=a.mode,
           cache=a.cache, extra=extra, size=a.image_size,
           agent_ops=int(os.environ.get("TIER_POWERCUT_AGENT_OPS", "8"))))

    def start_tierd(self):
        lf = open(self.logf, "a")
        lf.write("==== start (round data: %s)\n" % self.img)
        lf.flush()
        self.proc = subprocess.Popen([self.a.tierd, "--config", self.conf], stdout=lf, stderr=lf,
                                     preexec_fn=unlimit)
        lf.close()
        with open(os.path.join(self.work, "tierd.pid"), "w") as f:
            f.write("%d\n" % self.proc.pid)
        deadline = time.monotonic() + 120
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise HarnessError("tierd exited (%d) during start-up; see %s" % (self.proc.returncode, self.logf))
            if os.path.exists(self.asok):
                r = run([self.a.tierctl, "--socket", self.asok, "images"], check=False)
                last = "tierctl images: exit %d: %s" % (r.returncode, r.stdout.strip()[-300:])
                if r.returncode == 0:
                    try:
                        imgs = json.loads(r.stdout)["images"]
                    except (ValueError, KeyError, IndexError):
                        imgs = []
                    if imgs and all(i.get("state") == "ready" for i in imgs):
                        return
                    if any(i.get("state") not in ("ready", "loading") for i in imgs):
                        raise HarnessError("image not ready after restart: %s" % r.stdout.strip())
            time.sleep(0.05)
        diag = ""
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                diag = " ".join(l.strip() for l in f if l.startswith(("State", "Threads")))
            with open("/proc/%d/wchan" % self.proc.pid) as f:
                diag += " wchan " + f.read()
        except OSError:
            pass
        raise HarnessError("tierd not ready within 120 s (%s; tierd %s)" % (last, diag))

    def reap(self):
        if self.proc is not None:
            self.proc.wait()
            self.proc = None

    def kill9(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.reap()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.proc = None
        return rc

    def tierctl(self, *args):
        return run([self.a.tierctl, "--socket", self.asok] + list(args), check=False)

    def counters(self):
        r = self.tierctl("perf", "dump")
        try:
            return json.loads(r.stdout)["tierd"]
        except (ValueError, KeyError):
            return {}

    def cache_pool(self):
        r = self.tierctl("perf", "dump")
        try:
            return json.loads(r.stdout)["tierd-pool-cache"]
        except (ValueError, KeyError):
            return {}

    def cleanup(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        if self.loop:
            self.umount_detach(remove_image=True)


# ------------------------------------------------------------ main

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=("object", "extent"), required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--tierd", required=True)
    p.add_argument("--tierctl", required=True)
    p.add_argument("--cuts", type=int, default=10)
    p.add_argument("--kill9", type=int, default=2)
    p.add_argument("--image-size", type=int, default=256 << 20)
    p.add_argument("--fs-size", type=int, default=1 << 30)
    p.add_argument("--fs", choices=("ext4", "tmpfs"), default="ext4",
                   help="tmpfs: kill -9 rounds only (the local store runs its syncing writes inline there)")
    p.add_argument("--cache", default="16M")
    p.add_argument("--min-run", type=float, default=0.5)
    p.add_argument("--max-run", type=float, default=2.5)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--keep-images", action="store_true")
    p.add_argument("--kill9-flush", choices=("strict", "lenient"), default="strict",
                   help="strict: a FLUSH after a kill -9 restart makes what was read back durable")
    a = p.parse_args()
    if a.fs == "tmpfs":
        a.cuts = 0          # a power cut of tmpfs loses everything: nothing to check

    seed = a.seed if a.seed is not None else random.randrange(1 << 32)
    rng = random.Random(seed)
    nblocks = a.image_size // BS
    model = Model(nblocks)
    cl = Client(a, model, rng, sys.stdout)
    rig = Rig(a)
    with open(os.path.join(a.work, "client.pid"), "w") as f:
        f.write("%d\n" % os.getpid())

    # rounds: kill -9 first and in the middle; power cuts alternate between
    # ext4 mounted with commit=1 and with default options
    total = a.cuts + a.kill9
    k9 = {i * total // a.kill9 for i in range(a.kill9)} if a.kill9 else set()
    plan = ["kill9" if i in k9 else "powercut" for i in range(total)]
    mount_opts = lambda i: "commit=1" if i % 2 == 0 else ""
    log("powercut: mode=%s seed=%d image=%d MiB cache=%s rounds=%s" % (
        a.mode, seed, a.image_size >> 20, a.cache, " ".join(plan)))
    cuts = kills = verified = 0
    lost_total = 0
    tier_tot = {}
    pend_tot = {"kept": 0, "dropped": 0}
    rc = 0
    try:
        rig.mkfs()
        epoch = 0
        rig.mount(mount_opts(epoch))
        rig.write_conf()
        rig.start_tierd()
        h = nbd_connect(rig.sock)
        for rnd, kind in enumerate(plan, 1):
            cl.rnd, cl.printed = rnd, 0
            cl.hot = rng.randrange(nblocks - 4096)
            cl.hot_len = 4096 if rng.random() < 0.5 else 8192 if nblocks > 8192 else 4096
            cl.hot_len = min(cl.hot_len, nblocks - cl.hot)
            cl.hot2 = rng.randrange(nblocks - 256)
            stats = {k: 0 for k in ("write", "write_fua", "read", "trim", "trim_fua", "zero", "zero_fua", "flush")}
            dur = rng.uniform(a.min_run, a.max_run)
            opts = mount_opts(epoch) or "defaults"
            inflight = cl.workload(h, dur, stats)
            cnt = rig.counters()
            for k in ("promotions", "flushes", "evictions", "evict_partial", "proxy_writes", "proxy_reads",
                      "agent_turnovers"):
                tier_tot[k] = tier_tot.get(k, 0) + int(cnt.get(k, 0))
            # records of overwrites left with the open file (docs/DURABILITY.md), before the cut
            deferred = int(rig.cache_pool().get("meta_deferred", 0))
            tier_tot["meta_deferred"] = tier_tot.get("meta_deferred", 0) + deferred
            # ---- the cut: nothing of the client's is processed after this point
            n_inflight = len(inflight)
            for op, _ in inflight.values():
                if op.kind not in ("read", "flush"):
                    op.status = "in flight at the cut"
                elif op.kind == "flush":
                    op.status = "in flight at the cut"
            if kind == "kill9":
                rig.kill9()
                h = nbd_drop(h)
                kills += 1
                desc = "kill9 #%d" % kills
                fsck = "-"
                tcopy = 0.0
            else:
                epoch += 1
                fsck_rc, tcopy = rig.power_cut(mount_opts(epoch))
                h = nbd_drop(h)
                cuts += 1
                desc = "cut %d (ext4 %s)" % (cuts, opts)
                fsck = fsck_rc
            for i in range(nblocks):
                cl.busy[i] = 0
            rig.start_tierd()
            h = nbd_connect(rig.sock)
            obs = cl.read_all(h)
            f1, lost = cl.check(obs, kind, desc)
            # records with pending ranges (local_io.c) checked at the rebuild: kept or dropped
            pool = rig.cache_pool()
            pkept, pdrop = int(pool.get("pending_kept", 0)), int(pool.get("pending_dropped", 0))
            pend_tot["kept"] += pkept
            pend_tot["dropped"] += pdrop
            if kind == "kill9" and pdrop:
                cl.fail("%s: %d records dropped their pending ranges after kill -9 "
                        "(the page cache kept every byte: the check must pass)" % (desc, pdrop))
            t = time.monotonic()
            r = rig.tierctl("flush", "--wait", "--timeout", "120")
            tflush = time.monotonic() - t
            if r.returncode != 0:
                cl.fail("%s: tierctl flush --wait failed: %s" % (desc, r.stdout.strip()[-500:]))
            obs2 = cl.read_all(h)
            f2 = 0
            for b in range(nblocks):
                if obs2[b] != obs[b]:
                    f2 += 1
                    cl.fail("%s: block %d changed with no write in between, across the agent flush: "
                            "%s before, %s after" % (desc, b, model.desc_value(obs[b]), model.desc_value(obs2[b])))
            h.flush()
            if kind == "kill9" and a.kill9_flush == "lenient":
                model.note_observed(obs2, rnd, 0.0, "kill -9 restart")
            else:
                model.reset_observed(obs2, rnd, 0.0, "kill -9 restart" if kind == "kill9" else "power cut")
            verified += 2 * nblocks
            lost_total += lost
            nops = sum(v for k, v in stats.items())
            log("powercut: mode=%s round %d/%d %s after %.1fs: %d ops (%s), %d in flight at the cut; "
                "fsck rc %s; copy %.2fs; verified %d blocks twice: %d failures, %d after flush; "
                "%d blocks legally lost acknowledged writes; agent flush %.1fs; "
                "tier counters: promotions %s flushes %s evictions %s partial evictions %s; "
                "records left in memory %d; "
                "pending ranges at the rebuild: %d records kept, %d fell back; client rss %d MiB" % (
                    a.mode, rnd, len(plan), desc, dur, nops,
                    " ".join("%s=%d" % kv for kv in stats.items()), n_inflight, fsck, tcopy,
                    nblocks, f1, f2, lost, tflush, cnt.get("promotions", "?"),
                    cnt.get("flushes", "?"), cnt.get("evictions", "?"),
                    cnt.get("evict_partial", "?"), deferred, pkept, pdrop, rss_mib()))
            if (f1 or f2) and os.environ.get("TIER_POWERCUT_STOP_ON_FAIL") == "1":
                break
        h = nbd_drop(h)
        src = rig.stop()
        if src != 0:
            cl.fail("tierd exited with status %d after SIGTERM" % src)
    except HarnessError as e:
        print("powercut: HARNESS ERROR (mode=%s round=%d): %s" % (a.mode, cl.rnd, e), flush=True)
        rc = 2
    except Exception:
        traceback.print_exc()
        print("powercut: HARNESS ERROR (mode=%s round=%d): exception above" % (a.mode, cl.rnd), flush=True)
        rc = 2
    finally:
        rig.cleanup()
    # extent mode: the cuts must have come among partial evictions (evict_extents, default 2)
    if rc == 0 and a.mode == "extent" and cuts + kills and not tier_tot.get("evict_partial", 0):
        cl.fail("extent mode: no partial eviction in %d rounds: the cuts tested none" % (cuts + kills))
    print("powercut: mode=%s cuts=%d kill9=%d blocks_verified=%d failures=%d "
          "failures_after_kill9=%d legally_lost_acked=%d promotions=%d flushes=%d evictions=%d "
          "partial_evictions=%d meta_deferred=%d pending_kept=%d pending_dropped=%d turnovers=%d qd=%d seed=%d" % (
              a.mode, cuts, kills, verified, cl.failures, cl.after_kill9, lost_total, tier_tot.get("promotions", 0),
              tier_tot.get("flushes", 0), tier_tot.get("evictions", 0), tier_tot.get("evict_partial", 0),
              tier_tot.get("meta_deferred", 0), pend_tot["kept"], pend_tot["dropped"],
              tier_tot.get("agent_turnovers", 0), QD, seed), flush=True)
    if rc:
        return rc
    return 1 if cl.failures else 0


if __name__ == "__main__":
    sys.exit(main())
