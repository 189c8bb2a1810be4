package main

// The announcements part of `edgelb status`: who answers for each VIP, the
// BGP sessions, the L2 members and the sync peers, from GET
// /api/v1/announce (issue 35: status showed nothing of ownership, BGP or
// sync).

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/edgelb/edgelb/announce"
)

// statusReport is `edgelb status -o json|yaml`: the virtual servers and the
// announcements.
type statusReport struct {
	Virtual       []statusVirtual     `json:"virtual"`
	Announcements statusAnnouncements `json:"announcements"`
}

type statusAnnouncements struct {
	VIPs      []statusVIPOwner `json:"vips"`
	Sessions  []statusSession  `json:"bgpSessions"`
	Members   []statusPeer     `json:"l2Members"`
	SyncPeers []statusPeer     `json:"syncPeers"`
}

// statusVIPOwner is one VIP per announcer: the L2 member answering for it
// and whether this gateway announces it over BGP.
type statusVIPOwner struct {
	VIP     string `json:"vip"`
	Service string `json:"service,omitempty"`
	// L2Owner is the member name answering ARP/NDP ("" without L2, "-" when
	// no member is known to).
	L2Owner string `json:"l2Owner,omitempty"`
	L2Self  bool   `json:"l2Self,omitempty"` // the owner is this gateway
	// BGP: "announced", "not announced" ("" without BGP).
	BGP string `json:"bgp,omitempty"`
}

// statusSession is one BGP session; BFD is the session's BFD state as the
// speaker reports it (empty: no BFD).
type statusSession struct {
	Name    string    `json:"name"`
	Address string    `json:"address"`
	State   string    `json:"state"`
	Since   time.Time `json:"since,omitzero"` // when State began: the uptime while Established
	BFD     string    `json:"bfd,omitempty"`
	Detail  string    `json:"detail,omitempty"`
}

// statusPeer is one L2 member or sync peer.
type statusPeer struct {
	Name       string        `json:"name"`
	Address    string        `json:"address"`
	State      string        `json:"state"`
	Since      time.Time     `json:"since,omitzero"`
	LastPacket time.Time     `json:"lastPacket,omitzero"`
	Silence    time.Duration `json:"silenceNs,omitzero,format:nano"`
	Queue      *uint64       `json:"queue,omitempty"`
	Detail     string        `json:"detail,omitempty"`
}

// collectAnnouncements reads GET /api/v1/announce and joins it with the
// VIPs the services have (vips: VIP → service).
func collectAnnouncements(ctx context.Context, c *apiClient, vips map[string]string) (statusAnnouncements, error) {
	var as []announce.Status
	if _, err := c.do(ctx, http.MethodGet, "/api/v1/announce", nil, &as); err != nil {
		return statusAnnouncements{}, err
	}
	return announcements(as, vips), nil
}

