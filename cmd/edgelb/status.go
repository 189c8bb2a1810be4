package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgelb/edgelb/webui"
)

// statusBackend is one real server row, as ipvsadm -ln shows it plus health.
type statusBackend struct {
	Address    string `json:"address"`
	Forward    string `json:"forward"`
	Weight     int64  `json:"weight"`
	ActiveConn int    `json:"activeConn"`
	InActConn  int    `json:"inActConn"`
	Health     string `json:"health"`
}

// statusVirtual is one VIP:port/protocol, or (Protocol "FWM", Address the
// mark) one firewall-mark service.
type statusVirtual struct {
	Service   string          `json:"service"`
	Protocol  string          `json:"protocol"`
	Address   string          `json:"address"`
	Scheduler string          `json:"scheduler"`
	Affinity  string          `json:"affinityTimeout,omitempty"`
	Backends  []statusBackend `json:"backends"`
}

func newStatusCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "status [--server URL] [--watch] [--interval 2s] [-o table|json|yaml]",
		Short: "an ipvsadm -ln-like table of VIPs, backends, connections and health, then who announces each VIP, the BGP sessions, L2 members and sync peers, from the REST API",
		Args:  noArgs,
	}
	cf := addClientFlags(c.Flags())
	watch := c.Flags().Bool("watch", false, "redraw every --interval until interrupted")
	interval := c.Flags().Duration("interval", 2*time.Second, "redraw period with --watch")
	output := addOutputFlag(c, outTable, outJSON, outYAML)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if *interval <= 0 {
			return usageError(c, fmt.Errorf("--interval %q: must be positive", interval.String()))
		}
		cl, err := cf.client()
		if err != nil {
			return &exitError{exitUsage, err}
		}
		return status(c.Context(), cl, *watch, *interval, output.val, c.OutOrStdout())
	}
	return c
}

