//go:build netns

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgelb/edgelb/lab/logbuf"
	"github.com/edgelb/edgelb/lb/store"
)

// TestNetnsStoreDamageRefusesStart (issue 13): the real daemon runs with
// config services and REST-created ones, is killed -9 (its tables stay in
// the kernel, as after a crash), and its state file is then damaged in
// each way the issue lists. Each start must exit with the store's own exit
// code and a message naming the file and the way out — never a panic,
// never an empty start — and the untouched file must start as before.
func TestNetnsStoreDamageRefusesStart(t *testing.T) {
	e := newEnv(t, "fls", 2)
	svcs := append([]svcDef{e.webService()}, e.bulkServices(300, 0)...)
	cfg := e.config(cfgOpts{Services: svcs})
	e.start(cfg)
	e.waitReady(2 * time.Minute)
	for i := 0; i < 20; i++ { // REST-created: only the state file remembers them
		vip := netip.AddrFrom4([4]byte{192, 0, 2, byte(101 + i)}) // the demo pool, 192.0.2.100-120
		e.putService(svcDef{Name: fmt.Sprintf("rest-%02d", i), Pool: "demo", VIP: vip, Port: 9000, Backends: svcs[0].Backends})
	}
	want := e.restServices()
	e.kill9()
	path := filepath.Join(e.dir, "state", "edgelb.db")
	pristine, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(b []byte, what string) []byte {
		i := bytes.Index(b, []byte(what))
		if i < 0 {
			t.Fatalf("%q not found in the state file", what)
		}
		b = bytes.Clone(b)
		b[i+len(what)-1] ^= 1
		return b
	}
	// viaBolt returns the pristine file changed through bbolt itself (a
	// change that still parses: only edgelb's checks can catch it).
	viaBolt := func(fn func(tx *bolt.Tx) error) []byte {
		tmp := filepath.Join(t.TempDir(), "copy.db")
		if err := os.WriteFile(tmp, pristine, 0o600); err != nil {
			t.Fatal(err)
		}
		db, err := bolt.Open(tmp, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(fn); err != nil {
			t.Fatal(err)
		}
		db.Close()
		b, _ := os.ReadFile(tmp)
		return b
	}
	cases := []struct {
		name  string
		file  func() []byte // nil: delete the file
		code  int
		words string
	}{
		{"deleted", nil, 4, "is missing, but this gateway's kernel holds edgelb's state"},
		{"0 bytes", func() []byte { return []byte{} }, 4, "is empty (0 bytes), but this gateway's kernel holds edgelb's state"},
		// Half of the data's extent: bbolt grows the file ahead of it.
		{"truncated to half its data", func() []byte { return pristine[:boltDataSize(t, pristine)/2] }, 3, "is damaged"},
		{"a byte flipped in a REST service's record", func() []byte { return flip(pristine, `"rest-07"`) }, 3, "checksum mismatch"},
		{"rest-07 given rest-06's address (a parsable record, checksum and all)", func() []byte {
			return viaBolt(func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("assignments"))
				rec := b.Get([]byte("rest-06"))
				return b.Put([]byte("rest-07"), store.FrameForTest("rest-07", bytes.Clone(rec[6:])))
			})
		}, 3, "stored assignments conflict"},
		{"rest-07's stored address rewritten (bytes in the record)", func() []byte {
			return viaBolt(func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("assignments"))
				rec := bytes.Clone(b.Get([]byte("rest-07")))
				i := bytes.Index(rec, []byte(`"]`))
				rec[i-1] ^= 1
				return b.Put([]byte("rest-07"), rec)
			})
		}, 3, "checksum mismatch"},
		{"a newer schema version", func() []byte {
			return viaBolt(func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte("9")) })
		}, 3, `schema version "9"`},
		{"first 8 KiB zeroed (both meta pages)", func() []byte { return append(make([]byte, 8192), pristine[8192:]...) }, 3, "is damaged"},
	}
	for _, c := range cases {
		if c.file == nil {
			os.Remove(path)
		} else if err := os.WriteFile(path, c.file(), 0o600); err != nil {
			t.Fatal(err)
		}
		// edgelb check reads the file read-only, says the same and exits
		// with run's code.
		chk, cerr := e.lab.Gateway.Command(context.Background(), e.exe, "check", "--config", e.cfgPath).CombinedOutput()
		ccode := 0
		if ee := (*exec.ExitError)(nil); errors.As(cerr, &ee) {
			ccode = ee.ExitCode()
		}
		if !strings.Contains(string(chk), "state: ") || !strings.Contains(string(chk), path) || ccode != c.code {
			t.Errorf("%s: edgelb check exit %d (want %d), must report the state file:\n%s", c.name, ccode, c.code, chk)
		}
		t.Logf("edgelb check — %s: exit %d: %s", c.name, ccode, lastLineWith(string(chk), "state: "))
		from := len(e.logs.String())
		e.start(cfg)
		select {
		case <-e.d.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the daemon did not exit: %s", c.name, e.logs.Tail(20))
		}
		code := -1
		var ee *exec.ExitError
		if errors.As(e.d.Err(), &ee) {
			code = ee.ExitCode()
		}
		out := e.logs.String()[from:]
		last := lastLine(out)
		t.Logf("MEASURED store damage — %s: exit %d: %s", c.name, code, last)
		if code != c.code || !strings.Contains(out, c.words) || !strings.Contains(out, path) || !strings.Contains(out, "edgelb cleanup") {
			t.Errorf("%s: exit %d, want %d with %q, the file and the way out:\n%s", c.name, code, c.code, c.words, logbuf.Tail(out, 10))
		}
		if strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
			t.Errorf("%s: a stack trace:\n%s", c.name, logbuf.Tail(out, 30))
		}
	}
	// The kernel still holds what the killed daemon programmed, and the
	// untouched file starts as before: every service, same addresses.
	if err := os.WriteFile(path, pristine, 0o600); err != nil {
		t.Fatal(err)
	}
	chk, err := e.lab.Gateway.Command(context.Background(), e.exe, "check", "--config", e.cfgPath).CombinedOutput()
	t.Logf("edgelb check — untouched: %s", lastLineWith(string(chk), "state: "))
	if err != nil || !strings.Contains(string(chk), "every record's checksum matches") {
		t.Errorf("edgelb check on the untouched file: %v\n%s", err, chk)
	}
	e.start(cfg)
	e.waitReady(2 * time.Minute)
	got := e.restServices()
	if got != want {
		t.Fatalf("after restoring the file, services differ:\nbefore %s\nafter  %s", want, got)
	}
	t.Logf("the untouched state file: %d bytes; restart restores all %d services with the same addresses", len(pristine), strings.Count(want, "\n"))
}

