#!/usr/bin/env python3
"""Consistency checks of deploy/ (used by tests/e2e/deploy_manifests_test.sh).

  check_manifests.py SRC HELP_FILE METRICS_REFERENCE_FILE

Parses every YAML file under deploy/ and checks the Kubernetes manifests, the
systemd unit, the Grafana dashboard and deploy/README.md against each other,
against `fabricscoped --help` (HELP_FILE) and against the metric reference
(`fabricscoped --dump-metrics-reference`). Prints every problem; exit 1 if any.
"""
import glob
import json
import os
import re
import sys

import yaml

SRC, HELP, REFERENCE = sys.argv[1:4]
DEPLOY = os.path.join(SRC, "deploy")
problems = []


def problem(msg):
    if msg not in problems:
        problems.append(msg)


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


# Every YAML file parses.
docs = {}
for path in sorted(glob.glob(os.path.join(DEPLOY, "**", "*.y*ml"), recursive=True)):
    try:
        docs[os.path.relpath(path, DEPLOY)] = load_all(path)
    except yaml.YAMLError as e:
        problem(f"{path}: YAML error: {e}")
if len(docs) < 10:
    problem(f"expected at least 10 YAML files under deploy/, found {sorted(docs)}")

help_text = open(HELP).read()
help_flags = set(re.findall(r"^  --([a-z0-9.-]+)", help_text, re.M))
if len(help_flags) < 20:
    problem(f"could not read the flags from --help ({sorted(help_flags)})")
reference = open(REFERENCE).read()
known_metrics = set(re.findall(r"^\| `(\w+)` \|", reference, re.M))
if len(known_metrics) < 30:
    problem("could not read the metric names from the reference")


def size_bytes(text):
    m = re.fullmatch(r"(\d+)\s*(B|KiB|MiB|GiB|K|M|G|Ki|Mi|Gi)?", text.strip())
    if not m:
        raise ValueError(f"not a size: {text}")
    unit = {None: 1, "B": 1, "K": 1 << 10, "KiB": 1 << 10, "Ki": 1 << 10, "M": 1 << 20,
            "MiB": 1 << 20, "Mi": 1 << 20, "G": 1 << 30, "GiB": 1 << 30, "Gi": 1 << 30}[m.group(2)]
    return int(m.group(1)) * unit


def parse_duration(text):
    """'20s', '1m', '500ms', '2m30s' or a bare number of seconds -> seconds."""
    text = str(text).strip()
    if re.fullmatch(r"[0-9.]+", text):
        return float(text)
    total = 0.0
    for num, unit in re.findall(r"([0-9.]+)(ms|s|m|h)", text):
        total += float(num) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    return total


def check_flags(where, args):
    """Every --flag in args exists in --help; returns {flag: value}."""
    values = {}
    for a in args:
        m = re.fullmatch(r"--([a-z0-9.-]+)(?:=(.*))?", a)
        if not m:
            continue
        if m.group(1) not in help_flags:
            problem(f"{where}: --{m.group(1)} is not a fabricscoped flag (--help)")
        values[m.group(1)] = m.group(2)
    return values


def check_memory(where, limit_bytes, flags):
    budget = size_bytes(flags.get("store-memory") or "256MiB") + size_bytes(flags.get("span-memory") or "64MiB")
    # The daemon's own footprint was measured at ~22 MiB (deploy/README.md); ask for 64 MiB of room.
    if limit_bytes < budget + (64 << 20):
        problem(f"{where}: memory limit {limit_bytes} does not leave 64 MiB above the store budgets ({budget})")


# --- Kubernetes
k8s = {}
for rel, ds in docs.items():
    if not rel.startswith("kubernetes/"):
        continue
    for d in ds:
        if not isinstance(d, dict) or "kind" not in d:
            problem(f"{rel}: a document without kind")
            continue
        if d["kind"] == "Kustomization":
            k8s["Kustomization"] = (rel, d)
            continue
        for key in ("apiVersion", "metadata"):
            if key not in d:
                problem(f"{rel}: {d['kind']} without {key}")
        meta = d.get("metadata", {})
        if not meta.get("name"):
            problem(f"{rel}: {d['kind']} without metadata.name")
        if d["kind"] != "Namespace" and meta.get("namespace") != "fabricscope":
            problem(f"{rel}: {d['kind']} {meta.get('name')} not in namespace fabricscope")
        k8s.setdefault(d["kind"], [])
        k8s[d["kind"]].append((rel, d))

