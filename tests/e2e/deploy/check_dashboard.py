#!/usr/bin/env python3
"""Runs every query of the Grafana dashboard and every loaded rule through a
Prometheus HTTP API (used by tests/e2e/deploy_dashboard_test.sh).

  check_dashboard.py API_URL DASHBOARD_JSON panels   exit 0: every panel target
      returned at least one series; 1: some returned none (listed); 2: a query
      failed (error printed). Dashboard variables are resolved the way Grafana
      does ("All" selected: every value of the variable's label_values() query,
      as a regex alternation); $__rate_interval etc. get fixed windows.
  check_dashboard.py API_URL - rules   exit 0: every rule Prometheus loaded has
      been evaluated without error (health ok) and its expression runs as an
      instant query; 1: not evaluated yet; 2: a rule or query errored.
"""
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

API = sys.argv[1].rstrip("/")


class QueryError(Exception):
    pass


def get(path, params):
    url = API + path + "?" + urllib.parse.urlencode(params, doseq=True)
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:
        try:
            body = json.load(e)
        except Exception:  # noqa: BLE001
            raise QueryError(f"HTTP {e.code} for {params}") from None
    if body.get("status") != "success":
        raise QueryError(f"{body.get('errorType')}: {body.get('error')} (query {params})")
    return body["data"]


def query(expr):
    return get("/query", {"query": expr})["result"]


FIXED = {"__rate_interval": "1m", "__interval": "15s", "__range": "5m",
                  "__range_s": "300", "__interval_ms": "15000"}


def substitute(text, values):
    def repl(m):
        name = m.group(1) or m.group(2)
        if name in values:
            return values[name]
        if name in FIXED:
            return FIXED[name]
        raise QueryError(f"unknown variable ${name} in {text}")
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", repl, text)


def resolve_variables(dash):
    values = {}
    for v in dash.get("templating", {}).get("list", []):
        name = v["name"]
        if v["type"] == "datasource":
            values[name] = "prometheus"
            continue
        if v["type"] == "custom":  # a fixed list (the trace data source's UID): its current value
            values[name] = v["current"]["value"]
            continue
        if v["type"] != "query":
            raise QueryError(f"variable {name}: type {v['type']} not handled by this test")
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", q)
        if not m:
            raise QueryError(f"variable {name}: only label_values(selector, label) is handled: {q}")
        selector = substitute(m.group(1), values)
        got = get("/label/" + m.group(2) + "/values", {"match[]": selector})
        got = [x for x in got if x != ""]
        if not got:
            print(f"  variable ${name}: no values for {q}")
            return None
        # A regex inside a PromQL string: escape for the regex, then for the string
        # (what Grafana's Prometheus data source does for a multi-value variable).
        alt = "|".join(re.escape(x) for x in sorted(got))
        values[name] = "(" + alt.replace("\\", "\\\\") + ")"
    return values


def check_panels(path):
    dash = json.load(open(path))
    values = resolve_variables(dash)
    if values is None:
        return 1
    empty = []
    total = 0

    def walk(panels):
        for p in panels:
            yield p
            yield from walk(p.get("panels", []))

    for p in walk(dash["panels"]):
        for t in p.get("targets", []):
            total += 1
            expr = substitute(t["expr"], values)
            n = len(query(expr))
            if n == 0:
                empty.append(f"{p['title']!r} target {t['refId']}: {t['expr']}")
    if total == 0:
        raise QueryError("dashboard has no targets")
    for e in empty:
        print("  no series: " + e)
    print(f"  {total - len(empty)}/{total} panel targets returned series")
    return 1 if empty else 0


def check_rules():
    groups = get("/rules", {})["groups"]
    rules = [r for g in groups for r in g["rules"]]
    if not rules:
        raise QueryError("Prometheus loaded no rules")
    pending = 0
    for r in rules:
        name = r.get("name")
        if r.get("health") == "err" or r.get("lastError"):
            raise QueryError(f"rule {name}: {r.get('lastError')}")
        if r.get("health") != "ok":
            pending += 1
        query(r["query"])  # raises on a query error
    print(f"  {len(rules)} rules loaded, {len(rules) - pending} evaluated ok, every expression runs")
    return 1 if pending else 0


try:
    if sys.argv[3] == "panels":
        sys.exit(check_panels(sys.argv[2]))
    sys.exit(check_rules())
except QueryError as e:
    print("  query error: " + str(e))
    sys.exit(2)
