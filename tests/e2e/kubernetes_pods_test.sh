#!/usr/bin/env bash
# Pods (issue #37), end to end: a fake kubelet serving PodResources v1 on a
# unix socket (tests/support/fake_kubelet.h), a fake host (sysfs with two
# RoCE PFs and an SR-IOV VF of the first, a /proc with a pod's process and
# the kubelet's log tree), and the real OpenTelemetry JS SDK exporting spans
# whose resources name their pod (k8s.* attributes) or only their process.
#
#   llm/vllm-0 (container engine) holds the VF 0000:3b:00.2 (mlx5_2, PF
#   mlx5_0 on fsroce0) and a GPU; llm/sglang-0 holds an RDMA shared-device id
#   that names nothing. Process 4242 (cgroup v2, systemd driver) has the VF's
#   uverbs2 open.
#
#   phase 1  fsroce1 (no device of vllm-0) pauses 80 % for 2.5 s. Spans in it:
#            A vllm-0 by k8s attributes, D by process.pid 4242 alone, B with
#            neither. Want: A and D judged on vllm-0's devices (mlx5_2, mlx5_0:
#            not fabric), B on every port (fabric on fsroce1).
#   phase 2  the VF's out_of_sequence climbs; span C of vllm-0: fabric, on the
#            VF.
# Then: correlate --pod selects A, C, D; /metrics names the pod's devices;
# a recording carries the pods and analyze judges the four spans as live did;
# the kubelet goes away for several polls (one log line, up 0, the
# allocations kept) and comes back (one line, up 1).
source "$(dirname "$0")/lib.sh"

CLI="$BIN/fabricscope"
KUBELET="$BIN/fake_kubelet"
[ -x "$KUBELET" ] || fail "fake_kubelet not built"
otel_npm_modules
command -v jq >/dev/null || fail "jq is required"

UID_A=8f2c1d90-3e5a-4b17-9c2e-5da9abb51763
CID_A=$(printf 'a%.0s' $(seq 1 64))
SYS="$WORK/sys"
DIR="$WORK/ethtool"
PROC="$WORK/proc"
LOGS="$WORK/log"
mkdir -p "$DIR" "$WORK/kubelet"
# port DEV NETDEV PCI [PF_PCI] UVERBS
port() {
  local p="$SYS/class/infiniband/$1/ports/1"
  mkdir -p "$p/gid_attrs/ndevs" "$p/hw_counters" "$SYS/bus/pci/devices/$3/infiniband/$1" \
    "$SYS/class/infiniband_verbs/uverbs$5"
  echo Ethernet >"$p/link_layer"
  echo "4: ACTIVE" >"$p/state"
  echo "100 Gb/sec (4X EDR)" >"$p/rate"
  echo "$2" >"$p/gid_attrs/ndevs/0"
  for c in np_ecn_marked_roce_packets np_cnp_sent out_of_sequence local_ack_timeout_err; do
    echo 0 >"$p/hw_counters/$c"
  done
  echo "$1" >"$SYS/class/infiniband_verbs/uverbs$5/ibdev"
  [ -z "$4" ] || ln -s "$SYS/bus/pci/devices/$4" "$SYS/bus/pci/devices/$3/physfn"
}
port mlx5_0 fsroce0 0000:3b:00.0 "" 0
port mlx5_1 fsroce1 0000:86:00.0 "" 1
port mlx5_2 fsvf0 0000:3b:00.2 0000:3b:00.0 2
mkdir -p "$PROC/driver/nvidia/gpus/0000:1b:00.0" "$PROC/4242/fd" "$PROC/77/fd"
printf 'Model: \t\t NVIDIA H100\nGPU UUID: \t GPU-11111111-2222-3333-4444-555555555555\nDevice Minor: \t 2\n' \
  >"$PROC/driver/nvidia/gpus/0000:1b:00.0/information"
echo "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${UID_A//-/_}.slice/cri-containerd-$CID_A.scope" \
  >"$PROC/4242/cgroup"
