//go:build netns

package netns

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"testing"
	"time"
)

func TestNetnsVethHTTP(t *testing.T) {
	a, b := NewT(t, "elb-ta"), NewT(t, "elb-tb")
	if err := Veth(a, "va", b, "vb"); err != nil {
		t.Fatal(err)
	}
	if err := a.AddAddr("va", netip.MustParsePrefix("192.0.2.1/24")); err != nil {
		t.Fatal(err)
	}
	if err := b.AddAddr("vb", netip.MustParsePrefix("192.0.2.2/24")); err != nil {
		t.Fatal(err)
	}
	l, err := b.Listen("tcp", "192.0.2.2:8080")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "b") })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	resp, err := a.HTTPClient(2 * time.Second).Get("http://192.0.2.2:8080/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "b" {
		t.Fatalf("body %q", body)
	}
	if v, err := a.ReadSysctl("net.ipv4.ip_forward"); err != nil || v != "0" {
		t.Fatalf("fresh netns ip_forward=%q err=%v", v, err)
	}
	if err := a.Sysctl("net.ipv4.ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	if out, err := a.Exec(context.Background(), "cat", "/proc/sys/net/ipv4/ip_forward"); err != nil || string(out) != "1\n" {
		t.Fatalf("ip_forward in ns: %q %v", out, err)
	}
}
