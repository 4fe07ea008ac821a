#!/usr/bin/env python3
"""Detection quality of fabricscope's detectors against fabricsim's ground truth.

For every scenario and seed: fabricsim writes a recording and its ground truth,
`fabricscope analyze` runs the daemon's detectors (default thresholds) over it,
and the events are matched with the injected episodes.

  bench/detection_quality.py [--bin DIR] [--seeds N] [--duration S] [--json FILE]

Matching: an event matches a ground-truth episode when the detector is the one
the episode expects, it is on the episode's port (netdev or RDMA device/port),
has the episode's priority/direction where the episode names one, and overlaps
[start - 0.1 s, end + 2 s] (detectors report an episode from its first judged
interval; windowed detectors can outlast the cause by their window) without
having started more than 1 s before the episode (an event already running
belongs to an earlier cause).

Per detector and per kind (the event's kind for precision, the ground truth's
kind for recall): recall (episodes matched / episodes), precision (events
matching an episode of their own detector / events), and the detection delay
of each matched episode = the first matching event's detected_unix_nano - the
episode start (median and worst). Every event that matches no episode of its
own detector counts against precision: "side" events (another detector's
episode on the same port: the pause-frame bursts of a storm, ACK timeouts
after a link flap) included, unless the daemon merged them into that episode
(daemon/detect/event_log.h: the episode lists their signals and they are not
listed on their own). Events with no episode on their port at all are also
reported as "unexplained".

Targets (issues #7, #16), checked per detector: recall 1.0, precision >= 0.95,
no event on quiet, PFC storms detected within the detection time (200 ms) + 2
poll intervals of the pause counters (100 ms each in the recordings). Exits 1
when a target is missed, naming it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

SCENARIOS = ["quiet", "incast_microbursts", "pfc_storm", "ecn_too_late", "ecn_too_aggressive",
             "fec_degradation", "link_flap", "retransmit_storm"]
T0 = 1_760_000_000_000_000_000
TARGET_RECALL = 1.0
TARGET_PRECISION = 0.95
PFC_DELAY_TARGET_MS = 200 + 2 * 100


def on_port(ev, gt):
    if gt.get("netdev") and ev.get("netdev") == gt["netdev"]:
        return True
    return bool(gt.get("device")) and ev.get("device") == gt["device"] and ev.get("port") == gt.get("port")


def matches(ev, gt, same_detector=True):
    if same_detector and ev["detector"] != gt["detector"]:
        return False
    if not on_port(ev, gt):
        return False
    if same_detector:
        if gt.get("direction") and ev.get("direction") and ev["direction"] != gt["direction"]:
            return False
        prio = gt.get("priority", -1)
        if prio is not None and prio >= 0 and ev.get("priority") not in ("", str(prio)):
            return False
    end = ev["end_unix_nano"] if ev["end_unix_nano"] is not None else 2**63
    return gt["start_unix_nano"] - 1_000_000_000 <= ev["start_unix_nano"] <= \
        gt["end_unix_nano"] + 2_000_000_000 and end >= gt["start_unix_nano"] - 100_000_000


def run(bin_dir, scenario, seed, duration, work):
    rec = os.path.join(work, f"{scenario}.{seed}.jsonl")
    truth = os.path.join(work, f"{scenario}.{seed}.truth.json")
    subprocess.run([os.path.join(bin_dir, "fabricsim"), f"--scenario={scenario}", f"--seed={seed}",
                    f"--duration={duration}s", "--as-fast-as-possible", f"--start-unix-ns={T0}",
                    f"--record={rec}", f"--ground-truth={truth}"], check=True)
    out = subprocess.run([os.path.join(bin_dir, "fabricscope"), "--output=json", "analyze", rec],
                         check=True, capture_output=True, text=True).stdout
    events = json.loads(out)["events"]
    with open(truth) as f:
        gts = json.load(f)["events"]
    os.unlink(rec)
    return events, gts


def new_stats():
    return {"episodes": 0, "found": 0, "events": 0, "true_events": 0, "side_events": 0,
            "delays_ms": []}


def ratio(num, den):
    return num / den if den else None


def fmt(x):
    return "-" if x is None else f"{x:.2f}"


def table(title, rows):
    print(f"{title:<40} {'episodes':>8} {'recall':>7} {'events':>7} {'precision':>9} "
          f"{'side':>5} {'median delay':>13} {'worst delay':>12}")
    for name in sorted(rows):
        s = rows[name]
        med = f"{statistics.median(s['delays_ms']):.0f} ms" if s["delays_ms"] else "-"
        worst = f"{max(s['delays_ms']):.0f} ms" if s["delays_ms"] else "-"
        print(f"{name:<40} {s['episodes']:>8} {fmt(ratio(s['found'], s['episodes'])):>7} "
              f"{s['events']:>7} {fmt(ratio(s['true_events'], s['events'])):>9} "
              f"{s['side_events']:>5} {med:>13} {worst:>12}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "build", "release"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=20, help="model seconds per run")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--json", help="also write the per-detector and per-kind figures here")
    a = ap.parse_args()

    per = {}       # detector -> stats
    per_kind = {}  # "detector/kind" -> stats (event kinds and ground-truth kinds)
    quiet_events = 0
    unexplained = []

    def d(table_, name):
        return table_.setdefault(name, new_stats())

    with tempfile.TemporaryDirectory(prefix="fabricscope-dq.") as work:
        for scenario in a.scenarios.split(","):
            for seed in range(1, a.seeds + 1):
                events, gts = run(a.bin, scenario, seed, a.duration, work)
                if scenario == "quiet":
                    quiet_events += len(events)
                for gt in gts:
                    for s in (d(per, gt["detector"]), d(per_kind, f"{gt['detector']}/{gt.get('detector_kind') or gt['kind']}")):
                        s["episodes"] += 1
                    hits = [e for e in events if matches(e, gt)]
                    if hits:
                        first = min(hits, key=lambda e: e["detected_unix_nano"])
                        delay = (first["detected_unix_nano"] - gt["start_unix_nano"]) / 1e6
                        for s in (d(per, gt["detector"]), d(per_kind, f"{gt['detector']}/{gt.get('detector_kind') or gt['kind']}")):
                            s["found"] += 1
                            s["delays_ms"].append(delay)
                for e in events:
                    targets = (d(per, e["detector"]), d(per_kind, f"{e['detector']}/{e['kind']}"))
                    true = any(matches(e, gt) for gt in gts)
                    side = not true and any(matches(e, gt, same_detector=False) for gt in gts)
                    for s in targets:
                        s["events"] += 1
                        s["true_events"] += true
                        s["side_events"] += side
                    if not true and not side:
                        unexplained.append((scenario, seed, e["detector"], e["kind"], e["summary"]))
                    elif side:
                        print(f"side event ({scenario} seed {seed}): {e['detector']} {e['kind']}: "
                              f"{e['summary']}", file=sys.stderr)

    table("detector", per)
    print()
    table("detector/kind (event kind; ground-truth kind)", per_kind)
    print(f"events on quiet: {quiet_events}; unexplained events: {len(unexplained)}")
    for u in unexplained[:20]:
        print("  unexplained:", *u)

    missed = []
    for name, s in sorted(per.items()):
        recall = ratio(s["found"], s["episodes"])
        precision = ratio(s["true_events"], s["events"])
        if recall is not None and recall < TARGET_RECALL:
            missed.append(f"{name} recall {recall:.2f} < {TARGET_RECALL}")
        if precision is not None and precision < TARGET_PRECISION:
            missed.append(f"{name} precision {precision:.2f} < {TARGET_PRECISION}")
    if quiet_events:
        missed.append(f"{quiet_events} events on quiet")
    pfc = per.get("pfc_storm", {}).get("delays_ms") or []
    if pfc and max(pfc) > PFC_DELAY_TARGET_MS:
        missed.append(f"pfc_storm worst delay {max(pfc):.0f} ms > {PFC_DELAY_TARGET_MS} ms")
    for m in missed:
        print("below target:", m)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"detectors": per, "kinds": per_kind, "quiet_events": quiet_events,
                       "unexplained": len(unexplained), "below_target": missed}, f, indent=1)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
