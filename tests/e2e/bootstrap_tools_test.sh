#!/usr/bin/env bash
# deploy/bootstrap.sh installs every tool the build, the tests and the package
# use (issue #38: a minimal Debian 12 lacked `file`, which CPack needs, and the
# developers' machines happened to have it). For each command below, the
# Debian package that provides it here must be in bootstrap.sh's list, or be
# part of every Debian system (Essential, or Priority required: what
# `debootstrap --variant=minbase` installs). A command missing here fails
# too. To find new ones, run the README's commands on a fresh system:
# tools/fresh-debian-check.sh.
source "$(dirname "$0")/lib.sh"

command -v dpkg-query >/dev/null || skip "not a Debian system (no dpkg-query)"

# Commands the build, tests/, tools/ and cmake/packaging.cmake run.
commands=(
  cmake ninja g++ clang pkg-config git clang-format protoc grpc_cpp_plugin
  cpack dpkg dpkg-deb dpkg-shlibdeps dpkg-query help2man file objdump lintian
  prometheus promtool prometheus-node-exporter lldpd lldpcli
  ip tc ethtool pgrep pkill ps curl jq openssl python3 node npm systemd-analyze
  setpriv su mktemp timeout awk sed grep gzip tar install
)

mapfile -t listed < <(awk '/^packages=\(/,/^\)/' "$SRC/deploy/bootstrap.sh" | sed 's/#.*//' |
  tr ' ' '\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' || true)
[ ${#listed[@]} -gt 20 ] || fail "could not read bootstrap.sh's package list (${#listed[@]} names)"
listed+=(nodejs npm)  # bootstrap.sh adds them when node or npm is missing
# A direct dependency of a listed package comes with it (g++ -> g++-12,
# python3 -> python3-minimal, which ships /usr/bin/python3).
mapfile -t deps < <(for p in "${listed[@]}"; do dpkg-query -W -f='${Pre-Depends}, ${Depends}\n' "$p" 2>/dev/null || true; done |
  tr ',|' '\n\n' | sed 's/(.*)//; s/:any//; s/ //g' | grep -v '^$' | sort -u)
in_list() { local p; for p in "${listed[@]}" "${deps[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
# owner PATH: the package that ships PATH (as named, then /usr-merged, then
# resolved through links and alternatives), empty when none does.
owner() {
  local p out
  for p in "$1" "${1/#\/usr\/bin\//\/bin\/}" "${1/#\/usr\/sbin\//\/sbin\/}" "$(readlink -f "$1")"; do
    out=$(dpkg-query -S "$p" 2>/dev/null | head -n1) || continue
    out=${out%%:*}
    echo "${out%%,*}"
    return 0
  done
}

problems=0
for c in "${commands[@]}"; do
  path=$(command -v "$c" 2>/dev/null) || { echo "missing: $c is not installed"; problems=$((problems + 1)); continue; }
  pkg=$(owner "$path")
  if [ -z "$pkg" ]; then
    # Installed by hand (a pyenv python3 first on PATH): it says nothing about
    # a fresh machine; the Debian one is checked when it is found instead.
    echo "note: $c ($path) belongs to no Debian package here; not checked"
    continue
  fi
  essential=$(dpkg-query -W -f='${Essential}' "$pkg" 2>/dev/null || true)
  priority=$(dpkg-query -W -f='${Priority}' "$pkg" 2>/dev/null || true)
  if in_list "$pkg" || [ "$essential" = yes ] || [ "$priority" = required ]; then
    continue
  fi
  # Pulled in by a listed package is not enough: a Recommends is not
  # installed (--no-install-recommends) and a Depends may change.
  echo "not installed by bootstrap.sh: $c (package $pkg, priority ${priority:-?})"
  problems=$((problems + 1))
done
[ "$problems" -eq 0 ] || fail "$problems command(s) a fresh Debian 12 would lack"
echo "checked ${#commands[@]} commands against ${#listed[@]} bootstrap packages"
echo "PASS"