// announcements is collectAnnouncements' pure part. Silences are the
// gateway's, taken when it answered (no clock of the reader's is used); a
// session's uptime is counted from its Since.
func announcements(as []announce.Status, vips map[string]string) statusAnnouncements {
	out := statusAnnouncements{VIPs: []statusVIPOwner{}, Sessions: []statusSession{}, Members: []statusPeer{}, SyncPeers: []statusPeer{}}
	var l2, bgp *announce.Status
	for i := range as {
		a := &as[i]
		switch a.Kind {
		case "l2":
			l2 = a
			for j, p := range a.Peers {
				if j == 0 {
					continue // this gateway itself
				}
				out.Members = append(out.Members, peerRow(p))
			}
		case "bgp":
			bgp = a
			for _, p := range a.Peers {
				s := statusSession{Name: p.Name, Address: p.Address, State: p.State, Since: p.Since, BFD: bfdCell(p.BFD), Detail: p.Detail}
				out.Sessions = append(out.Sessions, s)
			}
		case "statesync":
			for _, p := range a.Peers {
				if p.Name == "sync peer" {
					out.SyncPeers = append(out.SyncPeers, peerRow(p))
				}
			}
		}
	}
	if l2 == nil && bgp == nil {
		return out // no announcer: no owner to show
	}
	// Every VIP the services have, and any an announcer knows beyond them.
	all := map[netip.Addr]string{}
	for v, svc := range vips {
		if a, err := netip.ParseAddr(v); err == nil {
			all[a] = svc
		}
	}
	var advertised map[netip.Addr]bool
	if bgp != nil {
		advertised = map[netip.Addr]bool{}
		for _, o := range bgp.Owned {
			if p, err := netip.ParsePrefix(o); err == nil {
				advertised[p.Addr()] = true
				if _, ok := all[p.Addr()]; !ok && p.IsSingleIP() {
					all[p.Addr()] = ""
				}
			} else if a, err := netip.ParseAddr(o); err == nil {
				advertised[a] = true
			}
		}
	}
	self := ""
	if l2 != nil {
		if len(l2.Peers) > 0 {
			self = l2.Peers[0].Name
		}
		for v := range l2.Owners {
			if a, err := netip.ParseAddr(v); err == nil {
				if _, ok := all[a]; !ok {
					all[a] = ""
				}
			}
		}
	}
	keys := make([]netip.Addr, 0, len(all))
	for a := range all {
		keys = append(keys, a)
	}
	slices.SortFunc(keys, netip.Addr.Compare)
	for _, a := range keys {
		row := statusVIPOwner{VIP: a.String(), Service: all[a]}
		if l2 != nil {
			row.L2Owner = "-"
			if o := l2.Owners[a.String()]; o != "" {
				row.L2Owner, row.L2Self = o, o == self
			}
		}
		if bgp != nil {
			row.BGP = "not announced"
			if advertised[a] {
				row.BGP = "announced"
			}
		}
		out.VIPs = append(out.VIPs, row)
	}
	return out
}

func peerRow(p announce.PeerState) statusPeer {
	return statusPeer{Name: p.Name, Address: p.Address, State: p.State, Since: p.Since, LastPacket: p.LastPacket,
		Silence: p.Silence, Queue: p.Queue, Detail: p.Detail}
}

// ago is a silence for the table: "0.3s ago", "-" when nothing was heard.
func ago(last time.Time, d time.Duration) string {
	if last.IsZero() {
		return "never"
	}
	if d < 10*time.Second {
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s ago"
	}
	return d.Round(time.Second).String() + " ago"
}

// writeAnnouncementsTable writes the four tables, each only when its
// announcer runs (a VIP table whenever there are VIPs).
func writeAnnouncementsTable(w io.Writer, a statusAnnouncements, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	if len(a.VIPs) > 0 {
		fmt.Fprintln(tw, "\nVIP\tService\tL2 owner\tBGP")
		for _, v := range a.VIPs {
			owner := dash(v.L2Owner)
			if v.L2Self {
				owner += " (this gateway)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.VIP, dash(v.Service), owner, dash(v.BGP))
		}
	}
	if len(a.Sessions) > 0 {
		fmt.Fprintln(tw, "\nBGP peer\tAddress\tState\tUp\tBFD\tDetail")
		for _, s := range a.Sessions {
			up := "-"
			if s.State == "Established" && !s.Since.IsZero() {
				up = now.Sub(s.Since).Round(time.Second).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Address, s.State, up, dash(s.BFD), s.Detail)
		}
	}
	if len(a.Members) > 0 {
		fmt.Fprintln(tw, "\nL2 member\tAddress\tState\tLast packet\tDetail")
		for _, p := range a.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.Address, p.State, ago(p.LastPacket, p.Silence), p.Detail)
		}
	}
	if len(a.SyncPeers) > 0 {
		fmt.Fprintln(tw, "\nSync peer\tState\tQueue\tLast packet")
		for _, p := range a.SyncPeers {
			q := "-"
			if p.Queue != nil {
				q = strconv.FormatUint(*p.Queue, 10)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Address, p.State, q, ago(p.LastPacket, p.Silence))
		}
	}
	return tw.Flush()
}

// bfdCell is the BFD column: the session's state and detection setting,
// "up (300ms x 3)"; empty without BFD.
func bfdCell(b *announce.BFDState) string {
	if b == nil {
		return ""
	}
	if b.Detect == "" {
		return b.State
	}
	return b.State + " (" + b.Detect + ")"
}
