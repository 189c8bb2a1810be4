#!/bin/bash
# make test-package: the .deb installed into a fresh Debian bookworm root
# (debootstrap, cached once per machine under $EDGELB_CACHE), its unit checked
# with `systemd-analyze verify`, then removed and purged; the root's file
# list before and after must be the same. Prints lintian's verdict.
# Runs in a private mount and PID namespace with chroot: nothing touches the
# host's network, systemd or package database.
# Usage: lab/package/test.sh DEB
set -euo pipefail
deb=$(readlink -f "${1:?usage: test.sh DEB}")
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
t0=$(date +%s.%N)

echo "== lintian $(basename "$deb")"
# One run (lintian takes ~15 s on this package): tags with their explanations;
# O: lines are overridden tags, their reason printed above each.
lint=$(lintian --info --show-overrides "$deb" 2>/dev/null || true)
echo "$lint" | grep -v '^N: ' | sed 's/^/  /'
tags=$(echo "$lint" | grep -cE '^[EW]:' || true)
[ "$tags" = 0 ] || fail "lintian: $tags error/warning tags not overridden"
echo "  lintian: 0 errors, 0 warnings not overridden ($(echo "$lint" | grep -c '^O:') overridden, reasons in lab/package/debian/lintian-overrides)"

tar=$("$here/rootfs.sh")
root=$(mktemp -d /tmp/edgelb-pkgtest.XXXXXX)
trap 'rm -rf "$root"' EXIT
tar -C "$root" -xf "$tar"
cp "$deb" "$root/tmp/edgelb.deb"

# What dpkg legitimately changes by itself (its database, logs) is left out of
# the comparison; everything else must be back as it was after the purge.
snapshot() {
  (cd "$root" && find . -xdev \( -path ./proc -o -path ./tmp -o -path ./var/lib/dpkg -o -path ./var/log \
     -o -path ./var/cache/debconf -o -path ./run \) -prune -o -printf '%M %u %s %p\n' | sort)
}
inroot() { unshare --mount --pid --fork chroot "$root" /bin/sh -ec "mount -t proc proc /proc; $1"; }
snapshot >"$root/tmp/before"

echo "== dpkg -i"
inroot 'dpkg -i /tmp/edgelb.deb' | sed 's/^/  /'
inroot 'dpkg-query -W -f="\${Package} \${Version} \${Status}\n" edgelb; dpkg-query -W -f="\${Conffiles}\n" edgelb' | sed 's/^/  /'
snapshot >"$root/tmp/installed"
echo "  files added by the package:"
{ diff "$root/tmp/before" "$root/tmp/installed" || true; } | sed -n 's/^> /    /p'
enabled=$(inroot 'systemctl is-enabled edgelb.service || true')
echo "  systemctl is-enabled edgelb.service: $enabled"
[ "$enabled" = disabled ] || fail "the package enabled an unconfigured gateway ($enabled)"

echo "== systemd-analyze verify /lib/systemd/system/edgelb.service (in the installed root)"
if ! out=$(inroot 'systemd-analyze verify /lib/systemd/system/edgelb.service' 2>&1); then
  echo "$out" | sed 's/^/  /'; fail "systemd-analyze verify"
fi
[ -z "$out" ] || { echo "$out" | sed 's/^/  /'; fail "systemd-analyze verify printed warnings"; }
echo "  verify: no findings"
inroot '/usr/bin/edgelb version 2>/dev/null || /usr/bin/edgelb --version' | sed 's/^/  edgelb: /' || true

# A gateway that ran leaves state; the purge must take it too.
mkdir -p "$root/var/lib/private/edgelb" && echo state >"$root/var/lib/private/edgelb/state.db"
echo "local edit" >>"$root/etc/edgelb/config.yaml"

echo "== dpkg -r (the edited conffile stays)"
inroot 'dpkg -r edgelb' | sed 's/^/  /'
snapshot >"$root/tmp/removed"
echo "  left after remove:"
{ diff "$root/tmp/before" "$root/tmp/removed" || true; } | sed -n 's/^> /    /p'
[ -f "$root/etc/edgelb/config.yaml" ] || fail "remove deleted the conffile"

echo "== dpkg -P"
inroot 'dpkg -P edgelb' | sed 's/^/  /'
snapshot >"$root/tmp/purged"
if ! diff "$root/tmp/before" "$root/tmp/purged" >"$root/tmp/left"; then
  sed 's/^/  /' "$root/tmp/left"; fail "files differ after purge"
fi
inroot 'dpkg-query -W edgelb 2>&1 || true' | sed 's/^/  /'
echo "  MEASURED files: before $(wc -l <"$root/tmp/before"), installed $(wc -l <"$root/tmp/installed"), removed $(wc -l <"$root/tmp/removed"), purged $(wc -l <"$root/tmp/purged") (0 differences)"
printf 'PASS test-package in %.1f s\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
