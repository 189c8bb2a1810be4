package hostcheck

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/edgelb/edgelb/proxy"
)

func TestParsePortList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		err  bool
	}{
		{"", "", false},
		{"\n", "", false},
		{"8080", "8080", false},
		{"8080,30000-32767\n", "8080,30000-32767", false},
		{"30000-32767,8080", "8080,30000-32767", false},       // sorted
		{"1-5,3-9,10,12", "1-10,12", false},                   // overlap and adjacency coalesce
		{"65535,0", "0,65535", false},                         // bounds
		{"5-3", "", true},                                     // reversed
		{"65536", "", true},                                   // too big
		{"1,,2", "", true},                                    // empty element
		{"a-b", "", true},                                     // not numbers
		{"1 2", "", true},                                     // spaces inside an element
		{"-5", "", true},                                      // missing first
		{" 8080 , 9090 ", "8080,9090", false},                 // spaces around elements
		{"30000-32767,32768-60999", "30000-60999", false},     // adjacent ranges merge
		{"100-200,150-160,300-400,201-299", "100-400", false}, // contained and bridging
		{"0-65535", "0-65535", false},                         // everything
		{"+1", "", true},                                      // sign
		{"0x10", "", true},                                    // hex
		{"1-2-3", "", true},                                   // too many dashes
		{"32768\t60999", "", true},                            // a range sysctl is not a list
		{"10-20,5-15,1-3,4", "1-20", false},                   // unordered chain
		{"7,7,7", "7", false},                                 // duplicates
		{"65534-65535,65533", "65533-65535", false},           // top end, no overflow
		{"0,1", "0-1", false},                                 // bottom end
		{strings.Repeat("1,", 1000) + "1", "1", false},        // long list
		{"60999-60999", "60999", false},                       // single as range
		{"30000 - 32767", "", true},                           // spaces inside
		{"١٢", "", true},                                      // non-ASCII digits
		{"1,\t2", "1-2", false},                               // tab around an element
		{"1,2,", "", true},                                    // trailing comma
		{",1", "", true},                                      // leading comma
		{"99999999999999999999", "", true},                    // overflow
		{"30000-40000", "30000-40000", false},                 // plain range
	} {
		got, err := ParsePortList(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("ParsePortList(%q) error = %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if err == nil && FormatPortList(got) != tc.want {
			t.Errorf("ParsePortList(%q) = %q, want %q", tc.in, FormatPortList(got), tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), "invalid port list") {
			t.Errorf("ParsePortList(%q) error %q does not say what it parsed", tc.in, err)
		}
	}
}