for kind in ("Namespace", "DaemonSet", "Service", "ServiceMonitor", "PrometheusRule", "Kustomization"):
    if kind not in k8s:
        problem(f"deploy/kubernetes: no {kind}")
if problems:
    print("\n".join(problems))
    sys.exit(1)

# kustomization lists every manifest.
rel, kust = k8s["Kustomization"]
listed = set(kust.get("resources", []))
present = {os.path.basename(r) for r in docs if r.startswith("kubernetes/") and not r.endswith("kustomization.yaml")}
if listed != present:
    problem(f"{rel}: resources {sorted(listed)} != manifests {sorted(present)}")

# PrometheusRule spec == the rule file it is generated from.
rule_files = sorted(glob.glob(os.path.join(DEPLOY, "prometheus", "fabricscope-*.rules.yml")))
pr_names = set()
for rel, d in k8s["PrometheusRule"]:
    name = d["metadata"]["name"].removeprefix("fabricscope-")
    pr_names.add(name)
    src = os.path.join(DEPLOY, "prometheus", f"fabricscope-{name}.rules.yml")
    if not os.path.exists(src):
        problem(f"{rel}: no rule file {src}")
    elif d.get("spec") != load_all(src)[0]:
        problem(f"{rel}: spec differs from {src} (run tools/gen-k8s-manifests.sh)")
for f in rule_files:
    name = os.path.basename(f)[len("fabricscope-"):-len(".rules.yml")]
    if name not in pr_names:
        problem(f"{f}: no PrometheusRule generated from it")

# DaemonSet.
rel, ds = k8s["DaemonSet"][0]
pod = ds["spec"]["template"]["spec"]
pod_labels = ds["spec"]["template"]["metadata"]["labels"]
if ds["spec"]["selector"]["matchLabels"].items() - pod_labels.items():
    problem(f"{rel}: selector does not match the pod labels")
if pod.get("hostNetwork") is not True:
    problem(f"{rel}: hostNetwork must be true (netlink/ioctl collectors need the host netns)")
if pod.get("securityContext", {}).get("runAsNonRoot") is not True:
    problem(f"{rel}: pod must runAsNonRoot")
volumes = {v["name"]: v for v in pod.get("volumes", [])}
c = pod["containers"][0]
flags = check_flags(rel, c.get("args", []))
sys_mounts = [m for m in c.get("volumeMounts", []) if volumes.get(m["name"], {}).get("hostPath", {}).get("path") == "/sys"]
if not sys_mounts:
    problem(f"{rel}: no hostPath /sys mount")
for m in sys_mounts:
    if m.get("readOnly") is not True:
        problem(f"{rel}: /sys must be mounted readOnly")
    if flags.get("sysfs-root") != m["mountPath"]:
        problem(f"{rel}: --sysfs-root={flags.get('sysfs-root')} but /sys is mounted at {m['mountPath']}")
# --state-dir: a writable node directory mounted there, handed to the daemon's
# user before it starts.
if "state-dir" in flags:
    state_mounts = [m for m in c.get("volumeMounts", []) if m["mountPath"] == flags["state-dir"]]
    if not state_mounts or state_mounts[0].get("readOnly"):
        problem(f"{rel}: --state-dir={flags['state-dir']} but no writable volume is mounted there")
    elif "hostPath" not in volumes.get(state_mounts[0]["name"], {}):
        problem(f"{rel}: the state volume must be a hostPath (it must outlive the pod)")
    uid = pod.get("securityContext", {}).get("runAsUser")
    inits = " ".join(" ".join(i.get("command", [])) for i in pod.get("initContainers", []))
    if f"chown {uid}:" not in inits or flags["state-dir"] not in inits:
        problem(f"{rel}: no init container chowns {flags['state-dir']} to the daemon's user {uid}")
    grace = pod.get("terminationGracePeriodSeconds", 30)
    timeout = parse_duration(flags.get("state-save-timeout", "20s"))
    if grace <= timeout:
        problem(f"{rel}: terminationGracePeriodSeconds {grace} must exceed --state-save-timeout {timeout}s")
