#!/bin/bash
# run.sh — boot Debian's stock kernel (IPVS as modules) in a throwaway guest and
# run static test binaries inside it, one after the other, in one boot.
#
# Usage: lab/guest/run.sh [--tcg|--uml] BINARY[:SRCDIR] ... [-- ARGS...]
#   BINARY  a static linux/amd64 executable (CGO_ENABLED=0 go test -c ...)
#   SRCDIR  copied into the guest; the binary runs with it as cwd (a package
#           dir, so testdata/ paths work). Default: no copy, cwd=/.
#   ARGS    passed to every binary (e.g. -test.v -test.run '^TestIPVSGuest').
# Prints each binary's output and "guest: NAME exit=RC". Exits 0 when every
# binary exited 0, with the first non-zero exit code otherwise, and with 125
# when the guest did not report an exit code for every binary (boot failure,
# kernel panic, timeout).
#
# Engines: --tcg (default) QEMU software emulation of linux-image-*-amd64 with
# the uncompressed vmlinux and qboot; --uml Debian's user-mode-linux kernel run
# as a plain process. Neither gets a network device: all traffic stays inside.
# Env:
#   EDGELB_CACHE           cache root (default /var/cache/edgelb); files go to $EDGELB_CACHE/guest
#   EDGELB_GUEST_ENGINE    tcg|uml (default tcg; the flags above win)
#   EDGELB_GUEST_TIMEOUT   seconds before the guest is killed (default 1800)
#   EDGELB_GUEST_MEM       MiB (default 1536)   EDGELB_GUEST_SMP vCPUs (default 2, max 2)
#   EDGELB_GUEST_HOSTBINS  host programs copied in with their shared libraries
#                          (default "ipvsadm ip nft keepalived"; missing ones are skipped with a note)
#   EDGELB_GUEST_FILES     static executables copied to /usr/local/bin in the guest
#                          (run-suite.sh puts the edgelb binary there; /init sets EDGELB_BIN)
#   EDGELB_GUEST_VERBOSE=1 also print the kernel console
# Downloads use `apt-get download` + `dpkg -x`: the kernel is never installed.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${EDGELB_CACHE:-/var/cache/edgelb}/guest
ENGINE=${EDGELB_GUEST_ENGINE:-tcg}
log() { echo "guest: $*" >&2; }
die() { log "$*"; exit 2; }

