#!/usr/bin/env bash
# The topology collector end to end with the real daemon, on captured machine
# topologies: hwloc XML exports of two real machines (tests/fixtures/hwloc/
# README.md: mirage004 with three Tesla GPUs and a ConnectX-3 mlx4_0, conan
# with three Tesla GPUs, a Radeon and a ConnectX-4 mlx5_0) loaded with
# --hwloc-xml, a fake sysfs tree naming the same RDMA devices, and a
# --topology-file keyed by netdev and by port GUID. Checks the exported GPU
# list, port PCI placement and GPU-NIC relation classes (what nvidia-smi topo
# -m would print for those trees), that a partner that changes ends its old
# series, and that a removed file takes its partners with it.
source "$(dirname "$0")/lib.sh"

SYS="$WORK/sys"
port() {  # port DEV PORT LINK_LAYER NETDEV GID0
  local dir="$SYS/class/infiniband/$1/ports/$2"
  mkdir -p "$dir/counters" "$dir/gids" "$dir/gid_attrs/ndevs"
  echo "$3" >"$dir/link_layer"
  echo "4: ACTIVE" >"$dir/state"
  echo "40 Gb/sec (4X QDR)" >"$dir/rate"
  [ -n "$4" ] && echo "$4" >"$dir/gid_attrs/ndevs/0"
  echo "$5" >"$dir/gids/0"
  echo 0 >"$dir/counters/port_xmit_data"
}
port mlx4_0 1 InfiniBand "" fe80:0000:0000:0000:0002:c903:0045:f2a1
port mlx4_0 2 Ethernet eth2 fe80:0000:0000:0000:0202:c9ff:fe45:f2a2
port mlx5_0 1 InfiniBand "" fe80:0000:0000:0000:1070:fd03:00b2:c3d4

TOPO="$WORK/topology"
cat >"$TOPO" <<'T'
# cabling inventory export: one line per link
host=*  port_guid=0x0002c9030045f2a1  system="QM8700 spine02" port=17 chassis=0x98039b0300a1b2c3
host=*  netdev=eth2                   system=leaf07 port=Ethernet1/12 description="rack 3 uplink"
host=not-this-host netdev=eth2        system=wrong port=1
T

# wait_for PATTERN: the scrape shows a line matching the extended regex (bounded).
wait_for() {
  for _ in $(seq 1 $(tries 150)); do
    scrape >"$WORK/scrape" 2>/dev/null && grep -Eq "$1" "$WORK/scrape" && return 0
    sleep 0.1
  done
  fail "no line matching $1 within 15 s; scrape: $(grep -E 'partner|gpu|pci|topology' "$WORK/scrape")"
}
# wait_gone PATTERN: the scrape no longer shows it (bounded).
wait_gone() {
  for _ in $(seq 1 $(tries 150)); do
    scrape >"$WORK/scrape" 2>/dev/null && ! grep -Eq "$1" "$WORK/scrape" && return 0
    sleep 0.1
  done
  fail "a line matching $1 is still there after 15 s"
}
count() { grep -c "^$1{" "$WORK/scrape" || true; }

# --- mirage004: GPU0 on mlx4_0's IOH behind another root port (PHB), GPU1/2
# on the other socket (SYS); mlx5_0 is not in this tree (no placement).
start_daemon --sysfs-root="$SYS" --collectors=rdma_sysfs,topology --config-interval=200ms \
  --lldpd-socket= --topology-file="$TOPO" \
  --hwloc-xml="$SRC/tests/fixtures/hwloc/24em64t-2n6c2t-pci.xml"