ln -s /dev/infiniband/uverbs2 "$PROC/4242/fd/5"
ln -s /dev/nvidiactl "$PROC/4242/fd/6"
echo "0::/system.slice/lldpd.service" >"$PROC/77/cgroup"  # not a pod
mkdir -p "$LOGS/pods/llm_vllm-0_$UID_A/engine" "$LOGS/containers"
ln -s "/var/log/pods/llm_vllm-0_$UID_A/engine/0.log" "$LOGS/containers/vllm-0_llm_engine-$CID_A.log"
cat >"$WORK/pods.txt" <<EOF
llm vllm-0 engine nvidia.com/gpu GPU-11111111-2222-3333-4444-555555555555
llm vllm-0 engine nvidia.com/cx7_vf 0000:3b:00.2
llm sglang-0 worker rdma/hca_shared_devices_a ib-shared-7
EOF
SOCK="$WORK/kubelet/kubelet.sock"
up_value() { sed -n 's/^fabricscope_kubernetes_up //p' "$WORK/m"; }
# wait_up V: scrapes into $WORK/m until fabricscope_kubernetes_up is V (bounded).
wait_up() {
  for _ in $(seq 1 $(tries 100)); do
    scrape >"$WORK/m" 2>/dev/null || true
    [ "$(up_value)" = "$1" ] && return 0
    sleep 0.1
  done
  return 1
}
start_kubelet() {
  "$KUBELET" --socket="$SOCK" --pods="$WORK/pods.txt" >>"$WORK/kubelet.out" 2>&1 &
  KUBELET_PID=$!
  PIDS+=("$KUBELET_PID")
  for _ in $(seq 1 $(tries 50)); do
    [ -S "$SOCK" ] && return 0
    sleep 0.1
  done
  fail "fake kubelet did not serve: $(cat "$WORK/kubelet.out")"
}
start_kubelet

declare -A PAUSE_US=([fsroce0]=1000 [fsroce1]=1000 [fsvf0]=1000)
put() {
  printf 'NIC statistics:\n     rx_prio3_pause: %d\n     rx_prio3_pause_duration: %d\n' \
    "$((PAUSE_US[$1] / 100))" "${PAUSE_US[$1]}" >"$DIR/.$1.tmp"
  mv "$DIR/.$1.tmp" "$DIR/$1"
}
for n in fsroce0 fsroce1 fsvf0; do put $n; done
keep() {
  local end=$(($(now_us) + $1 * 1000))
  while [ "$(now_us)" -lt "$end" ]; do
    for n in fsroce0 fsroce1 fsvf0; do put $n; done
    sleep 0.05
  done
}

start_daemon --sysfs-root="$SYS" --ethtool-dir="$DIR" --collectors=rdma_sysfs,ethtool \
  --lldpd-socket= --medium-interval=20ms --slow-interval=200ms --config-interval=1s \
  --baseline-window=2s --kubernetes-socket="$SOCK" --proc-root="$PROC" \
  --kubernetes-log-dir="$LOGS"
grpc_address
grep -q "kubernetes=$SOCK" "$WORK/daemon.log" || fail "start line does not name the kubelet socket"

