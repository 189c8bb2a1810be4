#!/bin/bash
# Builds the Kubernetes test counterparts (kube-apiserver v1.37.0 and etcd v3.6.16)
# from the Go module proxy into $EDGELB_CACHE/bin, once per machine.
# Usage: lab/tools/build.sh [kube-apiserver|etcd]...   (default: both)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
CACHE=${EDGELB_CACHE:-/var/cache/edgelb}
mkdir -p "$CACHE/bin"
want=("$@"); [ ${#want[@]} -gt 0 ] || want=(kube-apiserver etcd)
for t in "${want[@]}"; do
  out=$CACHE/bin/$t
  if [ -x "$out" ] && [ "$out" -nt "$here/$t/go.mod" ]; then echo "cached: $out"; continue; fi
  echo "building $t into $out (kube-apiserver takes ~8 min on 2 cores, once)"
  cd "$here/$t"
  GOFLAGS=-mod=mod go mod download
  case $t in
    kube-apiserver)
      GOFLAGS=-mod=mod go build -trimpath -o "$out.tmp" -ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v1.37.0 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37" k8s.io/kubernetes/cmd/kube-apiserver ;;
    etcd)
      GOFLAGS=-mod=mod go build -trimpath -o "$out.tmp" -ldflags="-s -w" . ;;
  esac
  mv "$out.tmp" "$out"
done
