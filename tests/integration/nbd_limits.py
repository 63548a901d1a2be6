#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Limits that must hold against a running tierd, one case per run.

usage: nbd_limits.py CASE SOCKET_PATH EXPORT [ARGS...]

Cases (each exits 0 when the limit held, 1 with a message otherwise):
  maxconn N            N idle connections reach transmission; the next ones
                       are closed before the greeting; a client connected
                       before them still reads and writes
  flood N [MAX]        a connected client keeps reading and writing correctly
                       while N more connections are opened (descriptors run
                       out in tierd, not in its connected clients); with MAX,
                       at most MAX - 1 of them are greeted
  global_cap           three connections each send a 32 MiB WRITE; with
                       max_bytes_in_flight = 64M the third payload is not
                       taken while the first two are in the engine
  stall TIMEOUT_S      a WRITE payload that stops (and one that trickles a
                       byte at a time) is cut after the transmission timeout
  unread SECONDS       clients pipelining READs and never reading the replies
                       (left open for SIGTERM)
  admin ASOK TIMEOUT_S admin socket: a silent client is closed after the
                       timeout; one that never reads its answers is stopped
                       being read (bounded queue), then closed
  prom PORT TIMEOUT_S  Prometheus: silent connections closed after the
                       timeout, at most 64 held at once, scrapes still work
  bigwrites PID MIB S  16 clients pipeline 32 MiB WRITEs and never read the
                       replies for S seconds: tierd's peak RSS stays below MIB
