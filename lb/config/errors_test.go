package config

import (
	"strings"
	"testing"

	"github.com/edgelb/edgelb/lb"
)

// pool is a valid pool section most cases build on.
const pool = "pools: [{name: p, addresses: [\"192.0.2.0/24\", \"2001:db8::/120\"]}]\n"

// TestErrors: one bad input per case → an error at that exact field path
// whose text quotes the value and says what is wrong.
func TestErrors(t *testing.T) {
	files := map[string]string{"/etc/edgelb/token": "tok", "/empty": " \n", "/pw": "pw"}
	for _, tc := range []struct {
		name string
		yaml string
		want []want
	}{
		// Syntax and structure.
		{"yaml syntax", "pools: [\n", []want{{"yaml", "did not find expected node content"}}},
		{"duplicate key", "api: {listen: 127.0.0.1:1}\napi: {listen: 127.0.0.1:2}\n", []want{{"yaml", `key "api" already set`}}},
		{"top level list", "- a\n- b\n", []want{{"config", "want a mapping of sections"}}},
		{"unknown section", "pool: []\n", []want{{"pool", `unknown field (did you mean "pools"?)`}}},
		{"unknown field case", pool + "services: [{name: a, ports: [{Port: 80}]}]\n", []want{{"services[0].ports[0].Port", `did you mean "port"?`}}},
		{"unknown field far", "api: {colour: red}\n", []want{{"api.colour", "known fields: listen, tokenFile, tokens, anonymousReads, tls"}}},
		{"section not a map", "dataplane: nftables\n", []want{{"dataplane", `"nftables": want an object, got a string`}}},
		{"list not a list", pool + "services: [{name: a, ports: {port: 80}}]\n", []want{{"services[0].ports", "want an array, got an object"}}},
		{"string for int", pool + "services: [{name: a, ports: [{port: eighty}]}]\n", []want{{"services[0].ports[0].port", `"eighty": want an integer, got a string`}}},
		{"float for int", pool + "services: [{name: a, ports: [{port: 80.5}]}]\n", []want{{"services[0].ports[0].port", `"80.5": want an integer`}}},
		{"int for string", "announce: {l2: {interface: 0}}\n", []want{{"announce.l2.interface", `"0": want a string, got a number (quote the value)`}}},
		{"bool for string", "dataplane: {snat: maybe}\n", []want{{"dataplane.snat", `"maybe": want true or false, got a string`}}},
		{"number for duration", "dataplane: {drainTimeout: 30}\n", []want{{"dataplane.drainTimeout", `"30": want a string, got a number (quote the value)`}}},
		{"bad duration", "dataplane: {resyncInterval: 5 minutes}\n", []want{{"dataplane.resyncInterval", `"5 minutes": want a duration`}}},
		{"negative duration", "dataplane: {drainTimeout: -5s}\n", []want{{"dataplane.drainTimeout", `"-5s": must not be negative`}}},
		{"huge int", pool + "services: [{name: a, ports: [{port: 99999999999999999999999}]}]\n", []want{{"services[0].ports[0].port", "want an integer"}}},

		// Pools.
		{"overlapping pools quote both", `pools:
  - {name: a, addresses: ["192.0.2.100-192.0.2.120"]}
  - {name: b, addresses: ["198.51.100.0/24", "192.0.2.0/25"]}
`, []want{{"pools[1].addresses[1]", `"192.0.2.0/25": overlaps "192.0.2.100-192.0.2.120" of pool "a" (pools[0].addresses[0])`}}},
		{"overlap reported on the later range", `pools:
  - {name: a, addresses: ["192.0.2.0/25"]}
  - {name: b, addresses: ["192.0.2.100-192.0.2.120"]}
`, []want{{"pools[1].addresses[0]", `"192.0.2.100-192.0.2.120": overlaps "192.0.2.0/25" of pool "a"`}}},
		{"overlap inside a pool", `pools: [{name: a, addresses: ["192.0.2.0/24", "192.0.2.7"]}]`,
			[]want{{"pools[0].addresses[1]", `"192.0.2.7": overlaps "192.0.2.0/24" of the same pool (addresses[0])`}}},
		{"ipv6 overlap", `pools:
  - {name: a, addresses: ["2001:db8::/64"]}
  - {name: b, addresses: ["2001:db8::10-2001:db8::20"]}
`, []want{{"pools[1].addresses[0]", `overlaps "2001:db8::/64"`}}},
		{"bad cidr", `pools: [{name: a, addresses: ["192.0.2.1/24"]}]`, []want{{"pools[0].addresses[0]", `host bits set (did you mean 192.0.2.0/24?)`}}},
		{"mixed range", `pools: [{name: a, addresses: ["192.0.2.1-2001:db8::1"]}]`, []want{{"pools[0].addresses[0]", "mixes IPv4 and IPv6"}}},
		{"reversed range", `pools: [{name: a, addresses: ["192.0.2.9-192.0.2.1"]}]`, []want{{"pools[0].addresses[0]", "last address is before the first"}}},
		{"no addresses", `pools: [{name: a}]`, []want{{"pools[0].addresses", "at least one address range"}}},
		{"duplicate pool", `pools: [{name: a, addresses: ["192.0.2.0/25"]}, {name: a, addresses: ["192.0.2.128/25"]}]`,
			[]want{{"pools[1].name", `"a": duplicate pool name (also pools[0])`}}},
		{"bad pool name", `pools: [{name: Public, addresses: ["192.0.2.0/25"]}]`, []want{{"pools[0].name", `"Public"`}}},
		{"bad community", `pools: [{name: a, addresses: ["192.0.2.0/24"], advertisement: {communities: ["65000:70000"]}}]`,
			[]want{{"pools[0].advertisement.communities[0]", `"65000:70000": want ASN:VALUE`}}},
		{"bad large community", `pools: [{name: a, addresses: ["192.0.2.0/24"], advertisement: {largeCommunities: ["1:2"]}}]`,
			[]want{{"pools[0].advertisement.largeCommunities[0]", `"1:2": want GLOBAL:LOCAL1:LOCAL2`}}},
		{"aggregation too long", `pools: [{name: a, addresses: ["192.0.2.0/24"], advertisement: {aggregationLength: 33}}]`,
			[]want{{"pools[0].advertisement.aggregationLength", `"33": out of range 0-32`}}},
		{"aggregation outside pool", `pools: [{name: a, addresses: ["192.0.2.10-192.0.2.20"], advertisement: {aggregationLength: 24}}]`,
			[]want{{"pools[0].advertisement.aggregationLength", `range "192.0.2.10-192.0.2.20" does not split into /24 blocks`}}},
		{"local pref", `pools: [{name: a, addresses: ["192.0.2.0/24"], advertisement: {localPref: -1}}]`,
			[]want{{"pools[0].advertisement.localPref", `"-1": out of range`}}},

		// Services: addresses.
		{"vip outside every pool", pool + "services: [{name: a, vip: 198.51.100.7, ports: [{port: 80}]}]\n",
			[]want{{"services[0].vip", `"198.51.100.7": outside every pool`}}},
		{"vip outside named pool", `pools:
  - {name: a, addresses: ["192.0.2.0/25"]}
  - {name: b, addresses: ["192.0.2.128/25"]}
services: [{name: s, pool: a, vip: 192.0.2.200, ports: [{port: 80}]}]
`, []want{{"services[0].vip", `"192.0.2.200": outside pool "a" (192.0.2.0/25)`}}},
		{"unknown pool", pool + "services: [{name: a, pool: nope, ports: [{port: 80}]}]\n", []want{{"services[0].pool", `"nope": no pool of that name`}}},
		{"buggy ip", `pools: [{name: a, addresses: ["192.0.2.0/24"], avoidBuggyIPs: true}]
services: [{name: s, vip: 192.0.2.255, ports: [{port: 80}]}]`, []want{{"services[0].vip", `"192.0.2.255": pool "a" has avoidBuggyIPs`}}},
		{"bad vip", pool + "services: [{name: a, vip: 192.0.2.300, ports: [{port: 80}]}]\n", []want{{"services[0].vip", `"192.0.2.300": not an IP address`}}},
		{"vip and vips", pool + "services: [{name: a, vip: 192.0.2.1, vips: [192.0.2.2], ports: [{port: 80}]}]\n", []want{{"services[0].vip", "set vip or vips, not both"}}},
		{"two vips one family", pool + "services: [{name: a, vips: [192.0.2.1, 192.0.2.2], ports: [{port: 80}]}]\n",
			[]want{{"services[0].vips[1]", `"192.0.2.2": two IPv4 VIPs`}}},
		{"no auto pool for family", `pools: [{name: a, addresses: ["192.0.2.0/24"]}]
services: [{name: s, families: [IPv6], ports: [{port: 80}]}]`, []want{{"services[0]", `"s": no vip, no pool, and no autoAssign pool has IPv6 addresses`}}},
		{"no auto pool at all", `pools: [{name: a, addresses: ["192.0.2.0/24"], autoAssign: false}]
services: [{name: s, ports: [{port: 80}]}]`, []want{{"services[0]", "no autoAssign pool has IPv4 addresses"}}},
		{"pool lacks family", `pools: [{name: a, addresses: ["192.0.2.0/24"]}]
services: [{name: s, pool: a, families: [IPv4, IPv6], ports: [{port: 80}]}]`, []want{{"services[0].pool", `"a": pool has no IPv6 addresses`}}},
		{"bad family", pool + "services: [{name: a, families: [IPv5], ports: [{port: 80}]}]\n", []want{{"services[0].families[0]", `"IPv5": want IPv4 or IPv6`}}},

		// Services: ports and cross-service conflicts.
		{"port out of range", pool + "services: [{name: a, ports: [{port: 70000}]}]\n", []want{{"services[0].ports[0].port", `"70000": port out of range 1-65535`}}},
		{"port missing", pool + "services: [{name: a, ports: [{name: http}]}]\n", []want{{"services[0].ports[0].port", "required (1-65535)"}}},
		{"negative target port", pool + "services: [{name: a, ports: [{port: 80, targetPort: -1}]}]\n", []want{{"services[0].ports[0].targetPort", `"-1": port out of range`}}},
		{"no ports", pool + "services: [{name: a}]\n", []want{{"services[0].ports", "at least one port"}}},
		{"bad protocol", pool + "services: [{name: a, ports: [{port: 80, protocol: SCTP}]}]\n", []want{{"services[0].ports[0].protocol", `"SCTP": want TCP or UDP`}}},
		{"port twice", pool + "services: [{name: a, ports: [{port: 80}, {port: 80, protocol: tcp}]}]\n", []want{{"services[0].ports[1].port", `"80/TCP": listed twice (also ports[0])`}}},
		{"duplicate vip port proto", pool + `services:
  - {name: a, vip: 192.0.2.1, ports: [{port: 80}]}
  - {name: b, vip: 192.0.2.1, sharingKey: k, ports: [{port: 80}]}
`, []want{{"services[1].vip", `"192.0.2.1": VIP is also service "a"'s (services[0])`}}},
		{"duplicate even with sharing key", pool + `services:
  - {name: a, vip: 192.0.2.1, sharingKey: k, ports: [{port: 53, protocol: UDP}]}
  - {name: b, vip: 192.0.2.1, sharingKey: k, ports: [{port: 53, protocol: UDP}]}
`, []want{{"services[1].vip", `"192.0.2.1": VIP:port/protocol 192.0.2.1:53/UDP already used by service "a" (services[0].ports[0])`}}},
		{"shared vip without key", pool + `services:
  - {name: a, vip: 192.0.2.1, ports: [{port: 80}]}
  - {name: b, vip: 192.0.2.1, ports: [{port: 443}]}
`, []want{{"services[1].vip", `"192.0.2.1": VIP is also service "a"'s (services[0]); services share a VIP only with the same non-empty sharingKey`}}},
		{"node port outside range", pool + "services: [{name: a, ports: [{port: 80, nodePort: 8080}]}]\n",
			[]want{{"services[0].ports[0].nodePort", `"8080": outside dataplane.nodePortRange "30000-32767"`}}},
		{"node port outside custom range", pool + "dataplane: {nodePortRange: 20000-20999}\nservices: [{name: a, ports: [{port: 80, nodePort: 30080}]}]\n",
			[]want{{"services[0].ports[0].nodePort", `"30080": outside dataplane.nodePortRange "20000-20999"`}}},
		{"node port twice", pool + `services:
  - {name: a, ports: [{port: 80, nodePort: 30080}]}
  - {name: b, ports: [{port: 81, nodePort: 30080}]}
`, []want{{"services[1].ports[0].nodePort", `"30080/TCP": node port already used by service "a"`}}},
		{"duplicate service", pool + "services: [{name: a, ports: [{port: 80}]}, {name: a, ports: [{port: 81}]}]\n",
			[]want{{"services[1].name", `"a": duplicate service name (also services[0])`}}},
		{"bad service name", pool + "services: [{name: web/http, ports: [{port: 80}]}]\n", []want{{"services[0].name", `"web/http"`}}},
		{"duplicate port name", pool + "services: [{name: a, ports: [{name: x, port: 80}, {name: x, port: 81}]}]\n",
			[]want{{"services[0].ports[1].name", `"x": duplicate port name`}}},

		// Services: backends, scheduler, affinity.
		{"bad backend", pool + "services: [{name: a, ports: [{port: 80}], backends: [{address: backend1:80}]}]\n",
			[]want{{"services[0].backends[0].address", `"backend1:80": not an IP address`}}},
		{"backend port twice", pool + "services: [{name: a, ports: [{port: 80}], backends: [{address: \"198.51.100.1:80\", port: 81}]}]\n",
			[]want{{"services[0].backends[0].port", `"81": the address already has a port (80)`}}},
		{"backend family", pool + "services: [{name: a, vip: 192.0.2.1, ports: [{port: 80}], backends: [{address: \"2001:db8:1::1\"}]}]\n",
			[]want{{"services[0].backends[0].address", `"2001:db8:1::1": an IPv6 backend, but the service has no IPv6 VIP`}}},
		{"backend twice", pool + "services: [{name: a, ports: [{port: 80}], backends: [{address: 198.51.100.1, port: 80}, {address: \"198.51.100.1:80\"}]}]\n",
			[]want{{"services[0].backends[1].address", `"198.51.100.1:80": listed twice (also backends[0])`}}},
		{"weight", pool + "services: [{name: a, ports: [{port: 80}], backends: [{address: 198.51.100.1, weight: 70000}]}]\n",
			[]want{{"services[0].backends[0].weight", `"70000": out of range 0-65535`}}},
		{"unknown scheduler", pool + "services: [{name: a, ports: [{port: 80}], scheduler: fastest}]\n",
			[]want{{"services[0].scheduler", `"fastest": want one of rr, wrr, lc, wlc, sh, dh, sed, nq, mh`}}},
		{"affinity type", pool + "services: [{name: a, ports: [{port: 80}], affinity: {type: Cookie}}]\n", []want{{"services[0].affinity.type", `"Cookie": want ClientIP or None`}}},
		{"affinity too long", pool + "services: [{name: a, ports: [{port: 80}], affinity: {type: ClientIP, timeout: 48h}}]\n",
			[]want{{"services[0].affinity.timeout", `"48h0m0s": out of range 1s-24h0m0s`}}},
		{"unknown method", pool + "services: [{name: a, ports: [{port: 80}], method: masq}]\n", []want{{"services[0].method", `"masq": want nat, nat-nosnat, dr or tunnel`}}},

		// Forwarding methods.
		{"dr with port mapping", pool + "services: [{name: a, method: dr, ports: [{port: 80, targetPort: 8080}]}]\n",
			[]want{{"services[0].ports[0].targetPort", `"8080": method dr cannot map ports: targetPort must equal port 80`}}},
		{"tunnel with backend port", pool + "services: [{name: a, method: tunnel, ports: [{port: 80}], backends: [{address: \"198.51.100.1:8080\"}]}]\n",
			[]want{{"services[0].backends[0].address", `"198.51.100.1:8080": method tunnel cannot map ports`}}},
		{"dr with node port", pool + "services: [{name: a, method: dr, ports: [{port: 80, nodePort: 30080}]}]\n",
			[]want{{"services[0].ports[0].nodePort", `"30080": method dr cannot serve node ports`}}},
		{"dr on nftables", pool + "dataplane: {mode: nftables}\nservices: [{name: a, method: dr, ports: [{port: 80}]}]\n",
			[]want{{"services[0].method", `"dr": refused by the dataplane: method "dr": not supported by this dataplane (nftables can only NAT; use the ipvs dataplane)`}}},
		{"tunnel on nftables", pool + "dataplane: {mode: nftables}\nservices: [{name: a, method: tunnel, ports: [{port: 80}]}]\n",
			[]want{{"services[0].method", `"tunnel": refused by the dataplane: method "tunnel": not supported`}}},

		// Health checks.
		{"interval 0", pool + "services: [{name: a, ports: [{port: 80}], healthCheck: {type: tcp, interval: 0s}}]\n",
			[]want{{"services[0].healthCheck.interval", `"0s": must be more than 0`}}},
		{"timeout over interval", pool + "services: [{name: a, ports: [{port: 80}], healthCheck: {type: tcp, interval: 1s, timeout: 2s}}]\n",
			[]want{{"services[0].healthCheck.timeout", `"2s": longer than interval 1s`}}},
		{"timeout 0", pool + "services: [{name: a, ports: [{port: 80}], healthCheck: {type: tcp, timeout: 0s}}]\n",
			[]want{{"services[0].healthCheck.timeout", `"0s": must be more than 0`}}},
		{"url without host", pool + "services: [{name: a, ports: [{port: 80}], healthCheck: {url: \"http:///healthz\"}}]\n",
			[]want{{"services[0].healthCheck.url", `"http:///healthz": URL has no host`}}},
		{"url in path without host", pool + "services: [{name: a, ports: [{port: 80}], healthCheck: {type: http, path: \"http:///healthz\"}}]\n",
			[]want{{"services[0].healthCheck.path", `"http:///healthz": a URL without a host`}}},
		{"url in path", pool + "services: [{name: a, ports: [{port: 80}], healthCheck: {type: http, path: \"http://x/healthz\"}}]\n",
			[]want{{"services[0].healthCheck.path", `a URL, not a path; use url: http://x/healthz, or path: /healthz`}}},
		{"url scheme", pool + "services: [{name: a, ports: [{port: 80}], healthCheck: {url: \"ftp://x/\"}}]\n",
			[]want{{"services[0].healthCheck.url", `"ftp://x/": want an http:// or https:// URL`}}},
		{"relative path", pool + "services: [{name: a, ports: [{port: 80}], healthCheck: {type: http, path: healthz}}]\n",
			[]want{{"services[0].healthCheck.path", `"healthz": must start with /`}}},
		{"bad host", pool + "services: [{name: a, ports: [{port: 80}], healthCheck: {type: http, host: \"a/b\"}}]\n",
			[]want{{"services[0].healthCheck.host", `"a/b": want a host name`}}},
		{"tcp with path", pool + "services: [{name: a, ports: [{port: 80}], healthCheck: {type: tcp, path: /x}}]\n",
			[]want{{"services[0].healthCheck.type", `"tcp": path, host and expectStatus only apply to http and https checks`}}},
		{"bad check type", pool + "services: [{name: a, ports: [{port: 80}], healthCheck: {type: icmp}}]\n",
			[]want{{"services[0].healthCheck.type", `"icmp": want tcp, http or https`}}},
		{"rise 0", pool + "services: [{name: a, ports: [{port: 80}], healthCheck: {rise: 0}}]\n",
			[]want{{"services[0].healthCheck.rise", `"0": out of range 1-1000`}}},
		{"expect status", pool + "services: [{name: a, ports: [{port: 80}], healthCheck: {type: http, expectStatus: 42}}]\n",
			[]want{{"services[0].healthCheck.expectStatus", `"42": out of range 100-599`}}},

		// Announce.
		{"l2 interface missing", "announce: {l2: {}}\n", []want{{"announce.l2.interface", "required"}}},
		{"l2 interface too long", "announce: {l2: {interface: averyveryverylongname}}\n", []want{{"announce.l2.interface", `"averyveryverylongname": longer than 15 characters`}}},
		{"members timeout", "announce: {l2: {interface: eth0, members: {probeInterval: 100ms, probeTimeout: 100ms}}}\n",
			[]want{{"announce.l2.members.probeTimeout", `"100ms": must be shorter than probeInterval 100ms`}}},
		{"members join", "announce: {l2: {interface: eth0, members: {join: [gw2]}}}\n", []want{{"announce.l2.members.join[0]", `"gw2": not an IP address`}}},
		{"members key", "announce: {l2: {interface: eth0, members: {secretFile: /pw}}}\n", []want{{"announce.l2.members.secretFile", `"/pw": want a base64 key`}}},
		{"bgp asn zero", "announce: {bgp: {peers: [{address: 192.0.2.1, asn: 65000}]}}\n", []want{{"announce.bgp.localASN", "required"}}},
		{"bgp asn too big", "announce: {bgp: {localASN: 4294967296, peers: [{address: 192.0.2.1, asn: 65000}]}}\n",
			[]want{{"announce.bgp.localASN", `"4294967296": AS number out of range`}}},
		{"bgp as_trans", "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 23456}]}}\n",
			[]want{{"announce.bgp.peers[0].asn", `"23456": AS 23456 is AS_TRANS`}}},
		{"bgp reserved asn", "announce: {bgp: {localASN: 65535, peers: [{address: 192.0.2.1, asn: 65000}]}}\n",
			[]want{{"announce.bgp.localASN", `"65535": AS 65535 is reserved`}}},
		{"router id v6", "announce: {bgp: {localASN: 65001, routerID: \"2001:db8::1\", peers: [{address: 192.0.2.1, asn: 65000}]}}\n",
			[]want{{"announce.bgp.routerID", `"2001:db8::1": a router ID is an IPv4 address`}}},
		{"router id zero", "announce: {bgp: {localASN: 65001, routerID: 0.0.0.0, peers: [{address: 192.0.2.1, asn: 65000}]}}\n",
			[]want{{"announce.bgp.routerID", `"0.0.0.0": not a usable router ID`}}},
		{"router id garbage", "announce: {bgp: {localASN: 65001, routerID: 1.2.3, peers: [{address: 192.0.2.1, asn: 65000}]}}\n",
			[]want{{"announce.bgp.routerID", `"1.2.3": not an IP address`}}},
		{"peer twice", "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65000}, {address: 192.0.2.1, asn: 65002}]}}\n",
			[]want{{"announce.bgp.peers[1].address", `"192.0.2.1": peer listed twice`}}},
		{"hold time", "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65000, holdTime: 2s}]}}\n",
			[]want{{"announce.bgp.peers[0].holdTime", `"2s": want whole seconds from 3s to 65535s`}}},
		{"hold time zero", "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65000, holdTime: 0s}]}}\n",
			[]want{{"announce.bgp.peers[0].holdTime", `"0s": hold time 0 (no keepalives, a dead peer never detected) is not supported`}}},
		{"bfd interval", "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65000, bfd: {enabled: true, receiveInterval: 5ms}}]}}\n",
			[]want{{"announce.bgp.peers[0].bfd.receiveInterval", `"5ms": want whole milliseconds from 10ms to 60s`}}},
		{"bfd multiplier", "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65000, bfd: {enabled: true, multiplier: 1}}]}}\n",
			[]want{{"announce.bgp.peers[0].bfd.multiplier", `"1": want 2-255`}}},
		{"bfd multihop without source", "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65000, multihopTTL: 2, bfd: {enabled: true}}]}}\n",
			[]want{{"announce.bgp.peers[0].bfd.enabled", `"true": multihop BFD (RFC 5883) needs the peer's sourceAddress set`}}},
		{"keepalive over hold", "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65000, holdTime: 9s, keepalive: 9s}]}}\n",
			[]want{{"announce.bgp.peers[0].keepalive", `"9s": must be at least 1s and shorter than holdTime 9s`}}},
		{"passive without listen", "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65000, passive: true}]}}\n",
			[]want{{"announce.bgp.peers[0].passive", "set announce.bgp.listenPort"}}},
		{"password file missing", "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65000, passwordFile: /nope}]}}\n",
			[]want{{"announce.bgp.peers[0].passwordFile", `"/nope": cannot read`}}},
		{"ibgp multihop", "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65001, multihopTTL: 3}]}}\n",
			[]want{{"announce.bgp.peers[0].multihopTTL", `"3": only applies to eBGP`}}},
		{"multihop range", "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65000, multihopTTL: 256}]}}\n",
			[]want{{"announce.bgp.peers[0].multihopTTL", `"256": out of range 0-255`}}},

		// Dataplane, API, Kubernetes, the rest.
		{"dataplane mode", "dataplane: {mode: ebpf}\n", []want{{"dataplane.mode", `"ebpf": want auto, nftables or ipvs`}}},
		{"node port range syntax", "dataplane: {nodePortRange: \"30000:32767\"}\n", []want{{"dataplane.nodePortRange", `"30000:32767": want FIRST-LAST`}}},
		{"node port range reversed", "dataplane: {nodePortRange: 32767-30000}\n", []want{{"dataplane.nodePortRange", `"32767-30000": want FIRST-LAST`}}},
		{"node port range zero", "dataplane: {nodePortRange: 0-100}\n", []want{{"dataplane.nodePortRange", `"0-100": want FIRST-LAST within 1-65535`}}},
		{"node address", "dataplane: {nodeAddresses: [0.0.0.0]}\n", []want{{"dataplane.nodeAddresses[0]", `"0.0.0.0": not a usable node address`}}},
		{"resync", "dataplane: {resyncInterval: 10ms}\n", []want{{"dataplane.resyncInterval", `"10ms": must be at least 1s`}}},
		{"unreadable token file", "api: {tokenFile: /etc/edgelb/missing}\n", []want{{"api.tokenFile", `"/etc/edgelb/missing": cannot read`}}},
		{"empty token file", "api: {tokenFile: /empty}\n", []want{{"api.tokenFile", `"/empty": file is empty`}}},
		{"api listen", "api: {listen: localhost}\n", []want{{"api.listen", `"localhost": want ADDRESS:PORT`}}},
		{"api listen port 0", "api: {listen: \"127.0.0.1:0\"}\n", []want{{"api.listen", `"127.0.0.1:0": want ADDRESS:PORT with a port above 0`}}},
		{"tls without key", "api: {tls: {cert: /etc/edgelb/token}}\n", []want{{"api.tls.key", "required with tls"}}},
		{"tls bad pair", "api: {tls: {cert: /etc/edgelb/token, key: /pw}}\n", []want{{"api.tls.cert", `"/etc/edgelb/token": does not load with api.tls.key "/pw"`}}},
		{"tls client ca", "api: {tls: {cert: /nocert, key: /pw, clientCA: /pw}}\n", []want{{"api.tls.cert", `"/nocert": cannot read`}, {"api.tls.clientCA", `"/pw": holds no PEM certificate`}}},
		{"k8s with services", pool + "kubernetes: {enabled: true}\nservices: [{name: a, ports: [{port: 80}]}]\n",
			[]want{{"services", "not allowed with kubernetes.enabled"}, {"pools", "not allowed with kubernetes.enabled"}}},
		{"k8s class", "kubernetes: {loadBalancerClass: edgelb}\n", []want{{"kubernetes.loadBalancerClass", `"edgelb": want PREFIX/NAME`}}},
		{"k8s backend mode", "kubernetes: {backendMode: pods}\n", []want{{"kubernetes.backendMode", `"pods": want endpoints or nodeport`}}},
		{"k8s lease namespace", "kubernetes: {leaseNamespace: Kube_System}\n", []want{{"kubernetes.leaseNamespace", `"Kube_System": want a DNS label`}}},
		{"k8s kubeconfig", "kubernetes: {enabled: true, kubeconfig: /nope}\n", []want{{"kubernetes.kubeconfig", `"/nope": cannot read`}}},
		{"k8s method", "kubernetes: {method: dr}\n", []want{{"kubernetes.method", `"dr": want nat or nat-nosnat`}}},
		{"k8s scheduler", "kubernetes: {scheduler: random}\n", []want{{"kubernetes.scheduler", `"random": want one of`}}},
		{"k8s node check without nodeport", "kubernetes: {nodeHealthCheck: {interval: 1s}}\n",
			[]want{{"kubernetes.nodeHealthCheck", `"endpoints": needs backendMode nodeport`}}},
		{"k8s node check interval 0", "kubernetes: {backendMode: nodeport, nodeHealthCheck: {interval: 0s}}\n",
			[]want{{"kubernetes.nodeHealthCheck.interval", `"0s": must be more than 0`}}},
		{"k8s node check timeout over interval", "kubernetes: {backendMode: nodeport, nodeHealthCheck: {interval: 1s, timeout: 3s}}\n",
			[]want{{"kubernetes.nodeHealthCheck.timeout", `"3s": longer than interval 1s`}}},
		{"k8s node check fall 0", "kubernetes: {backendMode: nodeport, nodeHealthCheck: {fall: 0}}\n",
			[]want{{"kubernetes.nodeHealthCheck.fall", `"0": out of range 1-1000`}}},
		{"k8s node check rise", "kubernetes: {backendMode: nodeport, nodeHealthCheck: {rise: 1001}}\n",
			[]want{{"kubernetes.nodeHealthCheck.rise", `"1001": out of range 1-1000`}}},
		{"k8s node check bad duration", "kubernetes: {backendMode: nodeport, nodeHealthCheck: {timeout: soon}}\n",
			[]want{{"kubernetes.nodeHealthCheck.timeout", `"soon": want a duration`}}},
		{"k8s node check is tcp only", "kubernetes: {backendMode: nodeport, nodeHealthCheck: {url: \"http://x/\"}}\n",
			[]want{{"kubernetes.nodeHealthCheck.url", "unknown field"}}},
		{"members advertise", "announce: {l2: {interface: eth0, members: {advertiseAddress: \"0.0.0.0:7946\"}}}\n",
			[]want{{"announce.l2.members.advertiseAddress", `"0.0.0.0:7946": want an address other members can reach`}}},
		{"health policy", "health: {allDown: panic}\n", []want{{"health.allDown", `"panic": want keep or withdraw`}}},
		{"log level", "log: {level: loud}\n", []want{{"log.level", `"loud": want debug, info, warn or error`}}},
		{"allocation order", "allocation: {order: random}\n", []want{{"allocation.order", `"random": want "lowest-free" or "rotate"`}}},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			cfg, err := parseWith(tc.yaml, files)
			if err == nil {
				t.Fatalf("accepted:\n%s\n%+v", tc.yaml, cfg)
			}
			if cfg != nil {
				t.Errorf("a config came back with the error")
			}
			t.Log(err)
			assertErrors(t, err, tc.want)
		})
	}
}

