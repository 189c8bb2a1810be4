package bfdd

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"
)

// peerJSON is one entry of bfdd's "show bfd peers json".
type peerJSON struct {
	Multihop         bool   `json:"multihop"`
	Peer             string `json:"peer"`
	Status           string `json:"status"`
	Uptime           int64  `json:"uptime"`
	Downtime         int64  `json:"downtime"`
	Diagnostic       string `json:"diagnostic"`
	RemoteDiagnostic string `json:"remote-diagnostic"`
	RemoteRx         int64  `json:"remote-receive-interval"`
	RemoteTx         int64  `json:"remote-transmit-interval"`
	RemoteMult       int    `json:"remote-detect-multiplier"`
}

// countersJSON is one entry of "show bfd peers counters json".
type countersJSON struct {
	Multihop bool   `json:"multihop"`
	Peer     string `json:"peer"`
	In       uint64 `json:"control-packet-input"`
	Out      uint64 `json:"control-packet-output"`
	Up       uint64 `json:"session-up"`
	Down     uint64 `json:"session-down"`
}

type stateKey struct {
	peer     netip.Addr
	multihop bool
}

// parseStates joins bfdd's two JSON answers into States.
func parseStates(peers, counters []byte) ([]State, error) {
	var ps []peerJSON
	if err := json.Unmarshal(peers, &ps); err != nil {
		return nil, fmt.Errorf("bfdd: show bfd peers json: %w (%.200q)", err, peers)
	}
	var cs []countersJSON
	if err := json.Unmarshal(counters, &cs); err != nil {
		return nil, fmt.Errorf("bfdd: show bfd peers counters json: %w (%.200q)", err, counters)
	}
	byKey := map[stateKey]countersJSON{}
	for _, c := range cs {
		if a, err := netip.ParseAddr(c.Peer); err == nil {
			byKey[stateKey{a.Unmap(), c.Multihop}] = c
		}
	}
	out := make([]State, 0, len(ps))
	for _, p := range ps {
		a, err := netip.ParseAddr(p.Peer)
		if err != nil {
			continue
		}
		a = a.Unmap()
		st := State{Peer: a, Multihop: p.Multihop, Status: p.Status, Diagnostic: p.Diagnostic,
			RemoteDiagnostic: p.RemoteDiagnostic, RemoteRxInterval: time.Duration(p.RemoteRx) * time.Millisecond,
			RemoteTxInterval: time.Duration(p.RemoteTx) * time.Millisecond, RemoteMultiplier: p.RemoteMult}
		if p.Status == StateUp {
			st.For = time.Duration(p.Uptime) * time.Second
		} else {
			st.For = time.Duration(p.Downtime) * time.Second
		}
		if c, ok := byKey[stateKey{a, p.Multihop}]; ok {
			st.RxPackets, st.TxPackets, st.Ups, st.Downs = c.In, c.Out, c.Up, c.Down
		}
		out = append(out, st)
	}
	return out, nil
}
