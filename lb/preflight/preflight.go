package preflight

import (
	"fmt"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/fielderr"
	"github.com/edgelb/edgelb/proxy/hostcheck"
	"github.com/edgelb/edgelb/proxy/ipvs"
	"github.com/edgelb/edgelb/proxy/nft"
)

// HostFindings is what `check` prints and `run` refuses to start on: node
// ports against ephemeral ports and local sockets, the dataplane `auto` would
// pick, the dataplane's sysctls, and forwarding methods the dataplane cannot do.
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
			out = append(out, sysctlFindings(cfg, hostcheck.CheckSysctls(src, "IPVS", hostcheck.IPVSSysctls))...)
		}
	case config.ModeNFTables:
		out = append(out, sysctlFindings(cfg, hostcheck.CheckSysctls(src, "nftables", hostcheck.NFTablesSysctls))...)
		out = append(out, nftFindings(cfg)...)
	}
	out = append(out, hostcheck.CheckConntrack(src, cfg.Dataplane.ConntrackPeak)...)
	out = append(out, stateSyncFindings(cfg, linkExists)...)
	out = append(out, ecmpFindings(cfg)...)
	out = append(out, bgpFailoverFindings(cfg)...)
	if mode == config.ModeIPVS {
		out = append(out, ipvsStateSyncFindings(cfg)...)
	}
	return out, nil
}

// sysctlFindings: with dataplane.setSysctls the dataplane writes its list
// at start, so a value still wrong now is context, not a warning.
func sysctlFindings(cfg *config.Config, fs []hostcheck.Finding) []hostcheck.Finding {
	if !cfg.Dataplane.SetSysctls {
		return fs
	}
	for i, f := range fs {
		if f.Code == hostcheck.CodeSysctlWrong {
			fs[i].Severity = hostcheck.Info
			fs[i].Message += " (edgelb sets it at start: dataplane.setSysctls)"
		}
	}
	return fs
}

// nftFindings asks the nftables dataplane, through the one validator's
// probe (lb.CheckDataplane, which asks nft.Check), about every service's
// scheduler, method and firewall mark: with mode auto the dataplane is known
// only now, so what nftables cannot do is an Error here, never silently
// downgraded. (With mode nftables config.Parse has refused it already.)
func nftFindings(cfg *config.Config) []hostcheck.Finding {
	var c fielderr.Collector
	for i := range cfg.Services {
		lb.CheckDataplane(&c, fmt.Sprintf("services[%d]", i), &cfg.Services[i], nft.Check)
	}
	var out []hostcheck.Finding
	for _, fe := range c.List() {
		out = append(out, hostcheck.Finding{Severity: hostcheck.Error, Code: CodeDataplaneUnsupported,
			Message: fmt.Sprintf("%v (the dataplane here is nftables: see the dataplane line)", fe),
			Fix:     "load IPVS (modprobe ip_vs) and set dataplane.mode: ipvs, or choose what nftables does: method nat or nat-nosnat, a vip with ports instead of fwmark, scheduler rr, wrr, sh, dh or mh"})
	}
	return out
}

// CodeDataplaneUnsupported: a service asks for what the dataplane that would
// run cannot do.
const CodeDataplaneUnsupported = "dataplane-unsupported"

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
