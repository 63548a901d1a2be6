#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/integration/test-man.py SRCDIR TIERD_CONF_5 TIERD_8 TIERCTL_8 TIERD TIERCTL

The man pages as built cover what the code accepts, read from elsewhere
than the generator reads it:
- every key of the config parser's tables (daemon/config.c's kdesc tables,
  the [tier] parameter table of include/tier/params.h and libtier/params.c,
  tier_preset) has an entry in tierd.conf(5) under its section, and the page
  has no key the tables lack;
- every key deploy/tierd.conf.example sets or shows commented out is there;
- every key has its entry (**`key`**) under its section of the
  "Configuration reference" of docs/OPERATIONS.md, and that has no other;
- every option of `tierd --help` is in tierd(8), every option and command
  of `tierctl --help` and every command of the admin socket's table
  (daemon/admin-cmd.c) in tierctl(8).
It checks that it can fail: the same comparison on a copy of the page
without its first key entry must report that key.
"""
import re
import subprocess
import sys


def fail(msg):
    print("test-man: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def source_keys(src):
    """{section: set(keys)} from the source tables, by regular expressions."""
    keys = {}
    with open(src + "/daemon/config.c") as f:
        cfg = f.read()
    tables = set(re.findall(r"static const struct kdesc (\w+)_keys\[\]", cfg))
    if tables != {"global", "local", "rados", "image"}:
        fail("daemon/config.c's key tables are %s: a new section needs its place in "
             "tierd_config_key_info, the template and this test" % sorted(tables))
    for sec in ("global", "local", "rados", "image"):
        m = re.search(r"static const struct kdesc %s_keys\[\] = \{(.*?)\n\};" % sec, cfg, re.S)
        if not m:
            fail("no %s_keys table in daemon/config.c" % sec)
        keys[sec] = set(re.findall(r'(?:CFG|OVR|IMG)\("(\w+)"', m.group(1)))
    with open(src + "/include/tier/params.h") as f:
        hdr = f.read()
    with open(src + "/libtier/params.c") as f:
        par = f.read()
    tier = {"tier_preset"}
    for macro in ("TIER_PARAMS_U", "TIER_PARAMS_D"):
        m = re.search(r"#define %s\(X\)(.*?)\n\n" % macro, hdr, re.S)
        if not m:
            fail("no %s in include/tier/params.h" % macro)
        tier |= set(re.findall(r"X\((\w+),", m.group(1)))
    m = re.search(r"static const struct pdesc table\[\] = \{(.*?)\n\};", par, re.S)
    if not m:
        fail("no parameter table in libtier/params.c")
    tier |= set(re.findall(r"PDESC_E\((\w+),", m.group(1)))
    tier |= set(re.findall(r'\{"(\w+)", K_ENUM', m.group(1)))
    keys["tier"] = tier
    for sec, ks in keys.items():
        if len(ks) < 3:
            fail("only %d keys found for [%s] in the sources: the patterns are stale" % (len(ks), sec))
    return keys


def page_keys(text):
    """{section: set(keys)} from tierd.conf(5): .TP/.B entries under .SH [section]."""
    keys, sec, lines = {}, None, text.split("\n")
    for i, line in enumerate(lines):
        m = re.match(r"\.SH \[(\w+)(?:\.NAME)?\]$", line)
        if m:
            sec = m.group(1)
            keys.setdefault(sec, set())
        elif line.startswith(".SH "):
            sec = None
        elif sec and line == ".TP" and i + 1 < len(lines) and lines[i + 1].startswith(".B "):
            if lines[i - 1].startswith(".SS"):
                continue
            keys[sec].add(lines[i + 1][3:].replace("\\-", "-"))
    return keys


def presets_out(text):
    """The [tier] entries without the presets subsection's (.SS Presets)."""
    return re.sub(r"\.SS Presets\n.*?(?=\.SH )", "", text, flags=re.S)


def compare(want, have):
    errs = []
    for sec in sorted(want):
        for k in sorted(want[sec] - have.get(sec, set())):
            errs.append("[%s] %s: accepted by the parser, missing from tierd.conf(5)" % (sec, k))
        for k in sorted(have.get(sec, set()) - want[sec]):
            errs.append("[%s] %s: in tierd.conf(5), not in the parser's tables" % (sec, k))
    for sec in sorted(set(have) - set(want)):
        errs.append("[%s]: a section of tierd.conf(5) the parser does not have" % sec)
    return errs


def ops_keys(text):
    """{section: set(keys)} from docs/OPERATIONS.md's "Configuration reference"."""
    m = re.search(r"^## Configuration reference\n(.*?)(?=^## )", text, re.S | re.M)
    if not m:
        fail("docs/OPERATIONS.md has no '## Configuration reference'")
    keys, sec = {}, None
    for line in m.group(1).split("\n"):
        h = re.match(r"### \[(\w+)(?:\.NAME)?\]", line)
        if h:
            sec = h.group(1)
            keys.setdefault(sec, set())
        elif line.startswith("### "):
            sec = None
        elif sec:
            keys[sec] |= set(re.findall(r"\*\*`(\w+)`\*\*", line))
    return keys