// TestValid: inputs near the error cases that must be accepted.
func TestValid(t *testing.T) {
	for name, y := range map[string]string{
		"shared vip same key disjoint ports": pool + `services:
  - {name: a, vip: 192.0.2.1, sharingKey: k, ports: [{port: 80}]}
  - {name: b, vip: 192.0.2.1, sharingKey: k, ports: [{port: 80, protocol: UDP}, {port: 443}]}
`,
		"same node port different protocol": pool + `services:
  - {name: a, ports: [{port: 53, protocol: UDP, nodePort: 30053}, {port: 53, nodePort: 30053}]}
`,
		"dr without mapping":      pool + "services: [{name: a, method: dr, ports: [{port: 80, targetPort: 80}], backends: [{address: \"198.51.100.1:80\"}]}]\n",
		"tunnel on ipvs":          pool + "dataplane: {mode: ipvs}\nservices: [{name: a, method: tunnel, ports: [{port: 80}]}]\n",
		"nat-nosnat on nftables":  pool + "dataplane: {mode: nftables}\nservices: [{name: a, method: nat-nosnat, ports: [{port: 80}]}]\n",
		"adjacent pools":          `pools: [{name: a, addresses: ["192.0.2.0/25"]}, {name: b, addresses: ["192.0.2.128-192.0.2.255"]}]`,
		"aggregation aligned":     `pools: [{name: a, addresses: ["192.0.2.0/24", "198.51.100.0/25"], advertisement: {aggregationLength: 25}}]`,
		"ipv6 aggregation":        `pools: [{name: a, addresses: ["2001:db8::/64"], advertisement: {aggregationLength: 64}}]`,
		"dual stack families":     pool + "services: [{name: a, families: [IPv4, IPv6], ports: [{port: 80}], backends: [{address: 198.51.100.1}, {address: \"2001:db8:9::1\"}]}]\n",
		"ipv6 vip":                pool + "services: [{name: a, vip: \"2001:db8::5\", ports: [{port: 80}], backends: [{address: \"[2001:db8:9::1]:8080\"}]}]\n",
		"bfd":                     "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65000, sourceAddress: 192.0.2.9, multihopTTL: 2, bfd: {enabled: true, receiveInterval: 100ms, transmitInterval: 200ms, multiplier: 5, passive: true}}]}}\n",
		"passive with listen":     "announce: {bgp: {localASN: 4200000000, listenPort: 1790, peers: [{address: 192.0.2.1, asn: 65000, passive: true}]}}\n",
		"ebgp multihop":           "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65000, multihopTTL: 255}]}}\n",
		"listen any":              "api: {listen: \":9090\"}\n",
		"k8s":                     "kubernetes: {enabled: true, handleClassless: true, backendMode: nodeport, loadBalancerClass: example.com/my_lb.v1, scheduler: mh, method: nat-nosnat, nodePortsOnLoadBalancers: true}\n",
		"k8s node checks":         "kubernetes: {backendMode: nodeport, nodeHealthCheck: {interval: 500ms, timeout: 200ms, rise: 1, fall: 2}}\n",
		"k8s node checks default": "kubernetes: {backendMode: nodeport, nodeHealthCheck: {}}\n",
		"affinity none":           pool + "services: [{name: a, ports: [{port: 80}], affinity: {type: None}}]\n",
		"null values are default": "api:\ndataplane: {mode: ~}\n",
		"yaml anchors":            pool + "services: [{name: a, ports: [&p {port: 80}]}, {name: b, ports: [*p]}]\n",
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			mustParse(t, y, nil)
		})
	}
}

// TestAllocationOrder: allocation.order defaults to MetalLB's lowest free
// address; "rotate" keeps edgelb's earlier order (issue 37).
func TestAllocationOrder(t *testing.T) {
	for y, want := range map[string]lb.AllocOrder{
		"{}\n":                               lb.LowestFree,
		"allocation: {order: lowest-free}\n": lb.LowestFree,
		"allocation: {order: rotate}\n":      lb.Rotate,
	} {
		cfg, err := Parse([]byte(y))
		if err != nil || cfg.AllocationOrder != want {
			t.Errorf("%q: order %v, %v; want %v", y, cfg.AllocationOrder, err, want)
		}
	}
}
