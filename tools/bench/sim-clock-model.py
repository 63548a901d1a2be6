#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tools/bench/sim-clock-model.py - a clock over extents, as a model, on a trace.

    sim-clock-model.py TRACE CACHE_BYTES VARIANT...   [--objects N] [--warmup N] [--dirty]

The request sequence of a tier-sim debug trace (-v -v; see
sim-trace-lru.py) through a model of the engine's eviction in extent mode
(evict_extents = 2): blocks of 4 KiB grouped by object, a hand walking the
objects in order and, at each, clearing the reference bit of every block
hit since its last pass and dropping the others, as far as the usable size
(CACHE_BYTES x 0.8) needs; every miss admitted, no timing, no dirty
blocks unless --dirty.  It prints the misses after the warm-up for each
VARIANT, and for the clocks the record writes (hand visits that dropped
something: one metadata write each in the engine's partial eviction):

  probation     new blocks enter unreferenced (the engine's rule)
  clock         new blocks enter referenced (a plain CLOCK)
  ages:K,A      a block goes after K passes unreferenced; new ones start at A
  ghost         a block missed again within a revolution of its drop
                enters referenced (2Q's ghost queue)
  learned:S     new blocks enter referenced when the hand reaches their
                object within a share w of a revolution; a miss on a block
                dropped within the last revolution raises w by S if it was
                never hit while cached, lowers it if it was, each weighted
                by the other kind's drops (ARC's rule)
  spike:S,L,T   new blocks enter referenced while the miss rate averaged
                with weight S is over T times the one with weight L
  fifo:F        new blocks wait in a FIFO of their own (S3-FIFO's small
                queue, at block granularity) and leave it, oldest first,
                when the cache is over its size and the FIFO over F of it
                (or nothing else is cached): into the clock if hit while
                there (unreferenced), else out of the cache; the hand only
                walks blocks that came through.  Prints the FIFO's mean
                share of the cache and the record writes (FIFO exits and
                hand visits that dropped something: one metadata write
                each in the engine's partial eviction) too.
  fifogen:G     fifo:0.1 with the blocks leaving in batches, one per
                object and generation (a generation every 1/G of the
                cache's worth of new blocks): an order the engine could
                keep in bits per extent, fewer record writes
  fifogen:G,0   the same with --dirty: a new block flushed at the FIFO's
                end goes to the clock (by default it goes round the FIFO
                again)
  fifoobj       fifo:0.1 with one batch per object (an object's new blocks
                join its batch while it waits)

--dirty: a write dirties its block, and a dirty block is never dropped:
where it would go it is flushed (counted) and goes at its next look.
  lru           an LRU of blocks (tier-sim's reference)

(docs/BENCHMARKS.md, "The policy suite".)
"""
import argparse
import collections
import re

LINE = re.compile(r"^tier-sim: \[engine\] (read|write) \S+\.([0-9a-f]+) \+(\d+) len \d+: ([a-z-]+)")


def run_fifo(seq, cap, nobj, warm, share, gens=0, per_object=False, wr=None, requeue=True):
    """fifo:F, fifogen:G and fifoobj: (misses, the FIFO's mean share of the
    cache, record writes: FIFO exits and hand visits that dropped blocks,
    each one metadata write in the engine's partial eviction, flushes).
    With wr (--dirty), a dirty block is never dropped: where it would go it
    is flushed and stays, a new one queued again at the FIFO's tail
    (requeue) or passed to the clock unreferenced."""
    objs = collections.defaultdict(dict)   # object -> {block: [referenced, dirty]}, the clock's
    new = {}                               # (object, block) -> [hit while waiting, dirty]
    fifo = collections.OrderedDict()       # (tag, object) -> its blocks, oldest batch first
    step = max(1, int(cap / gens)) if gens else 1
    nclock = hand = miss = ins = writes = flushes = 0
    fmax = max(1, int(share * cap))
    occ = 0
    for i, (o, b) in enumerate(seq):
        d = objs[o]
        w = bool(wr and wr[i])
        if b in d:
            d[b][0] = 1
            d[b][1] |= w
        elif (o, b) in new:
            new[(o, b)][0] = 1
            new[(o, b)][1] |= w
        else:
            miss += i >= warm
            new[(o, b)] = [0, w]
            # the block's batch: its object's open one, its object's of the
            # current generation, or the block alone
            tag = 0 if per_object else ins // step if gens else b
            ins += 1
            fifo.setdefault((tag, o), []).append(b)
            while nclock + len(new) > cap:
                if len(new) > fmax or not nclock:
                    (_, fo), blocks = fifo.popitem(last=False)
                    dropped = False
                    for fb in blocks:
                        hit, dirty = new.pop((fo, fb))
                        if dirty and not hit:
                            flushes += 1
                        if hit or (dirty and not requeue):
                            objs[fo][fb] = [0, 0 if not hit else dirty]
                            nclock += 1
                        elif dirty:
                            new[(fo, fb)] = [0, 0]
                            fifo.setdefault((("again", ins), fo), []).append(fb)
                        else:
                            dropped = True
                    writes += dropped
                    continue
                dropped = False
                while not dropped:
                    hand = (hand + 1) % nobj
                    dd = objs.get(hand)
                    for bb in list(dd or ()):
                        if dd[bb][0]:
                            dd[bb][0] = 0
                        elif dd[bb][1]:
                            dd[bb][1] = 0
                            flushes += 1
                        else:
                            del dd[bb]
                            nclock -= 1
                            dropped = True
                writes += 1
        occ += len(new)
    return miss, occ / max(1, len(seq)) / cap, writes, flushes


def run(seq, cap, nobj, warm, variant, wr=None):
    name, _, arg = variant.partition(":")
    args = [float(x) for x in arg.split(",")] if arg else []
    if name == "fifo":
        return run_fifo(seq, cap, nobj, warm, args[0], wr=wr)
    if name == "fifogen":
        return run_fifo(seq, cap, nobj, warm, 0.1, gens=args[0], wr=wr,
                        requeue=len(args) < 2 or args[1] != 0)
    if name == "fifoobj":
        return run_fifo(seq, cap, nobj, warm, 0.1, per_object=True, wr=wr)
    if name == "lru":
        lru = collections.OrderedDict()
        miss = 0
        for i, b in enumerate(seq):
            if b in lru:
                lru.move_to_end(b)
                continue
            miss += i >= warm
            lru[b] = True
            if len(lru) > cap:
                lru.popitem(last=False)
        return miss
    K, A = (int(args[0]), int(args[1])) if name == "ages" else (1, 0)
    objs = collections.defaultdict(dict)   # object -> {block: [age, referenced, hit]}
    ghosts = {}                            # block -> (hand steps at the drop, was hit)
    n = hand = steps = miss = writes = flushes = 0
    w, drops = 0.0, [1.0, 1.0]
    fast = slow = 0.15
    for i, (o, b) in enumerate(seq):
        d = objs[o]
        x = d.get(b)
        if name == "spike":
            fast += ((x is None) - fast) * args[0]
            slow += ((x is None) - slow) * args[1]
        w = bool(wr and wr[i])
        if x is not None:
            x[1] = x[2] = 1
            x[3] |= w
            continue
        miss += i >= warm
        ref = name == "clock"
        g = ghosts.pop((o, b), None)
        if g and steps - g[0] <= nobj:
            if name == "ghost":
                ref = True
            elif name == "learned":
                new = not g[1]
                k = drops[0] / drops[1] if new else drops[1] / drops[0]
                w = min(1.0, max(0.0, w + (1 if new else -1) * args[0] * max(1.0, k)))
        if name == "learned":
            ref = (o - hand) % nobj < w * nobj
        elif name == "spike":
            ref = i > 2000 and fast > args[2] * slow
        d[b] = [A, 1 if ref else 0, 0, w]
        n += 1
        while n > cap:
            hand = (hand + 1) % nobj
            steps += 1
            if hand == 0:
                drops = [max(1.0, drops[0] / 2), max(1.0, drops[1] / 2)]
            dd = objs.get(hand)
            if not dd:
                continue
            dropped = False
            for bb in list(dd):
                e = dd[bb]
                if e[1]:
                    e[0], e[1] = 0, 0
                    continue
                e[0] += 1
                if e[0] >= K and e[3]:
                    e[0], e[3] = K - 1, 0   # flushed: it goes at the next look
                    flushes += 1
                elif e[0] >= K:
                    del dd[bb]
                    n -= 1
                    dropped = True
                    if name in ("ghost", "learned"):
                        ghosts[(hand, bb)] = (steps, e[2])
                        drops[0 if e[2] else 1] += 1
            writes += dropped
    return miss, writes, flushes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("cache_bytes", type=int)
    ap.add_argument("variant", nargs="+")
    ap.add_argument("--objects", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=20000)
    ap.add_argument("--dirty", action="store_true",
                    help="writes dirty their block; a dirty block is flushed, never dropped")
    a = ap.parse_args()
    seq, wr = [], []
    for line in open(a.trace, errors="replace"):
        m = LINE.match(line)
        if m and m.group(4) != "wait":
            seq.append((int(m.group(2), 16) % a.objects, int(m.group(3)) >> 12))
            wr.append(m.group(1) == "write")
    cap = int(a.cache_bytes * 0.8 / 4096)
    for v in a.variant:
        r = run(seq, cap, a.objects, a.warmup, v, wr if a.dirty else None)
        fl = ", %d flushes" % r[-1] if a.dirty and not isinstance(r, int) else ""
        if isinstance(r, int):
            print("%s: %d misses" % (v, r))
        elif len(r) == 3:
            print("%s: %d misses (%d record writes%s)" % (v, r[0], r[1], fl))
        else:
            print("%s: %d misses (FIFO %.1f%% of the cache, %d record writes%s)" % (
                v, r[0], 100 * r[1], r[2], fl))


if __name__ == "__main__":
    main()
