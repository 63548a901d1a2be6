#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""FLUSH storm: k NBD FLUSHes in flight over N dirty objects.

Used by tools/bench/bench-durability.sh.  Per round: write BS bytes into each of
N distinct objects (offset i * OBJECT_SIZE, at most --write-qd writes in
flight), wait for all of them, then issue k FLUSHes at once with libnbd's
aio API and time each until it completes.  Rounds cycle through --ks
(1,8,64,1,8,64,...) so every k sees the same conditions; a warm-up round
(dirty + one FLUSH, not reported) comes first, so the measured rounds
rewrite objects that are already cached.

Prints one line per round and, at the end, per k: the median over rounds of
the time until all k FLUSHes completed, of the mean per-FLUSH latency
(completion - issue), and its ratio to k=1.  If the k FLUSHes are not all
answered within --timeout seconds it prints "NO ANSWER" and exits 3 (the
caller kills the server).  Needs python3-libnbd (/usr/bin/python3).
"""
import argparse
import statistics
import sys
import time

import nbd


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper()
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("uri")
    ap.add_argument("--objects", type=int, default=1000)
    ap.add_argument("--object-size", default="4M")
    ap.add_argument("--bs", default="4K")
    ap.add_argument("--ks", default="1,8,64")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per k")
    ap.add_argument("--write-qd", type=int, default=32)
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds to wait for one round's k FLUSHes")
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    osz, bs = parse_size(a.object_size), parse_size(a.bs)
    ks = [int(x) for x in a.ks.split(",")]

    h = nbd.NBD()
    h.connect_uri(a.uri)
    size = h.get_size()
    if a.objects * osz > size:
        sys.exit("image too small: %d objects of %d > %d" % (a.objects, osz, size))
    if not h.can_flush():
        sys.exit("server does not advertise FLUSH")

    def poll_until(pending, deadline):
        while pending() and time.monotonic() < deadline:
            h.poll(100)      # ms
        return not pending()

    def dirty(rnd):
        data = bytes([rnd & 0xFF]) * bs
        buf = nbd.Buffer.from_bytearray(bytearray(data))
        t0 = time.monotonic()
        nxt = 0
        inflight = [0]
        errors = [0]

        def done(err):
            inflight[0] -= 1
            if err.value:
                errors[0] += 1
            return 1

        deadline = t0 + a.timeout
        while nxt < a.objects or inflight[0]:
            while nxt < a.objects and inflight[0] < a.write_qd:
                h.aio_pwrite(buf, nxt * osz, completion=done)
                inflight[0] += 1
                nxt += 1
            h.poll(100)
            if time.monotonic() > deadline:
                print("%sNO ANSWER: writes still in flight after %.0f s" %
                      (a.label, a.timeout), flush=True)
                sys.exit(3)
        if errors[0]:
            sys.exit("%d writes failed" % errors[0])
        return time.monotonic() - t0

    def storm(k):
        t_done = [None] * k
        errors = [0]

        def mk(i):
            def cb(err):
                t_done[i] = time.monotonic()
                if err.value:
                    errors[0] += 1
                return 1
            return cb

        t0 = time.monotonic()
        for i in range(k):
            h.aio_flush(completion=mk(i))
        ok = poll_until(lambda: any(t is None for t in t_done), t0 + a.timeout)
        if not ok:
            n = sum(t is not None for t in t_done)
            return None, n
        if errors[0]:
            sys.exit("%d FLUSHes failed" % errors[0])
        lat = [t - t0 for t in t_done]
        return (max(lat), statistics.mean(lat), min(lat)), k

    # warm-up: create the cache copies, then make them durable once
    dirty(255)
    res, _ = storm(1)
    if res is None:
        print("%sNO ANSWER: warm-up FLUSH not answered in %.0f s" % (a.label, a.timeout),
              flush=True)
        sys.exit(3)

    results = {k: [] for k in ks}
    rnd = 0
    for _ in range(a.rounds):
        for k in ks:
            rnd += 1
            wt = dirty(rnd)
            res, n = storm(k)
            if res is None:
                print("%sround %d k=%d: dirty %d objects %.0f ms; NO ANSWER: %d of %d "
                      "FLUSHes answered in %.0f s" % (a.label, rnd, k, a.objects,
                                                      wt * 1e3, n, k, a.timeout),
                      flush=True)
                sys.exit(3)
            tot, mean, first = res
            results[k].append(res)
            print("%sround %d k=%-3d dirty %d objects %7.0f ms | all %d FLUSHes %8.1f ms, "
                  "per FLUSH mean %8.1f ms, first %8.1f ms" %
                  (a.label, rnd, k, a.objects, wt * 1e3, k, tot * 1e3, mean * 1e3,
                   first * 1e3), flush=True)
    h.shutdown()

    base = statistics.median(r[0] for r in results[ks[0]])
    for k in ks:
        tot = statistics.median(r[0] for r in results[k])
        mean = statistics.median(r[1] for r in results[k])
        print("%sSUMMARY k=%d rounds=%d all_done_ms=%.1f per_flush_ms=%.1f "
              "all_done_vs_k%d=%.2f" % (a.label, k, len(results[k]), tot * 1e3,
                                        mean * 1e3, ks[0], tot / base), flush=True)


if __name__ == "__main__":
    main()
