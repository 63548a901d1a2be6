#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Protocol abuse against a running NBD server, with a raw socket.

usage: nbd_abuse.py SOCKET_PATH RW_EXPORT RO_EXPORT [HANDSHAKE_TIMEOUT_S]

With HANDSHAKE_TIMEOUT_S (the server's handshake_timeout), the handshake
deadline cases run too.

Each case sends broken or hostile input and checks the documented answer
(an NBD error reply with the connection still usable, or the connection
closed); after every case a fresh client must still complete a handshake and
a read.  Exits 0 when every case passed, 1 otherwise.
"""
import os
import socket
import struct
import sys
import time

NBD_MAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REP_MAGIC = 0x0003E889045565A9
REQ_MAGIC = 0x25609513
SIMPLE_MAGIC = 0x67446698
STRUCT_MAGIC = 0x668E33EF
OPT_EXPORT_NAME, OPT_ABORT, OPT_LIST, OPT_INFO, OPT_GO, OPT_SR = 1, 2, 3, 6, 7, 8
REP_ACK, REP_SERVER, REP_INFO = 1, 2, 3
ERR_UNSUP, ERR_INVALID, ERR_UNKNOWN, ERR_TOO_BIG = (1 << 31) + 1, (1 << 31) + 3, (1 << 31) + 6, (1 << 31) + 9
CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH, CMD_TRIM, CMD_CACHE, CMD_ZEROES, CMD_BS = range(8)
EPERM, EINVAL, ENOSPC, EOVERFLOW = 1, 22, 28, 75
FLAG_READ_ONLY = 1 << 1

SOCK, RW, RO = sys.argv[1], sys.argv[2], sys.argv[3]
HS_TIMEOUT = float(sys.argv[4]) if len(sys.argv) > 4 else None
TIMEOUT = 10.0


class Closed(Exception):
    pass


def recvn(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise Closed("server closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def connect_raw():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(TIMEOUT)
    s.connect(SOCK)
    magic, ver, gflags = struct.unpack(">QQH", recvn(s, 18))
    assert magic == NBD_MAGIC and ver == IHAVEOPT, "bad greeting"
    assert gflags & 1, "server is not fixed newstyle"
    s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
    return s


def send_opt(s, opt, data=b""):
    s.sendall(struct.pack(">QII", IHAVEOPT, opt, len(data)) + data)


def recv_opt_reply(s):
    magic, opt, rep, ln = struct.unpack(">QIII", recvn(s, 20))
    assert magic == REP_MAGIC, "bad option reply magic %x" % magic
    return opt, rep, recvn(s, ln)


def go(s, name, structured=False):
    """Negotiate (optionally structured replies) and GO; returns (size, eflags)."""
    if structured:
        send_opt(s, OPT_SR)
        _, rep, _ = recv_opt_reply(s)
        assert rep == REP_ACK, "STRUCTURED_REPLY refused: %x" % rep
    n = name.encode()
    send_opt(s, OPT_GO, struct.pack(">I", len(n)) + n + struct.pack(">HH", 1, 3))
    size = flags = None
    while True:
        _, rep, data = recv_opt_reply(s)
        if rep == REP_ACK:
            break
        assert rep == REP_INFO, "GO failed: %x %r" % (rep, data)
        if struct.unpack(">H", data[:2])[0] == 0:
            _, size, flags = struct.unpack(">HQH", data)
    assert size is not None, "no NBD_INFO_EXPORT"
    return size, flags


def connect(name, structured=False):
    s = connect_raw()
    size, flags = go(s, name, structured)
    return s, size, flags


def req(s, cmd, off, ln, cookie=1, flags=0, payload=b""):
    s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, flags, cmd, cookie, off, ln) + payload)


def simple_reply(s, datalen=0):
    magic, err, cookie = struct.unpack(">IIQ", recvn(s, 16))
    assert magic == SIMPLE_MAGIC, "bad reply magic %x" % magic
    data = recvn(s, datalen) if err == 0 and datalen else b""
    return err, cookie, data


def expect_closed(s):
    try:
        while True:
            if not s.recv(65536):
                return
    except ConnectionResetError:
        return
    except socket.timeout:
        raise AssertionError("server did not close the connection")


def healthy():
    """A fresh client can still handshake, write, read back and flush."""
    s, size, _ = connect(RW)
    pat = os.urandom(4096)
    req(s, CMD_WRITE, size - 4096, 4096, cookie=7, payload=pat)
    err, cookie, _ = simple_reply(s)
    assert err == 0 and cookie == 7, "write after abuse: err %d" % err
    req(s, CMD_READ, size - 4096, 4096, cookie=8)
    err, cookie, data = simple_reply(s, 4096)
    assert err == 0 and data == pat, "read after abuse failed (err %d)" % err
    req(s, CMD_DISC, 0, 0)
    expect_closed(s)
    s.close()


# ---- cases: each returns nothing and raises on failure ----

def case_garbage_in_haggling():
    s = connect_raw()
    s.sendall(os.urandom(64))
    expect_closed(s)


def case_bad_client_flags():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(TIMEOUT)
    s.connect(SOCK)
    recvn(s, 18)
    s.sendall(struct.pack(">I", 0xFFFF0000))
    expect_closed(s)


def case_unknown_option_then_go():
    s = connect_raw()
    send_opt(s, 0x4242, b"abc")
    _, rep, _ = recv_opt_reply(s)
    assert rep == ERR_UNSUP, "unknown option answered %x" % rep
    send_opt(s, 10, b"\0" * 8)   # SET_META_CONTEXT before STRUCTURED_REPLY
    _, rep, _ = recv_opt_reply(s)
    assert rep == ERR_INVALID, "SET_META_CONTEXT answered %x" % rep
    go(s, RW)
    req(s, CMD_READ, 0, 512)
    assert simple_reply(s, 512)[0] == 0


def case_bad_option_payloads():
    s = connect_raw()
    send_opt(s, OPT_LIST, b"x")
    assert recv_opt_reply(s)[1] == ERR_INVALID, "LIST with data"
    send_opt(s, OPT_INFO, b"\0\0")
    assert recv_opt_reply(s)[1] == ERR_INVALID, "short INFO"
    send_opt(s, OPT_INFO, struct.pack(">I", 1000) + b"ab" + b"\0\0")
    assert recv_opt_reply(s)[1] == ERR_INVALID, "INFO name length past the data"
    n = b"no-such-export"
    send_opt(s, OPT_INFO, struct.pack(">I", len(n)) + n + b"\0\0")
    assert recv_opt_reply(s)[1] == ERR_UNKNOWN, "unknown export"
    send_opt(s, OPT_SR, b"zz")
    assert recv_opt_reply(s)[1] == ERR_INVALID, "STRUCTURED_REPLY with data"
    send_opt(s, 0x77, b"\0" * 20000)   # longer than the server buffers
    assert recv_opt_reply(s)[1] in (ERR_TOO_BIG, ERR_UNSUP), "long option"
    send_opt(s, OPT_LIST)
    names = []
    while True:
        _, rep, data = recv_opt_reply(s)
        if rep == REP_ACK:
            break
        assert rep == REP_SERVER
        ln = struct.unpack(">I", data[:4])[0]
        names.append(data[4:4 + ln].decode())
    assert RW in names and RO in names, "LIST: %r" % names
    send_opt(s, OPT_ABORT)
    assert recv_opt_reply(s)[1] == REP_ACK
    expect_closed(s)


def case_option_flood_unread_replies():
    """Options sent without reading the replies: the server stops reading
    (its replies queue up) instead of buffering replies without bound."""
    s = connect_raw()
    s.settimeout(2.0)
    chunk = struct.pack(">QII", IHAVEOPT, OPT_LIST, 0) * 4096   # 64 KiB
    sent, limit = 0, 256 << 20
    try:
        while sent < limit:
            sent += s.send(chunk)
    except (socket.timeout, BrokenPipeError, ConnectionResetError):
        pass
    s.close()
    # about 0.3 MiB gets in (socket buffers, the read buffer); without the
    # cap the server swallowed over 7 MiB within the 1 s handshake deadline
    assert sent < (2 << 20), "server took %d MiB of options without the replies " \
        "being read" % (sent >> 20)


def case_export_name_unknown():
    s = connect_raw()
    send_opt(s, OPT_EXPORT_NAME, b"nope")
    expect_closed(s)


def case_export_name_ok():
    s = connect_raw()
    n = RW.encode()
    send_opt(s, OPT_EXPORT_NAME, n)
    size, flags = struct.unpack(">QH", recvn(s, 10))   # NO_ZEROES negotiated
    assert size > 0 and flags & 1
    req(s, CMD_READ, 0, 4096)
    assert simple_reply(s, 4096)[0] == 0


def case_bad_request_magic():
    s, _, _ = connect(RW)
    s.sendall(struct.pack(">IHHQQI", 0xDEADBEEF, 0, CMD_READ, 1, 0, 512))
    expect_closed(s)


def case_truncated_request():
    s, _, _ = connect(RW)
    s.sendall(struct.pack(">IHHQ", REQ_MAGIC, 0, CMD_READ, 1))  # 16 of 28 bytes
    s.shutdown(socket.SHUT_WR)
    expect_closed(s)


def case_truncated_write_payload():
    s, _, _ = connect(RW)
    req(s, CMD_WRITE, 0, 65536, payload=b"x" * 1000)
    s.shutdown(socket.SHUT_WR)
    expect_closed(s)


def case_range_and_length_errors():
    s, size, _ = connect(RW)
    checks = [
        (CMD_READ, 0, (64 << 20) + 512, EOVERFLOW, "oversize read (over 64 MiB)"),
        (CMD_READ, size, 512, EINVAL, "read at the end"),
        (CMD_READ, size - 512, 1024, EINVAL, "read across the end"),
        (CMD_READ, (1 << 64) - 512, 1024, EINVAL, "offset overflow"),
        (CMD_READ, 0, 0, EINVAL, "zero-length read"),
        (CMD_TRIM, size, 4096, EINVAL, "trim past the end"),
        (CMD_ZEROES, size - 1, 2, ENOSPC, "write_zeroes past the end"),
        (CMD_CACHE, size + 4096, 4096, EINVAL, "cache past the end"),
        (42, 0, 512, EINVAL, "unknown command"),
        (CMD_BS, 0, 4096, EINVAL, "block status without a meta context"),
    ]
    for i, (cmd, off, ln, want, what) in enumerate(checks):
        req(s, cmd, off, ln, cookie=100 + i)
        err, cookie, _ = simple_reply(s)
        assert cookie == 100 + i, "%s: cookie %d" % (what, cookie)
        assert err == want, "%s: got error %d, want %d" % (what, err, want)
    req(s, CMD_READ, 0, 512, cookie=1, flags=1 << 9)
    assert simple_reply(s)[0] == EINVAL, "unknown command flag"
    req(s, CMD_TRIM, 0, 4096, cookie=2, flags=1 << 4)
    assert simple_reply(s)[0] == EINVAL, "FAST_ZERO on a TRIM"
    # refused WRITEs: the payload is consumed and the stream stays in sync
    req(s, CMD_WRITE, size - 100, 200, cookie=5, payload=b"w" * 200)
    assert simple_reply(s)[0] == ENOSPC, "write past the end"
    req(s, CMD_WRITE, 0, 0, cookie=6)
    assert simple_reply(s)[0] == EINVAL, "zero-length write"
    req(s, CMD_WRITE, 0, 4096, cookie=9, payload=b"k" * 4096)
    assert simple_reply(s)[0] == 0, "good write after refused ones"
    req(s, CMD_READ, 0, 4096, cookie=10)
    err, _, data = simple_reply(s, 4096)
    assert err == 0 and data == b"k" * 4096, "read back"


def case_oversize_write_payload_consumed():
    s, _, _ = connect(RW)
    ln = (64 << 20) + 4096
    req(s, CMD_WRITE, 0, ln, cookie=3)
    s.sendall(b"\0" * ln)
    err, cookie, _ = simple_reply(s)
    assert cookie == 3 and err in (EOVERFLOW, EINVAL), "oversize write: %d" % err
    req(s, CMD_READ, 0, 512, cookie=4)
    assert simple_reply(s, 512)[0] == 0


def case_read_only_export():
    s, size, flags = connect(RO)
    assert flags & FLAG_READ_ONLY, "read-only export without READ_ONLY flag"
    req(s, CMD_WRITE, 0, 4096, cookie=1, payload=b"r" * 4096)
    assert simple_reply(s)[0] == EPERM, "write to read-only export"
    req(s, CMD_TRIM, 0, 4096, cookie=2)
    assert simple_reply(s)[0] == EPERM, "trim on read-only export"
    req(s, CMD_ZEROES, 0, 4096, cookie=3)
    assert simple_reply(s)[0] == EPERM, "zeroes on read-only export"
    req(s, CMD_READ, 0, 4096, cookie=4)
    err, _, data = simple_reply(s, 4096)
    assert err == 0 and len(data) == 4096


def case_structured_replies():
    s, size, _ = connect(RW, structured=True)
    req(s, CMD_WRITE, 8192, 4096, cookie=11, payload=b"s" * 4096)
    assert simple_reply(s)[0] == 0
    req(s, CMD_READ, 8192, 4096, cookie=12)
    magic, fl, typ, cookie, ln = struct.unpack(">IHHQI", recvn(s, 20))
    assert magic == STRUCT_MAGIC and typ == 1 and fl & 1 and cookie == 12
    body = recvn(s, ln)
    assert struct.unpack(">Q", body[:8])[0] == 8192 and body[8:] == b"s" * 4096
    req(s, CMD_READ, size, 4096, cookie=13)
    magic, fl, typ, cookie, ln = struct.unpack(">IHHQI", recvn(s, 20))
    assert magic == STRUCT_MAGIC and typ == (1 << 15) + 1 and cookie == 13
    assert struct.unpack(">I", recvn(s, ln)[:4])[0] == EINVAL


def case_pipelined_out_of_order():
    """Many requests in flight; every cookie answered once, data right."""
    s, _, _ = connect(RW)
    n = 300
    blob = b"".join(struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_WRITE, i, i * 4096, 4096)
                    + bytes([i % 251]) * 4096 for i in range(n))
    s.sendall(blob)   # far above the per-connection caps: backpressure, not errors
    seen = set()
    for _ in range(n):
        err, cookie, _ = simple_reply(s)
        assert err == 0, "pipelined write error %d" % err
        seen.add(cookie)
    assert seen == set(range(n)), "missing cookies"
    req(s, CMD_FLUSH, 0, 0, cookie=999)
    assert simple_reply(s)[0] == 0
    s.sendall(b"".join(struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_READ, i, i * 4096, 4096)
                       for i in range(n)))
    for _ in range(n):
        err, cookie, data = simple_reply(s, 4096)
        assert err == 0 and data == bytes([cookie % 251]) * 4096, "readback %d" % cookie


def case_disconnect_mid_flight():
    s, _, _ = connect(RW)
    for i in range(64):
        req(s, CMD_READ, i * 65536, 65536, cookie=i)
    s.close()   # replies have nowhere to go


# ---- handshake deadline (only with HANDSHAKE_TIMEOUT_S) ----

def closed_by_deadline(s, what):
    """The server closes s after about HS_TIMEOUT seconds, not before."""
    t0 = time.monotonic()
    s.settimeout(HS_TIMEOUT + 3)
    expect_closed(s)
    dt = time.monotonic() - t0
    assert dt >= HS_TIMEOUT * 0.5, "%s: closed after %.2f s, before the deadline" % (what, dt)
    assert dt <= HS_TIMEOUT + 2, "%s: closed only after %.2f s" % (what, dt)
    s.close()


def hs_case_silent_client():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(SOCK)            # not even the greeting is read
    closed_by_deadline(s, "silent client")


def hs_case_client_flags_only():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(TIMEOUT)
    s.connect(SOCK)
    recvn(s, 18)
    s.sendall(struct.pack(">I", 3))
    closed_by_deadline(s, "client flags only")


def hs_case_haggling_forever():
    s = connect_raw()
    send_opt(s, OPT_LIST)
    while recv_opt_reply(s)[1] != REP_ACK:
        pass
    closed_by_deadline(s, "options but never GO")


def hs_case_idle_transmission_kept():
    s, _, _ = connect(RW)
    time.sleep(HS_TIMEOUT + 1)  # past the deadline: transmission is not timed
    req(s, CMD_READ, 0, 512, cookie=77)
    err, cookie, _ = simple_reply(s, 512)
    assert err == 0 and cookie == 77, "idle connection in transmission was dropped"


CASES = [v for k, v in sorted(globals().items()) if k.startswith("case_")]
if HS_TIMEOUT is not None:
    CASES += [v for k, v in sorted(globals().items()) if k.startswith("hs_case_")]


def main():
    failed = 0
    healthy()
    for c in CASES:
        name = c.__name__.split("case_", 1)[1]
        try:
            c()
            healthy()
            print("ok   %s" % name)
        except (AssertionError, Closed, OSError) as e:
            failed += 1
            print("FAIL %s: %s" % (name, e))
    print("%d/%d abuse cases passed" % (len(CASES) - failed, len(CASES)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
