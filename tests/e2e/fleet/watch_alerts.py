#!/usr/bin/env python3
"""Watches a Prometheus server's alerts while a fabricsim fleet scenario runs.

usage: watch_alerts.py API_URL GROUND_TRUTH_JSON OUT_JSON SECONDS_AFTER_START MAX_SECONDS

Polls API_URL/alerts every 0.25 s from now until SECONDS_AFTER_START seconds
after the first episode of the ground truth started, or MAX_SECONDS after the
watcher started, whichever comes first (the quiet scenario has no episode: it
is watched for MAX_SECONDS), and records,
for every alert name and label set, when it was first seen pending and
firing. Writes OUT_JSON:
  {"episode_start_unix": float|null, "watch_start_unix": float,
   "alerts": [{"name", "labels", "first_pending_unix", "first_firing_unix"}]}
Bounded: exits after the window however Prometheus behaves.
"""
import json
import sys
import time
import urllib.request


def episode_start(path):
    try:
        with open(path) as f:
            gt = json.load(f)
    except (OSError, ValueError):
        return None
    eps = gt.get("episodes") or []
    return eps[0]["start_unix_nano"] / 1e9 if eps else None


def main():
    api, gt_path, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    window, max_seconds = float(sys.argv[4]), float(sys.argv[5])
    watch_start = time.time()
    seen = {}
    start = None
    while True:
        now = time.time()
        if start is None:
            start = episode_start(gt_path)
        if (start is not None and now > start + window) or now > watch_start + max_seconds:
            break
        try:
            with urllib.request.urlopen(api + "/alerts", timeout=2) as r:
                alerts = json.load(r)["data"]["alerts"]
        except Exception:  # noqa: BLE001 - a slow scrape is retried
            alerts = []
        for a in alerts:
            labels = a["labels"]
            key = json.dumps(labels, sort_keys=True)
            rec = seen.setdefault(key, {"name": labels.get("alertname"), "labels": labels,
                                        "first_pending_unix": None, "first_firing_unix": None})
            if rec["first_pending_unix"] is None:
                rec["first_pending_unix"] = now
            if a["state"] == "firing" and rec["first_firing_unix"] is None:
                rec["first_firing_unix"] = now
        time.sleep(0.25)
    with open(out_path, "w") as f:
        json.dump({"episode_start_unix": start, "watch_start_unix": watch_start,
                   "alerts": list(seen.values())}, f, indent=1)


if __name__ == "__main__":
    main()
