#!/bin/sh
# /init of the edgelb test guest (see lab/guest/run.sh): mounts, loads the
# modules IPVS and the nftables dataplane need, runs every /test/N/bin with
# /test/args between markers, prints each exit code, powers off.
export PATH=/usr/local/sbin:/sbin:/usr/sbin:/bin:/usr/bin HOME=/root TMPDIR=/tmp EDGELB_GUEST=1
mount -t proc proc /proc; mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp; mount -t tmpfs tmpfs /run
mkdir -p /run/netns; ln -s /run /var/run
# The kernel auto-loads modules (nft expressions, schedulers) through busybox modprobe.
echo /sbin/modprobe > /proc/sys/kernel/modprobe
modprobe -q crc32c-intel 2>/dev/null || modprobe -q crc32c_generic
for m in nf_conntrack nf_nat ip_vs ip_vs_rr ip_vs_wrr ip_vs_lc ip_vs_wlc ip_vs_sh ip_vs_dh ip_vs_sed ip_vs_nq \
         ip_vs_mh veth dummy ipip nfnetlink nf_tables nft_ct nft_nat nft_masq nft_chain_nat nft_numgen \
         nft_hash nf_conntrack_netlink xfrm_user; do
  modprobe "$m" 2>/dev/null || echo "guest-init: modprobe $m failed"
done
ip link set lo up
# The daemon binary run-suite.sh ships (lab/edgelbbin reads EDGELB_BIN).
[ -x /usr/local/bin/edgelb ] && export EDGELB_BIN=/usr/local/bin/edgelb
set --
while IFS= read -r a; do set -- "$@" "$a"; done < /test/args
while read -r n name; do
  cd "/test/$n/src"
  echo "=====EDGELB-GUEST-BEGIN $n $name====="
  "/test/$n/bin" "$@"; rc=$?
  echo "=====EDGELB-GUEST-EXIT $n $name $rc====="
done < /test/list
sync; poweroff -f
