#!/bin/bash
# Installs the Debian packages a make target needs, once, idempotently.
# Usage: lab/deps.sh GROUP...   groups: netns ipvs k8s bgp ui demo system monitoring package race all
set -euo pipefail
pkgs=()
for g in "$@"; do
  case $g in
    netns|demo) pkgs+=(iproute2 nftables iputils-arping conntrack tshark curl systemd wrk iperf3) ;;
    ipvs)       pkgs+=(qemu-system-x86 cpio busybox-static xz-utils ipvsadm keepalived) ;;
    k8s)        pkgs+=(openssl curl) ;;
    bgp)        pkgs+=(frr bird2 iproute2 nftables conntrack iputils-arping) ;;
    failover)   pkgs+=(iproute2 iputils-arping tshark conntrack conntrackd) ;;
    ui)         pkgs+=(chromium fonts-liberation) ;;
    systemd)    pkgs+=(systemd) ;;
    system)     pkgs+=(systemd-container debootstrap iproute2 util-linux) ;;
    monitoring) pkgs+=(prometheus) ;;
    package)    pkgs+=(dpkg-dev fakeroot lintian debootstrap systemd) ;;
    race)       pkgs+=(gcc libc6-dev) ;;
    all)        exec "$0" netns ipvs k8s bgp failover ui systemd system monitoring package ;;
    *) echo "deps.sh: unknown group $g" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then echo "deps.sh: need root to install: ${missing[*]}" >&2; exit 1; fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Another apt (unattended-upgrades on a fresh machine, a second make target)
# may hold dpkg's lock: wait for it rather than fail the run.
lock=(-o DPkg::Lock::Timeout=600)
apt-get "${lock[@]}" update -qq
apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}"
