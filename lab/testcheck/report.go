package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	Test        string
	Output      string
	FailedBuild string
}

// result is the outcome of one test (top-level or subtest) or package.
type result struct {
	Target  string `json:"target"`
	Package string `json:"package"`
	Test    string `json:"test"` // "" for the package itself
	Action  string `json:"action"`
	Reason  string `json:"reason,omitempty"` // for skips the skip message; for failed tests what they printed (failReason)
}

// Plain `-test.v` lines, for the guest suite whose test binaries run inside
// QEMU and print text, not JSON.
var (
	textRunRE  = regexp.MustCompile(`^=== RUN\s+(\S+)`)
	textDoneRE = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)
	textPkgRE  = regexp.MustCompile(`^(ok|FAIL)\s+(\S+)`)
)

type reporter struct {
	target  string
	verbose bool
	w       io.Writer
	allow   allowlist

	buf     map[string][]string // output per package/test, printed if it fails or skips
	results []result
	// textTest is the test a plain-text line belongs to (guest suite).
	textTest string
}

func key(pkg, test string) string { return pkg + "\x00" + test }

// line takes one line of go test output, JSON or plain text.
func (r *reporter) line(s string) {
	if strings.HasPrefix(s, "{") {
		var e event
		if err := json.Unmarshal([]byte(s), &e); err == nil && e.Action != "" {
			r.event(e)
			return
		}
	}
	r.text(s)
}

func (r *reporter) event(e event) {
	k := key(e.Package, e.Test)
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.w, e.Output) // compiler errors: always shown
	case "build-fail":
		// counted by the package's own "fail" event (FailedBuild set)
	case "output":
		if r.verbose || isFigure(e.Output) || (e.Test == "" && isPackageLine(e.Output)) {
			fmt.Fprint(r.w, e.Output)
		}
		r.buf[k] = append(r.buf[k], e.Output)
	case "pass", "fail", "skip":
		res := result{Target: r.target, Package: e.Package, Test: e.Test, Action: e.Action}
		if e.Action == "skip" {
			res.Reason = skipReason(r.buf[k])
		}
		if e.Action == "fail" && e.Test != "" {
			res.Reason = failReason(r.buf[k])
		}
		if e.Test == "" && e.Action == "skip" {
			break // "no test files": a package, not a test
		}
		if e.Test == "" && e.Action == "fail" {
			switch {
			case e.FailedBuild != "":
				res.Reason = "build failed"
			case r.anyTestFailed(e.Package):
				delete(r.buf, k)
				return // counted through its tests
			default:
				// A package fails without a failing test: a panic in TestMain, a
				// timeout; print what it said.
				res.Reason = "package failed outside a test"
			}
		}
		r.results = append(r.results, res)
		if e.Action == "fail" && e.Test != "" && !r.verbose {
			r.dump(k, "--- FAIL: "+e.Test+" ("+e.Package+")")
		}
		if e.Action == "fail" && e.Test == "" && res.Reason != "" && !r.verbose {
			r.dump(k, "FAIL "+e.Package+" (outside a test)")
		}
		if e.Action == "skip" && !r.verbose {
			fmt.Fprintf(r.w, "--- SKIP: %s (%s): %s\n", e.Test, e.Package, res.Reason)
		}
		delete(r.buf, k)
	}
}

func (r *reporter) anyTestFailed(pkg string) bool {
	for _, res := range r.results {
		if res.Package == pkg && res.Test != "" && res.Action == "fail" {
			return true
		}
	}
	return false
}

func (r *reporter) text(s string) {
	fmt.Fprintln(r.w, s) // the guest suite is small and already verbose
	if m := textRunRE.FindStringSubmatch(s); m != nil {
		r.textTest = m[1]
		return
	}
	if m := textDoneRE.FindStringSubmatch(s); m != nil {
		res := result{Target: r.target, Package: "guest", Test: m[2], Action: strings.ToLower(m[1])}
		if res.Action == "skip" {
			res.Reason = skipReason(r.buf[key("guest", m[2])])
		}
		r.results = append(r.results, res)
		return
	}
	if m := textPkgRE.FindStringSubmatch(s); m != nil {
		if m[1] == "FAIL" && !strings.HasPrefix(s, "FAIL\t") && !strings.Contains(s, "\t") {
			return
		}
		if m[1] == "FAIL" {
			r.results = append(r.results, result{Target: r.target, Package: m[2], Action: "fail", Reason: "package failed"})
		}
		return
	}
	if r.textTest != "" {
		k := key("guest", r.textTest)
		r.buf[k] = append(r.buf[k], s+"\n")
	}
}

func (r *reporter) dump(k, title string) {
	fmt.Fprintf(r.w, "%s\n", title)
	for _, l := range r.buf[k] {
		fmt.Fprint(r.w, "    ", l)
	}
}

// isFigure: lines a test prints for a person to read even when it passes —
// the measured numbers the issues ask for.
func isFigure(s string) bool {
	return strings.Contains(s, "MEASURED") || strings.Contains(s, "BENCH ")
}

