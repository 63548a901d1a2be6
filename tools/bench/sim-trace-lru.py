#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tools/bench/sim-trace-lru.py - the engine's misses an LRU of blocks would hit.

    tier-sim ... --policy default -v -v 2>TRACE
    sim-trace-lru.py TRACE CACHE_BYTES [--full-ratio R] [--warmup N] [--list]

Replays the request sequence of a tier-sim debug trace (one "read|write
OID +OFF len LEN: ROUTE (WHY)" line per routing decision; waits skipped)
through an LRU of 4 KiB blocks of the usable size (CACHE_BYTES x R, R
0.8 as tier-sim's reference), counts the engine's misses (a read not
routed "hit", a write the trace marks "a write miss") and the LRU's after
the warm-up, and groups the engine's misses the LRU hits by their route,
the reason and the route of the same block's previous access, with the
gap in requests since it (10th, 50th and 90th percentiles).  --list
prints each such miss with the block's last three accesses.  Requests of
one 4 KiB block each (the suite's); the order is the trace's, which at
queue depth > 1 may differ by a few requests from arrival order.
"""
import argparse
import collections
import re

LINE = re.compile(r"^tier-sim: \[engine\] (read|write) \S+\.([0-9a-f]+) \+(\d+) len (\d+): "
                  r"([a-z-]+) \(([^)]*)\)(.*)$")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("cache_bytes", type=int)
    ap.add_argument("--full-ratio", type=float, default=0.8)
    ap.add_argument("--warmup", type=int, default=20000)
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    cap = int(a.cache_bytes * a.full_ratio / 4096)
    lru = collections.OrderedDict()
    hist = collections.defaultdict(list)
    groups = collections.Counter()
    gaps = collections.defaultdict(list)
    other = collections.Counter()
    i = eng = ref = 0
    for ln, line in enumerate(open(a.trace, errors="replace"), 1):
        m = LINE.match(line)
        if not m or m.group(5) == "wait":
            continue
        t, obj, off, _, route, why, rest = m.groups()
        b = (int(obj, 16) << 32) | (int(off) >> 12)
        hit = route == "hit" if t == "read" else "a write miss" not in rest
        lhit = b in lru
        if lhit:
            lru.move_to_end(b)
        else:
            lru[b] = True
            if len(lru) > cap:
                lru.popitem(last=False)
        if i >= a.warmup:
            eng += not hit
            ref += not lhit
            if not hit and lhit:
                p = hist[b][-1] if hist[b] else None
                k = (t, route, why.split(":")[0],
                     "previous: " + ("%s, %s" % (p[2], "hit" if p[3] else "miss") if p else "none"))
                groups[k] += 1
                gaps[k].append(i - p[0] if p else -1)
                if a.list:
                    print("--- request %d (trace line %d)" % (i, ln))
                    for h in hist[b][-3:]:
                        print("    before: request %d, line %d: %s" % (h[0], h[1], h[4]))
                    print("    now:    " + line.strip())
            elif hit and not lhit:
                other[(t, route)] += 1
        hist[b].append((i, ln, route, hit, line.strip()))
        i += 1
    print("requests %d, counted after %d: engine misses %d, LRU misses %d (%d blocks)"
          % (i, a.warmup, eng, ref, cap))
    print("engine misses the LRU hits: %d" % sum(groups.values()))
    for k, v in groups.most_common():
        g = sorted(gaps[k])
        print("  %6d  %s: %s (%s); %s; gap p10/p50/p90 %d/%d/%d"
              % (v, k[0], k[1], k[2], k[3], g[len(g) // 10], g[len(g) // 2], g[9 * len(g) // 10]))
    print("engine hits the LRU misses: %d %s" % (sum(other.values()), dict(other)))


if __name__ == "__main__":
    main()
