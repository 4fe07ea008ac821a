#!/usr/bin/env bash
# The Debian package (issue #16, item 6; cmake/packaging.cmake):
#  1. `cpack -G DEB` from this build directory makes
#     fabricscope_<version>_<arch>.deb (version from fabricscoped --version,
#     arch from dpkg), into a scratch directory.
#  2. dpkg-deb -c/-I/-e: the three programs in /usr/bin, the systemd unit, the
#     default configuration as a conffile, the Prometheus rules and Grafana
#     dashboards (byte-identical to deploy/), the man pages, the doc; Depends
#     computed by dpkg-shlibdeps (gRPC, protobuf, libnl, libc...); maintainer
#     scripts that are valid sh.
#  3. The default configuration lists every option of fabricscoped --help
#     (commented out, but state-dir, which the package sets there and not as
#     a unit flag) and, with every option uncommented, is accepted by the
#     daemon, which then serves /metrics with the file's settings in effect.
#     The unit passes --config alone and lldpd's group; copyright and
#     changelog are Debian's; lintian finds no error.
#  4. `dpkg --root=SCRATCH --force-depends --force-script-chrootless -i`
#     installs it into an empty scratch root, recorded in that root's dpkg
#     database with its conffile; `fabricscoped --version` runs from there
#     (with the host's libraries: --force-depends, since the scratch root has
#     none of the dependencies, and a chroot could not load them).
#     Why chrootless: dpkg --root runs maintainer scripts chrooted into the
#     root, which has no /bin/sh; --force-script-chrootless runs them on the
#     host with DPKG_ROOT set, and deploy/deb/* then do nothing (they must not
#     touch the host's systemd), which is checked. Then --purge removes every
#     file again.
# Needs cpack, dpkg, dpkg-deb, dpkg-shlibdeps (dpkg-dev) and help2man (man
# pages; deploy/bootstrap.sh installs them). Takes about 10 s (most of it
# dpkg-shlibdeps).
source "$(dirname "$0")/lib.sh"

for tool in cpack dpkg dpkg-deb dpkg-shlibdeps dpkg-query; do
  command -v "$tool" >/dev/null || fail "$tool not installed (deploy/bootstrap.sh: cmake, dpkg-dev)"
done
[ -f "$BIN/CPackConfig.cmake" ] || fail "no CPackConfig.cmake in $BIN (configure with cmake --preset release)"
for f in packaging/fabricscoped.conf packaging/fabricscoped.8.gz packaging/fabricscope.1.gz packaging/fabricsim.1.gz; do
  [ -f "$BIN/$f" ] || fail "$BIN/$f not built (cmake --build: target fabricscope_packaging_files; help2man installed?)"
done

VERSION=$("$DAEMON" --version | awk '{print $2}')
ARCH=$(dpkg --print-architecture)
DEB="$WORK/pkg/fabricscope_${VERSION}_${ARCH}.deb"

# --- 1. build ----------------------------------------------------------------
start=$SECONDS
(cd "$BIN" && cpack -G DEB -B "$WORK/pkg") >"$WORK/cpack.log" 2>&1 || { cat "$WORK/cpack.log"; fail "cpack -G DEB failed"; }
# CPack goes on without a tool it needs and only warns: a package without
# computed dependencies (on a fresh Debian 12 `file` was missing).
if grep -iE 'not available|not found' "$WORK/cpack.log"; then
  fail "cpack -G DEB lacked a tool (deploy/bootstrap.sh must install it)"
fi
[ -f "$DEB" ] || { ls -la "$WORK/pkg"; fail "expected $DEB"; }
echo "cpack: $(basename "$DEB") ($(stat -c %s "$DEB") bytes) in $((SECONDS - start)) s"

