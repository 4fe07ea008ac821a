#!/usr/bin/env bash
# Installs everything fabricscope needs to build, run and test on Debian 12:
# the toolchain, the library -dev packages and the test tools. Idempotent: it
# installs only what is missing and touches nothing when all is present.
# Runs as root, or through sudo when it is available.
set -euo pipefail

packages=(
  # toolchain
  g++ cmake ninja-build pkg-config git clang-format
  # libFuzzer targets (the fuzz preset, tests/fuzz/run_fuzzers.sh)
  clang libclang-rt-14-dev
  # libraries (see DESIGN.md section 2)
  libibverbs-dev libibumad-dev libibmad-dev
  # topology collector: LLDP neighbours (lldpd client library), the PCI tree (hwloc)
  liblldpctl-dev libhwloc-dev
  libnl-3-dev libnl-genl-3-dev libnl-route-3-dev
  prometheus-cpp-dev
  libmicrohttpd-dev libgnutls28-dev libyaml-cpp-dev libcrypt-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  zlib1g-dev
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  # test tools: real Prometheus server + promtool, the peer exporter, kernel tools
  prometheus prometheus-node-exporter lldpd iproute2 ethtool procps curl jq openssl python3 python3-yaml
  # npm install (the OpenTelemetry client of the e2e tests) and curl over TLS
  ca-certificates
  # systemd-analyze verifies deploy/systemd/fabricscoped.service (e2e_deploy_manifests)
  systemd
  # the Debian package (cpack -G DEB, e2e_deb_package): dpkg-shlibdeps computes
  # its dependencies, help2man makes the man pages from --help, and CPack
  # runs `file` on each installed file to find the ones dpkg-shlibdeps reads
  # (a minimal Debian 12 has no `file`: tests/e2e/bootstrap_tools_test.sh);
  # lintian checks the package against Debian policy
  dpkg-dev help2man file lintian
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Node.js with npm runs the real OpenTelemetry client in the end-to-end tests.
# Debian ships them as two packages; NodeSource's nodejs bundles npm.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all dependencies present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "bootstrap: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "bootstrap: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "bootstrap: done"
