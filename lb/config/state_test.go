package config

import (
	"errors"
	"reflect"
	"testing"
)

// TestStateEtcd: state.type etcd parses into typed values, bbolt stays the
// default, and every mistake names its field and quotes the value.
func TestStateEtcd(t *testing.T) {
	files := fakeFiles(nil)
	parseState := func(y string) (*Config, error) { return parse([]byte(y), env{readFile: files, dir: "/etc/edgelb"}) }

	cfg, err := parseState("state: {type: etcd, endpoints: [\"https://10.0.0.1:2379\", \"http://[::1]:2379\"], tls: {ca: ca.pem, cert: /c.pem, key: /k.pem}}\n")
	if err != nil {
		t.Fatal(err)
	}
	want := &Etcd{Endpoints: []string{"https://10.0.0.1:2379", "http://[::1]:2379"}, CA: "/etc/edgelb/ca.pem",
		Cert: "/c.pem", Key: "/k.pem", Prefix: DefaultEtcdPrefix}
	if cfg.State.Type != StateEtcd || !reflect.DeepEqual(cfg.State.Etcd, want) {
		t.Fatalf("state = %+v, etcd %+v; want %+v", cfg.State, cfg.State.Etcd, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("re-validate: %v", err)
	}
	cfg, err = parseState("state: {dir: /srv/edgelb}\n")
	if err != nil || cfg.State.Type != "" || cfg.State.Etcd != nil || cfg.State.Dir != "/srv/edgelb" {
		t.Fatalf("bbolt default: %+v, %v", cfg.State, err)
	}

	for _, c := range []struct{ yaml, field, value string }{
		{"state: {type: zookeeper}", "state.type", "zookeeper"},
		{"state: {endpoints: [\"http://a:1\"]}", "state.type", ""},
		{"state: {type: etcd}", "state.endpoints", ""},
		{"state: {type: etcd, endpoints: [\"10.0.0.1:2379\"]}", "state.endpoints[0]", "10.0.0.1:2379"},
		{"state: {type: etcd, endpoints: [\"http://a:1\", \"http://a\"]}", "state.endpoints[1]", "http://a"},
		{"state: {type: etcd, endpoints: [\"http://a:1/v3\"]}", "state.endpoints[0]", "http://a:1/v3"},
		{"state: {type: etcd, endpoints: [\"http://a:1\", \"http://a:1\"]}", "state.endpoints[1]", "http://a:1"},
		{"state: {type: etcd, endpoints: [\"http://a:1\"], prefix: edgelb}", "state.prefix", "edgelb"},
		{"state: {type: etcd, endpoints: [\"http://a:1\"], prefix: /edgelb/}", "state.prefix", "/edgelb/"},
		{"state: {type: etcd, endpoints: [\"http://a:1\"], prefix: \"/a b\"}", "state.prefix", "/a b"},
		{"state: {type: etcd, endpoints: [\"http://a:1\"], tls: {cert: /c.pem}}", "state.tls", "/c.pem "},
		{"state: {type: etcd, endpoints: [\"http://a:1\"], gateway: \"gw 1\"}", "state.gateway", "gw 1"},
		{"state: {gateway: gw1}", "state.type", ""},
	} {
		_, err := parseState(c.yaml + "\n")
		var errs *Errors
		if !errors.As(err, &errs) {
			t.Fatalf("%s: want *Errors, got %v", c.yaml, err)
		}
		found := false
		for _, fe := range errs.List {
			found = found || (fe.Field == c.field && fe.Value == c.value)
		}
		if !found {
			t.Errorf("%s: want an error on %s quoting %q, got %v", c.yaml, c.field, c.value, err)
		}
	}
}
