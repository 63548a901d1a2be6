#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The service contract of tierd with systemd, without systemd as PID 1.

usage: notify.py TIERD WORKDIR

Binds an AF_UNIX SOCK_DGRAM socket, starts TIERD (local backend, a unix and
a TCP listener, two images) with NOTIFY_SOCKET and WATCHDOG_USEC pointing at
it, and checks what sd_notify(3) says, as systemd would read it (each
datagram's sender from SCM_CREDENTIALS: NotifyAccess=main):

  - STATUS= lines during start-up, before READY=1;
  - READY=1 only when the pools and listeners are up: the NBD greeting is
    read on both listeners and both images answer nbdinfo, with no retry,
    right after READY=1 arrives;
  - WATCHDOG=1 at about half of WATCHDOG_USEC;
  - on SIGHUP: RELOADING=1 with MONOTONIC_USEC= (CLOCK_MONOTONIC, now), then
    READY=1 whose STATUS= counts the image the reload added; a reload of a
    broken file: RELOADING=1, then READY=1 with STATUS= saying it failed;
  - on SIGTERM: STOPPING=1, then exit 0;
  - a start-up that fails (a listener in a missing directory): no READY=1,
    STATUS= and ERRNO= say why, exit status 1.

Exits 0 when every check passed, 1 at the first failure.
"""
import os
import signal
import socket
import struct
import subprocess
import sys
import time

TIERD, WORK = sys.argv[1], sys.argv[2]
NSOCK = os.path.join(WORK, "notify.sock")
SOCK = os.path.join(WORK, "nbd.sock")
CONF = os.path.join(WORK, "tierd.conf")
LOG = os.path.join(WORK, "tierd.log")
WATCHDOG_USEC = 1_000_000
SO_PASSCRED = getattr(socket, "SO_PASSCRED", 16)
SCM_CREDENTIALS = getattr(socket, "SCM_CREDENTIALS", 2)


PROCS = []      # every tierd started, killed on failure


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    for p in PROCS:
        if p.poll() is None:
            p.kill()
            p.wait()
    try:
        with open(LOG) as f:
            print("---- tierd log (tail) ----\n" + "".join(f.readlines()[-30:]),
                  file=sys.stderr)
    except OSError:
        pass
    sys.exit(1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


PORT = free_port()


def write_config(images, broken=False, listen_dir=WORK):
    with open(CONF, "w") as f:
        f.write("[global]\nbackend = local\n")
        f.write("listen = unix:%s/nbd.sock\nlisten = 127.0.0.1:%d\n" % (listen_dir, PORT))
        f.write("admin_socket = %s/tierd.asok\n" % WORK)
        f.write("[local]\ndata_dir = %s/data\nbase_profile = none\ncache_profile = none\n"
                % WORK)
        f.write("[tier]\ntarget_max_bytes = 64M\n")
        if broken:
            f.write("hit_set_count = 99\n")
        for name in images:
            f.write("[image.%s]\nsize = 32M\n" % name)


class Notify:
    """The receiving end of NOTIFY_SOCKET: (time, sender pid, {key: value})."""

    def __init__(self):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.s.bind(NSOCK)
        self.s.setsockopt(socket.SOL_SOCKET, SO_PASSCRED, 1)
        self.pid = None
        self.seen = []

    def recv(self, timeout):
        self.s.settimeout(max(timeout, 0.001))
        try:
            data, anc, _, _ = self.s.recvmsg(4096, socket.CMSG_SPACE(12))
        except socket.timeout:
            return None
        pid = None
        for level, typ, cdata in anc:
            if level == socket.SOL_SOCKET and typ == SCM_CREDENTIALS:
                pid = struct.unpack("iII", cdata[:12])[0]
        if self.pid is not None and pid != self.pid:
            fail("notification from pid %s, not tierd's main pid %d: %r"
                 % (pid, self.pid, data))
        msg = {}
        for line in data.decode().split("\n"):
            if line:
                k, _, v = line.partition("=")
                msg[k] = v
        item = (time.monotonic(), msg)
        self.seen.append(item)
        return item

    def wait_for(self, key, timeout, value=None, proc=None):
        """Messages until one has key (=value); the list of all read, that one last."""
        got, end = [], time.monotonic() + timeout
        while time.monotonic() < end:
            item = self.recv(min(0.2, end - time.monotonic()))
            if item is None:
                if proc is not None and proc.poll() is not None:
                    fail("tierd exited (%d) waiting for %s" % (proc.returncode, key))
                continue
            got.append(item)
            if key in item[1] and (value is None or item[1][key] == value):
                return got
        fail("no %s%s within %.0f s; got %r" % (key, "=" + value if value else "", timeout,
                                                [m for _, m in got]))


def greeting(family, addr):
    """The first 16 bytes of the NBD handshake: NBDMAGIC, IHAVEOPT."""
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(addr)
    data = b""
    while len(data) < 16:
        chunk = s.recv(16 - len(data))
        if not chunk:
            break
        data += chunk
    s.close()
    return data


def check_served(names):
    for fam, addr in ((socket.AF_UNIX, SOCK), (socket.AF_INET, ("127.0.0.1", PORT))):
        g = greeting(fam, addr)
        if g[:8] != b"NBDMAGIC" or g[8:16] != b"IHAVEOPT":
            fail("right after READY=1, listener %r answered %r, not the NBD greeting"
                 % (addr, g))
    for name in names:
        r = subprocess.run(["nbdinfo", "--size", "nbd+unix:///%s?socket=%s" % (name, SOCK)],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0 or r.stdout.strip() != str(32 << 20):
            fail("right after READY=1, nbdinfo of %s: rc %d, %r %r"
                 % (name, r.returncode, r.stdout, r.stderr))


def start(n):
    env = dict(os.environ, NOTIFY_SOCKET=NSOCK, WATCHDOG_USEC=str(WATCHDOG_USEC))
    env.pop("WATCHDOG_PID", None)
    env.pop("JOURNAL_STREAM", None)
    with open(LOG, "a") as log:
        proc = subprocess.Popen([TIERD, "--config", CONF], env=env, stderr=log)
    n.pid = proc.pid
    PROCS.append(proc)
    return proc


def main():
    subprocess.run(["nbdinfo", "--version"], capture_output=True, check=True)
    n = Notify()

    # ---- start-up: STATUS= lines, then READY=1 with everything up
    write_config(["a", "b"])
    proc = start(n)
    got = n.wait_for("READY", 60, "1", proc)
    check_served(["a", "b"])
    before = [m for _, m in got[:-1]]
    if not any("STATUS" in m for m in before):
        fail("no STATUS= line before READY=1: %r" % before)
    if got[-1][1].get("STATUS") != "serving 2 image(s)":
        fail("READY=1 came with STATUS=%r" % got[-1][1].get("STATUS"))
    print("ok: READY=1 after %d STATUS= line(s); both listeners greet and both images "
          "answer at once" % len(before))

    # ---- watchdog: WATCHDOG=1 every WATCHDOG_USEC / 2
    t0 = time.monotonic()
    pings = []
    while time.monotonic() - t0 < 3.2:
        item = n.recv(3.2 - (time.monotonic() - t0))
        if item and item[1].get("WATCHDOG") == "1":
            pings.append(item[0])
    if len(pings) < 4:
        fail("%d WATCHDOG=1 in 3.2 s with WATCHDOG_USEC=%d (want about 6)"
             % (len(pings), WATCHDOG_USEC))
    gaps = [b - a for a, b in zip(pings, pings[1:])]
    mean = sum(gaps) / len(gaps)
    if not 0.3 <= mean <= 0.7 or max(gaps) >= WATCHDOG_USEC / 1e6:
        fail("WATCHDOG=1 gaps %r (mean %.3f s): want about %.1f s, none reaching the "
             "timeout" % (gaps, mean, WATCHDOG_USEC / 2e6))
    print("ok: %d WATCHDOG=1 in 3.2 s, mean gap %.3f s, max %.3f s (WATCHDOG_USEC=%d)"
          % (len(pings), mean, max(gaps), WATCHDOG_USEC))

    # ---- SIGHUP: RELOADING=1 + MONOTONIC_USEC, then READY=1 with the new image
    write_config(["a", "b", "c"])
    now_us = time.monotonic_ns() // 1000
    proc.send_signal(signal.SIGHUP)
    got = n.wait_for("RELOADING", 10, "1", proc)
    mono = got[-1][1].get("MONOTONIC_USEC")
    if mono is None or not mono.isdigit():
        fail("RELOADING=1 without MONOTONIC_USEC=: %r" % got[-1][1])
    if abs(int(mono) - now_us) > 5_000_000:
        fail("MONOTONIC_USEC=%s is not CLOCK_MONOTONIC now (%d)" % (mono, now_us))
    if any("READY" in m for _, m in got):
        fail("READY=1 before RELOADING=1: %r" % [m for _, m in got])
    got = n.wait_for("READY", 30, "1", proc)
    if got[-1][1].get("STATUS") != "serving 3 image(s)":
        fail("READY=1 after the reload came with STATUS=%r" % got[-1][1].get("STATUS"))
    check_served(["a", "b", "c"])
    print("ok: SIGHUP: RELOADING=1 (MONOTONIC_USEC %+d us from the signal), then READY=1 "
          "serving 3 images" % (int(mono) - now_us))

    write_config(["a", "b", "c"], broken=True)
    proc.send_signal(signal.SIGHUP)
    n.wait_for("RELOADING", 10, "1", proc)
    got = n.wait_for("READY", 30, "1", proc)
    st = got[-1][1].get("STATUS", "")
    if "reload failed" not in st or "hit_set_count" not in st:
        fail("READY=1 after a broken reload came with STATUS=%r" % st)
    print("ok: a broken reload: RELOADING=1, READY=1, STATUS=%r" % st)

    # ---- SIGTERM: STOPPING=1, exit 0
    proc.send_signal(signal.SIGTERM)
    n.wait_for("STOPPING", 10, "1", proc)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        fail("tierd did not exit within 60 s of SIGTERM")
    if rc != 0:
        fail("tierd exited %d after SIGTERM, want 0" % rc)
    while n.recv(0.2) is not None:     # the stopping daemon's last STATUS= lines
        pass
    print("ok: SIGTERM: STOPPING=1, exit 0")

    # ---- a failed start-up: no READY=1, STATUS= and ERRNO=, exit 1
    write_config(["a"], listen_dir=os.path.join(WORK, "missing"))
    proc = start(n)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        fail("tierd with a listener in a missing directory did not exit")
    msgs = []
    while True:
        item = n.recv(0.2)
        if item is None:
            break
        msgs.append(item[1])
    if any(m.get("READY") == "1" for m in msgs):
        fail("READY=1 from a start-up that failed: %r" % msgs)
    last = [m for m in msgs if "ERRNO" in m]
    if rc != 1 or not last or "start-up failed" not in last[-1].get("STATUS", ""):
        fail("failed start-up: exit %d, notifications %r" % (rc, msgs))
    print("ok: failed start-up: no READY=1, STATUS=%r ERRNO=%s, exit 1"
          % (last[-1]["STATUS"], last[-1]["ERRNO"]))


if __name__ == "__main__":
    main()
