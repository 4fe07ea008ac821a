#!/usr/bin/env bash
# Quick start: runs fabricscoped on this host's RDMA devices or, on a machine
# without any, on a simulated fabric (tools/fabricsim, the `mixed` scenario),
# so that a newcomer sees the whole pipeline work.
#
#   tools/run.sh [--demo=auto|on|off] [--demo-scenario=NAME] [fabricscoped flags...]
#
#   --demo=auto   (default) simulate only when /sys/class/infiniband has no device
#   --demo=on     always simulate;  --demo=off  never (plain fabricscoped)
#   --demo-scenario=NAME   the fabricsim scenario (default mixed; fabricsim --list-scenarios)
#
# Every other argument goes to fabricscoped unchanged. The binaries are taken
# from $FABRICSCOPE_BINARY_DIR (default build/release).
#
# In demo mode the simulator writes a live fake sysfs tree, `ethtool -S` files
# and `dcb pfc show` files (the PFC configuration dcbnl would give on a real
# host) into a fresh /tmp/fabricscope-demo.XXXXXX directory (world-readable,
# with a copy of the hwloc XML it uses: everything the daemon reads after it
# switched to `nobody` is there, wherever the checkout lives), and this script
# then becomes fabricscoped (exec) pointed at it. The simulator watches the
# daemon's pid (the same pid as this script's) and stops, removing the
# directory, as soon as the daemon exits, whichever way it exits.
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${FABRICSCOPE_BINARY_DIR:-$SRC/build/release}"
demo=auto
scenario=mixed
args=()
for a in "$@"; do
  case "$a" in
    --demo=*) demo="${a#--demo=}" ;;
    --demo-scenario=*) scenario="${a#--demo-scenario=}" ;;
    *) args+=("$a") ;;
  esac
done
case "$demo" in
  auto | on | off) ;;
  *) echo "run.sh: --demo must be auto, on or off (got '$demo')" >&2; exit 2 ;;
esac
[ -x "$BIN/fabricscoped" ] || { echo "run.sh: $BIN/fabricscoped not built (cmake --preset release && cmake --build --preset release)" >&2; exit 1; }

reason="--demo=on"
if [ "$demo" = auto ]; then
  if compgen -G "/sys/class/infiniband/*" >/dev/null; then demo=off; else demo=on; fi
  reason="no RDMA devices under /sys/class/infiniband"
fi
for a in "${args[@]}"; do
  case "$a" in --help | --version | --list-collectors | --dump-metrics-reference | --dump-options-reference | --explain-cost) demo=off ;; esac
done
# As root, the daemon switches to an unprivileged user once its listeners are
# bound (it refuses plain root; no collector needs privileges), unless the
# arguments already say --user or --allow-root.
who=()
if [ "$(id -u)" -eq 0 ]; then
  who=(--user=nobody)
  for a in "${args[@]}"; do
    case "$a" in --user=* | --user | --allow-root | --allow-root=*) who=() ;; esac
  done
fi
if [ "$demo" = off ]; then
  exec "$BIN/fabricscoped" "${who[@]}" "${args[@]}"
fi

[ -x "$BIN/fabricsim" ] || { echo "run.sh: $BIN/fabricsim not built" >&2; exit 1; }
[[ "$("$BIN/fabricsim" --list-scenarios)" == *"  $scenario: "* ]] ||
  { echo "run.sh: unknown --demo-scenario '$scenario'; one of:" >&2; "$BIN/fabricsim" --list-scenarios >&2; exit 2; }

# Where the daemon will listen (the last --flag wins, as in fabricscoped).
metrics_listen=0.0.0.0:9478
grpc_listen=127.0.0.1:9479
for a in "${args[@]}"; do
  case "$a" in
    --metrics-listen=*) metrics_listen="${a#--metrics-listen=}" ;;
    --grpc-listen=*) grpc_listen="${a#--grpc-listen=}" ;;
  esac
done

dir="$(mktemp -d /tmp/fabricscope-demo.XXXXXX)"
chmod 755 "$dir"  # readable by the daemon after it switched user
touch "$dir/.fabricsim-remove-ok"
# Until the exec below, a signal removes the directory (the simulator, once
# started, also goes: it watches this pid).
trap 'rm -rf "$dir"; exit 130' INT TERM
sim=("$BIN/fabricsim" "--scenario=$scenario" "--sysfs-root=$dir/sys" "--ethtool-dir=$dir/ethtool"
     "--dcb-dir=$dir/dcb" "--ground-truth=$dir/ground_truth.json" "--exit-with-pid=$$" "--remove-on-exit=$dir"
     "--ready-file=$dir/.tree-ready" "--nccl-inspector-out=$dir/nccl"
     "--kubelet-socket=$dir/kubelet.sock")

# Spans go to the daemon through `fabricscope push` (which sends what it reads
# on stdin when stdin ends): fabricsim's span lines are cut into one batch a
# second, each sent by one `fabricscope push`. This needs the CLI and a gRPC
# port known in advance.
spans="no (\`fabricscope push\` not available)"
push_target=""
if [ "${grpc_listen##*:}" = 0 ]; then
  spans="no (--grpc-listen port 0: fabricscope push needs a fixed port)"
