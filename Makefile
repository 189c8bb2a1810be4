# edgelb — every kind of proof has its own target; `make test` runs them all.
# Kernel-touching tests run only inside network namespaces they create.
SHELL     := /bin/bash
GO        ?= go
BIN       ?= bin/edgelb
PKGS      := ./...
export EDGELB_CACHE ?= /var/cache/edgelb
GOTEST    := $(GO) test -count=1
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/edgelb/edgelb/cmd/edgelb/internal/version.Version=$(VERSION)

.PHONY: all build test test-inventory test-unit test-netns test-ipvs test-k8s test-bgp test-failover test-ui test-fleet \
        test-monitoring test-package test-system deb image test-image reports-clean soak soak-clones soak-load bench demo lint fuzz race deps install clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/edgelb

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags 'netns ipvsguest k8s bgp failover ui fleet system' $(PKGS)

# Every test target pipes `go test -json` through testcheck: concise output,
# the MEASURED lines, and a failure for a failed test or for a skip that is not
# on lab/testcheck/skips.txt with its reason. Results land in $(REPORTS).
TESTCHECK := bin/testcheck
REPORTS   ?= bin/test-reports
REPORT     = $(TESTCHECK) report -target $@ -save $(REPORTS)

$(TESTCHECK): $(wildcard lab/testcheck/*.go) lab/testcheck/skips.txt
	$(GO) build -o $@ ./lab/testcheck

# Every Test/Fuzz function runs in exactly one of the targets below (read from
# this Makefile's recipes: build tags, -run pattern, packages).
test-inventory: $(TESTCHECK)
	$(TESTCHECK) inventory

# Fast loop: no root, no kernel; loopback only (in-process BGP and memberlist peers).
test-unit: $(TESTCHECK)
	set -o pipefail; $(GOTEST) -json $(PKGS) 2>&1 | $(REPORT)

# Real kernel in namespaces (root): nftables dataplane, ARP, node-port checks, demo lab.
# UPGRADE_FROM: the last commit before the nft layout gave service ids a
# class; lab/faults takes a gateway it programmed over under load.
UPGRADE_FROM ?= d14835d
test-netns: build $(TESTCHECK)
	lab/deps.sh netns
	set -o pipefail; EDGELB_OLD_BIN="$$(lab/oldbin.sh $(UPGRADE_FROM))" $(GOTEST) -json -p 1 -tags netns -run '^TestNetns' -timeout 20m $(PKGS) 2>&1 | $(REPORT)

# IPVS on Debian's stock kernel booted in a guest (this host kernel has no IPVS).
test-ipvs: $(TESTCHECK)
	lab/deps.sh ipvs
	set -o pipefail; EDGELB_GUEST_TAGS=ipvsguest EDGELB_GUEST_RUN='^TestIPVSGuest' lab/guest/run-suite.sh 2>&1 | $(REPORT)

# A real kube-apiserver + etcd on 127.0.0.1 (built once into $(EDGELB_CACHE)).
test-k8s: $(TESTCHECK)
	lab/deps.sh k8s
	lab/tools/build.sh
	set -o pipefail; $(GOTEST) -json -p 1 -tags k8s -run '^TestK8s' -timeout 30m $(PKGS) 2>&1 | $(REPORT)

# FRR and BIRD as BGP peers in namespaces.
test-bgp: $(TESTCHECK)
	lab/deps.sh bgp
	set -o pipefail; $(GOTEST) -json -p 1 -tags bgp -run '^TestBGP' -timeout 40m $(PKGS) 2>&1 | $(REPORT)

# Gateways killed with -9 on a shared bridge; failover times printed.
test-failover: $(TESTCHECK)
	lab/deps.sh failover
	set -o pipefail; $(GOTEST) -json -p 1 -tags failover -run '^TestFailover' -timeout 50m $(PKGS) 2>&1 | $(REPORT) -v

# A fleet (issue 17): a 3-member etcd 3.6 cluster (built once into $(EDGELB_CACHE))
# and 3 gateways, each in its own namespace, sharing one state; MEASURED fleet line.
test-fleet: $(TESTCHECK)
	lab/deps.sh netns
	lab/tools/build.sh etcd
	set -o pipefail; $(GOTEST) -json -p 1 -tags fleet -run '^TestFleet' -timeout 30m $(PKGS) 2>&1 | $(REPORT) -v

# Debian chromium, headless, against the embedded page.
test-ui: build $(TESTCHECK)
	lab/deps.sh ui netns
	set -o pipefail; $(GOTEST) -json -p 1 -tags ui -run '^TestUI' -timeout 15m $(PKGS) 2>&1 | $(REPORT) -v

# The Debian package (dpkg-deb, no packaging library in go.mod): bin/edgelb_<version>_<arch>.deb.
deb: build
	lab/deps.sh package
	rm -f bin/edgelb_*.deb
	lab/package/build-deb.sh $(BIN)

# lintian, then the .deb installed into a fresh debootstrapped Debian root
# (cached in $(EDGELB_CACHE)), systemd-analyze verify, remove, purge, nothing left.
test-package: deb
	lab/package/test.sh bin/edgelb_*.deb

# Debian 12 booted with systemd as PID 1 in systemd-nspawn containers inside
# namespaces (lab/system): the .deb installed with dpkg and run by systemd;
# an upgrade from UPGRADE_SYSTEM_FROM's package under traffic on an L2 pair
# with state sync, reboots, bad days, BGP to FRR, a fleet (etcd) rolled from the
# old package to the new. The root is built once into $(EDGELB_CACHE).
# UPGRADE_SYSTEM_FROM: the commit make soak-load last certified (docs/soak.md).
UPGRADE_SYSTEM_FROM ?= 6995521
test-system: deb $(TESTCHECK)
	lab/deps.sh system package bgp
	lab/tools/build.sh etcd
	set -o pipefail; EDGELB_ROOTFS="$$(lab/system/rootfs.sh)" EDGELB_DEB="$$(readlink -f bin/edgelb_*.deb)" EDGELB_OLD_DEB="$$(lab/system/olddeb.sh $(UPGRADE_SYSTEM_FROM))" $(GOTEST) -json -p 1 -tags system -run '^TestSystem' -timeout 15m ./lab/system 2>&1 | $(REPORT) -v

# The OCI image without a container daemon (go-containerregistry, its own module
# lab/tools/ociimage): bin/image (OCI layout) and bin/image.tar; one layer, /edgelb only.
IMAGE ?= edgelb:$(VERSION)
image: build
	cd lab/tools/ociimage && GOFLAGS=-mod=mod $(GO) build -o ../../../bin/ociimage .
	bin/ociimage build -binary $(BIN) -out bin/image -tag $(IMAGE) -version $(VERSION) -created $$(git log -1 --format=%ct)

# Builds the image, reads it back from the layout and checks it: a single file
# (the static binary), a numeric non-root user, entrypoint /edgelb; prints the config.
test-image: image
	bin/ociimage inspect bin/image

# Prometheus alert rules: syntax and their unit tests (Debian's prometheus package).
test-monitoring:
	lab/deps.sh monitoring
	promtool check rules docs/monitoring/prometheus/edgelb-rules.yaml
	cd docs/monitoring/prometheus && promtool test rules edgelb-rules_test.yaml

reports-clean:
	rm -rf $(REPORTS)

# The closing line sums every target's results.
test: lint test-inventory reports-clean test-unit test-netns test-ipvs test-k8s test-bgp test-failover test-ui test-fleet test-monitoring test-package test-system test-image
	$(TESTCHECK) total $(REPORTS)

# Runs the root targets N times in a row (logs in bin/soak/logs) and prints a
# pass/fail table per test; a test that failed in any run is listed.
N           ?= 5
SOAK_TARGETS ?= test-netns test-ipvs test-k8s test-bgp test-failover test-ui test-fleet test-system
soak: build $(TESTCHECK)
	rm -rf bin/soak && mkdir -p bin/soak/logs
	for i in $$(seq 1 $(N)); do for t in $(SOAK_TARGETS); do \
	  echo "soak: run $$i/$(N) $$t ($$(date -u +%H:%M:%S))"; \
	  $(MAKE) --no-print-directory $$t REPORTS=bin/soak/run$$i >bin/soak/logs/run$$i-$$t.log 2>&1 || echo "soak: run $$i $$t FAILED (bin/soak/logs/run$$i-$$t.log)"; \
	done; done
	$(TESTCHECK) soak bin/soak/run*/

# CI's own proof, N times: each run a fresh clone of HEAD running .ci/run (what
# CI does), one line per run with its wall time, then the same per-test table.
soak-clones: $(TESTCHECK)
	lab/soak-clones.sh $(N) bin/soak-clones

# soak-clones on a busy machine (issue 33): each fresh clone's .ci/run with a
# CPU burner per core beside it at normal priority, N=3 by default; each run's
# line gives its load average; any failed run fails the target.
soak-load: N = 3
soak-load: $(TESTCHECK)
	EDGELB_SOAK_BURNERS=$$(nproc) lab/soak-clones.sh $(N) bin/soak-load

# Every benchmark; writes docs/performance.md (the README's table).
bench: build
	lab/deps.sh all
	lab/bench.sh
	lab/readme-perf.sh

# The unit tests again under the race detector (cgo: gcc). A re-run of
# test-unit's tests, not a kind of proof of its own, so not in `make test`
# (CONTRIBUTING.md says why and what it found).
race:
	lab/deps.sh race
	CGO_ENABLED=1 $(GOTEST) -race $(PKGS)

# Each parser's fuzz target for FUZZTIME (default 60s).
FUZZTIME ?= 60s
fuzz:
	lab/fuzz.sh $(FUZZTIME)

# The demo is a lab tool (lab/demo/cmd/edgelb-demo), not an edgelb command: it runs $(BIN).
demo: build
	lab/deps.sh demo
	$(GO) build -o $(dir $(BIN))edgelb-demo ./lab/demo/cmd/edgelb-demo
	$(dir $(BIN))edgelb-demo --edgelb $(BIN)

deps:
	lab/deps.sh all

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)/usr/local/bin/edgelb
	install -D -m 0644 systemd/edgelb.service $(DESTDIR)/etc/systemd/system/edgelb.service
	install -D -m 0644 systemd/sysctl.d/90-edgelb.conf $(DESTDIR)/etc/sysctl.d/90-edgelb.conf
	install -D -m 0644 systemd/modules-load.d/edgelb.conf $(DESTDIR)/etc/modules-load.d/edgelb.conf
	[ -e $(DESTDIR)/etc/edgelb/config.yaml ] || install -D -m 0644 systemd/config.example.yaml $(DESTDIR)/etc/edgelb/config.yaml
	install -D -m 0644 systemd/edgelb-bfd.conf $(DESTDIR)/usr/local/share/doc/edgelb/examples/edgelb-bfd.conf

clean:
	rm -rf bin