sc = c.get("securityContext", {})
if sc.get("allowPrivilegeEscalation") is not False or sc.get("capabilities", {}).get("drop") != ["ALL"] \
        or sc.get("capabilities", {}).get("add") or sc.get("privileged") or sc.get("readOnlyRootFilesystem") is not True:
    problem(f"{rel}: container must drop ALL capabilities, add none, not escalate, read-only root")
ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
metrics_port = int((flags.get("metrics-listen") or "0.0.0.0:9478").rsplit(":", 1)[1])
if ports.get("metrics") != metrics_port:
    problem(f"{rel}: port 'metrics' {ports.get('metrics')} != --metrics-listen port {metrics_port}")
grpc_port = int((flags.get("grpc-listen") or "127.0.0.1:9479").rsplit(":", 1)[1])
if ports.get("grpc") != grpc_port:
    problem(f"{rel}: port 'grpc' {ports.get('grpc')} != --grpc-listen port {grpc_port}")
for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
    get = c.get(probe, {}).get("httpGet", {})
    if get.get("path") != path or get.get("port") not in ("metrics", metrics_port):
        problem(f"{rel}: {probe} must GET {path} on the metrics port")
limits = c.get("resources", {}).get("limits", {})
if "memory" not in limits or "cpu" not in limits or "requests" not in c.get("resources", {}):
    problem(f"{rel}: resources need requests and cpu/memory limits")
else:
    check_memory(rel, size_bytes(limits["memory"]), flags)

# Service and ServiceMonitor.
rel_s, svc = k8s["Service"][0]
if svc["spec"]["selector"].items() - pod_labels.items():
    problem(f"{rel_s}: selector does not select the DaemonSet's pods")
svc_ports = {p["name"]: p for p in svc["spec"]["ports"]}
if svc_ports.get("metrics", {}).get("targetPort") not in ("metrics", metrics_port):
    problem(f"{rel_s}: port 'metrics' must target the container's metrics port")
alerts_text = open(os.path.join(DEPLOY, "prometheus", "fabricscope-alerts.rules.yml")).read()
jobs = set(re.findall(r'job="([^"]+)"', alerts_text))
if jobs != {svc["metadata"]["name"]}:
    problem(f"{rel_s}: Service name {svc['metadata']['name']} (the job label) != job {jobs} in the alerts")
rel_m, sm = k8s["ServiceMonitor"][0]
if sm["spec"]["selector"]["matchLabels"].items() - svc["metadata"]["labels"].items():
    problem(f"{rel_m}: selector does not select the Service")
for ep in sm["spec"]["endpoints"]:
    if ep.get("port") not in svc_ports:
        problem(f"{rel_m}: endpoint port {ep.get('port')} is not a Service port")

# --- systemd unit.
unit = open(os.path.join(DEPLOY, "systemd", "fabricscoped.service")).read()
settings = {}
for line in unit.splitlines():
    m = re.match(r"^([A-Za-z]+)=(.*)$", line)
    if m:
        settings.setdefault(m.group(1), []).append(m.group(2))
exec_start = settings.get("ExecStart", [""])[0].split()
if not exec_start or not exec_start[0].endswith("/fabricscoped"):
    problem("fabricscoped.service: ExecStart does not run fabricscoped")
uflags = check_flags("fabricscoped.service", exec_start[1:])
required = {"DynamicUser": "yes", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
            "PrivateTmp": "yes", "Restart": "on-failure", "CapabilityBoundingSet": "", "AmbientCapabilities": ""}
for k, v in required.items():
    if settings.get(k) != [v]:
        problem(f"fabricscoped.service: want {k}={v}, have {settings.get(k)}")
if "PrivateNetwork" in settings:
    problem("fabricscoped.service: PrivateNetwork hides the host's netdevs")
if "state-dir" in uflags:
    if settings.get("StateDirectory") != ["fabricscope"] or uflags["state-dir"] != "/var/lib/fabricscope":
        problem("fabricscoped.service: --state-dir must be /var/lib/fabricscope with StateDirectory=fabricscope "
                "(a DynamicUser can write nowhere else)")
    stop = parse_duration(settings.get("TimeoutStopSec", ["90s"])[0])
    if stop <= parse_duration(uflags.get("state-save-timeout", "20s")):
        problem(f"fabricscoped.service: TimeoutStopSec {stop}s must exceed --state-save-timeout")
if not settings.get("CPUQuota"):
    problem("fabricscoped.service: no CPUQuota")
if not settings.get("MemoryMax"):
    problem("fabricscoped.service: no MemoryMax")
else:
    check_memory("fabricscoped.service", size_bytes(settings["MemoryMax"][0]), uflags)

