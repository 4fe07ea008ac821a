#!/usr/bin/env python3
"""Scores the fleet rules against fabricsim's ground truth.

usage: fleet_score.py RESULT_DIR

RESULT_DIR holds, per scenario S, S.alerts.json (tests/e2e/fleet/
watch_alerts.py) and S.truth.json (fabricsim's ground_truth.json). Prints a
Markdown table per scenario (detection time of each alert after the episode
started) and precision/recall over all scenarios:
  - origin: a FabricPFCStormOrigin naming (instance, switch, switch_port) is
    a true positive when the scenario's ground truth has that origin host,
    else a false positive; an origin in the ground truth never named is a
    false negative;
  - congested port: a FabricSwitchPortCongested naming (switch, switch_port)
    is a true positive when the ground truth lists that switch port as
    congested toward a host (the leaf ports the hosts' partners name; spine
    and uplink ports are not observable from hosts and not scored);
  - bad link: a FabricBadLink naming (instance, switch_port) against the
    bad_link episode's target.
"""
import glob
import json
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def prf(tp, fp, fn):
    p = tp / (tp + fp) if tp + fp else float("nan")
    r = tp / (tp + fn) if tp + fn else float("nan")
    return p, r


def main():
    d = sys.argv[1]
    counts = {k: [0, 0, 0] for k in ("origin", "congested", "bad_link")}
    print("| scenario | alert | named | first firing after episode start (s) |")
    print("|---|---|---|---|")
    for path in sorted(glob.glob(os.path.join(d, "*.alerts.json"))):
        scen = os.path.basename(path)[: -len(".alerts.json")]
        res = load(path)
        truth = load(os.path.join(d, scen + ".truth.json"))
        hosts = {t["host"] for t in truth.get("topology", [])}
        eps = truth.get("episodes") or []
        start = eps[0]["start_unix_nano"] / 1e9 if eps else None
        origins = {e["origin"]["host"] for e in eps
                   if e.get("origin") and e.get("kind") != "bad_link"}
        congested = {(c["switch"], c["port"]) for e in eps for c in e.get("congested", [])
                     if c.get("toward") in hosts}
        bad = {(e["target"]["host"], e["target"]["leaf_port"]) for e in eps
               if e.get("kind") == "bad_link" and e.get("target")}
        named = {"origin": set(), "congested": set(), "bad_link": set()}
        for a in res["alerts"]:
            if a["first_firing_unix"] is None:
                continue
            l = a["labels"]
            after = "-" if start is None else "%.1f" % (a["first_firing_unix"] - start)
            what = " ".join(x for x in (l.get("instance", ""), l.get("netdev", ""),
                                        l.get("switch", ""), l.get("switch_port", "")) if x)
            if a["name"].startswith("Fabric") and not a["name"].startswith("Fabricscope"):
                print(f"| {scen} | {a['name']} | {what} | {after} |")
            if a["name"] == "FabricPFCStormOrigin":
                named["origin"].add(l.get("instance"))
            elif a["name"] == "FabricSwitchPortCongested":
                named["congested"].add((l.get("switch"), l.get("switch_port")))
            elif a["name"] == "FabricBadLink":
                named["bad_link"].add((l.get("instance"), l.get("switch_port")))
        for key, truth_set in (("origin", origins), ("congested", congested), ("bad_link", bad)):
            got = named[key]
            counts[key][0] += len(got & truth_set)
            counts[key][1] += len(got - truth_set)
            counts[key][2] += len(truth_set - got)
    print()
    print("| what | TP | FP | FN | precision | recall |")
    print("|---|---|---|---|---|---|")
    for key, (tp, fp, fn) in counts.items():
        p, r = prf(tp, fp, fn)
        print(f"| {key} | {tp} | {fp} | {fn} | {p:.2f} | {r:.2f} |")


if __name__ == "__main__":
    main()