wait_for '^fabricscope_gpu_nic_affinity\{'
wait_for '^fabricscope_link_partner_info\{.*netdev="eth2"'
[ "$(count fabricscope_gpu_info)" = 3 ] || fail "expected 3 GPUs: $(grep gpu_info "$WORK/scrape")"
for want in \
  'fabricscope_gpu_info{gpu_bus_id="0000:06:00.0",gpu_index="0",vendor="nvidia",model="0x06d2",numa_node="0"} 1' \
  'fabricscope_gpu_info{gpu_bus_id="0000:14:00.0",gpu_index="2",vendor="nvidia",model="0x06d2",numa_node="1"} 1' \
  'fabricscope_gpu_nic_affinity{gpu_bus_id="0000:06:00.0",gpu_index="0",device="mlx4_0",relation="PHB"} 1' \
  'fabricscope_gpu_nic_affinity{gpu_bus_id="0000:11:00.0",gpu_index="1",device="mlx4_0",relation="SYS"} 1' \
  'fabricscope_gpu_nic_affinity{gpu_bus_id="0000:14:00.0",gpu_index="2",device="mlx4_0",relation="SYS"} 1' \
  'fabricscope_port_pci_info{device="mlx4_0",port="1",netdev="",pci_address="0000:05:00.0",numa_node="0"} 1' \
  'fabricscope_port_pci_info{device="mlx4_0",port="2",netdev="eth2",pci_address="0000:05:00.0",numa_node="0"} 1' \
  'fabricscope_link_partner_info{device="mlx4_0",port="1",netdev="",source="file",partner_chassis_id="0x98039b0300a1b2c3",partner_system_name="QM8700 spine02",partner_port_id="17",partner_port_description=""} 1' \
  'fabricscope_link_partner_info{device="mlx4_0",port="2",netdev="eth2",source="file",partner_chassis_id="",partner_system_name="leaf07",partner_port_id="Ethernet1/12",partner_port_description="rack 3 uplink"} 1' \
  'fabricscope_topology_source_up{source="file"} 1' \
  'fabricscope_topology_source_up{source="hwloc"} 1'; do
  grep -qxF "$want" "$WORK/scrape" || fail "missing: $want"
done
[ "$(count fabricscope_gpu_nic_affinity)" = 3 ] || fail "mlx5_0 (not in the tree) has an affinity"
[ "$(count fabricscope_link_partner_info)" = 2 ] || fail "expected 2 partners: $(grep partner_info "$WORK/scrape")"
grep -q 'device="mlx5_0"' <(grep -E '^fabricscope_(port_pci_info|link_partner_info)' "$WORK/scrape") &&
  fail "mlx5_0 has a placement or partner"

# The cable moved: the old label set goes, the new one comes; nothing stale.
sed -i 's/system=leaf07 port=Ethernet1\/12/system=leaf08 port=Ethernet2\/1/' "$TOPO"
wait_for 'partner_system_name="leaf08",partner_port_id="Ethernet2/1"'
grep -q 'leaf07' "$WORK/scrape" && fail "the old partner leaf07 is still exported"
[ "$(count fabricscope_link_partner_info)" = 2 ] || fail "partner count changed"

# The file goes: its partners go, the source is down, one not_found error.
rm "$TOPO"
wait_gone '^fabricscope_link_partner_info\{'
wait_for '^fabricscope_topology_source_up\{source="file"\} 0'
[ "$(metric_value 'fabricscope_collector_errors_total{code="not_found",collector="topology"}' "$WORK/scrape")" = 1 ] ||
  fail "a missing topology file must be counted once, not every tick"
stop_daemon

# --- conan: GPU0 on the other socket (SYS), GPU1 behind another root port of
# mlx5_0's host bridge (PHB), GPU2 and the Radeon behind mlx5_0's root port (PIX).
start_daemon --sysfs-root="$SYS" --collectors=rdma_sysfs,topology --config-interval=200ms \
  --lldpd-socket= --hwloc-xml="$SRC/tests/fixtures/hwloc/32em64t-2n8c2t-pci-normalio.xml"
wait_for '^fabricscope_gpu_nic_affinity\{'
[ "$(count fabricscope_gpu_info)" = 4 ] || fail "expected 4 GPUs: $(grep gpu_info "$WORK/scrape")"
for want in \
  'fabricscope_gpu_nic_affinity{gpu_bus_id="0000:03:00.0",gpu_index="0",device="mlx5_0",relation="SYS"} 1' \
  'fabricscope_gpu_nic_affinity{gpu_bus_id="0000:83:00.0",gpu_index="1",device="mlx5_0",relation="PHB"} 1' \
  'fabricscope_gpu_nic_affinity{gpu_bus_id="0000:84:00.0",gpu_index="2",device="mlx5_0",relation="PIX"} 1' \
  'fabricscope_gpu_nic_affinity{gpu_bus_id="0000:84:00.1",gpu_index="3",device="mlx5_0",relation="PIX"} 1' \
  'fabricscope_port_pci_info{device="mlx5_0",port="1",netdev="",pci_address="0000:04:00.0",numa_node="1"} 1'; do
  grep -qxF "$want" "$WORK/scrape" || fail "missing: $want"
done
grep -q '^fabricscope_gpu_info{gpu_bus_id="0000:84:00.1",gpu_index="3",vendor="amd",' "$WORK/scrape" ||
  fail "the Radeon is not listed as an amd GPU"
grep -q '^fabricscope_link_partner_info' "$WORK/scrape" && fail "a partner without any partner source"
stop_daemon
echo PASS