# --- README: every --help flag in the configuration reference.
readme = open(os.path.join(DEPLOY, "README.md")).read()
for f in sorted(help_flags):
    if f"`--{f}`" not in readme:
        problem(f"deploy/README.md: flag --{f} (fabricscoped --help) is not documented")

# --- Grafana dashboard and rules: every metric exists, every fabricscope:* and fabric:* is recorded.
recorded = set()
for f in rule_files:
    for g in load_all(f)[0]["groups"]:
        for r in g["rules"]:
            if "record" in r:
                recorded.add(r["record"])
exprs = []
uids = set()
for dash_name in ("fabricscope.json", "fabricscope-fleet.json"):
    dash_path = os.path.join(DEPLOY, "grafana", dash_name)
    dash = json.load(open(dash_path))
    for key in ("uid", "title", "schemaVersion", "panels", "templating"):
        if key not in dash:
            problem(f"{dash_path}: no {key}")
    if dash.get("uid") in uids:
        problem(f"{dash_path}: duplicate dashboard uid {dash.get('uid')}")
    uids.add(dash.get("uid"))
    ids = set()
    for p in dash["panels"]:
        where = f"{dash_name}: panel {p.get('title')!r}"
        if p.get("id") in ids:
            problem(f"{dash_name}: duplicate panel id {p.get('id')}")
        ids.add(p.get("id"))
        g = p.get("gridPos", {})
        if not {"x", "y", "w", "h"} <= g.keys() or g["x"] + g["w"] > 24:
            problem(f"{where} has a bad gridPos {g}")
        if p["type"] == "row":
            continue
        if p.get("datasource", {}).get("uid") != "${datasource}":
            problem(f"{where} does not use the datasource variable")
        if not p.get("targets") or not all(t.get("expr") for t in p["targets"]):
            problem(f"{where} has no PromQL targets")
        if not p.get("description"):
            problem(f"{where} has no description")
        exprs += [t["expr"] for t in p.get("targets", [])]
rule_exprs = []
for f in rule_files:
    for g in load_all(f)[0]["groups"]:
        rule_exprs += [r["expr"] for r in g["rules"]]
for where, texts in (("dashboard", exprs), ("rules", rule_exprs)):
    for e in texts:
        for name in re.findall(r"\bfabric(?:scope)?:[a-z0-9_:]+", e):
            if name not in recorded:
                problem(f"{where}: {name} is not a recording rule")
        for name in re.findall(r"\b(fabricscope_[a-z0-9_]+)", e):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if name not in known_metrics and base not in known_metrics:
                problem(f"{where}: metric {name} is not in fabricscoped --dump-metrics-reference")

# The container image builds from the same sources and packages as a host
# build: its build stage copies every directory the top-level CMakeLists.txt
# reads (add_subdirectory, include(cmake/...)) and installs every library -dev
# package deploy/bootstrap.sh installs (less the test-only ones).
with open(os.path.join(DEPLOY, "container", "Containerfile")) as f:
    containerfile = f.read()
with open(os.path.join(SRC, "CMakeLists.txt")) as f:
    top = f.read()
copied = set(re.findall(r"^COPY (?!--from)(\S+) /src/", containerfile, re.M))
needed = set(re.findall(r"^add_subdirectory\((\w+)\)", top, re.M)) | \
    ({"cmake"} if re.search(r"^include\(cmake/", top, re.M) else set())
for d in sorted(needed - {"tests", "fuzz", "bench"} - copied):
    problem(f"container/Containerfile: the build stage does not COPY {d}/ (CMakeLists.txt reads it)")
with open(os.path.join(DEPLOY, "bootstrap.sh")) as f:
    bootstrap = f.read()
test_only = {"libgtest-dev", "libgmock-dev", "libbenchmark-dev", "libclang-rt-14-dev"}
for pkg in sorted(set(re.findall(r"\b((?:lib[a-z0-9.+-]+|zlib1g)-dev)\b", bootstrap)) - test_only):
    if not re.search(r"(?<![\w.+-])" + re.escape(pkg) + r"(?![\w.+-])", containerfile):
        problem(f"container/Containerfile: the build stage does not install {pkg} (deploy/bootstrap.sh does)")

for p in problems:
    print(p)
print(f"checked {len(docs)} YAML files, {sum(len(v) for k, v in k8s.items() if k != 'Kustomization')} "
      f"Kubernetes objects, the systemd unit, {len(exprs)} dashboard and {len(rule_exprs)} rule expressions")
sys.exit(1 if problems else 0)
