#!/usr/bin/env bash
# Runs the README's two commands on a fresh minimal Debian 12, as root, with
# the checkout under root's 0700 home -- what a newcomer who clones as root
# gets (issue #38). Not part of CI (it needs debootstrap, the Debian mirror
# and a full build: about an hour on 2 cores); run it after touching
# deploy/bootstrap.sh, packaging or privileges.
#
#   tools/fresh-debian-check.sh [CHROOT_DIR] [-- run_all.sh presets...]
#
# CHROOT_DIR (default /srv/fabricscope-deb12) is made with
# `debootstrap --variant=minbase bookworm` when it does not exist yet, gets
# Debian's default sources (bookworm, bookworm-updates, bookworm-security),
# and /proc, /sys, /dev, /dev/pts and /dev/shm bound in (and a tmpfs /run)
# for the run. The
# committed HEAD of this repository is cloned into CHROOT_DIR/root/project
# (/root is 0700, as on a fresh install) and there
#   ./deploy/bootstrap.sh && ./tests/run_all.sh [presets]
# runs as root. The mounts are undone on exit. Needs root and debootstrap.
set -euo pipefail
SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="${1:-/srv/fabricscope-deb12}"
shift || true
[ "${1:-}" = "--" ] && shift
[ "$(id -u)" -eq 0 ] || { echo "fresh-debian-check: needs root" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh-debian-check: apt-get install debootstrap" >&2; exit 2; }
if [ ! -x "$root/bin/bash" ]; then
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian
fi
cat >"$root/etc/apt/sources.list" <<'SOURCES'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
# The network settings of the machine this runs on are the fresh machine's
# too, not the project's: certificate authorities added to this host's trust
# store (an egress proxy's) and npm's cafile setting (node does not read the
# system store otherwise). Installed into the chroot's trust store once its
# ca-certificates package is there (bootstrap installs it: curl needs it).
extra_cas=()
for ca in /usr/local/share/ca-certificates/*.crt; do [ -f "$ca" ] && extra_cas+=("$ca"); done
if [ ${#extra_cas[@]} -gt 0 ]; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp "${extra_cas[@]}" "$root/usr/local/share/ca-certificates/"
fi
for f in /etc/npmrc /usr/etc/npmrc; do
  if [ -f "$f" ]; then mkdir -p "$root$(dirname "$f")"; cp "$f" "$root$f"; fi
done
mounts=()
cleanup() {
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
# The root a mount point of its own, as on a booted system (`ip netns add`
# makes / a slave mount, which fails where / is a plain directory).
mount --bind "$root" "$root"
mounts+=("$root")
for m in proc sys dev dev/pts dev/shm; do
  mkdir -p "$root/$m"
  mount --bind "/$m" "$root/$m"
  mounts+=("$root/$m")
done
# A /run of its own, as a booted system has (ip netns keeps its namespaces
# under /run/netns: the netns tests run instead of skipping).
mkdir -p "$root/run"
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
mounts+=("$root/run")
chmod 0700 "$root/root"
rm -rf "$root/root/project"
git clone -q "$SRC" "$root/root/project"
presets=("$@")
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 TERM=dumb /bin/bash -c \
  "cd /root/project && ./deploy/bootstrap.sh &&
   { ! command -v update-ca-certificates >/dev/null || update-ca-certificates >/dev/null; } &&
   ./tests/run_all.sh ${presets[*]}"