# --- 2. contents and control -------------------------------------------------
dpkg-deb -c "$DEB" >"$WORK/contents" || fail "dpkg-deb -c failed"
# has PERMS PATH: the archive lists PATH with these permissions, owned by root.
has() {
  awk -v p="./$2" -v m="$1" '$6 == p && $1 == m && $2 == "root/root" { f = 1 } END { exit !f }' "$WORK/contents" ||
    { cat "$WORK/contents"; fail "package lacks $2 ($1 root/root)"; }
}
for prog in fabricscoped fabricscope fabricsim; do has -rwxr-xr-x "usr/bin/$prog"; done
has -rw-r--r-- lib/systemd/system/fabricscoped.service
has -rw-r--r-- etc/fabricscope/fabricscoped.conf
for r in fabricscope-recording.rules.yml fabricscope-alerts.rules.yml fabricscope-fleet.rules.yml prometheus.example.yml; do
  has -rw-r--r-- "usr/share/fabricscope/prometheus/$r"
done
for d in fabricscope.json fabricscope-fleet.json; do has -rw-r--r-- "usr/share/fabricscope/grafana/$d"; done
has -rw-r--r-- usr/share/man/man8/fabricscoped.8.gz
has -rw-r--r-- usr/share/man/man1/fabricscope.1.gz
has -rw-r--r-- usr/share/man/man1/fabricsim.1.gz
has -rw-r--r-- usr/share/doc/fabricscope/README.md
has -rw-r--r-- usr/share/doc/fabricscope/copyright
has -rw-r--r-- usr/share/doc/fabricscope/changelog.gz
# Nothing else but directories (no test binaries, no build files).
n_files=$(grep -vc '^d' "$WORK/contents")
[ "$n_files" = 17 ] || { grep -v "^d" "$WORK/contents"; fail "expected 17 files in the package, got $n_files"; }

dpkg-deb -I "$DEB" >"$WORK/info" || fail "dpkg-deb -I failed"
field() { dpkg-deb -f "$DEB" "$1"; }
[ "$(field Package)" = fabricscope ] || fail "Package: $(field Package)"
[ "$(field Version)" = "$VERSION" ] || fail "Version: $(field Version), fabricscoped says $VERSION"
[ "$(field Architecture)" = "$ARCH" ] || fail "Architecture: $(field Architecture)"
DEPENDS=$(field Depends)
echo "Depends: $DEPENDS"
for lib in 'libgrpc\+\+1' 'libgrpc[0-9]' libprotobuf libnl-3 libnl-route-3 libprometheus-cpp-core libmicrohttpd libyaml-cpp libabsl libc6 'libstdc\+\+6' libhwloc; do
  grep -Eq "(^|, )$lib[^,]* \(>= [^)]+\)" <<<"$DEPENDS" || fail "Depends lacks $lib (with a version): $DEPENDS"
done
grep -q 'conffiles' "$WORK/info" || fail "no conffiles in the control archive"

dpkg-deb -e "$DEB" "$WORK/control" || fail "dpkg-deb -e failed"
[ "$(cat "$WORK/control/conffiles")" = /etc/fabricscope/fabricscoped.conf ] ||
  fail "conffiles: $(cat "$WORK/control/conffiles")"
for s in postinst prerm postrm; do
  [ -x "$WORK/control/$s" ] || fail "$s missing or not executable"
  sh -n "$WORK/control/$s" || fail "$s is not valid sh"
  cmp -s "$WORK/control/$s" "$SRC/deploy/deb/$s" || fail "$s differs from deploy/deb/$s"
done

# The files are the project's own.
dpkg-deb -x "$DEB" "$WORK/x" || fail "dpkg-deb -x failed"
cmp "$WORK/x/lib/systemd/system/fabricscoped.service" "$SRC/deploy/systemd/fabricscoped.service" ||
  fail "packaged unit differs from deploy/systemd"
for r in fabricscope-recording.rules.yml fabricscope-alerts.rules.yml fabricscope-fleet.rules.yml; do
  cmp "$WORK/x/usr/share/fabricscope/prometheus/$r" "$SRC/deploy/prometheus/$r" || fail "$r differs from deploy/"
done
cmp "$WORK/x/usr/share/fabricscope/grafana/fabricscope.json" "$SRC/deploy/grafana/fabricscope.json" ||
  fail "dashboard differs from deploy/"
