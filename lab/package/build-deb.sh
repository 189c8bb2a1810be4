#!/bin/bash
# Builds the Debian package of edgelb with dpkg-deb (no packaging library in
# go.mod): bin/edgelb-<version>_<arch>.deb. Usage: lab/package/build-deb.sh BINARY
# The binary is the static one `make build` writes (CGO_ENABLED=0).
set -euo pipefail
bin=${1:?usage: build-deb.sh BINARY}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# Debian versions must start with a digit: 0~git<commit time>.<describe> sorts
# below any 1.0, and by commit time among builds (a hash alone sorts at random,
# and dpkg would take an upgrade for a downgrade).
ver=$(git -C "$top" describe --always --dirty 2>/dev/null || echo dev)
when=$(TZ=UTC git -C "$top" log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S 2>/dev/null || echo 0)
ver=0~git$when.$(echo "$ver" | tr -c 'A-Za-z0-9.+~\n' '+')
arch=$(dpkg --print-architecture)
out=$top/bin/edgelb_${ver}_${arch}.deb
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
r=$stage/root
umask 022
install -D -m 0755 "$bin" "$r/usr/bin/edgelb"
# The unit as in systemd/, with the package's binary path (make install uses /usr/local).
install -d "$r/lib/systemd/system"
sed 's#/usr/local/bin/edgelb#/usr/bin/edgelb#g' "$top/systemd/edgelb.service" >"$r/lib/systemd/system/edgelb.service"
chmod 0644 "$r/lib/systemd/system/edgelb.service"
# Package defaults live under /usr/lib (an admin overrides them in /etc).
install -D -m 0644 "$top/systemd/sysctl.d/90-edgelb.conf" "$r/usr/lib/sysctl.d/90-edgelb.conf"
install -D -m 0644 "$top/systemd/modules-load.d/edgelb.conf" "$r/usr/lib/modules-load.d/edgelb.conf"
install -D -m 0644 "$top/systemd/config.example.yaml" "$r/etc/edgelb/config.yaml"
install -D -m 0644 "$top/systemd/config.example.yaml" "$r/usr/share/doc/edgelb/examples/config.yaml"
install -D -m 0644 "$top/systemd/edgelb-bfd.conf" "$r/usr/share/doc/edgelb/examples/edgelb-bfd.conf"
install -D -m 0644 "$top/README.md" "$r/usr/share/doc/edgelb/README.md"
install -D -m 0644 "$here/debian/copyright" "$r/usr/share/doc/edgelb/copyright"
install -D -m 0644 "$here/debian/lintian-overrides" "$r/usr/share/lintian/overrides/edgelb"
date=$(git -C "$top" log -1 --format=%aD 2>/dev/null || date -R)
printf 'edgelb (%s) unstable; urgency=medium\n\n  * Built from %s.\n\n -- edgelb maintainers <maintainers@edgelb.invalid>  %s\n' \
  "$ver" "$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo dev)" "$date" |
  gzip -9n >"$r/usr/share/doc/edgelb/changelog.gz"
chmod 0644 "$r/usr/share/doc/edgelb/changelog.gz"
install -d "$r/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$r" | cut -f1)
sed -e "s/@VERSION@/$ver/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" "$here/debian/control" >"$r/DEBIAN/control"
install -m 0644 "$here/debian/conffiles" "$r/DEBIAN/conffiles"
for s in postinst prerm postrm; do install -m 0755 "$here/debian/$s" "$r/DEBIAN/$s"; done
(cd "$r" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$r/DEBIAN/md5sums"
chmod 0644 "$r/DEBIAN/md5sums"
mkdir -p "$top/bin"
fakeroot dpkg-deb --root-owner-group -Zxz --build "$r" "$out" >&2
echo "$out"
