# edgelb — every kind of proof has its own target; `make test` runs them all.
# Kernel-touching tests run only inside network namespaces they create.
GO        ?= go
BIN       ?= bin/edgelb
PKGS      := ./...
export EDGELB_CACHE ?= /var/cache/edgelb
GOTEST    := $(GO) test -count=1
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/edgelb/edgelb/cmd/edgelb/internal/version.Version=$(VERSION)

.PHONY: all build test test-unit test-netns test-ipvs test-k8s test-bgp test-failover test-ui \
        bench demo lint fuzz deps install clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/edgelb

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags 'netns ipvsguest k8s bgp failover ui' $(PKGS)

# Fast loop: no root, no kernel, no network.
test-unit:
	$(GOTEST) -short $(PKGS)

# Real kernel in namespaces (root): nftables dataplane, ARP, node-port checks, demo lab.
# UPGRADE_FROM: the last commit before the nft layout gave service ids a
# class; lab/faults takes a gateway it programmed over under load.
UPGRADE_FROM ?= d14835d
test-netns: build
	lab/deps.sh netns
	EDGELB_OLD_BIN="$$(lab/oldbin.sh $(UPGRADE_FROM))" $(GOTEST) -p 1 -tags netns -run '^TestNetns' -timeout 20m $(PKGS)

# IPVS on Debian's stock kernel booted in a guest (this host kernel has no IPVS).
test-ipvs:
	lab/deps.sh ipvs
	lab/guest/run-suite.sh

# A real kube-apiserver + etcd on 127.0.0.1 (built once into $(EDGELB_CACHE)).
test-k8s:
	lab/deps.sh k8s
	lab/tools/build.sh
	$(GOTEST) -p 1 -tags k8s -run '^TestK8s' -timeout 30m $(PKGS)

# FRR and BIRD as BGP peers in namespaces.
test-bgp:
	lab/deps.sh bgp
	$(GOTEST) -p 1 -tags bgp -run '^TestBGP' -timeout 20m $(PKGS)

# Gateways killed with -9 on a shared bridge; failover times printed.
test-failover:
	lab/deps.sh failover
	$(GOTEST) -p 1 -tags failover -run '^TestFailover' -timeout 20m -v $(PKGS)

# Debian chromium, headless, against the embedded page.
test-ui: build
	lab/deps.sh ui netns
	$(GOTEST) -p 1 -tags ui -run '^TestUI' -timeout 15m -v $(PKGS)

test: lint test-unit test-netns test-ipvs test-k8s test-bgp test-failover test-ui

# Every benchmark; writes docs/performance.md (the README's table).
bench: build
	lab/deps.sh all
	lab/bench.sh
	lab/readme-perf.sh

# Each parser's fuzz target for FUZZTIME (default 60s).
FUZZTIME ?= 60s
fuzz:
	lab/fuzz.sh $(FUZZTIME)

demo: build
	lab/deps.sh demo
	$(BIN) demo

deps:
	lab/deps.sh all

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)/usr/local/bin/edgelb
	install -D -m 0644 systemd/edgelb.service $(DESTDIR)/etc/systemd/system/edgelb.service
	install -D -m 0644 systemd/sysctl.d/90-edgelb.conf $(DESTDIR)/etc/sysctl.d/90-edgelb.conf
	install -D -m 0644 systemd/modules-load.d/edgelb.conf $(DESTDIR)/etc/modules-load.d/edgelb.conf
	[ -e $(DESTDIR)/etc/edgelb/config.yaml ] || install -D -m 0640 systemd/config.example.yaml $(DESTDIR)/etc/edgelb/config.yaml

clean:
	rm -rf bin
