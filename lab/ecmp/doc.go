// Package ecmp holds the BGP ECMP proof of the nftables scheduler mh
// (issue 16): gateways running the real daemon announce one VIP to FRR,
// which spreads flows over them by an L4 hash; gateways join and leave
// under 100 long-lived connections, and the connections that survive are
// counted. Everything lives in tagged test files (bgp); see README.md.
package ecmp
