package metallb

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/edgelb/edgelb/lb/config"
)

func convertFile(t *testing.T, path string) *Result {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, skipped, err := ReadDocuments(f, filepath.Base(path), true)
	if err != nil {
		t.Fatal(err)
	}
	// The password file a passwordSecret becomes must exist for the
	// config to load, as it must on a real gateway.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bgp-far.password"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Convert(objs, Options{L2Interface: "eth0", SecretDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	res.Skipped = skipped
	return res
}

func fields(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Object+" "+f.Field)
	}
	sort.Strings(out)
	return out
}

// TestExamplesConvert: every MetalLB example in testdata converts; the
// config form is accepted by edgelb's own config parser (what `edgelb
// check` runs first); the report lists exactly the fields with no
// equivalent.
func TestExamplesConvert(t *testing.T) {
	want := map[string][]string{
		// Selected for BGP with no BGPPeer: MetalLB tells no router.
		"addresspool-v1beta1.yaml": {"AddressPool/legacy announcement"},
		"bgp.yaml": {
			"BFDProfile/full spec.echoMode",
			"BGPPeer/far spec.nodeSelectors",
		},
		// No advertisement selects them: MetalLB assigns, announces nothing.
		"ipaddresspool.yaml": {"IPAddressPool/cheap announcement", "IPAddressPool/expensive announcement", "IPAddressPool/first-pool announcement"},
		"l2advertisement.yaml": {
			"L2Advertisement/example spec.nodeSelectors",
		},
		"serviceallocation.yaml": {"IPAddressPool/ns-pool announcement"},
	}
	files, _ := filepath.Glob("testdata/*.yaml")
	if len(files) != len(want) {
		t.Fatalf("testdata has %d files, the table %d", len(files), len(want))
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			res := convertFile(t, path)
			if got := fields(res.Unsupported); strings.Join(got, "\n") != strings.Join(want[filepath.Base(path)], "\n") {
				t.Errorf("unsupported:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want[filepath.Base(path)], "\n"))
			}
			cfg, err := res.Config()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := config.Parse(cfg); err != nil {
				t.Fatalf("config form refused: %v\n%s", err, cfg)
			}
			cc, err := res.ClusterConfig()
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Announce.BGP.peersOrNil())+boolInt(res.Announce.L2 != nil) > 0 {
				if _, err := config.Parse(cc); err != nil {
					t.Fatalf("cluster config refused: %v\n%s", err, cc)
				}
			}
			objs, err := res.Objects()
			if err != nil {
				t.Fatal(err)
			}
			if n := bytes.Count(objs, []byte("kind: IPPool")); n != len(res.Pools) || n == 0 {
				t.Fatalf("%d IPPool documents for %d pools", n, len(res.Pools))
			}
		})
	}
}