# /metrics: the pods' devices and the process, once the source has polled.
for _ in $(seq 1 $(tries 100)); do
  scrape >"$WORK/m" 2>/dev/null || true
  grep -q '^fabricscope_pod_processes{via="devices"} 1' "$WORK/m" &&
    [ "$(grep -c '^fabricscope_pfc_pause_seconds_total{netdev="fs' "$WORK/m")" = 3 ] && break
  sleep 0.1
done
grep -qF 'fabricscope_pod_device_info{namespace="llm",pod="vllm-0",container="engine",resource="nvidia.com/cx7_vf",device_id="0000:3b:00.2",kind="rdma",device="mlx5_2",parent_device="mlx5_0",bus_id="0000:3b:00.2",gpu_bus_id=""} 1' "$WORK/m" ||
  fail "the VF's pod_device_info: $(grep pod_device_info "$WORK/m")"
grep -qF 'device_id="GPU-11111111-2222-3333-4444-555555555555",kind="gpu",device="",parent_device="",bus_id="0000:1b:00.0",gpu_bus_id="0000:1b:00.0"} 1' "$WORK/m" ||
  fail "the GPU's pod_device_info: $(grep pod_device_info "$WORK/m")"
grep -qF 'pod="sglang-0",container="worker",resource="rdma/hca_shared_devices_a",device_id="ib-shared-7",kind="unresolved"' "$WORK/m" ||
  fail "the shared-device id is not reported as naming nothing"
[ "$(up_value)" = 1 ] || fail "kubernetes_up is not 1"
[ "$(metric_value 'fabricscope_pod_processes{via="devices"}' "$WORK/m")" = 1 ] ||
  fail "process 4242 not attributed by its devices"
keep 2500 # a baseline

SPANS="$WORK/spans.jsonl"
: >"$SPANS"
RES_POD='{"service.name":"vllm","k8s.namespace.name":"llm","k8s.pod.name":"vllm-0","k8s.container.name":"engine","process.pid":999999}'
RES_PID='{"service.name":"vllm","process.pid":4242}'
RES_NONE='{"service.name":"bench"}'
# span TAG RESOURCE START_NS END_NS
span() {
  printf '{"tag":"%s","name":"decode_step","start_unix_nano":"%s","end_unix_nano":"%s","resource":%s}\n' \
    "$1" "$3" "$4" "$2" >>"$SPANS"
}
ms() { echo $(($1 * 1000000)); }

# Phase 1: a burst on fsroce1, no device of vllm-0.
B0=$(($(now_us) * 1000))
burst fsroce1 2500
for t in A:$RES_POD D:$RES_PID B:$RES_NONE; do
  span "${t%%:*}" "${t#*:}" $((B0 + $(ms 400))) $((B0 + $(ms 2000)))
done
keep 2500

# Phase 2: the VF's out_of_sequence climbs for 1.5 s.
C0=$(($(now_us) * 1000))
OOS=0
end=$(($(now_us) + 1500000))
while [ "$(now_us)" -lt "$end" ]; do
  OOS=$((OOS + 20000))
  echo "$OOS" >"$SYS/class/infiniband/mlx5_2/ports/1/hw_counters/out_of_sequence"
  for n in fsroce0 fsroce1 fsvf0; do put $n; done
  sleep 0.05
done
span C "$RES_POD" $((C0 + $(ms 200))) $((C0 + $(ms 1300)))
keep 1500

timeout 60 node "$SRC/tests/e2e/otel/export_resource_spans.js" "$GRPC_ADDR" "$SPANS" \
  >"$WORK/ids.jsonl" 2>"$WORK/node.err" || fail "export failed: $(cat "$WORK/node.err")"
[ "$(wc -l <"$WORK/ids.jsonl")" = 4 ] || fail "want 4 exported spans, got $(wc -l <"$WORK/ids.jsonl")"
jq -s 'map({(.span_id): .tag}) | add' "$WORK/ids.jsonl" >"$WORK/tags.json"

for _ in $(seq 1 $(tries 100)); do
  "$CLI" --server="$GRPC_ADDR" correlate --since 2m --all --output json >"$WORK/c.json" 2>/dev/null || true
  [ "$(jq '[.spans[] | select(.name == "decode_step")] | length' "$WORK/c.json" 2>/dev/null)" = 4 ] && break
  sleep 0.2
done
jq --slurpfile tags "$WORK/tags.json" \
  '[.spans[] | select(.name == "decode_step") | . + {tag: $tags[0][.span_id]}] | map({(.tag): .}) | add' \
  "$WORK/c.json" >"$WORK/judged.json"
show() { jq -c ".$1 | {verdict, reason, scope, pod, s: [.signals[] | select(.anomalous) | {device, netdev, counter}]}" "$WORK/judged.json"; }
SCOPE_POD='pod llm/vllm-0/engine devices: mlx5_2/1, mlx5_0/1'
jq -e --arg scope "$SCOPE_POD" '.A | .pod.namespace == "llm" and .pod.name == "vllm-0"
    and .pod.container == "engine" and .pod.via == "span attributes" and .scope == $scope
    and .verdict != "fabric"' "$WORK/judged.json" >/dev/null ||
  fail "span A (k8s attributes) not judged on its pod's devices: $(show A)"
jq -e '.D | .pod.name == "vllm-0" and .pod.uid == "'"$UID_A"'" and .pod.via == "process 4242 (devices)"
    and (.scope | startswith("pod llm/vllm-0/engine devices: mlx5_2/1, mlx5_0/1")) and .verdict != "fabric"' \
  "$WORK/judged.json" >/dev/null ||
  fail "span D (process.pid only) not given its process's pod: $(show D)"
jq -e '.B | (has("pod") | not) and .scope == "every port" and .verdict == "fabric"
    and (.signals | any(.anomalous and .netdev == "fsroce1"))' "$WORK/judged.json" >/dev/null ||
  fail "span B (no pod) not judged fabric on fsroce1: $(show B)"
jq -e --arg scope "$SCOPE_POD" '.C | .scope == $scope and .verdict == "fabric"
    and (.signals | any(.anomalous and .device == "mlx5_2" and .counter == "out_of_sequence"))' \
  "$WORK/judged.json" >/dev/null ||
  fail "span C not judged fabric on its pod's VF: $(show C)"

# correlate --pod: the pod's spans only; the human output names the pod.
"$CLI" --server="$GRPC_ADDR" correlate --since 2m --all --pod llm/vllm-0 --output json >"$WORK/p.json"
got=$(jq -c --slurpfile tags "$WORK/tags.json" '[.spans[] | $tags[0][.span_id]] | sort' "$WORK/p.json")
[ "$got" = '["A","C","D"]' ] || fail "correlate --pod llm/vllm-0: want A, C, D, got $got"
"$CLI" --server="$GRPC_ADDR" correlate --since 2m --all --pod llm/vllm-0 >"$WORK/p.txt"
grep -q '^    pod: llm/vllm-0/engine (span attributes)$' "$WORK/p.txt" ||
  fail "human output does not print the pod: $(head -n 20 "$WORK/p.txt")"
grep -q '^    pod: llm/vllm-0/engine (process 4242 (devices))$' "$WORK/p.txt" ||
  fail "human output does not print the process's pod: $(head -n 20 "$WORK/p.txt")"
"$CLI" --server="$GRPC_ADDR" correlate --since 2m --pod vllm-0 >"$WORK/bad.txt" 2>&1 &&
  fail "--pod without a namespace was accepted"
grep -q 'NAMESPACE/POD' "$WORK/bad.txt" || fail "--pod error does not say the form: $(cat "$WORK/bad.txt")"

# Offline: the recording's header carries the pods; analyze judges each span
# on the same devices, with the same pod and verdict, as the daemon did live.
"$CLI" --server="$GRPC_ADDR" record --since 1m --out "$WORK/rec.jsonl" 2>"$WORK/record.err" ||
  fail "record failed: $(cat "$WORK/record.err")"
head -n1 "$WORK/rec.jsonl" | jq -e '.recording | (.pod_devices | length) == 3
    and (.pod_processes | map(select(.pid == 4242 and .pod == "vllm-0" and .via == "devices")) | length) == 1'   >/dev/null || fail "the recording header does not carry the pods: $(head -c 400 "$WORK/rec.jsonl")"
"$CLI" analyze "$WORK/rec.jsonl" --all --limit 0 --output json >"$WORK/off.json" 2>"$WORK/analyze.err" ||
  fail "analyze failed: $(cat "$WORK/analyze.err")"
for t in A B C D; do
  id=$(jq -r --arg t "$t" 'to_entries[] | select(.value == $t) | .key' "$WORK/tags.json")
  live=$(jq -c --arg id "$id" '.spans[] | select(.span_id == $id) | {verdict, scope, pod}' "$WORK/c.json")
  off=$(jq -c --arg id "$id" '.spans[] | select(.span_id == $id) | {verdict, scope, pod}' "$WORK/off.json")
  [ -n "$live" ] && [ "$live" = "$off" ] || fail "span $t: live $live, offline $off"
done

# The kubelet goes away for several polls (1 s each): one line, up 0, the
# allocations kept; it comes back: one line, up 1.
kill -TERM "$KUBELET_PID"
wait "$KUBELET_PID" 2>/dev/null || true
wait_up 0 || fail "kubernetes_up stays 1 without a kubelet"
sleep 4
scrape >"$WORK/m"
polls=$(metric_value 'fabricscope_kubernetes_polls_total{result="unavailable"}' "$WORK/m")
[ "${polls:-0}" -ge 3 ] || fail "want at least 3 failed polls while the kubelet was away, got '$polls'"
[ "$(grep -c 'kubelet PodResources unavailable' "$WORK/daemon.log")" = 1 ] ||
  fail "want one log line for the kubelet going away: $(grep kubernetes "$WORK/daemon.log")"
grep -q 'pod="vllm-0".*device_id="0000:3b:00.2"' "$WORK/m" || fail "allocations lost while the kubelet was away"
start_kubelet
wait_up 1 || fail "kubernetes_up not 1 after the kubelet came back"
[ "$(grep -c 'kubelet PodResources answers again' "$WORK/daemon.log")" = 1 ] ||
  fail "want one log line for the kubelet coming back: $(grep kubernetes "$WORK/daemon.log")"
stop_daemon
echo "PASS kubernetes pods"
