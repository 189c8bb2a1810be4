package preflight

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/hostcheck"
	"github.com/edgelb/edgelb/proxy/ipvs"
	"github.com/edgelb/edgelb/proxy/nft"
)

// HostFindings is what `check` prints and `run` refuses to start on: node
// ports against ephemeral ports and local sockets, the dataplane `auto` would
// pick, IPVS sysctls, and forwarding methods the dataplane cannot do.
func HostFindings(cfg *config.Config, src hostcheck.Source) ([]hostcheck.Finding, error) {
	out, err := hostcheck.CheckNodePorts(src, cfg.NodePortInput())
	if err != nil {
		return nil, err
	}
	mode, why := ChooseDataplane(cfg.Dataplane.Mode)
	out = append(out, hostcheck.Finding{Severity: hostcheck.Info, Code: "dataplane", Message: why})
	switch mode {
	case config.ModeIPVS:
		if err := ipvs.Available(); err != nil {
			out = append(out, hostcheck.Finding{Severity: hostcheck.Error, Code: hostcheck.CodeIPVSAbsent,
				Message: fmt.Sprintf("dataplane mode ipvs: %v", err), Fix: "modprobe ip_vs  # or set dataplane.mode: auto"})
		} else {
			out = append(out, hostcheck.CheckIPVSSysctls(src)...)
		}
	case config.ModeNFTables:
		if fields := ipvsOnlyFields(cfg); len(fields) > 0 {
			out = append(out, hostcheck.Finding{Severity: hostcheck.Error, Code: "method-unsupported",
				Message: fmt.Sprintf("%s: only the IPVS dataplane can forward this way, but the nftables dataplane would run (%s; never silently downgraded)", strings.Join(fields, ", "), why),
				Fix:     "load IPVS (modprobe ip_vs) and set dataplane.mode: ipvs, or use method nat / nat-nosnat and a vip with ports instead of fwmark"})
		}
		out = append(out, nftSchedulerFindings(cfg)...)
	}
	out = append(out, hostcheck.CheckConntrack(src, cfg.Dataplane.ConntrackPeak)...)
	out = append(out, stateSyncFindings(cfg, linkExists)...)
	out = append(out, ecmpFindings(cfg, mode, src)...)
	out = append(out, bgpFailoverFindings(cfg)...)
	if mode == config.ModeIPVS {
		out = append(out, ipvsStateSyncFindings(cfg)...)
	}
	return out, nil
}

// nftSchedulerFindings refuses, before anything is programmed, schedulers
// the nftables dataplane cannot express (lc, wlc, sed, nq): it asks the
// dataplane itself (nft.Check), so the rule lives in one place.
func nftSchedulerFindings(cfg *config.Config) []hostcheck.Finding {
	var out []hostcheck.Finding
	for i, s := range cfg.Services {
		probe := proxy.Service{VIP: netip.MustParseAddr("192.0.2.1"), Port: 1, Protocol: proxy.TCP, Scheduler: s.Scheduler, Method: proxy.NAT}
		if err := nft.Check(probe); err != nil {
			out = append(out, hostcheck.Finding{Severity: hostcheck.Error, Code: "scheduler-unsupported",
				Message: fmt.Sprintf("services[%d].scheduler %q (service %q): %v", i, s.Scheduler, s.Name, errors.Unwrap(err)),
				Fix:     "use rr, wrr, sh, dh or mh with nftables, or load IPVS (modprobe ip_vs) and set dataplane.mode: ipvs"})
		}
	}
	return out
}

// ChooseDataplane resolves auto: IPVS when the kernel has it, else nftables.
func ChooseDataplane(m config.DataplaneMode) (config.DataplaneMode, string) {
	switch m {
	case config.ModeIPVS, config.ModeNFTables:
		return m, fmt.Sprintf("dataplane %s (configured)", m)
	}
	name, why := ipvs.Probe()
	return config.DataplaneMode(name), why
}

// Blocking reports whether findings forbid starting: any Error, except the
// ephemeral-range overlap when the operator chose to proceed.
func Blocking(cfg *config.Config, fs []hostcheck.Finding) []hostcheck.Finding {
	var out []hostcheck.Finding
	for _, f := range fs {
		if f.Severity != hostcheck.Error {
			continue
		}
		if f.Code == hostcheck.CodeRangeOverlap && cfg.Dataplane.AllowEphemeralOverlap {
			continue
		}
		out = append(out, f)
	}
	return out
}

// ipvsOnlyFields names the config fields of services that only IPVS can
// serve — a method (dr, tunnel) or a firewall mark — e.g.
// `services[1].method "tunnel" (service "web")`, `services[2].fwmark 1 (service "marked")`.
func ipvsOnlyFields(cfg *config.Config) []string {
	var out []string
	for i, s := range cfg.Services {
		if s.Method == proxy.DirectRouting || s.Method == proxy.Tunnel {
			out = append(out, fmt.Sprintf("services[%d].method %q (service %q)", i, s.Method, s.Name))
		}
		if s.FWMark != 0 {
			out = append(out, fmt.Sprintf("services[%d].fwmark %d (service %q)", i, s.FWMark, s.Name))
		}
	}
	return out
}