// restServices lists name → assigned addresses from the REST API, one
// line per service, sorted.
func (e *env) restServices() string {
	e.t.Helper()
	code, body := e.rest(http.MethodGet, "/api/v1/services", "")
	if code != http.StatusOK {
		e.t.Fatalf("GET services: %d %s", code, body)
	}
	return servicesDigest(e.t, body)
}

func lastLineWith(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return "(none)"
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) == 0 {
		return ""
	}
	if len(l[len(l)-1]) > 400 {
		return l[len(l)-1][:400] + "…"
	}
	return l[len(l)-1]
}

func servicesDigest(t *testing.T, body string) string {
	t.Helper()
	var list []struct {
		Spec struct {
			Name string `json:"name"`
		} `json:"spec"`
		Assigned []string `json:"assigned"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("services: %v", err)
	}
	var lines []string
	for _, s := range list {
		lines = append(lines, s.Spec.Name+" "+strings.Join(s.Assigned, ","))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// boltDataSize is how far a bbolt file's data extends (its high-water
// page, as the meta page says); the file itself is grown ahead of it.
func boltDataSize(t *testing.T, file []byte) int {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), "size.db")
	if err := os.WriteFile(tmp, file, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	if n <= 0 || n > int64(len(file)) {
		t.Fatalf("data extent %d of a %d-byte file", n, len(file))
	}
	return int(n)
}
