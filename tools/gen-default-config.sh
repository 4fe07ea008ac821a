#!/usr/bin/env bash
# Writes fabricscoped's commented default configuration file to stdout: every
# option of `fabricscoped --help`, with its help text, commented out at its
# built-in default. The Debian package installs it as
# /etc/fabricscope/fabricscoped.conf (a conffile); the build generates it
# (build/<preset>/packaging/fabricscoped.conf), so it always lists exactly the
# options the daemon has.
#
#   tools/gen-default-config.sh build/release/fabricscoped > fabricscoped.conf
#
# Options given as NAME=VALUE after the daemon are set instead of commented
# out: the package sets its state directory here, not as a unit flag that
# would shadow the file (cmake/packaging.cmake):
#
#   tools/gen-default-config.sh build/release/fabricscoped state-dir=/var/lib/fabricscope
#
# Uncommenting every option gives a file the daemon accepts and that changes
# nothing but the set ones (tests/e2e/deb_package_test.sh checks that).
set -euo pipefail
daemon="${1:?usage: gen-default-config.sh PATH/TO/fabricscoped [NAME=VALUE ...]}"
shift
version=$("$daemon" --version)
set_options=""
for kv in "$@"; do
  case "$kv" in
    [a-z]*=*) set_options+="$kv"$'\n' ;;
    *) echo "gen-default-config.sh: '$kv' is not NAME=VALUE" >&2; exit 2 ;;
  esac
done

cat <<EOF
# /etc/fabricscope/fabricscoped.conf: the configuration of fabricscoped, the
# per-host RDMA fabric telemetry daemon (man fabricscoped, or
# /usr/share/doc/fabricscope/README.md, "Configuration").
#
# One "name = value" per line; the names are those of the command-line flags
# without the leading dashes; "#" starts a comment. Flags on the command line
# win over this file; the systemd unit (fabricscoped.service) passes none but
# --config, so every line here takes effect. \`systemctl reload fabricscoped\`
# (SIGHUP) re-reads this file: options marked [reloadable] take effect at
# once, the others at the next restart (\`systemctl restart fabricscoped\`).
#
# Every option is listed below at its built-in default, commented out, except
# those this installation sets (uncommented, with the built-in default said).
# Uncomment a line to change it. Generated from \`fabricscoped --help\` of
# $version.
EOF

# The --help layout (daemon/config.cc, HelpText):
#   "  --name=HINT" or "  --name[=true|false]"
#   "      help text [reloadable]"      (one or more lines)
#   "      (default: VALUE)"            ("" for an empty value)
# --config and the actions (--help, --version, ...) have no default line.
"$daemon" --help | awk -v set_options="$set_options" '
  BEGIN {
    n = split(set_options, kvs, "\n")
    for (i = 1; i <= n; i++) {
      if (kvs[i] == "") continue
      eq = index(kvs[i], "=")
      set[substr(kvs[i], 1, eq - 1)] = substr(kvs[i], eq + 1)
    }
  }
  function flush() {
    if (name != "" && has_default) {
      print ""
      n = split(help, words, " ")
      line = "#"
      for (i = 1; i <= n; i++) {
        if (length(line) + 1 + length(words[i]) > 78 && line != "#") { print line; line = "#" }
        line = line " " words[i]
      }
      if (line != "#") print line
      if (name in set) {
        print "# Set by this installation (built-in default: " (value == "" ? "\"\"" : value) ")."
        print name " = " set[name]
        used[name] = 1
      } else {
        print "#" name " =" (value == "" ? "" : " " value)
      }
    }
    name = ""; help = ""; has_default = 0
  }
  /^  --/ {
    flush()
    name = substr($1, 3)
    sub(/\[?=.*/, "", name)
    if (name == "config") name = ""
    next
  }
  /^      \(default: .*\)$/ && name != "" {
    value = $0
    sub(/^      \(default: /, "", value)
    sub(/\)$/, "", value)
    if (value == "\"\"") value = ""
    has_default = 1
    next
  }
  /^      / && name != "" {
    text = $0
    sub(/^ +/, "", text)
    help = help (help == "" ? "" : " ") text
    next
  }
  END {
    flush()
    for (k in set) {
      if (!(k in used)) { print "gen-default-config.sh: no option " k " in --help" > "/dev/stderr"; exit 2 }
    }
  }
'
