#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tools/bench/sim-compare.py - two runs of tools/bench/sim-suite.sh, case by case.

    sim-compare.py DIR_A DIR_B [POLICY_A [POLICY_B]]   (policies: default)

Exact miss counts (the CSV's miss ratio x its counted requests) against
the block LRU and OPT at the usable size (A's, and B's after a slash when
B ran another sequence), for each case of the two runs (in bold where
above its own run's block LRU), then for each run the geometric mean
miss/OPT and the cases above the block LRU, and B over A as geometric
means over the cases (and the worst case) of the misses, base busy time,
mean and p99 latency and cache bytes written per client byte.  One seed
of the suite swings by hundreds of misses on a full cache after any change
of what is cached early on: compare several (SUITE_ARGS="--seed N").
"""
import csv
import glob
import math
import sys


def load(d, pol):
    rows = {}
    for p in sorted(glob.glob(d + "/*.csv")):
        for r in csv.DictReader(open(p)):
            if r["policy"] == pol:
                rows[r["workload"]] = r
    if not rows:
        sys.exit("sim-compare: no rows of policy %s in %s" % (pol, d))
    return rows


def count(r, k):
    return round(float(r[k]) * float(r["ops"]))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    pa = sys.argv[3] if len(sys.argv) > 3 else "default"
    pb = sys.argv[4] if len(sys.argv) > 4 else pa
    a, b = load(sys.argv[1], pa), load(sys.argv[2], pb)
    cases = sorted(set(a) & set(b))
    if not cases:
        sys.exit("sim-compare: no case in both runs")
    print("| case | OPT | block LRU | A | B | B - A |")
    print("|---|---|---|---|---|---|")
    above = [0, 0]
    gm = [0.0, 0.0]
    for c in cases:
        cells = []
        for i, r in enumerate((a[c], b[c])):
            m, lru = count(r, "miss"), count(r, "lru_miss_block")
            above[i] += m > lru
            gm[i] += math.log(float(r["miss_over_opt"]))
            cells.append(("**%d**" if m > lru else "%d") % m)
        ref = ["%d" % count(a[c], k) for k in ("opt_miss_block", "lru_miss_block")]
        for j, k in enumerate(("opt_miss_block", "lru_miss_block")):
            if count(b[c], k) != count(a[c], k):   # another sequence (seed)
                ref[j] += " / %d" % count(b[c], k)
        d = count(b[c], "miss") - count(a[c], "miss")
        print("| %s | %s | %s | %s | %s | %+d |" % (c, ref[0], ref[1], cells[0], cells[1], d))
    n = len(cases)
    print()
    for i, name in enumerate(("A", "B")):
        print("%s: gmean miss/OPT %.4f, above the block LRU (exact counts) %d of %d"
              % (name, math.exp(gm[i] / n), above[i], n))
    for k in ("miss", "base_busy_s", "lat_mean_ms", "lat_p99_ms", "cache_write_per_byte"):
        cs = [c for c in cases if float(a[c][k]) > 0 and float(b[c][k]) > 0]
        if not cs:
            continue
        ratio = {c: float(b[c][k]) / float(a[c][k]) for c in cs}
        worst = max(cs, key=lambda c: ratio[c])
        g = math.exp(sum(math.log(x) for x in ratio.values()) / len(cs))
        print("B/A %s: gmean %.4f, worst %.3f (%s)" % (k, g, ratio[worst], worst))


if __name__ == "__main__":
    main()
