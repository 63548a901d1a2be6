#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tools/bench/sim-suite.py [--goals LABEL] CSV... - the table of tools/bench/sim-suite.sh: tier-sim's
CSV rows (one per policy, workload and cache) as markdown, then per policy
the geometric means, and the issue's three goals for the column LABEL
(default: "default").  A column LABEL-wN (a fill window) is compared with
the engine LRU column ext-lru-wN when there is one.  miss/OPT and
miss/LRU are computed from the miss ratios at the CSV's full precision
(exact to a request at 10^5 requests), a run without a miss counted as
one.  Where the CSVs have tier-sim's lru_miss_held (an LRU at the engine's
granularity of the usable size or of the mean size the cache held, the
larger), the cases above it are counted too: the LRU at the usable size
is the same capacity only when the agent kept the cache at its line
(held_over_usable at most 1).
Reads only the CSVs; decides nothing else."""
import csv
import math
import re
import sys
from collections import OrderedDict

BASE = {"obj": "obj-lru", "ext": "ext-lru", "default": "ext-lru"}
PROMOTE_ALWAYS = "obj-hitset"   # the promote-always preset (hitset eviction)


def gmean(xs):
    xs = [max(x, 1e-9) for x in xs]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def ref_kind(rows):
    """Which references a policy's ratios divide by: "object" or "block"
    (tier-sim divides by those of the policy's promote_granularity), told
    from a row where it missed: the one its miss_over_opt was computed
    with."""
    for r in rows:
        m, oo = float(r["miss"]), float(r["miss_over_opt"])
        if m > 0 and oo > 0:
            return min(("object", "block"),
                       key=lambda k: abs(m / max(float(r["opt_miss_" + k]), 1e-12) - oo))
    return "block"


def ratio(r, ref, kind):
    """miss over a reference, from the counts at full precision (the CSV's
    ratio columns have 3 decimals: 1.0004 would read 1.000), a run without
    a miss counted as one miss (a ratio of 0 would make any gmean 0)."""
    m = max(float(r["miss"]), 1.0 / float(r["ops"]))
    return m / max(float(r[ref + "_miss_" + kind]), 1.0 / float(r["ops"]))


def main(args):
    goal = "default"
    if len(args) >= 2 and args[0] == "--goals":
        goal, args = args[1], args[2:]
    paths = args
    rows = []
    for p in paths:
        with open(p, newline="") as f:
            rows += list(csv.DictReader(f))
    if not rows:
        sys.exit("sim-suite.py: no rows")
    cases = OrderedDict()
    pols = []
    for r in rows:
        cases.setdefault(r["workload"], {})[r["policy"]] = r
        if r["policy"] not in pols:
            pols.append(r["policy"])
    for c, d in cases.items():
        missing = [p for p in pols if p not in d]
        if missing:
            sys.exit("sim-suite.py: %s lacks %s" % (c, ",".join(missing)))

    def f(r, k):
        return float(r[k])

    held = all("lru_miss_held" in r for r in rows)

    print("### Miss ratio per workload and cache (% of object pieces), with OPT and LRU at the usable size")
    print()
    print("| workload@cache | OPT obj | LRU obj | OPT ext | LRU ext | " + " | ".join(pols) + " |")
    print("|---" * (5 + len(pols)) + "|")
    for c, d in cases.items():
        any_r = next(iter(d.values()))
        refs = [f(any_r, k) * 100 for k in
                ("opt_miss_object", "lru_miss_object", "opt_miss_block", "lru_miss_block")]
        print("| %s | " % c + " | ".join("%.1f" % x for x in refs) + " | " +
              " | ".join("%.1f" % (f(d[p], "miss") * 100) for p in pols) + " |")
    print()
    print("### Per policy over the %d cases" % len(cases))
    print()
    print("| policy | gmean miss/OPT | gmean miss/LRU | worst miss/LRU | cases above LRU (ref) "
          "| cases above its engine LRU | gmean miss vs engine LRU | cache B written/client B (mean) "
          "| base busy vs promote-always (gmean) | B/cached object (max) |" +
          (" cases above LRU (>= mean held) | held/usable (min-max) |" if held else ""))
    print("|---" * (12 if held else 10) + "|")
    summary = {}
    for p in pols:
        kind = "obj" if p.startswith("obj") else "ext" if p.startswith("ext") else "default"
        base = BASE[kind] if BASE[kind] in pols else None
        # a column labelled ...-wN (a fill window) is compared with ext-lru-wN
        m = re.search(r"-(w[0-9a-z]+)$", p)
        if m and p.startswith("ext") and "ext-lru-" + m.group(1) in pols:
            base = "ext-lru-" + m.group(1)
        gran = ref_kind(d[p] for d in cases.values())
        oo = [ratio(d[p], "opt", gran) for d in cases.values()]
        ol = [ratio(d[p], "lru", gran) for d in cases.values()]
        above_ref = sum(1 for x in ol if x > 1.0 + 1e-9)
        if base:
            vb = [(f(d[p], "miss") + 1e-6) / (f(d[base], "miss") + 1e-6) for d in cases.values()]
            above_b = sum(1 for d in cases.values() if f(d[p], "miss") > f(d[base], "miss") + 1e-9)
        else:
            vb, above_b = [], 0
        cw = sum(f(d[p], "cache_write_per_byte") for d in cases.values()) / len(cases)
        busy = ([(f(d[p], "base_busy_s") + 1e-9) / (f(d[PROMOTE_ALWAYS], "base_busy_s") + 1e-9)
                 for d in cases.values()] if PROMOTE_ALWAYS in pols else [])
        mem = max(int(float(d[p]["mem_per_object"])) for d in cases.values())
        oh = [ratio(d[p], "lru", "held") for d in cases.values()] if held else []
        above_h = sum(1 for x in oh if x > 1.0 + 1e-9)
        hu = [f(d[p], "held_over_usable") for d in cases.values()] if held else []
        summary[p] = dict(oo=gmean(oo), ol=ol, above_ref=above_ref, above_b=above_b, oh=oh,
                          above_h=above_h)
        print("| %s | %.3f | %.3f | %.3f | %d | %s | %s | %.3f | %s | %d |" % (
            p, gmean(oo), gmean(ol), max(ol), above_ref,
            "%d (vs %s)" % (above_b, base) if base else "-",
            "%.3f" % gmean(vb) if vb else "-", cw,
            "%.3f" % gmean(busy) if busy else "-", mem) +
            (" %d | %.3f-%.3f |" % (above_h, min(hu), max(hu)) if held else ""))
    if goal in pols:
        print()
        print("### The goals, for `%s`" % goal)
        print()
        s = summary[goal]
        print("- misses no more than LRU (tier-sim's reference at the usable size) on every case: "
              "%s (%d of %d cases above, worst %.3f)" % (
                  "met" if s["above_ref"] == 0 else "NOT met", s["above_ref"], len(cases),
                  max(s["ol"])))
        if held:
            print("- (beside it) misses no more than an LRU of at least the mean size the "
                  "cache held (the usable size, or the mean held where larger): "
                  "%s (%d of %d cases above, worst %.3f)" % (
                      "met" if s["above_h"] == 0 else "NOT met", s["above_h"], len(cases),
                      max(s["oh"])))
        if BASE["default"] in pols:
            print("- misses no more than the engine with evict_policy = lru (same admission): "
                  "%s (%d of %d cases above)" % ("met" if s["above_b"] == 0 else "NOT met",
                                                 s["above_b"], len(cases)))
        print("- geometric mean miss/OPT <= 1.25: %s (%.3f)" % (
            "met" if s["oo"] <= 1.25 else "NOT met", s["oo"]))
        if PROMOTE_ALWAYS in pols:
            ok = 0
            for d in cases.values():
                r, pa = d[goal], d[PROMOTE_ALWAYS]
                if (f(r, "cache_write_per_byte") <= 0.7 * f(pa, "cache_write_per_byte") and
                        f(r, "miss") <= f(pa, "miss") + 1e-9):
                    ok += 1
            print("- cache bytes written per client byte >= 30%% below promote-always at an equal "
                  "or better miss ratio: %s (%d of %d cases)" % (
                      "met" if ok == len(cases) else "NOT met", ok, len(cases)))


if __name__ == "__main__":
    main(sys.argv[1:])