# The unit runs what the package installs with the packaged config and no
# other flag (a flag would win over the conffile: editing it would do
# nothing), with lldpd's group for its socket (the package depends on lldpd).
UNIT_FILE="$WORK/x/lib/systemd/system/fabricscoped.service"
[ "$(grep '^ExecStart=' "$UNIT_FILE")" = 'ExecStart=/usr/bin/fabricscoped --config=/etc/fabricscope/fabricscoped.conf' ] ||
  fail "the unit's ExecStart is not exactly fabricscoped --config=<the conffile>: $(grep '^ExecStart=' "$UNIT_FILE")"
grep -qx 'SupplementaryGroups=_lldpd' "$UNIT_FILE" || fail "the unit does not give the daemon lldpd's group"
grep -Eq '(^|, )lldpd( |,|$)' <<<"$(field Depends)" || fail "Depends lacks lldpd (the unit names its group): $(field Depends)"
# Debian policy: a machine-readable copyright file and a changelog whose top
# entry is this version; lintian finds no error.
head -n1 "$WORK/x/usr/share/doc/fabricscope/copyright" | grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' ||
  fail "copyright is not in the machine-readable format"
grep -q '^License: ' "$WORK/x/usr/share/doc/fabricscope/copyright" || fail "copyright names no license"
zcat "$WORK/x/usr/share/doc/fabricscope/changelog.gz" | head -n1 | grep -q "^fabricscope ($VERSION) " ||
  fail "changelog's top entry is not $VERSION: $(zcat "$WORK/x/usr/share/doc/fabricscope/changelog.gz" | head -n1)"
if command -v lintian >/dev/null; then
  lintian --fail-on error --tag-display-limit 0 "$DEB" >"$WORK/lintian.txt" 2>&1 ||
    { cat "$WORK/lintian.txt"; fail "lintian reports errors (above)"; }
  echo "lintian: no errors ($(grep -c '^W: ' "$WORK/lintian.txt" || true) warnings)"
  grep '^W: ' "$WORK/lintian.txt" || true
else
  fail "lintian not installed (deploy/bootstrap.sh installs it)"
fi
# Man pages: every daemon flag documented.
# (help2man sets only the part of a flag before a '.' in bold: drop the font
# changes.)
zcat "$WORK/x/usr/share/man/man8/fabricscoped.8.gz" | sed 's/\\-/-/g; s/\\f[BIRP]//g' >"$WORK/fabricscoped.8"
grep -q '^\.TH FABRICSCOPED "8"' "$WORK/fabricscoped.8" || fail "fabricscoped.8 has no .TH header"
for flag in $("$DAEMON" --help | sed -n 's/^  --\([a-z][a-z0-9.-]*\).*/\1/p'); do
  grep -q -- "--$flag" "$WORK/fabricscoped.8" || fail "fabricscoped.8 does not document --$flag"
done
grep -q '^/etc/fabricscope/fabricscoped.conf' <(zcat "$WORK/x/usr/share/man/man8/fabricscoped.8.gz" | sed -n '/^\.SH FILES/,$p' | sed -n 's/^\.I //p') ||
  fail "fabricscoped.8 has no FILES section naming the config"
zcat "$WORK/x/usr/share/man/man1/fabricscope.1.gz" | grep -q 'correlate' || fail "fabricscope.1 lacks the subcommands"

# --- 3. the default configuration --------------------------------------------
CONF="$WORK/x/etc/fabricscope/fabricscoped.conf"
want=$("$DAEMON" --help | sed -n 's/^  --\([a-z][a-z0-9.-]*\).*/\1/p' |
  grep -vx 'config\|list-collectors\|dump-metrics-reference\|dump-options-reference\|explain-cost\|version\|help' | sort)
got=$(sed -n 's/^#\{0,1\}\([a-z][a-z0-9.-]*\) =.*/\1/p' "$CONF" | sort)
[ "$want" = "$got" ] || fail "the default config does not list exactly the daemon's options: $(diff <(echo "$want") <(echo "$got") || true)"
grep -q '^#sysfs-root = /sys$' "$CONF" || fail "sysfs-root default missing"
grep -q '^#metrics-listen = 0.0.0.0:9478$' "$CONF" || fail "metrics-listen default missing"
# The one setting the package makes: the unit's StateDirectory, set in the
# file (not as a unit flag), with the built-in default said next to it.
[ "$(grep -v '^#' "$CONF" | grep -v '^$' || true)" = 'state-dir = /var/lib/fabricscope' ] ||
  fail "the default config sets more or less than state-dir: $(grep -v '^#' "$CONF" | grep -v '^$')"