func TestParsePortRange(t *testing.T) {
	for in, want := range map[string]PortRange{
		"32768\t60999\n": {32768, 60999},
		"30000 40000":    {30000, 40000},
		"30000-32767":    {30000, 32767},
		" 30000 - 32767": {30000, 32767},
		"80":             {80, 80},
	} {
		got, err := ParsePortRange(in)
		if err != nil || got != want {
			t.Errorf("ParsePortRange(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "40000 30000", "1 2 3", "x-1", "70000", "1-"} {
		if _, err := ParsePortRange(in); err == nil {
			t.Errorf("ParsePortRange(%q) accepted", in)
		}
	}
}

func TestSubtractIntersect(t *testing.T) {
	pr := func(s string) []PortRange {
		l, err := ParsePortList(s)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if got := FormatPortList(Subtract(pr("30000-40000"), pr("8080,30500-30600,45000"))); got != "30000-30499,30601-40000" {
		t.Errorf("Subtract = %q", got)
	}
	if got := FormatPortList(Subtract(pr("0-65535"), pr("0,65535"))); got != "1-65534" {
		t.Errorf("Subtract edges = %q", got)
	}
	if got := Subtract(pr("10-20"), pr("0-65535")); len(got) != 0 {
		t.Errorf("Subtract all = %v", got)
	}
	if got := FormatPortList(Intersect(PortRange{30000, 32767}, pr("32000-40000,1-30001"))); got != "30000-30001,32000-32767" {
		t.Errorf("Intersect = %q", got)
	}
}

func TestRelate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		node       PortRange
		eph        Ephemeral
		overlap    string
		unreserved string
		adjacent   bool
		merged     string
	}{
		{"machine default", PortRange{30000, 32767}, Ephemeral{Range: PortRange{32768, 60999}}, "", "", true, "30000-32767"},
		{"adjacent below", PortRange{61000, 61999}, Ephemeral{Range: PortRange{32768, 60999}}, "", "", true, "61000-61999"},
		{"disjoint", PortRange{20000, 21000}, Ephemeral{Range: PortRange{32768, 60999}}, "", "", false, "20000-21000"},
		{"one port overlap", PortRange{30000, 32768}, Ephemeral{Range: PortRange{32768, 60999}}, "32768", "32768", false, "30000-32768"},
		{"overlap", PortRange{30000, 32767}, Ephemeral{Range: PortRange{30000, 40000}}, "30000-32767", "30000-32767", false, "30000-32767"},
		{"partly reserved", PortRange{30000, 32767}, Ephemeral{Range: PortRange{30000, 40000}, Reserved: []PortRange{{8080, 8080}, {31000, 31999}}},
			"30000-32767", "30000-30999,32000-32767", false, "8080,30000-32767"},
		{"fully reserved", PortRange{30000, 32767}, Ephemeral{Range: PortRange{1024, 65535}, Reserved: []PortRange{{29000, 33000}}},
			"30000-32767", "", false, "29000-33000"},
		{"merge keeps others", PortRange{30000, 32767}, Ephemeral{Range: PortRange{30000, 40000}, Reserved: []PortRange{{8080, 8080}, {32768, 33000}, {50000, 50010}}},
			"30000-32767", "30000-32767", false, "8080,30000-33000,50000-50010"},
	} {
		r := Relate(tc.node, tc.eph)
		if got := FormatPortList(r.Overlap); got != tc.overlap {
			t.Errorf("%s: overlap %q, want %q", tc.name, got, tc.overlap)
		}
		if got := FormatPortList(r.Unreserved); got != tc.unreserved {
			t.Errorf("%s: unreserved %q, want %q", tc.name, got, tc.unreserved)
		}
		if r.Adjacent != tc.adjacent {
			t.Errorf("%s: adjacent %v, want %v", tc.name, r.Adjacent, tc.adjacent)
		}
		if got := FormatPortList(r.MergedReserved); got != tc.merged {
			t.Errorf("%s: merged %q, want %q", tc.name, got, tc.merged)
		}
	}
}

func codes(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Severity.String()+" "+f.Code)
	}
	return out
}

func find(fs []Finding, code string) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.Code == code {
			out = append(out, f)
		}
	}
	return out
}

