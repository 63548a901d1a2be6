#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Acknowledged writes survive a SIGTERM drain.

usage: nbd_drain.py write SOCKET EXPORT STATE   (runs until the server closes)
       nbd_drain.py verify SOCKET EXPORT STATE

write: keeps 32 4 KiB writes in flight at random 4 KiB slots (never two on
the same slot at once), each block stamped with (slot, sequence); records
the last acknowledged sequence per slot, and the sequence still in flight
when the connection ended.  verify: every slot must hold its last
acknowledged block, or the one that was in flight (the server may have
finished it without the reply getting out).  Exit 0 on success.
"""
import json
import random
import socket
import struct
import sys
import time

REQ_MAGIC, SIMPLE_MAGIC = 0x25609513, 0x67446698
SLOTS, QD, BS = 4096, 32, 4096


def recvn(s, n):
    buf = b""
    while len(buf) < n:
        c = s.recv(n - len(buf))
        if not c:
            raise EOFError
        buf += c
    return buf


def connect(path, name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(path)
    recvn(s, 18)
    s.sendall(struct.pack(">I", 3))
    n = name.encode()
    s.sendall(struct.pack(">QII", 0x49484156454F5054, 7, 6 + len(n)) + struct.pack(">I", len(n)) + n + b"\0\0")
    while True:
        _, _, rep, ln = struct.unpack(">QIII", recvn(s, 20))
        recvn(s, ln)
        if rep == 1:
            return s
        if rep != 3:
            raise SystemExit("GO refused: %x" % rep)


def block(slot, seq):
    return struct.pack(">QQ", slot, seq) * (BS // 16)


def do_write(path, name, state):
    s = connect(path, name)
    rnd = random.Random(42)
    acked, inflight, seq, done = {}, {}, 0, 0
    deadline = time.time() + 120
    try:
        while time.time() < deadline:
            while len(inflight) < QD:
                slot = rnd.randrange(SLOTS)
                if slot in inflight:
                    continue
                seq += 1
                inflight[slot] = seq
                s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, 1, slot, slot * BS, BS) + block(slot, seq))
            magic, err, slot = struct.unpack(">IIQ", recvn(s, 16))
            if magic != SIMPLE_MAGIC or err:
                raise SystemExit("bad reply magic %x err %d" % (magic, err))
            acked[slot] = inflight.pop(slot)
            done += 1
    except (EOFError, ConnectionResetError, BrokenPipeError):
        pass
    json.dump({"acked": acked, "inflight": inflight}, open(state, "w"))
    print("writer: %d writes acknowledged, %d in flight when the server closed" % (done, len(inflight)))
    return 0 if done > 0 else 1


def do_verify(path, name, state):
    st = json.load(open(state))
    acked = {int(k): v for k, v in st["acked"].items()}
    inflight = {int(k): v for k, v in st["inflight"].items()}
    s = connect(path, name)
    bad = 0
    for slot in sorted(set(acked) | set(inflight)):
        s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, 0, slot, slot * BS, BS))
        magic, err, _ = struct.unpack(">IIQ", recvn(s, 16))
        if err:
            raise SystemExit("read error %d" % err)
        data = recvn(s, BS)
        ok = [block(slot, acked[slot])] if slot in acked else [b"\0" * BS]
        if slot in inflight:
            ok.append(block(slot, inflight[slot]))
        if data not in ok:
            bad += 1
            got = struct.unpack(">QQ", data[:16])
            if bad < 5:
                print("slot %d: got (slot,seq)=%r, want seq %s" % (slot, got, [acked.get(slot), inflight.get(slot)]))
    print("verify: %d slots checked, %d wrong" % (len(set(acked) | set(inflight)), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    mode, path, name, state = sys.argv[1:5]
    sys.exit(do_write(path, name, state) if mode == "write" else do_verify(path, name, state))
