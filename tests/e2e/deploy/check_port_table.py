#!/usr/bin/env python3
"""Checks the port table of the Grafana dashboard (used by
tests/e2e/deploy_port_table_test.sh): the panel titled "Ports: link partner,
PCI placement, nearest GPUs" in deploy/grafana/fabricscope.json.

  check_port_table.py DASHBOARD_JSON OUT_DIR

  - its targets are instant table queries, merged (transformation "merge") and
    organized; every column the organize step orders or renames is a label that
    some target keeps, and every target's kept labels are ordered there;
  - the targets, with the dashboard variables set to ".*", are written as
    recording rules plus a `promtool test rules` file into OUT_DIR with
    synthetic topology series: GPU/NIC pairs of every relation class, where
    the nearest-GPU target must keep, per device, exactly the GPUs of the
    closest class present (PIX before PXB before PHB before NODE before SYS,
    ties kept), and the PCI and partner targets one series per port with the
    labels the table shows. The caller runs promtool on OUT_DIR/test.yml.
Exit 0: the static checks pass and the files are written; 1: a check failed.
"""
import json
import os
import re
import sys

TITLE = "Ports: link partner, PCI placement, nearest GPUs"
dash = json.load(open(sys.argv[1]))
out_dir = sys.argv[2]
problems = []
panel = next((p for p in dash["panels"] if p.get("title") == TITLE), None)
if panel is None:
    print(f"no panel titled {TITLE!r}")
    sys.exit(1)
if panel["type"] != "table":
    problems.append(f"panel type {panel['type']}, expected table")
targets = panel["targets"]
for t in targets:
    if t.get("format") != "table" or not t.get("instant") or t.get("range"):
        problems.append(f"target {t['refId']}: not an instant table query")
ids = [x["id"] for x in panel.get("transformations", [])]
if ids[:1] != ["merge"] or "organize" not in ids:
    problems.append(f"transformations {ids}: expected merge, then organize")
organize = next(x["options"] for x in panel["transformations"] if x["id"] == "organize")

# Labels each target keeps: its outermost `max by (...)`.
kept = {}
for t in targets:
    m = re.match(r"\s*max by \(([^)]*)\)", t["expr"])
    if not m:
        problems.append(f"target {t['refId']}: expected an outer 'max by (labels)'")
        continue
    kept[t["refId"]] = [x.strip() for x in m.group(1).split(",")]
labels = set(l for ls in kept.values() for l in ls)
for col in list(organize.get("indexByName", {})) + list(organize.get("renameByName", {})):
    if col not in labels:
        problems.append(f"organize names column {col!r}, which no target keeps")
for l in labels:
    if l not in organize.get("indexByName", {}):
        problems.append(f"label {l!r} is kept but not ordered in organize.indexByName")
for ref in kept:
    if not organize.get("excludeByName", {}).get(f"Value #{ref}"):
        problems.append(f"the value column of target {ref} is not hidden")
shared = set.intersection(*(set(v) for v in kept.values())) if kept else set()
if shared != {"instance", "device"}:
    problems.append(f"targets share labels {sorted(shared)}: merge needs exactly instance, device")

by_metric = {}
for t in targets:
    for name in re.findall(r"\b(fabricscope_[a-z_]+)\{", t["expr"]):
        by_metric[name] = t
need = {"fabricscope_gpu_nic_affinity", "fabricscope_port_pci_info", "fabricscope_link_partner_info"}
if set(by_metric) != need:
    problems.append(f"targets read {sorted(by_metric)}, expected {sorted(need)}")
if problems:
    for p in problems:
        print(p)
    sys.exit(1)


def expr_of(metric):
    e = by_metric[metric]["expr"]
    for var in ("job", "instance", "device", "netdev"):
        e = e.replace("$" + var, ".*")
    return e