func isPackageLine(s string) bool {
	if strings.Contains(s, "[no tests to run]") || strings.Contains(s, "[no test files]") {
		return false // a package with nothing for this target: noise
	}
	return strings.HasPrefix(s, "ok  ") || strings.HasPrefix(s, "FAIL\t") || strings.HasPrefix(s, "FAIL ") ||
		strings.HasPrefix(s, "panic:") || strings.HasPrefix(s, "--- FAIL")
}

// failLineRE is a line a test printed through t.Log/t.Error/t.Fatal: the
// file:line prefix the testing package adds, then the message's first line.
var failLineRE = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: (.*)`)

// Bounds of what a failure's summary repeats: enough to name why, little
// enough to stay in the tail of a CI log that shows only its last lines.
const (
	failMaxLines = 6
	failMaxChars = 300
)

// failReason is what a failed test printed through the testing package,
// figures left out: its t.Fatal/t.Error messages (and t.Log lines, which
// test2json does not tell apart), first line of each, in order.
func failReason(out []string) string {
	var msgs []string
	for _, l := range out {
		m := failLineRE.FindStringSubmatch(strings.TrimRight(l, "\n"))
		if m == nil || isFigure(l) {
			continue
		}
		msg := m[1]
		if len(msg) > failMaxChars {
			msg = msg[:failMaxChars] + "…"
		}
		msgs = append(msgs, msg)
		if len(msgs) == failMaxLines {
			break
		}
	}
	return strings.Join(msgs, "\n")
}

// failMessages repeats, under a failed test in the summary, why it and each
// failed subtest failed, so the reason is in the last lines of a long run
// (where CI excerpts stop) and not only far above, before the cleanup's
// logs.
func (r *reporter) failMessages(top result) string {
	var b strings.Builder
	for _, res := range r.results {
		if res.Package != top.Package || res.Action != "fail" || res.Reason == "" ||
			(res.Test != top.Test && !strings.HasPrefix(res.Test, top.Test+"/")) {
			continue
		}
		for _, m := range strings.Split(res.Reason, "\n") {
			fmt.Fprintf(&b, "\n        %s: %s", res.Test, m)
		}
	}
	return b.String()
}

// skipReason is the message a skipped test printed (the text after the
// file:line of its t.Skip).
func skipReason(out []string) string {
	for i := len(out) - 1; i >= 0; i-- {
		l := strings.TrimSpace(out[i])
		if l == "" || strings.HasPrefix(l, "--- SKIP") || strings.HasPrefix(l, "=== ") {
			continue
		}
		if j := strings.Index(l, ".go:"); j >= 0 {
			if k := strings.Index(l[j:], ": "); k >= 0 {
				return strings.TrimSpace(l[j+k+2:])
			}
		}
		return l
	}
	return "(no message)"
}

// summarize prints the skips and failures, writes the results file, and
// returns an error if anything failed or a skip is not on the allowlist.
func (r *reporter) summarize(saveDir string) error {
	var pass, fail, skip, badSkip int
	var failures, skips []string
	for _, res := range r.results {
		if res.Test == "" {
			if res.Action == "fail" {
				fail++
				failures = append(failures, fmt.Sprintf("%s (%s)", res.Package, res.Reason))
			}
			continue
		}
		if strings.Contains(res.Test, "/") {
			continue // subtests count through their parent
		}
		switch res.Action {
		case "pass":
			pass++
		case "fail":
			fail++
			failures = append(failures, res.Test+" ("+res.Package+")"+r.failMessages(res))
		case "skip":
			skip++
			if why, ok := r.allow.allowed(res.Test); ok {
				skips = append(skips, fmt.Sprintf("allowed skip: %s (%s): %s — allowlisted: %s", res.Test, res.Package, res.Reason, why))
			} else {
				badSkip++
				skips = append(skips, fmt.Sprintf("SKIP NOT ALLOWED: %s (%s): %s — a skip inside make test proves nothing; fix it or list it in lab/testcheck/skips.txt with the reason", res.Test, res.Package, res.Reason))
			}
		}
	}
	if saveDir != "" {
		if err := save(saveDir, r.target, r.results); err != nil {
			return err
		}
	}
	sort.Strings(failures)
	fmt.Fprintf(r.w, "\n== %s: %d passed, %d failed, %d skipped (%d not allowed)\n", r.target, pass, fail, skip, badSkip)
	for _, s := range skips {
		fmt.Fprintln(r.w, "   ", s)
	}
	for _, f := range failures {
		fmt.Fprintln(r.w, "    FAILED:", f)
	}
	if pass+fail == 0 {
		return fmt.Errorf("%s: %w", r.target, errNoTests)
	}
	if fail > 0 {
		return fmt.Errorf("%s: %d failed: %w", r.target, fail, errFailed)
	}
	if badSkip > 0 {
		return fmt.Errorf("%s: %d skipped without an allowlist entry: %w", r.target, badSkip, errFailed)
	}
	return nil
}

func save(dir, target string, rs []result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, target+".json"))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func report(in io.Reader, w io.Writer, target string, verbose bool, allow allowlist, saveDir string) error {
	r := &reporter{target: target, verbose: verbose, w: w, allow: allow, buf: map[string][]string{}}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		r.line(sc.Text())
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return r.summarize(saveDir)
}
