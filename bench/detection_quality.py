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
interval; windowed detectors can outlast the cause by their window).

Per detector: recall (episodes matched / episodes), precision (events matching
an episode of their own detector / events), and the detection delay of each
matched episode = the first matching event's detected_unix_nano - the episode
start (median and worst). Events of other detectors during an episode on the
same port (a storm also bursts pause frames) are counted as "side events", not
as false positives; events with no episode on their port at all are
"unexplained". Targets (issue #7): recall 1.0, no event on quiet, PFC storm
detected within the detection time (200 ms) + 2 poll intervals (20 ms).
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
    return ev["start_unix_nano"] <= gt["end_unix_nano"] + 2_000_000_000 and \
        end >= gt["start_unix_nano"] - 100_000_000


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "build", "release"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=20, help="model seconds per run")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--json", help="also write the per-detector figures here")
    a = ap.parse_args()

    per = {}  # detector -> dict
    quiet_events = 0
    unexplained = []
    def d(name):
        return per.setdefault(name, {"episodes": 0, "found": 0, "events": 0, "true_events": 0,
                                     "side_events": 0, "delays_ms": []})
    with tempfile.TemporaryDirectory(prefix="fabricscope-dq.") as work:
        for scenario in a.scenarios.split(","):
            for seed in range(1, a.seeds + 1):
                events, gts = run(a.bin, scenario, seed, a.duration, work)
                if scenario == "quiet":
                    quiet_events += len(events)
                for gt in gts:
                    s = d(gt["detector"])
                    s["episodes"] += 1
                    hits = [e for e in events if matches(e, gt)]
                    if hits:
                        s["found"] += 1
                        first = min(hits, key=lambda e: e["detected_unix_nano"])
                        s["delays_ms"].append((first["detected_unix_nano"] - gt["start_unix_nano"]) / 1e6)
                for e in events:
                    s = d(e["detector"])
                    s["events"] += 1
                    if any(matches(e, gt) for gt in gts):
                        s["true_events"] += 1
                    elif any(matches(e, gt, same_detector=False) for gt in gts):
                        s["side_events"] += 1
                    else:
                        unexplained.append((scenario, seed, e["detector"], e["kind"], e["summary"]))

    print(f"{'detector':<18} {'episodes':>8} {'recall':>7} {'events':>7} {'precision':>9} "
          f"{'side':>5} {'median delay':>13} {'worst delay':>12}")
    for name in sorted(per):
        s = per[name]
        recall = s["found"] / s["episodes"] if s["episodes"] else float("nan")
        precision = s["true_events"] / s["events"] if s["events"] else float("nan")
        med = f"{statistics.median(s['delays_ms']):.0f} ms" if s["delays_ms"] else "-"
        worst = f"{max(s['delays_ms']):.0f} ms" if s["delays_ms"] else "-"
        print(f"{name:<18} {s['episodes']:>8} {recall:>7.2f} {s['events']:>7} {precision:>9.2f} "
              f"{s['side_events']:>5} {med:>13} {worst:>12}")
    print(f"events on quiet: {quiet_events}; unexplained events: {len(unexplained)}")
    for u in unexplained[:20]:
        print("  unexplained:", *u)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"detectors": per, "quiet_events": quiet_events,
                       "unexplained": len(unexplained)}, f, indent=1)
    ok = quiet_events == 0 and all(s["found"] == s["episodes"] for s in per.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