func TestCheckNodePortsDefault(t *testing.T) {
	fs, err := CheckNodePorts(FromRoot("testdata/default"), NodePortInput{
		Range:     PortRange{30000, 32767},
		NodePorts: []NodePort{{Port: 30080, Protocol: proxy.TCP, Service: "web"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"INFO " + CodeRangeClear}; !reflect.DeepEqual(codes(fs), want) {
		t.Fatalf("findings %v, want %v:\n%v", codes(fs), want, fs)
	}
	if m := fs[0].Message; !strings.Contains(m, `"30000-32767"`) || !strings.Contains(m, `"32768-60999"`) || !strings.Contains(m, "adjacent, no overlap") {
		t.Errorf("message %q does not report the adjacency", m)
	}
	if Worst(fs) != Info {
		t.Errorf("worst = %v", Worst(fs))
	}
}

func TestCheckNodePortsOverlap(t *testing.T) {
	in := NodePortInput{
		Range: PortRange{30000, 32767},
		NodePorts: []NodePort{
			{Port: 30550, Protocol: proxy.TCP, Service: "reserved"}, // inside the reserved 30500-30600
			{Port: 30090, Protocol: proxy.TCP, Service: "api"},
			{Port: 30080, Protocol: proxy.TCP, Service: "web"},
			{Port: 30081, Protocol: proxy.TCP, Service: "local"},
			{Port: 30053, Protocol: proxy.UDP, Service: "dns"},
		},
		VIPPorts: []VIPPort{
			{VIP: netip.MustParseAddr("192.0.2.100"), Port: 80, Protocol: proxy.TCP, Service: "web"},
			{VIP: netip.MustParseAddr("192.0.2.100"), Port: 53, Protocol: proxy.UDP, Service: "dns"},
			{Port: 81, Protocol: proxy.TCP, Service: "unassigned"},
		},
	}
	fs, err := CheckNodePorts(FromRoot("testdata/overlap"), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		t.Log(f)
	}
	want := []string{
		"ERROR " + CodeRangeOverlap,
		"WARN " + CodeNodePortEphemeral, // 30053 udp
		"WARN " + CodeNodePortEphemeral, // 30080
		"WARN " + CodeNodePortEphemeral, // 30081
		"WARN " + CodeNodePortEphemeral, // 30090 (30550 is reserved)
		"WARN " + CodeListenerNodePort,  // 0.0.0.0:30053 udp
		"WARN " + CodeListenerNodePort,  // 0.0.0.0:30080 (127.0.0.1:30081 is not a node address)
		"WARN " + CodeListenerVIPPort,   // [::]:80 covers 192.0.2.100:80
		"WARN " + CodeOutboundNodePort,  // two connections from 30090
		// no in-range Info: 35555 is outside 30000-32767 and 30070 is TIME_WAIT
	}
	if !reflect.DeepEqual(codes(fs), want) {
		t.Fatalf("findings\n%v\nwant\n%v", codes(fs), want)
	}
	e := fs[0]
	for _, s := range []string{`"30000-32767"`, `"30000-40000"`, `"30000-30499,30601-32767"`, `"8080,30500-30600,45000"`} {
		if !strings.Contains(e.Message, s) {
			t.Errorf("error message lacks %s: %s", s, e.Message)
		}
	}
	wantFix := "sysctl -w net.ipv4.ip_local_reserved_ports=8080,30000-32767,45000\n" +
		"echo 'net.ipv4.ip_local_reserved_ports = 8080,30000-32767,45000' > " + ReservedPortsFile
	if e.Fix != wantFix {
		t.Errorf("fix\n%s\nwant\n%s", e.Fix, wantFix)
	}
	if w := find(fs, CodeNodePortEphemeral); !strings.Contains(w[0].Message, "30053/UDP") || !strings.Contains(w[3].Message, `"api"`) {
		t.Errorf("node-port warnings: %v", w)
	}
	if w := find(fs, CodeOutboundNodePort); !strings.Contains(w[0].Message, "2 established") || !strings.Contains(w[0].Message, "192.0.2.10:30090->198.51.100.5:443") {
		t.Errorf("outbound warning: %v", w)
	}
	if w := find(fs, CodeListenerVIPPort); !strings.Contains(w[0].Message, "192.0.2.100:80/TCP") {
		t.Errorf("VIP listener warning: %v", w)
	}
	if Worst(fs) != Error {
		t.Errorf("worst = %v", Worst(fs))
	}

	// With explicit node addresses, a wildcard listener still counts and a
	// listener on another address does not.
	in.NodeAddrs = []netip.Addr{netip.MustParseAddr("192.0.2.10")}
	fs, _ = CheckNodePorts(FromRoot("testdata/overlap"), in)
	if n := len(find(fs, CodeListenerNodePort)); n != 2 {
		t.Errorf("listener warnings with node addresses: %d, want 2", n)
	}
	// With a range wide enough to hold 35555, the outbound connection is reported as Info.
	in.Range = PortRange{30000, 39999}
	fs, _ = CheckNodePorts(FromRoot("testdata/overlap"), in)
	if n := len(find(fs, CodeOutboundInRange)); n != 1 {
		t.Errorf("in-range outbound info: %d, want 1", n)
	}
}

func TestCheckNodePortsReserved(t *testing.T) {
	fs, err := CheckNodePorts(FromRoot("testdata/reserved"), NodePortInput{Range: PortRange{30000, 32767}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"INFO " + CodeRangeReserved}; !reflect.DeepEqual(codes(fs), want) {
		t.Fatalf("findings %v, want %v", codes(fs), want)
	}
}

func TestCheckNodePortsBrokenSockets(t *testing.T) {
	fs, err := CheckNodePorts(FromRoot("testdata/broken"), NodePortInput{Range: PortRange{30000, 32767}})
	if err != nil {
		t.Fatal(err)
	}
	if w := find(fs, CodeSocketsUnreadable); len(w) != 1 || !strings.Contains(w[0].Message, "/proc/net/tcp") {
		t.Fatalf("findings %v", fs)
	}
}

func TestCheckNodePortsUnreadableSysctl(t *testing.T) {
	_, err := CheckNodePorts(Source{Sys: fstest.MapFS{}, Net: fstest.MapFS{}}, NodePortInput{Range: PortRange{30000, 32767}})
	if err == nil || !strings.Contains(err.Error(), "net.ipv4.ip_local_port_range") {
		t.Fatalf("err = %v", err)
	}
	_, err = CheckNodePorts(Source{Sys: fstest.MapFS{
		"net/ipv4/ip_local_port_range":     {Data: []byte("32768 60999\n")},
		"net/ipv4/ip_local_reserved_ports": {Data: []byte("1,x\n")},
	}, Net: fstest.MapFS{}}, NodePortInput{Range: PortRange{30000, 32767}})
	if err == nil || !strings.Contains(err.Error(), `"1,x`) {
		t.Fatalf("err = %v", err)
	}
}

func TestParseSockets(t *testing.T) {
	in := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 620 1 000000001a8154fa 100 0 0 10 0\n" +
		"   1: 020200C0:AB7A 507100CB:0050 06 00000000:00000000 03:0000135C 00000000     0        0 0 3 000000009fe971a3\n"
	s, err := ParseSockets(strings.NewReader(in), proxy.TCP)
	if err != nil {
		t.Fatal(err)
	}
	want := []Socket{
		{Protocol: proxy.TCP, Local: netip.MustParseAddrPort("127.0.0.1:22"), Remote: netip.MustParseAddrPort("0.0.0.0:0"), State: StateListen, Inode: 620},
		{Protocol: proxy.TCP, Local: netip.MustParseAddrPort("192.0.2.2:43898"), Remote: netip.MustParseAddrPort("203.0.113.80:80"), State: 6},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
	s6, err := ParseSockets(strings.NewReader("   0: B80D0120000000000000000001000000:01BB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n"), proxy.TCP)
	if err != nil || s6[0].Local != netip.MustParseAddrPort("[2001:db8::1]:443") {
		t.Fatalf("IPv6: %+v %v", s6, err)
	}
	for _, bad := range []string{"0: x", "   0: 0100007F:0016 00000000:0000 ZZ 0 0 0 0 0 0", "   0: 0100007:0016 00000000:0000 0A 0 0 0 0 0 0", "0 0100007F:0016 00000000:0000 0A 0 0 0 0 0 0"} {
		if _, err := ParseSockets(strings.NewReader(bad), proxy.TCP); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestIPVSSysctls(t *testing.T) {
	fs := CheckSysctls(FromRoot("testdata/ipvs"), "IPVS", IPVSSysctls)
	want := []string{"INFO sysctl-ok", "WARN sysctl-mismatch", "INFO sysctl-ok", "INFO sysctl-ok", "WARN sysctl-mismatch", "INFO sysctl-ok", "INFO sysctl-ok"}
	if !reflect.DeepEqual(codes(fs), want) {
		t.Fatalf("findings %v, want %v", codes(fs), want)
	}
	if fs[1].Fix != "sysctl -w net.ipv4.vs.expire_nodest_conn=1" || !strings.Contains(fs[1].Message, `is "0", IPVS wants "1"`) {
		t.Errorf("finding %v", fs[1])
	}
	fs = CheckSysctls(FromRoot("testdata/noipvs"), "IPVS", IPVSSysctls)
	want = []string{"INFO ipvs-absent", "WARN sysctl-mismatch", "INFO sysctl-ok", "INFO sysctl-ok", "WARN sysctl-mismatch"}
	if !reflect.DeepEqual(codes(fs), want) {
		t.Fatalf("findings %v, want %v", codes(fs), want)
	}
}

// TestNFTablesSysctls: a host without IPv6 (the optional forwarding key is
// absent: nothing to say) and before nf_conntrack is loaded (its keys are
// absent: CheckConntrack says so, once).
func TestNFTablesSysctls(t *testing.T) {
	src := Source{Sys: fstest.MapFS{
		"net/ipv4/ip_forward":                       {Data: []byte("1\n")},
		"net/netfilter/nf_conntrack_tcp_be_liberal": {Data: []byte("0\n")},
	}}
	fs := CheckSysctls(src, "nftables", NFTablesSysctls)
	if want := []string{"INFO sysctl-ok", "WARN sysctl-mismatch"}; !reflect.DeepEqual(codes(fs), want) {
		t.Fatalf("findings %v, want %v", codes(fs), want)
	}
	if fs[1].Fix != "sysctl -w net.netfilter.nf_conntrack_tcp_be_liberal=1" || !strings.Contains(fs[1].Message, `is "0", nftables wants "1"`) {
		t.Errorf("finding %v", fs[1])
	}
	src = Source{Sys: fstest.MapFS{"net/ipv4/ip_forward": {Data: []byte("0\n")}}}
	if fs, want := CheckSysctls(src, "nftables", NFTablesSysctls), []string{"WARN sysctl-mismatch"}; !reflect.DeepEqual(codes(fs), want) {
		t.Fatalf("before nf_conntrack: findings %v, want %v", codes(fs), want)
	}
}

// TestSystemReadable reads this machine's namespace; it changes nothing.
func TestSystemReadable(t *testing.T) {
	e, err := ReadEphemeral(System())
	if err != nil {
		t.Skipf("no /proc/sys here: %v", err)
	}
	r := Relate(PortRange{30000, 32767}, e)
	t.Logf("this machine: %s = %s, %s = %q; vs node ports 30000-32767: %v",
		sysctlPortRange, e.Range, sysctlReservedPorts, FormatPortList(e.Reserved), r.Findings(nil)[0].Message)
	if _, fs := ReadSockets(System()); len(fs) != 0 {
		t.Errorf("socket tables unreadable: %v", fs)
	}
}

// TestConntrackFindings: the sizing rules (2× the peak; buckets ≥ max/4),
// measured peak when none is configured, and a fix that only raises.
func TestConntrackFindings(t *testing.T) {
	cases := []struct {
		name  string
		c     Conntrack
		peak  uint64
		codes []string
		fix   string
	}{
		{"fits", Conntrack{Count: 10, Max: 262144, Buckets: 65536}, 100000, []string{CodeConntrackOK}, ""},
		{"below twice the peak", Conntrack{Max: 262144, Buckets: 262144}, 200000, []string{CodeConntrackSmall}, "sysctl -w net.netfilter.nf_conntrack_max=400000"},
		{"below the peak, buckets follow the new max", Conntrack{Max: 65536, Buckets: 16384}, 100000,
			[]string{CodeConntrackSmall, CodeConntrackBuckets}, "hashsize=50000"},
		{"buckets small for the max", Conntrack{Max: 1 << 20, Buckets: 1024}, 1000, []string{CodeConntrackBuckets}, "echo 262144 > /sys/module/nf_conntrack/parameters/hashsize"},
		{"measured: nothing configured", Conntrack{Count: 150000, Max: 262144, Buckets: 262144}, 0, []string{CodeConntrackSmall}, "nf_conntrack_max=300000"},
		{"measured: empty table", Conntrack{Max: 262144, Buckets: 262144}, 0, []string{CodeConntrackOK}, ""},
	}
	for _, tc := range cases {
		fs := ConntrackFindings(tc.c, tc.peak)
		var codes []string
		fixes := ""
		for _, f := range fs {
			codes = append(codes, f.Code)
			fixes += f.Fix + "\n"
		}
		if strings.Join(codes, ",") != strings.Join(tc.codes, ",") || !strings.Contains(fixes, tc.fix) {
			t.Errorf("%s: got %v, want codes %v and a fix with %q", tc.name, fs, tc.codes, tc.fix)
		}
	}
	if fs := CheckConntrack(Source{Sys: fstest.MapFS{}}, 5); len(fs) != 1 || fs[0].Code != CodeConntrackAbsent {
		t.Errorf("no nf_conntrack: got %v", fs)
	}
}
