#!/bin/bash
# SPDX-License-Identifier: MIT
# deploy/monitoring loads and names only metrics tierd exports: the alert
# rules pass `promtool check rules`, and `promtool test rules` shows each
# alert firing on its series and not on a healthy tierd's; the Grafana
# dashboard is JSON whose panels each have queries, PromQL that promtool
# accepts (as recording rules); every tierd_* metric the
# rules or the dashboard name is in a live scrape of a real tierd's
# /metrics, except tierd_image_owned and tierd_image_fenced, which only a
# tierd with RBD images (backend = rados) exports: they must be in
# daemon/prometheus.c.  The name check is shown to catch a name the scrape
# lacks.
. "$(dirname "$0")/lib.sh"
MON=$(cd "$(dirname "$0")/../../deploy/monitoring" && pwd)
RULES=$MON/tierd-alerts.yml
DASH=$MON/tierd-dashboard.json

command -v promtool >/dev/null || fail "promtool missing (prometheus, deploy/install-deps.sh)"
out=$(promtool check rules "$RULES" 2>&1) || fail "promtool check rules: $out"
log "promtool check rules: $(grep -o 'SUCCESS.*' <<<"$out")"
out=$(cd "$MON" && promtool test rules tierd-alerts.test.yml 2>&1) || fail "promtool test rules: $out"
log "promtool test rules: the alerts fire on their series"

# the dashboard's queries are PromQL: as recording rules (Grafana's
# variables given values) they pass promtool too
/usr/bin/python3 - "$DASH" >"$WORK/dashboard-rules.yml" <<'PY' || fail "dashboard queries"
import json, sys
d = json.load(open(sys.argv[1]))
print("groups:\n  - name: dashboard\n    rules:")
n = 0
for p in d["panels"]:
    for t in p.get("targets", []):
        n += 1
        e = t["expr"].replace("$__rate_interval", "5m").replace("$instance", ".*")
        print("      - record: tierd_dashboard_query_%d\n        expr: %s" % (n, json.dumps(e)))
PY
out=$(promtool check rules "$WORK/dashboard-rules.yml" 2>&1) || fail "dashboard queries: $out"
log "dashboard queries: $(grep -o 'SUCCESS.*' <<<"$out")"

PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
write_config
sed -i "s|^\[global\]$|[global]\nprometheus = 127.0.0.1:$PORT|" "$CONF"
start_tierd
PROM_C=$(cd "$(dirname "$0")/../.." && pwd)/daemon/prometheus.c
/usr/bin/python3 - "$PORT" "$RULES" "$DASH" "$PROM_C" <<'PY' || fail "metric names (above)"
import json, re, sys, urllib.request

port, rules, dash, prom_c = sys.argv[1:]
scrape = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=10).read().decode()
exported = {re.split(r"[{ ]", l, 1)[0] for l in scrape.splitlines() if l and not l.startswith("#")}
assert len(exported) > 40, "a scrape of %d names: not tierd's /metrics" % len(exported)
# the ownership gauges: only for RBD images, so from the source
ahead = {"tierd_image_owned", "tierd_image_fenced"}
src = open(prom_c).read()
for n in ahead:
    assert '"%s"' % n in src, "%s is not in daemon/prometheus.c" % n

def unknown(names):
    return sorted(n for n in names if n not in exported and n not in ahead)

# the check catches a name tierd does not export
assert unknown({"tierd_no_such_metric"}) == ["tierd_no_such_metric"]

with open(rules) as f:
    rule_names = set(re.findall(r"\btierd_[a-z0-9_]+", f.read()))
with open(dash) as f:
    d = json.load(f)
exprs = []
for p in d["panels"]:
    t = [x["expr"] for x in p.get("targets", []) if x.get("expr")]
    if not t:
        sys.exit("dashboard panel %r has no query" % p.get("title"))
    exprs += t
dash_names = set(re.findall(r"\btierd_[a-z0-9_]+", " ".join(exprs)))
bad = unknown(rule_names) + unknown(dash_names)
if bad:
    sys.exit("named in deploy/monitoring, not in tierd's /metrics: " + ", ".join(bad))
print("monitoring: %d metric names in the rules, %d in %d dashboard panels, all exported%s" % (
    len(rule_names), len(dash_names), len(d["panels"]),
    "" if ahead <= exported else " (%s: in daemon/prometheus.c, rados only)" %
    ", ".join(sorted(ahead - exported))))
PY
stop_tierd
log "PASS"