rules = {"groups": [{"name": "port_table", "rules": [
    {"record": "port_table:nearest_gpu", "expr": expr_of("fabricscope_gpu_nic_affinity")},
    {"record": "port_table:pci", "expr": expr_of("fabricscope_port_pci_info")},
    {"record": "port_table:partner", "expr": expr_of("fabricscope_link_partner_info")},
]}]}

G0, G1, G2 = "0000:1b:00.0", "0000:3d:00.0", "0000:9a:00.0"
# device -> [(gpu, index, relation)]; the expected nearest set per device.
pairs = {
    "mlx5_0": [(G0, 0, "PIX"), (G1, 1, "NODE"), (G2, 2, "SYS")],
    "mlx5_1": [(G0, 0, "NODE"), (G1, 1, "PXB"), (G2, 2, "PXB")],  # ties kept
    "mlx5_2": [(G0, 0, "SYS"), (G1, 1, "PHB"), (G2, 2, "SYS")],
    "mlx5_3": [(G0, 0, "SYS"), (G1, 1, "SYS"), (G2, 2, "NODE")],
    "mlx5_4": [(G0, 0, "SYS"), (G1, 1, "SYS"), (G2, 2, "SYS")],
}
nearest = {"mlx5_0": [G0], "mlx5_1": [G1, G2], "mlx5_2": [G1], "mlx5_3": [G2],
           "mlx5_4": [G0, G1, G2]}
series = []
base = 'job="fabricscope",instance="h1:9478"'
for dev, ps in pairs.items():
    for gpu, idx, rel in ps:
        series.append({"series": f'fabricscope_gpu_nic_affinity{{{base},gpu_bus_id="{gpu}",'
                                 f'gpu_index="{idx}",device="{dev}",relation="{rel}"}}',
                       "values": "1 1"})
rank = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}
exp_nearest = []
for dev, gpus in nearest.items():
    for gpu, idx, rel in pairs[dev]:
        if gpu in gpus:
            exp_nearest.append({"labels": f'port_table:nearest_gpu{{instance="h1:9478",device="{dev}",'
                                          f'gpu_bus_id="{gpu}",gpu_index="{idx}",relation="{rel}"}}',
                                "value": rank[rel]})
series += [
    {"series": f'fabricscope_port_pci_info{{{base},device="mlx5_0",port="1",netdev="eth0",'
               'pci_address="0000:1c:00.0",numa_node="0"}', "values": "1 1"},
    {"series": f'fabricscope_link_partner_info{{{base},device="mlx5_0",port="1",netdev="eth0",'
               'source="lldp",partner_chassis_id="00:11:22:33:44:55",partner_system_name="leaf07",'
               'partner_port_id="Ethernet1/12",partner_port_description="to h1"}', "values": "1 1"},
]
tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
    "interval": "1m", "input_series": series, "promql_expr_test": [
        {"expr": "port_table:nearest_gpu", "eval_time": "1m", "exp_samples": exp_nearest},
        {"expr": "port_table:pci", "eval_time": "1m", "exp_samples": [
            {"labels": 'port_table:pci{instance="h1:9478",device="mlx5_0",port="1",netdev="eth0",'
                       'pci_address="0000:1c:00.0",numa_node="0"}', "value": 1}]},
        {"expr": "port_table:partner", "eval_time": "1m", "exp_samples": [
            {"labels": 'port_table:partner{instance="h1:9478",device="mlx5_0",port="1",netdev="eth0",'
                       'source="lldp",partner_chassis_id="00:11:22:33:44:55",'
                       'partner_system_name="leaf07",partner_port_id="Ethernet1/12",'
                       'partner_port_description="to h1"}', "value": 1}]},
    ]}]}
# JSON is YAML: no PyYAML needed.
with open(os.path.join(out_dir, "rules.yml"), "w") as f:
    json.dump(rules, f, indent=1)
with open(os.path.join(out_dir, "test.yml"), "w") as f:
    json.dump(tests, f, indent=1)
print(f"port table: {len(targets)} targets, {len(labels)} columns; "
      f"promtool cases for {len(pairs)} devices written")
