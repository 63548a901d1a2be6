#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""NBD metadata contexts and NBD_CMD_BLOCK_STATUS against a running tierd,
with a raw socket: the option haggling (LIST/SET_META_CONTEXT, valid and
malformed), malformed BLOCK_STATUS requests, REQ_ONE, and the race rule (a
write acknowledged before a BLOCK_STATUS is never reported as a hole, on the
same connection and on another one).

usage: nbd_status.py SOCKET_PATH EXPORT OTHER_EXPORT OBJECT_SIZE
EXPORT must be empty (never written) when this starts.
Exits 0 when every case passed, 1 otherwise.
"""
import os
import socket
import struct
import sys

NBD_MAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REP_MAGIC = 0x0003E889045565A9
REQ_MAGIC = 0x25609513
SIMPLE_MAGIC = 0x67446698
STRUCT_MAGIC = 0x668E33EF
OPT_GO, OPT_SR, OPT_LIST_META, OPT_SET_META = 7, 8, 9, 10
REP_ACK, REP_INFO, REP_META = 1, 3, 4
ERR_INVALID, ERR_UNKNOWN = (1 << 31) + 3, (1 << 31) + 6
CMD_READ, CMD_WRITE, CMD_DISC, CMD_BS = 0, 1, 2, 7
REPLY_BS = 5
FLAG_DONE = 1
CMD_FLAG_REQ_ONE = 1 << 3
STATE_HOLE, STATE_ZERO = 1, 2
EINVAL = 22

SOCK, EXP, OTHER, OBJ = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])


def recvn(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise AssertionError("server closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def connect_raw():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(SOCK)
    magic, ver, _ = struct.unpack(">QQH", recvn(s, 18))
    assert magic == NBD_MAGIC and ver == IHAVEOPT
    s.sendall(struct.pack(">I", 3))
    return s


def send_opt(s, opt, data=b""):
    s.sendall(struct.pack(">QII", IHAVEOPT, opt, len(data)) + data)


def recv_opt(s):
    magic, opt, rep, ln = struct.unpack(">QIII", recvn(s, 20))
    assert magic == REP_MAGIC
    return opt, rep, recvn(s, ln)


def meta_data(name, queries):
    n = name.encode()
    d = struct.pack(">I", len(n)) + n + struct.pack(">I", len(queries))
    for q in queries:
        q = q.encode()
        d += struct.pack(">I", len(q)) + q
    return d


def meta_opt(s, opt, data):
    """Send a meta context option; returns ([(id, name)], final reply)."""
    send_opt(s, opt, data)
    ctx = []
    while True:
        _, rep, d = recv_opt(s)
        if rep != REP_META:
            return ctx, rep
        ctx.append((struct.unpack(">I", d[:4])[0], d[4:].decode()))


def sr(s):
    send_opt(s, OPT_SR)
    assert recv_opt(s)[1] == REP_ACK


def go(s, name):
    n = name.encode()
    send_opt(s, OPT_GO, struct.pack(">I", len(n)) + n + struct.pack(">H", 0))
    size = None
    while True:
        _, rep, d = recv_opt(s)
        if rep == REP_ACK:
            return size
        assert rep == REP_INFO, "GO failed: %x" % rep
        if struct.unpack(">H", d[:2])[0] == 0:
            size = struct.unpack(">HQH", d)[1]


def connect_bs(name=EXP):
    """Structured replies, base:allocation selected, GO: (sock, size, ctx id)."""
    s = connect_raw()
    sr(s)
    ctx, rep = meta_opt(s, OPT_SET_META, meta_data(name, ["base:allocation"]))
    assert rep == REP_ACK and len(ctx) == 1 and ctx[0][1] == "base:allocation", (ctx, rep)
    return s, go(s, name), ctx[0][0]


def req(s, cmd, off, ln, cookie=1, flags=0, payload=b""):
    s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, flags, cmd, cookie, off, ln) + payload)


def reply(s):
    """One reply: ('simple', err, cookie) or ('bs', ctx, [(len, flags)], cookie)
    or ('chunk', type, payload, cookie)."""
    magic = struct.unpack(">I", recvn(s, 4))[0]
    if magic == SIMPLE_MAGIC:
        err, cookie = struct.unpack(">IQ", recvn(s, 12))
        return ("simple", err, cookie)
    assert magic == STRUCT_MAGIC, "bad reply magic %x" % magic
    flags, typ, cookie, ln = struct.unpack(">HHQI", recvn(s, 16))
    data = recvn(s, ln)
    assert flags & FLAG_DONE, "BLOCK_STATUS answered in more than one chunk"
    if typ != REPLY_BS:
        return ("chunk", typ, data, cookie)
    ctx = struct.unpack(">I", data[:4])[0]
    assert (ln - 4) % 8 == 0 and ln > 4, "bad BLOCK_STATUS payload length %d" % ln
    ext = [struct.unpack(">II", data[i:i + 8]) for i in range(4, ln, 8)]
    return ("bs", ctx, ext, cookie)


def block_status(s, off, ln, ctx_id, flags=0, cookie=9):
    req(s, CMD_BS, off, ln, cookie=cookie, flags=flags)
    r = reply(s)
    assert r[0] == "bs", "BLOCK_STATUS answered %r" % (r,)
    assert r[1] == ctx_id and r[3] == cookie
    ext = r[2]
    total = sum(e[0] for e in ext)
    assert all(e[0] > 0 for e in ext), "zero-length extent"
    assert 0 < total <= ln, "extents cover %d of a %d-byte request" % (total, ln)
    return ext


def write(s, off, data, cookie=3):
    req(s, CMD_WRITE, off, len(data), cookie=cookie, payload=data)
    r = reply(s)
    assert r[0] == "simple" and r[1] == 0, "write failed: %r" % (r,)


def is_hole_at(ext, pos):
    at = 0
    for ln, fl in ext:
        if at <= pos < at + ln:
            return bool(fl & STATE_HOLE)
        at += ln
    raise AssertionError("position %d not covered" % pos)


# ---- cases ----

def case_list_and_set():
    s = connect_raw()
    # before structured replies: refused, and nothing is selected
    ctx, rep = meta_opt(s, OPT_SET_META, meta_data(EXP, ["base:allocation"]))
    assert rep == ERR_INVALID and not ctx, "SET before STRUCTURED_REPLY: %x" % rep
    ctx, rep = meta_opt(s, OPT_LIST_META, meta_data(EXP, []))
    assert rep == ERR_INVALID, "LIST before STRUCTURED_REPLY: %x" % rep
    sr(s)
    ctx, rep = meta_opt(s, OPT_LIST_META, meta_data(EXP, []))
    assert rep == REP_ACK and [c[1] for c in ctx] == ["base:allocation"], ctx
    ctx, rep = meta_opt(s, OPT_LIST_META, meta_data(EXP, ["base:"]))
    assert rep == REP_ACK and [c[1] for c in ctx] == ["base:allocation"], ctx
    ctx, rep = meta_opt(s, OPT_LIST_META, meta_data(EXP, ["qemu:dirty-bitmap:x"]))
    assert rep == REP_ACK and not ctx, "unknown context listed: %r" % ctx
    ctx, rep = meta_opt(s, OPT_SET_META, meta_data("no-such-export", ["base:allocation"]))
    assert rep == ERR_UNKNOWN, "SET for an unknown export: %x" % rep
    ctx, rep = meta_opt(s, OPT_SET_META, meta_data(EXP, ["x-nope:a", "base:allocation",
                                                        "base:allocation"]))
    assert rep == REP_ACK and len(ctx) == 1 and ctx[0][0] != 0, ctx
    # SET with no query selects nothing: BLOCK_STATUS is refused afterwards
    ctx, rep = meta_opt(s, OPT_SET_META, meta_data(EXP, []))
    assert rep == REP_ACK and not ctx
    go(s, EXP)
    req(s, CMD_BS, 0, 4096, cookie=5)
    r = reply(s)
    assert r[0] == "simple" and r[1] == EINVAL, "BLOCK_STATUS with nothing selected: %r" % (r,)
    s.close()


def case_malformed_options():
    s = connect_raw()
    sr(s)
    good = meta_data(EXP, ["base:allocation"])
    bad = [
        b"",                                   # too short
        b"\0\0\0",                             # too short
        struct.pack(">I", 5000) + b"x" * 8,    # name longer than the data
        struct.pack(">I", 2) + b"a\0" + struct.pack(">I", 0),   # NUL in the name
        good[:-3],                             # last query cut short
        good + b"junk",                        # data after the last query
        meta_data(EXP, []) + b"z",             # data after a zero count
        meta_data(EXP, [])[:-4] + struct.pack(">I", 0xFFFFFFFF),  # absurd count
        meta_data(EXP, [])[:-4] + struct.pack(">II", 1, 0xFFFFFFF0),  # absurd query length
    ]
    for i, d in enumerate(bad):
        for opt in (OPT_LIST_META, OPT_SET_META):
            ctx, rep = meta_opt(s, opt, d)
            assert rep == ERR_INVALID and not ctx, "malformed %d (opt %d): %x %r" % (i, opt, rep, ctx)
    # the failed SETs left nothing selected; the connection still works
    go(s, EXP)
    req(s, CMD_BS, 0, 4096, cookie=6)
    r = reply(s)
    assert r[0] == "simple" and r[1] == EINVAL, "after malformed SETs: %r" % (r,)
    req(s, CMD_READ, 0, 512, cookie=7)
    r = reply(s)
    assert r[0] == "chunk" and r[3] == 7, "read after malformed options: %r" % (r,)
    s.close()


def case_other_export():
    """A context selected for one export does not carry over to another."""
    s = connect_raw()
    sr(s)
    ctx, rep = meta_opt(s, OPT_SET_META, meta_data(EXP, ["base:allocation"]))
    assert rep == REP_ACK and ctx
    go(s, OTHER)
    req(s, CMD_BS, 0, 4096, cookie=8)
    r = reply(s)
    assert r[0] == "simple" and r[1] == EINVAL, "context used on another export: %r" % (r,)
    s.close()


def case_bad_requests():
    s, size, cid = connect_bs()
    for i, (off, ln, what) in enumerate([
            (0, 0, "length 0"),
            (size, 4096, "at the end"),
            (size - 512, 1024, "across the end"),
            ((1 << 64) - 512, 1024, "offset overflow")]):
        req(s, CMD_BS, off, ln, cookie=200 + i)
        r = reply(s)
        assert r[0] == "simple" and r[1] == EINVAL and r[2] == 200 + i, "%s: %r" % (what, r)
    req(s, CMD_BS, 0, 4096, cookie=210, flags=1 << 12)
    r = reply(s)
    assert r[0] == "simple" and r[1] == EINVAL, "unknown flag: %r" % (r,)
    # still in sync: a good one
    ext = block_status(s, 0, size if size < (1 << 32) else (1 << 32) - 4096, cid)
    assert ext, "no extents"
    s.close()


def case_holes_and_race():
    s, size, cid = connect_bs()
    whole = min(size, (1 << 32) - OBJ)
    ext = block_status(s, 0, whole, cid)
    assert ext[0][1] == STATE_HOLE | STATE_ZERO, "empty export starts with %r" % (ext[:2],)
    # REQ_ONE: one descriptor, within the request
    ext = block_status(s, 0, whole, cid, flags=CMD_FLAG_REQ_ONE)
    assert len(ext) == 1, "REQ_ONE gave %d descriptors" % len(ext)
    # a hole reads as zeros
    req(s, CMD_READ, 3 * OBJ + 100, 4096, cookie=11)
    r = reply(s)
    assert r[0] == "chunk" and r[2][8:] == b"\0" * 4096, "hole did not read as zeros"
    # the race rule, same connection: write (acknowledged), then ask
    for k, objno in enumerate((5, 9, 13)):
        off = objno * OBJ + 12345
        ext = block_status(s, objno * OBJ, OBJ, cid)
        assert is_hole_at(ext, 12345), "object %d not a hole before the write" % objno
        write(s, off, os.urandom(1000), cookie=20 + k)
        ext = block_status(s, objno * OBJ, OBJ, cid)
        assert not is_hole_at(ext, 12345), "acknowledged write reported as a hole: %r" % ext
    # pipelined: the write and the status request back to back (replies in
    # any order); the status request came after the write on the wire, so
    # the write was submitted first and must be seen
    off = 17 * OBJ
    req(s, CMD_WRITE, off, 4096, cookie=30, payload=os.urandom(4096))
    req(s, CMD_BS, off, OBJ, cookie=31)
    got = {}
    for _ in range(2):
        r = reply(s)
        got[r[-1]] = r
    assert got[30][0] == "simple" and got[30][1] == 0
    assert got[31][0] == "bs" and not is_hole_at(got[31][2], 0), "pipelined: %r" % (got[31],)
    # another connection sees a write acknowledged on this one
    t, _, cid2 = connect_bs()
    off = 21 * OBJ + 4096
    write(s, off, os.urandom(8192), cookie=40)
    ext = block_status(t, 21 * OBJ, OBJ, cid2)
    assert not is_hole_at(ext, 4096), "write on another connection hidden: %r" % ext
    t.close()
    s.close()


CASES = [case_list_and_set, case_malformed_options, case_other_export,
         case_bad_requests, case_holes_and_race]


def main():
    failed = 0
    for c in CASES:
        try:
            c()
            print("ok   %s" % c.__name__)
        except Exception as e:  # noqa: BLE001 - report every failure
            failed += 1
            print("FAIL %s: %s: %s" % (c.__name__, type(e).__name__, e))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