grep -B1 '^state-dir = ' "$CONF" | grep -q '^# Set by this installation (built-in default: "")\.$' ||
  fail "state-dir's line does not say the built-in default"
sed 's/^#\([a-z][a-z0-9.-]*\) =/\1 =/' "$CONF" >"$WORK/all.conf"
mkdir -p "$WORK/sys/class/infiniband" "$WORK/sys/class/net"
# Every option uncommented; the packaged state-dir pointed into the test's
# directory; budgets edited: what the file says is what the daemon runs with
# (its start line), and the snapshot lands in the file's state-dir.
sed -i "s|^state-dir = .*|state-dir = $WORK/state|; s|^store-memory = .*|store-memory = 96MiB|" "$WORK/all.conf"
start_daemon --config="$WORK/all.conf" --sysfs-root="$SRC/tests/fixtures/sysfs/root" --lldpd-socket=
scrape >"$WORK/m" || fail "no scrape with the uncommented default config"
grep -q '^fabricscope_build_info{' "$WORK/m" || fail "no build_info"
grep 'msg="fabricscoped starting"' "$WORK/daemon.log" | grep -F "state_dir=$WORK/state" | grep -q 'store_memory_bytes=100663296' ||
  fail "the config file's state-dir and store-memory did not take effect: $(grep 'fabricscoped starting' "$WORK/daemon.log")"
stop_daemon
[ -f "$WORK/state/snapshot" ] || fail "no snapshot in the config file's state-dir: $(ls -la "$WORK/state" 2>&1)"

# --- 4. install into a scratch root -----------------------------------------
ROOT="$WORK/root"
mkdir -p "$ROOT/var/lib/dpkg/info" "$ROOT/var/lib/dpkg/updates" "$ROOT/var/log"
touch "$ROOT/var/lib/dpkg/status"
host_wants=/etc/systemd/system/multi-user.target.wants/fabricscoped.service
host_state=/var/lib/systemd/deb-systemd-helper-enabled/fabricscoped.service.dsh-also
before=$( (ls -l "$host_wants" "$host_state" 2>&1 || true) | sort)
dpkg --root="$ROOT" --force-depends --force-script-chrootless -i "$DEB" >"$WORK/dpkg.log" 2>&1 ||
  { cat "$WORK/dpkg.log"; fail "dpkg --root -i failed"; }
dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f='${Status} ${Version}\n' fabricscope >"$WORK/status"
[ "$(cat "$WORK/status")" = "install ok installed $VERSION" ] || fail "status in the scratch root: $(cat "$WORK/status")"
dpkg-query --admindir="$ROOT/var/lib/dpkg" -s fabricscope | grep -Eq '^ /etc/fabricscope/fabricscoped.conf [0-9a-f]{32}$' ||
  fail "conffile not registered in the scratch root"
after=$( (ls -l "$host_wants" "$host_state" 2>&1 || true) | sort)
[ "$before" = "$after" ] || fail "installing into a scratch root changed the host's systemd state"
out=$("$ROOT/usr/bin/fabricscoped" --version) || fail "fabricscoped --version from the scratch root failed"
echo "from the scratch root: $out"
[ "$out" = "$("$DAEMON" --version)" ] || fail "installed fabricscoped says '$out', the build's says '$("$DAEMON" --version)'"
"$ROOT/usr/bin/fabricscope" --help >/dev/null || fail "fabricscope --help from the scratch root failed"
"$ROOT/usr/bin/fabricsim" --list-scenarios | grep -q 'mixed' || fail "fabricsim from the scratch root failed"

dpkg --root="$ROOT" --force-depends --force-script-chrootless --purge fabricscope >>"$WORK/dpkg.log" 2>&1 ||
  { cat "$WORK/dpkg.log"; fail "dpkg --root --purge failed"; }
left=$(cd "$ROOT" && find . -path ./var -prune -o -type f -print)
[ -z "$left" ] || fail "files left after purge: $left"
echo "PASS"