"""
import os
import socket
import struct
import sys
import threading
import time

CASE, SOCK, EXPORT = sys.argv[1], sys.argv[2], sys.argv[3]
ARGS = sys.argv[4:]
sys.argv = [sys.argv[0], SOCK, EXPORT, EXPORT]
import nbd_abuse as nb  # noqa: E402


def die(msg):
    print("FAIL %s: %s" % (CASE, msg))
    sys.exit(1)


def rw_check(s, off, cookie):
    data = os.urandom(65536)
    nb.req(s, nb.CMD_WRITE, off, len(data), cookie=cookie, payload=data)
    err, c, _ = nb.simple_reply(s)
    if err or c != cookie:
        die("write on a connected client failed: error %d" % err)
    nb.req(s, nb.CMD_READ, off, len(data), cookie=cookie + 1)
    err, c, back = nb.simple_reply(s, len(data))
    if err or back != data:
        die("read on a connected client failed: error %d" % err)


def greeted(s):
    """True if the server sent its NBD greeting, False if it closed first."""
    try:
        b = s.recv(18)
    except (ConnectionResetError, socket.timeout):
        return False
    return len(b) > 0


def raw_conn(timeout=5.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(SOCK)
    return s


def case_maxconn():
    n = int(ARGS[0])
    first, _, _ = nb.connect(EXPORT)
    held = [first]
    for _ in range(n - 1):
        s, _, _ = nb.connect(EXPORT)
        held.append(s)
    refused = 0
    for _ in range(5):
        s = raw_conn()
        if greeted(s):
            die("connection %d beyond max_connections %d was greeted" % (len(held) + 1, n))
        refused += 1
        s.close()
    for i, s in enumerate(held):
        rw_check(s, i * 65536, 10 + 2 * i)
    held[-1].close()
    time.sleep(0.3)
    s, _, _ = nb.connect(EXPORT)     # a freed slot is usable again
    rw_check(s, 0, 99)
    print("ok maxconn: %d served, %d refused before the greeting" % (n, refused))


def case_flood():
    n = int(ARGS[0])
    first, _, _ = nb.connect(EXPORT)
    socks, greeted_n = [], 0
    for i in range(n):
        for _ in range(100):      # a full backlog (unix: EAGAIN) drains as tierd accepts
            try:
                s = raw_conn(2.0)
                break
            except BlockingIOError:
                time.sleep(0.02)
        else:
            die("connect %d: backlog never drained" % i)
        socks.append(s)
    for s in socks:
        greeted_n += greeted(s)
    for i in range(8):      # new objects: the store needs descriptors for them
        rw_check(first, (10 + i) * (4 << 20), 100 + 2 * i)
    if len(ARGS) > 1 and greeted_n > int(ARGS[1]) - 1:
        die("%d connections greeted besides the first, max_connections is %s"
            % (greeted_n, ARGS[1]))
    print("ok flood: %d opened, %d greeted, %d closed at once; the connected client "
          "kept reading and writing" % (n, greeted_n, n - greeted_n))
    for s in socks:
        s.close()


def case_global_cap():
    big = 32 << 20
    conns = [nb.connect(EXPORT)[0] for _ in range(3)]
    payload = b"\xab" * big
    t0 = time.monotonic()
    for i, s in enumerate(conns[:2]):
        nb.req(s, nb.CMD_WRITE, i * big, big, cookie=1 + i, payload=payload)
    took2 = time.monotonic() - t0
    s = conns[2]
    s.settimeout(1.5)
    hdr = struct.pack(">IHHQQI", nb.REQ_MAGIC, 0, nb.CMD_WRITE, 3, 2 * big, big)
    sent = 0
    try:
        s.sendall(hdr)
        view = memoryview(payload)
        while sent < big:
            sent += s.send(view[sent:sent + (1 << 20)])
    except socket.timeout:
        pass
    if sent >= big:
        die("the third 32 MiB payload was taken with 64 MiB already in flight "
            "(first two sent in %.1f s)" % took2)
    s.settimeout(120)
    rest = threading.Thread(target=s.sendall, args=(memoryview(payload)[sent:],))
    rest.start()     # taken once the budget has room again
    for i, c in enumerate(conns[:2]):
        err, cookie, _ = nb.simple_reply(c)
        if err:
            die("write %d failed: %d" % (i, err))
    rest.join()
    err, _, _ = nb.simple_reply(s)
    if err:
        die("the held write failed once the budget freed: %d" % err)
    print("ok global_cap: third payload held at %d of %d bytes while 64 MiB were in "
          "flight, then completed" % (sent, big))


def case_stall():
    tmo = float(ARGS[0])
    for kind in ("stop", "trickle"):
        s, _, _ = nb.connect(EXPORT)
        nb.req(s, nb.CMD_WRITE, 0, 1 << 20, cookie=5)
        s.sendall(b"x" * 1000)
        t0 = time.monotonic()
        s.settimeout(0.25)
        closed = False
        while time.monotonic() - t0 < tmo + 10:
            try:
                if kind == "trickle":
                    s.sendall(b"y")
                b = s.recv(4096)
                if not b:
                    closed = True
                    break
            except socket.timeout:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
        took = time.monotonic() - t0
        if not closed:
            die("%s: a stalled WRITE payload was held %.1f s" % (kind, took))
        if took < tmo * 0.8:
            die("%s: cut after %.2f s, before the %.1f s timeout" % (kind, took, tmo))
        print("ok stall %s: cut after %.1f s (transmission_timeout %.1f s)" % (kind, took, tmo))
    s, _, _ = nb.connect(EXPORT)
    rw_check(s, 0, 7)


def case_unread():
    conns = []
    for _ in range(int(ARGS[0]) if ARGS else 4):
        s, _, _ = nb.connect(EXPORT)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        for i in range(32):
            nb.req(s, nb.CMD_READ, i << 20, 1 << 20, cookie=i)
        conns.append(s)
    print("ready", flush=True)
    sys.stdin.read()     # hold until the caller closes our stdin


def case_admin():
    asok, tmo = ARGS[0], float(ARGS[1])

    def conn():
        a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        a.connect(asok)
        return a

    def served():
        a = conn()
        a.settimeout(5)
        a.sendall(b"status\n")
        buf = b""
        while not buf.endswith(b"\n"):
            b = a.recv(65536)
            if not b:
                return False
            buf += b
        a.close()
        return b"{" in buf

    silent = conn()
    silent.settimeout(tmo + 10)
    t0 = time.monotonic()
    if silent.recv(1) != b"":
        die("silent admin client got data")
    took = time.monotonic() - t0
    if took < tmo * 0.8 or took > tmo + 5:
        die("silent admin client closed after %.1f s (timeout %.1f s)" % (took, tmo))
    # a client that sends commands and never reads the answers
    greedy = conn()
    greedy.setblocking(False)
    line = b"perf dump\n" * 1000
    sent, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < 3:
        try:
            sent += greedy.send(line)
        except BlockingIOError:
            time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            break
    if sent >= 4 << 20:
        die("tierd kept reading %d bytes of commands whose answers were not read" % sent)
    if not served():
        die("admin socket not served while a client does not read")
    greedy.settimeout(tmo + 10)
    t0 = time.monotonic()
    try:
        while True:
            time.sleep(0.2)
            greedy.send(b"status\n")
            if time.monotonic() - t0 > tmo + 8:
                die("a client that never reads its answers was not closed")
    except (BrokenPipeError, ConnectionResetError, BlockingIOError):
        pass
    if not served():
        die("admin socket not served afterwards")
    print("ok admin: silent closed after %.1f s; unread answers: %d bytes of commands "
          "taken, then closed" % (took, sent))


def case_prom():
    port, tmo = int(ARGS[0]), float(ARGS[1])
    socks = []
    for _ in range(100):
        s = socket.create_connection(("127.0.0.1", port))
        s.settimeout(tmo + 10)
        socks.append(s)
    time.sleep(0.5)
    t0 = time.monotonic()
    closed_at_once, closed = 0, 0
    for s in socks:
        s.settimeout(0.01)
        try:
            if s.recv(1) == b"":
                closed_at_once += 1
        except socket.timeout:
            pass
        except ConnectionResetError:
            closed_at_once += 1
    if closed_at_once < 100 - 64:
        die("%d of 100 silent scrapes closed at once, want >= 36 (at most 64 held)" % closed_at_once)
    for s in socks:
        s.settimeout(tmo + 10)
        try:
            if s.recv(1) == b"":
                closed += 1
        except ConnectionResetError:
            closed += 1
    took = time.monotonic() - t0
    if closed != 100 or took > tmo + 5:
        die("%d of 100 silent Prometheus clients closed in %.1f s" % (closed, took))
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
    buf = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        buf += b
    if not buf.startswith(b"HTTP/1.0 200"):
        die("scrape after the silent clients: %r" % buf[:40])
    print("ok prom: %d of 100 refused at once (64 max), all closed within %.1f s, "
          "scrape served" % (closed_at_once, took))


def vm_kib(pid, key):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def case_bigwrites():
    """16 clients pipeline 32 MiB WRITEs and never read a reply."""
    pid, limit_mib, secs = int(ARGS[0]), int(ARGS[1]), float(ARGS[2])
    base = vm_kib(pid, "VmRSS")
    payload = b"\xcd" * (32 << 20)
    conns = [nb.connect(EXPORT)[0] for _ in range(16)]

    def flood(s, k):
        try:
            for i in range(4):
                nb.req(s, nb.CMD_WRITE, ((k * 4 + i) % 8) << 25, len(payload),
                       cookie=i, payload=payload)
        except OSError:
            pass        # closed below

    ts = [threading.Thread(target=flood, args=(s, k), daemon=True) for k, s in enumerate(conns)]
    for t in ts:
        t.start()
    t0, peak = time.monotonic(), 0
    while time.monotonic() - t0 < secs:
        peak = max(peak, vm_kib(pid, "VmRSS"))
        time.sleep(0.1)
    hwm = vm_kib(pid, "VmHWM")
    for s in conns:
        s.close()
    print("bigwrites: tierd RSS %d MiB before, %d MiB peak sampled, VmHWM %d MiB "
          "(16 clients x 4 x 32 MiB WRITEs, replies never read, %.0f s)"
          % (base // 1024, peak // 1024, hwm // 1024, secs))
    if hwm // 1024 > limit_mib:
        die("tierd peak RSS %d MiB > %d MiB" % (hwm // 1024, limit_mib))


{"maxconn": case_maxconn, "bigwrites": case_bigwrites, "flood": case_flood, "global_cap": case_global_cap,
 "stall": case_stall, "unread": case_unread, "admin": case_admin,
 "prom": case_prom}[CASE]()