func (b *BGP) peersOrNil() []Peer {
	if b == nil {
		return nil
	}
	return b.Peers
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestConvertBGPExampleValues checks the values carried over, not only that they parse.
func TestConvertBGPExampleValues(t *testing.T) {
	res := convertFile(t, "testdata/bgp.yaml")
	b := res.Announce.BGP
	if b.LocalASN != 64500 || b.RouterID != "10.10.10.10" || len(b.Peers) != 2 {
		t.Fatalf("bgp = %+v", b)
	}
	far, sample := b.Peers[0], b.Peers[1]
	if sample.Address != "10.0.0.1" || sample.ASN != 64501 || sample.Port != 1179 || sample.HoldTime != "1m30s" ||
		sample.Keepalive != "30s" || sample.Password != "yourPassword" {
		t.Errorf("sample = %+v", sample)
	}
	if far.MultihopTTL != 255 || far.PasswordFile == "" || far.SourceAddress != "172.30.0.10" {
		t.Errorf("far = %+v", far)
	}
	ad := res.Pools[0].Advertisement
	if ad == nil || ad.AggregationLength != 24 || ad.LocalPref != 100 ||
		strings.Join(ad.Communities, ",") != "65535:65282,64500:10" {
		t.Errorf("advertisement = %+v", ad)
	}
}

func TestIPAddressPoolValues(t *testing.T) {
	res := convertFile(t, "testdata/ipaddresspool.yaml")
	got, _ := yaml.Marshal(res.Pools)
	want := `- addresses:
  - 192.168.144.0/20
  autoAssign: true
  avoidBuggyIPs: true
  name: cheap
- addresses:
  - 42.176.25.64/30
  autoAssign: false
  name: expensive
- addresses:
  - 192.168.10.0/24
  - 192.168.9.1-192.168.9.5
  - fc00:f853:0ccd:e799::/124
  autoAssign: true
  name: first-pool
`
	if string(got) != want {
		t.Fatalf("pools:\n%s\nwant:\n%s", got, want)
	}
}

// TestUnknownFieldReported: a field this package does not know (a newer
// MetalLB) is reported, never dropped.
func TestUnknownFieldReported(t *testing.T) {
	in := `apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: p}
spec:
  addresses: [192.0.2.0/28]
  futureKnob: {nested: 1}
`
	res := convertString(t, in)
	if got := fields(res.Unsupported); len(got) != 2 || got[1] != "IPAddressPool/p spec.futureKnob.nested" {
		t.Fatalf("unsupported = %v", got)
	}
}

func TestBadInputNamed(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p}\nspec: {addresses: [192.0.2.0/33]}\n", `spec.addresses[0] "192.0.2.0/33"`},
		{"apiVersion: metallb.io/v1\nkind: IPAddressPool\nmetadata: {name: p}\n", `apiVersion "metallb.io/v1"`},
		{"apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: x}\nspec: {peerAddress: nope}\n", `spec.peerAddress "nope"`},
		// What only edgelb's own validator catches (check.go), named by the
		// MetalLB object it came from (FuzzConvert found both).
		{"apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: 0A}\nspec: {addresses: [192.0.2.0/28]}\n", `IPAddressPool/0A (in:1): edgelb refuses its pools[0].name "0A"`},
		{"apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: a}\nspec: {addresses: [192.0.2.0/28]}\n---\n" +
			"apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: b}\nspec: {addresses: [192.0.2.8-192.0.2.20]}\n", `IPAddressPool/b (in:6): edgelb refuses its pools[1].addresses[0] "192.0.2.8-192.0.2.20"`},
	} {
		objs, _, err := ReadDocuments(strings.NewReader(tc.in), "in", false)
		if err == nil {
			_, err = Convert(objs, Options{})
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want it to name %s", tc.in, err, tc.want)
		}
	}
}

// TestL2InterfaceLeftToTheUser: without --l2-interface an L2Advertisement
// that names no interface still converts, with the note saying to set it
// (the check against edgelb's validator fills it in for itself only).
func TestL2InterfaceLeftToTheUser(t *testing.T) {
	in := "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: a}\nspec: {addresses: [192.0.2.0/28]}\n---\n" +
		"apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: l2}\n"
	res := convertString(t, in)
	if res.Announce.L2 == nil || res.Announce.L2.Interface != "" {
		t.Fatalf("announce.l2 %+v, want an empty interface left to the user", res.Announce.L2)
	}
	if len(res.Notes) != 1 || res.Notes[0].Field != "announce.l2.interface" {
		t.Fatalf("notes %+v, want one on announce.l2.interface", res.Notes)
	}
}

// TestHostBitsReadAsMetalLBDoes: MetalLB (net.ParseCIDR) keeps a CIDR's
// network; edgelb's parser refuses host bits as a likely typo, so the
// converter writes the network and notes it.
func TestHostBitsReadAsMetalLBDoes(t *testing.T) {
	in := "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: a}\nspec: {addresses: [192.0.2.5/28]}\n"
	res := convertString(t, in)
	if got := res.Pools[0].Addresses; len(got) != 1 || got[0] != "192.0.2.0/28" {
		t.Fatalf("addresses %v, want [192.0.2.0/28]", got)
	}
	if len(res.Notes) != 1 || res.Notes[0].Field != "spec.addresses[0]" || res.Notes[0].Value != "192.0.2.5/28" {
		t.Fatalf("notes %+v, want one on spec.addresses[0] quoting 192.0.2.5/28", res.Notes)
	}
}