def ops_compare(want, have):
    errs = []
    for sec in sorted(want):
        for k in sorted(want[sec] - have.get(sec, set())):
            errs.append("[%s] %s: accepted by the parser, no entry in docs/OPERATIONS.md" % (sec, k))
        for k in sorted(have.get(sec, set()) - want[sec]):
            errs.append("[%s] %s: an entry in docs/OPERATIONS.md, not in the parser's tables"
                        % (sec, k))
    return errs


def example_keys(path):
    keys, sec = {}, None
    with open(path) as f:
        for line in f:
            m = re.match(r"#?\[(\w+)(?:\.[\w.-]+)?\]", line)
            if m:
                sec = m.group(1)
                continue
            m = re.match(r"#?(\w+) = ", line)
            if m and sec:
                keys.setdefault(sec, set()).add(m.group(1))
    return keys


def help_text(prog):
    p = subprocess.run([prog, "--help"], capture_output=True, text=True)
    return p.stdout + p.stderr


def main():
    if len(sys.argv) != 7:
        fail(__doc__.split("\n")[0])
    src, conf5, tierd8, tierctl8, tierd, tierctl = sys.argv[1:]
    pages = {}
    for p in (conf5, tierd8, tierctl8):
        with open(p) as f:
            pages[p] = f.read()

    want = source_keys(src)
    text = presets_out(pages[conf5])
    have = page_keys(text)
    errs = compare(want, have)

    # the comparison can fail: drop the first key entry and it must say so
    m = re.search(r"\.TP\n\.B (\S+)\n", text)
    if not m:
        fail("tierd.conf(5) has no key entries")
    cut = text[:m.start()] + text[m.end():]
    dropped = m.group(1).replace("\\-", "-")
    if not any(" %s: accepted by the parser, missing" % dropped in e for e in compare(want, page_keys(cut))):
        fail("the comparison did not notice %s missing from a copy of the page" % dropped)

    with open(src + "/docs/OPERATIONS.md") as f:
        ops = f.read()
    errs += ops_compare(want, ops_keys(ops))
    m = re.search(r"\*\*`(\w+)`\*\*", ops[ops.index("## Configuration reference"):])
    if not m:
        fail("docs/OPERATIONS.md's configuration reference has no key entries")
    at = ops.index("## Configuration reference") + m.start()
    cut = ops[:at] + ops[at + len(m.group(0)):]
    if not any(" %s: accepted by the parser, no entry" % m.group(1) in e
               for e in ops_compare(want, ops_keys(cut))):
        fail("the comparison did not notice %s missing from a copy of OPERATIONS.md" % m.group(1))

    for sec, ks in example_keys(src + "/deploy/tierd.conf.example").items():
        for k in sorted(ks - have.get(sec, set())):
            errs.append("[%s] %s: in deploy/tierd.conf.example, missing from tierd.conf(5)" % (sec, k))

    for prog, page in ((tierd, tierd8), (tierctl, tierctl8)):
        h = help_text(prog)
        name = prog.rsplit("/", 1)[-1]
        for opt in sorted(set(re.findall(r"--([a-z][a-z-]*)", h))):
            if "\\-\\-" + opt.replace("-", "\\-") not in pages[page]:
                errs.append("%s --%s: in --help, missing from %s(8)" % (name, opt, name))
        if name == "tierctl":
            for line in h.split("\n"):
                m = re.match(r"  ([a-z][a-z |A-Z\[\]]*?)(?:  |$)", line)
                if not m:
                    continue
                for part in m.group(1).split("|"):
                    w = part.split()[0] if part.split() else ""
                    if w and not re.search(r"\.B[IR]? \"?%s\b" % re.escape(w), pages[page]) \
                            and not re.search(r"\b%s\b" % re.escape(w), pages[page]):
                        errs.append("tierctl %s: in --help, missing from tierctl(8)" % w)

    # every command of the admin socket's table (daemon/admin-cmd.c) has an
    # entry in tierctl(8)
    with open(src + "/daemon/admin-cmd.c") as f:
        cmds = re.findall(r'^\s*\{"([a-z_]+)", (?:NULL|"([a-z_]+)"), cmd_', f.read(), re.M)
    if len(cmds) < 10:
        fail("only %d commands found in daemon/admin-cmd.c: the pattern is stale" % len(cmds))
    text8 = pages[tierctl8].replace("\\-", "-").replace("\\fB", "").replace("\\fR", "")
    for name, sub in cmds:
        words = name + (" " + sub if sub else "")
        if not re.search(r'^\.B[IR]? "?%s\b' % re.escape(words), text8, re.M) and \
                not re.search(r"\b%s\b" % re.escape(name), text8):
            errs.append("admin command '%s': missing from tierctl(8)" % words)

    if errs:
        fail("\n  " + "\n  ".join(errs))
    n = sum(len(v) for v in want.values())
    print("test-man: %d keys in %d sections, the example's keys, tierd's and tierctl's "
          "options and commands: all in the pages; every key in docs/OPERATIONS.md"
          % (n, len(want)))


main()