bins=()
while [ $# -gt 0 ]; do
  case $1 in
    --tcg|--uml) ENGINE=${1#--}; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) bins+=("$1"); shift ;;
  esac
done
[ ${#bins[@]} -gt 0 ] || die "no binary given (see --help)"
case $ENGINE in tcg|uml) ;; *) die "unknown engine $ENGINE (want tcg or uml)" ;; esac
mkdir -p "$CACHE"

# ---- downloads, once: a stock kernel (or UML) and busybox-static, unpacked not installed
fetch() { # fetch DIR PKG... : apt-get download the packages and dpkg -x them into DIR
  local dir=$1; shift
  [ -f "$CACHE/$dir/.done" ] && return 0
  log "downloading $* (apt-get download + dpkg -x; nothing is installed)"
  rm -rf "$CACHE/$dir" "$CACHE/dl.$dir"; mkdir -p "$CACHE/dl.$dir"; chmod 777 "$CACHE/dl.$dir"
  (cd "$CACHE/dl.$dir" && apt-get download -qq "$@" >&2) || {
    log "apt-get download failed; trying apt-get update once"; apt-get update -qq >&2
    (cd "$CACHE/dl.$dir" && apt-get download -qq "$@" >&2); }
  for d in "$CACHE/dl.$dir"/*.deb; do dpkg -x "$d" "$CACHE/$dir"; done
  rm -rf "$CACHE/dl.$dir"; touch "$CACHE/$dir/.done"
}
fetch busybox busybox-static
BB=$CACHE/busybox/bin/busybox
if [ "$ENGINE" = uml ]; then
  fetch uml user-mode-linux
  KVER=$(ls "$CACHE/uml/usr/lib/uml/modules" | head -1); MODROOT=$CACHE/uml/usr/lib/uml/modules/$KVER
else
  command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing: run lab/deps.sh ipvs"
  kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  if [ -z "$kpkg" ]; then # no apt lists yet, or a cached kernel is enough
    kpkg=$(ls -d "$CACHE"/kernel-linux-image-* 2>/dev/null | head -1 | sed 's,.*/kernel-,,')
    [ -n "$kpkg" ] || { apt-get update -qq >&2; kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}'); }
  fi
  [ -n "$kpkg" ] || die "cannot find Debian's linux-image-amd64 dependency"
  fetch "kernel-$kpkg" "$kpkg"
  K=$CACHE/kernel-$kpkg
  KVER=$(ls "$K/lib/modules" | head -1); MODROOT=$K/lib/modules/$KVER
  # The uncompressed vmlinux boots through QEMU's PVH entry and skips the xz
  # decompressor, which halves the boot under TCG.
  if [ ! -s "$K/vmlinux" ]; then
    off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$K/boot/vmlinuz-$KVER" | head -1 | cut -d: -f1 || true)
    if [ -n "$off" ]; then
      tail -c +$((off + 1)) "$K/boot/vmlinuz-$KVER" | xz -dc > "$K/vmlinux.tmp" 2>/dev/null || true
      if [ "$(head -c4 "$K/vmlinux.tmp" | tail -c3)" = ELF ]; then mv "$K/vmlinux.tmp" "$K/vmlinux"; else rm -f "$K/vmlinux.tmp"; fi
    fi
  fi
  KIMG=$K/vmlinux; [ -s "$KIMG" ] || KIMG=$K/boot/vmlinuz-$KVER
fi

# ---- base initramfs: busybox, modules, host programs, /init. Cached by content key.
HOSTBINS=${EDGELB_GUEST_HOSTBINS-ipvsadm ip nft keepalived}
hostfiles=()
for b in $HOSTBINS; do
  p=$(command -v "$b" 2>/dev/null || true)
  if [ -z "$p" ]; then log "note: host program $b not found; the guest will not have it"; continue; fi
  p=$(readlink -f "$p"); hostfiles+=("$p:$b")
done
key=$( { cat "$0" "$HERE/init.sh"; echo "$ENGINE $KVER"; for f in "${hostfiles[@]}"; do stat -c '%n %Y %s' "${f%%:*}"; done; } | sha256sum | cut -c1-16)
BASE=$CACHE/base-$ENGINE-$key.cpio.gz
if [ ! -s "$BASE" ]; then
  log "building the base initramfs for $KVER ($ENGINE)"
  ST=$(mktemp -d "$CACHE/stage.XXXXXX")
  mkdir -p "$ST"/{bin,sbin,usr/bin,usr/sbin,usr/local/sbin,proc,sys,dev,tmp,run,root,etc,test,var,lib64}
  cp "$BB" "$ST/bin/busybox"
  for a in $("$BB" --list-full); do [ -e "$ST/$a" ] || ln -s /bin/busybox "$ST/$a"; done
  S=$ST/lib/modules/$KVER; mkdir -p "$S/kernel/lib"
  cp "$MODROOT"/modules.order "$MODROOT"/modules.builtin "$MODROOT"/modules.builtin.modinfo "$S/" 2>/dev/null || true
  for p in net/netfilter net/ipv4/netfilter net/ipv6/netfilter net/bridge net/llc net/802 net/xfrm \
           net/ipv4/ipip.ko net/ipv4/ip_tunnel.ko net/ipv4/tunnel4.ko net/ipv6/ipv6.ko \
           drivers/net/veth.ko drivers/net/dummy.ko drivers/net/macvlan.ko \
           crypto/crc32c_generic.ko arch/x86/crypto/crc32c-intel.ko; do
    [ -e "$MODROOT/kernel/$p" ] || continue
    mkdir -p "$S/kernel/$(dirname "$p")"; cp -a "$MODROOT/kernel/$p" "$S/kernel/$(dirname "$p")/"
  done
  cp "$MODROOT"/kernel/lib/*.ko "$S/kernel/lib/" 2>/dev/null || true
  find "$S" -name '*.ko.xz' -exec xz -d {} + 2>/dev/null || true
  "$BB" depmod -b "$ST" "$KVER"
  # Host programs (dynamically linked) with the libraries ldd names, at the same paths.
  for f in "${hostfiles[@]}"; do
    src=${f%%:*}; name=${f##*:}
    cp "$src" "$ST/usr/local/sbin/$name"
    for lib in $(ldd "$src" 2>/dev/null | grep -o '/[^ ]*'); do
      [ -e "$lib" ] || continue
      mkdir -p "$ST$(dirname "$lib")"; cp -L "$lib" "$ST$lib"
    done
  done
  cp "$HERE/init.sh" "$ST/init"; chmod 755 "$ST/init"
  (cd "$ST" && find . | sort | cpio -o -H newc -R 0:0 --quiet | gzip -1) > "$BASE.tmp"
  # Pad to 512 bytes so the appended uncompressed cpio starts aligned.
  sz=$(stat -c %s "$BASE.tmp"); head -c $(( (512 - sz % 512) % 512 )) /dev/zero >> "$BASE.tmp"
  mv "$BASE.tmp" "$BASE"; rm -rf "$ST"
  # Older bases of this engine are stale now.
  for old in "$CACHE"/base-"$ENGINE"-*.cpio.gz; do [ "$old" = "$BASE" ] || rm -f "$old"; done
fi

# ---- per-run overlay: /test/list, /test/args, /test/N/bin, /test/N/src
RUN=$(mktemp -d "${TMPDIR:-/tmp}/edgelb-guest.XXXXXX"); trap 'rm -rf "$RUN"' EXIT
mkdir -p "$RUN/o/test"
: > "$RUN/o/test/list"; : > "$RUN/o/test/args"
for a in "$@"; do printf '%s\n' "$a" >> "$RUN/o/test/args"; done
n=0; names=()
for spec in "${bins[@]}"; do
  bin=${spec%%:*}; src=; [ "$spec" != "$bin" ] && src=${spec#*:}
  [ -f "$bin" ] || die "$bin: no such file"
  if file "$bin" 2>/dev/null | grep -q 'dynamically linked'; then die "$bin is dynamically linked; build with CGO_ENABLED=0"; fi
  n=$((n + 1)); name=$(basename "$bin"); names+=("$name")
  mkdir -p "$RUN/o/test/$n/src"
  cp "$bin" "$RUN/o/test/$n/bin"; chmod 755 "$RUN/o/test/$n/bin"
  [ -n "$src" ] && cp -a "$src"/. "$RUN/o/test/$n/src/"
  echo "$n $name" >> "$RUN/o/test/list"
done
for f in ${EDGELB_GUEST_FILES:-}; do
  mkdir -p "$RUN/o/usr/local/bin"; cp "$f" "$RUN/o/usr/local/bin/"; chmod 755 "$RUN/o/usr/local/bin/$(basename "$f")"
done
(cd "$RUN/o" && find . | cpio -o -H newc -R 0:0 --quiet) > "$RUN/overlay.cpio"
cat "$BASE" "$RUN/overlay.cpio" > "$RUN/initrd"

# ---- boot
CMDLINE="panic=-1 quiet loglevel=3"
SMP=${EDGELB_GUEST_SMP:-2}; [ "$SMP" -gt 2 ] && SMP=2
MEM=${EDGELB_GUEST_MEM:-1536}
if [ "$ENGINE" = uml ]; then
  VM=("$CACHE/uml/usr/bin/linux.uml" mem="${MEM}M" initrd="$RUN/initrd" con0=null,fd:1 con=null ssl=null console=tty0 $CMDLINE)
else
  VM=(qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp "$SMP" -m "$MEM" -display none -monitor none
      -serial stdio -no-reboot -nic none -kernel "$KIMG" -initrd "$RUN/initrd"
      -append "console=ttyS0 $CMDLINE mitigations=off")
  [ -f /usr/share/qemu/qboot.rom ] && VM+=(-bios /usr/share/qemu/qboot.rom)
fi
SERIAL=$RUN/serial.log; T0=$(date +%s.%N)
cpus=$SMP; [ "$ENGINE" = uml ] && cpus=1
log "booting $KVER ($ENGINE, ${cpus} CPU, ${MEM} MiB) with ${names[*]}"
set +e
timeout -k 10 "${EDGELB_GUEST_TIMEOUT:-1800}" "${VM[@]}" </dev/null 2>&1 | tr -d '\r' | tee "$SERIAL" |
  awk -v v="${EDGELB_GUEST_VERBOSE:-0}" '
    /^=====EDGELB-GUEST-EXIT / {on=0; r=$4; sub(/=+$/, "", r); print "guest: " $3 " exit=" r; fflush(); next}
    /^=====EDGELB-GUEST-BEGIN / {on=1; next}
    on || v == 1 {print; fflush()}'
vrc=${PIPESTATUS[0]}
set -e
T1=$(date +%s.%N)
log "engine=$ENGINE vmm_rc=$vrc wall=$(awk "BEGIN{printf \"%.1f\", $T1-$T0}")s"
rc=0; i=0
for name in "${names[@]}"; do
  i=$((i + 1))
  r=$(sed -n "s/^=====EDGELB-GUEST-EXIT $i $name \([0-9]*\)=====.*/\1/p" "$SERIAL" | tail -1)
  if [ -z "$r" ]; then
    log "$name reported no exit code; console tail:"; tail -40 "$SERIAL" >&2; exit 125
  fi
  [ "$r" != 0 ] && [ "$rc" = 0 ] && rc=$r
done
exit "$rc"