// TestServiceAllocationValues: serviceAllocation is carried over whole
// into the IPPool, the standalone config keeps its priority, and a note
// says why; a bad selector is refused naming the field.
func TestServiceAllocationValues(t *testing.T) {
	res := convertFile(t, "testdata/serviceallocation.yaml")
	sa := res.Pools[0].ServiceAllocation
	if sa == nil || sa.Priority != 50 || strings.Join(sa.Namespaces, ",") != "namespace-a,namespace-b" ||
		sa.NamespaceSelectors[0].MatchLabels["foo"] != "bar" ||
		sa.ServiceSelectors[0].MatchExpressions[0].Key != "app" || sa.ServiceSelectors[0].MatchExpressions[0].Values[0] != "bar" {
		t.Fatalf("serviceAllocation = %+v", sa)
	}
	objs, _ := res.Objects()
	for _, s := range []string{"serviceAllocation:", "priority: 50", "- namespace-a", "foo: bar", "operator: In"} {
		if !bytes.Contains(objs, []byte(s)) {
			t.Errorf("IPPool lacks %q:\n%s", s, objs)
		}
	}
	cfg, _ := res.Config()
	parsed, err := config.Parse(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a := parsed.Pools[0].Allocation; a == nil || a.Priority != 50 || a.HasSelectors() {
		t.Fatalf("standalone allocation = %+v", a)
	}
	if len(res.Notes) == 0 || !strings.Contains(res.Notes[0].Note, "standalone config keeps only the priority") {
		t.Fatalf("notes = %v", res.Notes)
	}
	in := "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p}\nspec:\n  addresses: [192.0.2.0/28]\n" +
		"  serviceAllocation:\n    serviceSelectors:\n    - matchExpressions: [{key: app, operator: Equals, values: [x]}]\n"
	o, _, err := ReadDocuments(strings.NewReader(in), "in", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Convert(o, Options{}); err == nil || !strings.Contains(err.Error(), "spec.serviceAllocation.serviceSelectors[0].matchExpressions[0].operator") {
		t.Fatalf("bad operator: %v", err)
	}
}

// convertString reads and converts in (no options), failing the test on
// an error.
func convertString(t *testing.T, in string) *Result {
	t.Helper()
	objs, _, err := ReadDocuments(strings.NewReader(in), "in", false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert(objs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestBFDProfileCarried: a peer's bfdProfile becomes its bfd settings; a
// profile that is missing, or a multihop peer without sourceAddress, leaves
// BFD off and says why.
func TestBFDProfileCarried(t *testing.T) {
	res := convertFile(t, "testdata/bgp.yaml")
	var far *Peer
	for i, p := range res.Announce.BGP.Peers {
		if p.Name == "far" {
			far = &res.Announce.BGP.Peers[i]
		}
	}
	if far == nil || far.BFD == nil || *far.BFD != (BFD{Enabled: true, ReceiveInterval: "380ms", TransmitInterval: "270ms", Multiplier: 37}) {
		t.Fatalf("peer far: %+v", far)
	}
	doc := `apiVersion: metallb.io/v1beta1
kind: BFDProfile
metadata: {name: fast}
spec: {passiveMode: true}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: a}
spec: {myASN: 64500, peerASN: 64501, peerAddress: 192.0.2.1, bfdProfile: fast}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: b}
spec: {myASN: 64500, peerASN: 64501, peerAddress: 192.0.2.2, bfdProfile: nosuch}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: c}
spec: {myASN: 64500, peerASN: 64501, peerAddress: 192.0.2.3, ebgpMultiHop: true, bfdProfile: fast}
`
	objs, _, err := ReadDocuments(strings.NewReader(doc), "inline", false)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Convert(objs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ps := r.Announce.BGP.Peers
	if ps[0].BFD == nil || *ps[0].BFD != (BFD{Enabled: true, Passive: true}) || ps[1].BFD != nil || ps[2].BFD != nil {
		t.Fatalf("peers: %+v / %+v / %+v", ps[0].BFD, ps[1].BFD, ps[2].BFD)
	}
	if got := strings.Join(fields(r.Unsupported), ","); got != "BGPPeer/b spec.bfdProfile,BGPPeer/c spec.bfdProfile" {
		t.Fatalf("unsupported: %s", got)
	}
	y, err := r.Config()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(y)
	if err != nil {
		t.Fatalf("converted config refused: %v\n%s", err, y)
	}
	if b := cfg.Announce.BGP.Peers[0].BFD; b == nil || !b.Passive || b.Multiplier != 3 {
		t.Fatalf("parsed bfd: %+v", b)
	}
}
