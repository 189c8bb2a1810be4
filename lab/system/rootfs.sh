#!/bin/bash
# Builds, once per machine, the Debian bookworm root the system tests boot
# with systemd-nspawn: debootstrap --variant=minbase plus systemd as PID 1
# (systemd-sysv, dbus), what edgelb's package depends on (nftables, kmod,
# procps), conntrackd for state sync, FRR (edgelb's BFD runs its bfdd) and
# curl/conntrack/iproute2 for the checks. Cached as a tarball under $EDGELB_CACHE; each container boots from
# a fresh copy. Prints the tarball's path.
set -euo pipefail
cache=${EDGELB_CACHE:-/var/cache/edgelb}
# v2: with frr (its name changes with what it holds: the cache is shared).
tar=$cache/debian-bookworm-system-v2.tar
if [ -s "$tar" ]; then echo "$tar"; exit 0; fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/esys-rootfs.XXXXXX")
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,dbus,netbase,iproute2,nftables,kmod,procps,curl,conntrack,conntrackd,frr \
  bookworm "$work/root" http://deb.debian.org/debian >&2
r=$work/root
rm -rf "$r/var/cache/apt/archives/"*.deb "$r/var/lib/apt/lists/"*_Packages
# Debian's conntrackd.service runs its own conntrackd from /etc/conntrackd;
# edgelb runs one per peer from its state directory. Only edgelb's may run.
ln -sf /dev/null "$r/etc/systemd/system/conntrackd.service"
# Likewise FRR: only the bfdd edgelb starts (announce.bgp.bfd) may run.
ln -sf /dev/null "$r/etc/systemd/system/frr.service"
# Nothing is logged in on the console; nspawn's machine has no ttys to serve.
ln -sf /dev/null "$r/etc/systemd/system/console-getty.service"
# The machine id is made at each boot (a copy of the root per container).
: >"$r/etc/machine-id"
tar -C "$r" -cf "$tar.tmp.$$" .
mv "$tar.tmp.$$" "$tar"
echo "$tar"
