#!/bin/bash
# Builds, once per machine, a minimal Debian bookworm root from Debian's own
# packages (debootstrap --variant=minbase, plus systemd so `systemd-analyze
# verify` runs against the installed unit) and caches it as a tarball under
# $EDGELB_CACHE. Prints the tarball's path. Each test run unpacks a fresh copy.
set -euo pipefail
cache=${EDGELB_CACHE:-/var/cache/edgelb}
tar=$cache/debian-bookworm-minbase-systemd.tar
if [ -s "$tar" ]; then echo "$tar"; exit 0; fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/rootfs.XXXXXX")
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase --include=systemd,iproute2,nftables,kmod,procps \
  bookworm "$work/root" http://deb.debian.org/debian >&2
rm -rf "$work/root/var/cache/apt/archives/"*.deb
tar -C "$work/root" -cf "$tar.tmp" .
mv "$tar.tmp" "$tar"
echo "$tar"