func status(ctx context.Context, c *apiClient, watch bool, interval time.Duration, format string, stdout io.Writer) error {
	for {
		vs, vips, err := collectStatus(ctx, c)
		if err != nil {
			return err
		}
		ann, err := collectAnnouncements(ctx, c, vips)
		if err != nil {
			return err
		}
		if watch && format == outTable {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J") // home and clear, like watch(1)
		}
		done, err := writeStructured(stdout, format, statusReport{Virtual: vs, Announcements: ann})
		if !done {
			if err = writeStatusTable(stdout, vs); err == nil {
				for _, w := range readyWarnings(ctx, c) {
					fmt.Fprintln(stdout, w)
				}
				err = writeAnnouncementsTable(stdout, ann, time.Now())
			}
		}
		if err != nil || !watch {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// collectStatus joins services (spec and assigned VIPs), live flows
// (connection counts) and health into ipvsadm's shape: one virtual
// server per assigned VIP × port, sorted by address; and every assigned
// VIP with its service.
func collectStatus(ctx context.Context, c *apiClient) ([]statusVirtual, map[string]string, error) {
	var ss []webui.ServiceStatus
	if _, err := c.do(ctx, http.MethodGet, "/api/v1/services", nil, &ss); err != nil {
		return nil, nil, err
	}
	var fl webui.FlowList
	if _, err := c.do(ctx, http.MethodGet, "/api/v1/flows?limit=100000", nil, &fl); err != nil {
		return nil, nil, err
	}
	var hs []webui.BackendHealth
	if _, err := c.do(ctx, http.MethodGet, "/api/v1/health", nil, &hs); err != nil {
		return nil, nil, err
	}
	vips := map[string]string{}
	for _, s := range ss {
		for _, v := range s.Assigned {
			vips[v] = s.Spec.Name
		}
	}
	type conn struct{ fe, be, proto string }
	active, inactive := map[conn]int{}, map[conn]int{}
	for _, f := range fl.Flows {
		k := conn{f.Frontend, f.Backend, strings.ToUpper(f.Protocol)}
		// ipvsadm counts an established TCP connection active and every
		// other entry (handshakes, closing, UDP) inactive.
		if k.proto == "TCP" && strings.EqualFold(f.State, "ESTABLISHED") {
			active[k]++
		} else {
			inactive[k]++
		}
	}
	health := map[[2]string]string{}
	for _, h := range hs {
		v := "down"
		if h.Healthy {
			v = "up"
		}
		health[[2]string{h.Service, h.Backend}] = v
	}
	var out []statusVirtual
	for _, s := range ss {
		for _, vip := range s.Assigned {
			a, err := netip.ParseAddr(vip)
			if err != nil {
				return nil, nil, fmt.Errorf("service %q: assigned %q: %w", s.Spec.Name, vip, err)
			}
			for _, p := range s.Spec.Ports {
				proto := strings.ToUpper(p.Protocol)
				if proto == "" {
					proto = "TCP"
				}
				fe := netip.AddrPortFrom(a, uint16(p.Port)).String()
				v := statusVirtual{Service: s.Spec.Name, Protocol: proto, Address: fe, Scheduler: s.Spec.Scheduler,
					Affinity: affinityOf(s.Spec), Backends: []statusBackend{}}
				for _, b := range s.Spec.Backends {
					port := b.Port
					if port == 0 {
						port = p.TargetPort
					}
					if port == 0 {
						port = p.Port
					}
					ba, err := netip.ParseAddr(b.Address)
					if err != nil {
						return nil, nil, fmt.Errorf("service %q: backend %q: %w", s.Spec.Name, b.Address, err)
					}
					row := backendRow(s.Spec, b, netip.AddrPortFrom(ba, uint16(port)), health)
					k := conn{fe, row.Address, proto}
					row.ActiveConn, row.InActConn = active[k], inactive[k]
					v.Backends = append(v.Backends, row)
				}
				out = append(out, v)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		ai, aj := netip.MustParseAddrPort(out[i].Address), netip.MustParseAddrPort(out[j].Address)
		if c := ai.Compare(aj); c != 0 {
			return c < 0
		}
		return out[i].Protocol < out[j].Protocol
	})
	marks, err := markRows(ss, fl.Flows, out, health)
	if err != nil {
		return nil, nil, err
	}
	return append(out, marks...), vips, nil
}

// backendRow is a backend's row without its connection counts: weight
// (1 when unset), forward method, health ("-": not under an active check).
func backendRow(spec webui.ServiceSpec, b webui.BackendSpec, be netip.AddrPort, health map[[2]string]string) statusBackend {
	w := int64(1)
	if b.Weight != nil {
		w = *b.Weight
	}
	h, ok := health[[2]string{spec.Name, be.String()}]
	if !ok {
		h = "-"
	}
	return statusBackend{Address: be.String(), Forward: forwardName(spec.Method), Weight: w, Health: h}
}

// markRows are the firewall-mark services as ipvsadm -ln shows them ("FWM
// 42", after the VIP rows, by mark), a backend without a port as port 0.
// A flow is a mark service's when its frontend is no VIP row's and not on
// any service's node port (a marked packet may go to any address and port)
// and its backend is one of the
// service's — by address and port, or by address alone for a backend
// without a port; a backend two mark services share counts such flows in
// both (conntrack does not keep the packet's mark).
func markRows(ss []webui.ServiceStatus, flows []webui.Flow, vipRows []statusVirtual, health map[[2]string]string) ([]statusVirtual, error) {
	shown, nodePorts := map[string]bool{}, map[uint16]bool{}
	for _, v := range vipRows {
		shown[v.Address] = true
	}
	for _, s := range ss {
		for _, p := range s.Spec.Ports {
			if p.NodePort != 0 {
				nodePorts[uint16(p.NodePort)] = true
			}
		}
	}
	// The flows no VIP row or node port claims, parsed once.
	type orphan struct {
		be     netip.AddrPort
		active bool
	}
	var orphans []orphan
	for _, f := range flows {
		fb, err := netip.ParseAddrPort(f.Backend)
		fe, err2 := netip.ParseAddrPort(f.Frontend)
		if err != nil || err2 != nil || shown[f.Frontend] || nodePorts[fe.Port()] {
			continue
		}
		orphans = append(orphans, orphan{fb, strings.EqualFold(f.Protocol, "TCP") && strings.EqualFold(f.State, "ESTABLISHED")})
	}
	var out []statusVirtual
	for _, s := range ss {
		if s.Spec.FWMark == 0 {
			continue
		}
		v := statusVirtual{Service: s.Spec.Name, Protocol: "FWM", Address: strconv.FormatInt(s.Spec.FWMark, 10),
			Scheduler: s.Spec.Scheduler, Affinity: affinityOf(s.Spec), Backends: []statusBackend{}}
		for _, b := range s.Spec.Backends {
			ba, err := netip.ParseAddr(b.Address)
			if err != nil {
				return nil, fmt.Errorf("service %q: backend %q: %w", s.Spec.Name, b.Address, err)
			}
			be := netip.AddrPortFrom(ba, uint16(b.Port))
			row := backendRow(s.Spec, b, be, health)
			for _, o := range orphans {
				if o.be.Addr() != ba || (b.Port != 0 && o.be.Port() != be.Port()) {
					continue
				}
				if o.active {
					row.ActiveConn++
				} else {
					row.InActConn++
				}
			}
			v.Backends = append(v.Backends, row)
		}
		out = append(out, v)
	}
	sort.SliceStable(out, func(i, j int) bool {
		mi, _ := strconv.ParseUint(out[i].Address, 10, 32)
		mj, _ := strconv.ParseUint(out[j].Address, 10, 32)
		return mi < mj
	})
	return out, nil
}

// forwardName is ipvsadm's Forward column for edgelb's method.
func forwardName(method string) string {
	switch strings.ToLower(method) {
	case "", "nat", "nat-nosnat":
		return "Masq"
	case "dr":
		return "Route"
	case "tunnel":
		return "Tunnel"
	}
	return method
}

func writeStatusTable(w io.Writer, vs []statusVirtual) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "Prot LocalAddress:Port\tScheduler\tFlags\t\t\t\tService")
	fmt.Fprintln(tw, "  -> RemoteAddress:Port\tForward\tWeight\tActiveConn\tInActConn\tHealth\t")
	for _, v := range vs {
		flags := ""
		if v.Affinity != "" {
			flags = "persistent " + v.Affinity
		}
		fmt.Fprintf(tw, "%s  %s\t%s\t%s\t\t\t\t%s\n", v.Protocol, v.Address, v.Scheduler, flags, v.Service)
		for _, b := range v.Backends {
			fmt.Fprintf(tw, "  -> %s\t%s\t%s\t%d\t%d\t%s\t\n", b.Address, b.Forward, strconv.FormatInt(b.Weight, 10),
				b.ActiveConn, b.InActConn, b.Health)
		}
	}
	return tw.Flush()
}

// affinityOf is a service's ClientIP affinity timeout ("" = none).
func affinityOf(s webui.ServiceSpec) string {
	if s.Affinity != nil && s.Affinity.Type == "ClientIP" {
		return s.Affinity.Timeout
	}
	return ""
}