elif [ -x "$BIN/fabricscope" ] && [[ "$("$BIN/fabricscope" --help 2>/dev/null)" == *$'\n  push '* ]]; then
  push_target="$grpc_listen"
  case "$push_target" in 0.0.0.0:*) push_target="127.0.0.1:${push_target##*:}" ;; esac
  spans="decode_step spans pushed to $push_target every second"
fi
push_batches() {
  # Until the daemon's gRPC port answers (at most 30 s), fabricsim queues the
  # spans (bounded: it never blocks on them).
  for _ in $(seq 1 300); do
    (exec 3<>"/dev/tcp/${push_target%:*}/${push_target##*:}") 2>/dev/null && break
    sleep 0.1
  done
  local batch=() last=$SECONDS line
  while IFS= read -r line; do
    batch+=("$line")
    if [ "$SECONDS" != "$last" ]; then
      [ -d "$dir" ] || break  # the simulator has stopped and cleaned up
      printf '%s\n' "${batch[@]}" | "$BIN/fabricscope" "--server=$push_target" push >/dev/null 2>>"$dir/push.log" || true
      batch=()
      last=$SECONDS
    fi
  done
}
if [ -n "$push_target" ]; then
  # The last push can fail after the daemon is gone and append to push.log
  # while the simulator removes the directory: remove it again once both ended.
  ("${sim[@]}" --spans-out=- | push_batches; rm -rf "$dir") &
else
  "${sim[@]}" &
fi

# The daemon discovers ports at startup: wait (bounded) for the simulator's
# first whole tree (every port's files; it writes .tree-ready after them).
for _ in $(seq 1 200); do
  [ -f "$dir/.tree-ready" ] && break
  sleep 0.05
done

# Topology for the simulated host, unless the caller gave its own: the two
# simulated ports cabled to two leaves (the dual-plane layout of HPN-style
# fabrics), and the PCI tree of a captured real machine (hwloc's test export
# of "conan": four GPUs, mlx5_0 behind one of their switches;
# tests/fixtures/hwloc/README.md), so the port table and GPU-scoped spans
# have something to show.
topo_args=()
[[ " ${args[*]} " == *" --topology-file="* ]] || {
  printf '%s\n' '# fabricsim demo cabling (tools/run.sh)' \
    'host=* netdev=eth2 system=leaf01 port=Ethernet1/1 chassis=02:00:00:00:01:00' \
    'host=* netdev=eth3 system=leaf02 port=Ethernet1/1 chassis=02:00:00:00:02:00' >"$dir/topology"
  topo_args+=("--topology-file=$dir/topology")
}
# The simulated ports have no LLDP neighbours: the cabling file names them.
[[ " ${args[*]} " == *" --lldpd-socket="* ]] || topo_args+=("--lldpd-socket=")
# Copied into the demo directory: the daemon reads it after switching to an
# unprivileged user, who cannot read a checkout under root's 0700 home.
hwloc_xml="$SRC/tests/fixtures/hwloc/32em64t-2n8c2t-pci-normalio.xml"
if [[ " ${args[*]} " != *" --hwloc-xml="* ]] && [ -f "$hwloc_xml" ]; then
  install -m 0644 "$hwloc_xml" "$dir/hwloc.xml"
  topo_args+=("--hwloc-xml=$dir/hwloc.xml")
fi

host="${metrics_listen%:*}"
case "$host" in 0.0.0.0 | "" | "[::]") host=localhost ;; esac
echo "fabricscope: $reason: running fabricscoped on a simulated fabric (fabricsim --scenario=$scenario, live tree in $dir; spans: $spans)"
if [ "${metrics_listen##*:}" = 0 ]; then
  echo "  metrics:      see the daemon's 'serving metrics' log line for the port"
else
  echo "  metrics:      http://$host:${metrics_listen##*:}/metrics"
fi
# The CLI's commands as they run: --server only where the daemon does not
# listen on the CLI's default (127.0.0.1:9479).
cli="$BIN/fabricscope"
[ -z "$push_target" ] || [ "$push_target" = 127.0.0.1:9479 ] || cli="$cli --server=$push_target"
echo "  live view:    $cli top"
echo "  detectors:    $cli events --since 5m"
echo "  correlation:  $cli correlate --since 1m"
echo "  ground truth: $dir/ground_truth.json (what the simulator injected, and when)"
echo "  collectives:  $dir/nccl (each decode step's all-reduce as NCCL Inspector dumps it)"
echo "  topology:     $dir/topology (eth2 -> leaf01, eth3 -> leaf02); PCI tree of a captured machine (tests/fixtures/hwloc)"
echo "  pods:         $dir/kubelet.sock (fabricsim's kubelet: pod inference/vllm-decode-N holds mlx5_N; fabricscope_pod_device_info)"
echo "  stop:         Ctrl-C (the simulator stops with the daemon)"

[ ${#who[@]} -eq 0 ] || echo "  user:         the daemon switches to ${who[0]#--user=} once listening (it needs no privileges)"
exec "$BIN/fabricscoped" "${who[@]}" "--sysfs-root=$dir/sys" "--ethtool-dir=$dir/ethtool" \
  "--dcb-dir=$dir/dcb" "--nccl-inspector-dir=$dir/nccl" "--kubernetes-socket=$dir/kubelet.sock" \
  "${topo_args[@]}" "${args[@]}"
