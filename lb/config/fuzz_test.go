package config

import (
	"errors"
	"os"
	"testing"
)

// FuzzParse: any input either parses into a Config that validates again
// unchanged, or fails with *Errors whose every entry names a field. Never a
// panic. Files are served from memory so the fuzzer cannot touch the disk.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("../../systemd/config.example.yaml"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		"",
		pool + "services: [{name: a, vip: 192.0.2.1, ports: [{port: 80, nodePort: 30080}], backends: [{address: \"198.51.100.1:8080\", weight: 2}]}]\n",
		"pools: [{name: a, addresses: [\"192.0.2.0/25\", \"192.0.2.100-192.0.2.200\"]}]\n",
		"announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65000, passwordFile: /t}]}}\n",
		"api: {listen: \":8080\", tokenFile: /t}\n",
		"dataplane: {mode: nftables, nodePortRange: 30000-40000}\n",
		"state: {type: etcd, endpoints: [\"https://10.0.0.1:2379\"], prefix: /edgelb, tls: {ca: ca.pem, cert: c.pem, key: k.pem}}\n",
		pool + "services: [{name: a, method: dr, ports: [{port: 80, targetPort: 81}]}]\n",
		"announce: {l2: {interface: eth0, sourceAddresses: [198.51.100.9]}}\nstateSync: {conntrackd: {interface: eth1, peer: 10.0.0.2}}\n",
	} {
		f.Add([]byte(s))
	}
	files := fakeFiles(map[string]string{"/t": "token\n", "/etc/edgelb/token": "tok"})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parse(data, env{readFile: files})
		if err != nil {
			var errs *Errors
			if !errors.As(err, &errs) || len(errs.List) == 0 {
				t.Fatalf("error is not *Errors: %v", err)
			}
			for _, fe := range errs.List {
				if fe == nil || fe.Field == "" || fe.Err == nil {
					t.Fatalf("error without a field: %#v", fe)
				}
			}
			if cfg != nil {
				t.Fatalf("config returned with errors")
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("parsed config does not re-validate: %v\n%s", err, data)
		}
		_ = cfg.NodePortInput()
	})
}
