package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sampleMakefile = `GOTEST := go test
test-unit: $(TESTCHECK)
	set -o pipefail; $(GOTEST) -json $(PKGS) 2>&1 | $(REPORT)
test-netns: build
	lab/deps.sh netns
	$(GOTEST) -json -p 1 -tags netns -run '^TestNetns' -timeout 20m $(PKGS) | $(REPORT)
test-ipvs:
	EDGELB_GUEST_TAGS=ipvsguest EDGELB_GUEST_RUN='^TestIPVSGuest' lab/guest/run-suite.sh | $(REPORT)
test-one:
	$(GOTEST) -tags 'bgp' -run '^TestBGP' ./announce/bgp/...
test: lint test-unit test-netns
	$(TESTCHECK) total $(REPORTS)
`

func TestParseTargetsReadsEachRecipe(t *testing.T) {
	ts, err := parseTargets(strings.NewReader(sampleMakefile))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range ts {
		run := "all"
		if x.Run != nil {
			run = x.Run.String()
		}
		got = append(got, x.Name+" "+strings.Join(x.Tags, ",")+" "+run+" "+strings.Join(x.Pkgs, ","))
	}
	want := []string{
		"test-unit  all ./...",
		"test-netns netns ^TestNetns ./...",
		"test-ipvs ipvsguest ^TestIPVSGuest ./...",
		"test-one bgp ^TestBGP ./announce/bgp/...",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("targets:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A tree with one test of each fate: run once, orphaned (tag no target
// builds, or a name its target's -run does not match), run twice (an
// untagged file whose name matches the netns target's pattern).
func TestInventoryFindsOrphansAndDoubles(t *testing.T) {
	root := t.TempDir()
	write := func(path, body string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/x\n")
	write("Makefile", sampleMakefile)
	write("a/a_test.go", "package a\nimport \"testing\"\nfunc TestUnit(t *testing.T) {}\nfunc FuzzParse(f *testing.F) {}\nfunc TestNetnsByMistake(t *testing.T) {}\nfunc helper(t *testing.T) {}\n")
	write("a/k_test.go", "//go:build k8s\n\npackage a\nimport \"testing\"\nfunc TestK8sNobodyRuns(t *testing.T) {}\n")
	write("a/n_test.go", "//go:build netns\n\npackage a\nimport \"testing\"\nfunc TestNetnsOK(t *testing.T) {}\nfunc TestWrongPrefix(t *testing.T) {}\n")
	write("tools/x/go.mod", "module example.com/tools\n")
	write("tools/x/x_test.go", "package x\nimport \"testing\"\nfunc TestOtherModule(t *testing.T) {}\n")
	var out bytes.Buffer
	err := inventory(root, &out, true)
	if !errors.Is(err, errInventory) {
		t.Fatalf("inventory: err %v, want errInventory\n%s", err, out.String())
	}
	for _, want := range []string{
		"ORPHAN  ./a.TestK8sNobodyRuns",
		"ORPHAN  ./a.TestWrongPrefix",
		"TWICE   ./a.TestNetnsByMistake (a_test.go): run by test-unit and test-netns",
		"test-unit        ./a.TestUnit",
		"test-unit        ./a.FuzzParse",
		"test-netns       ./a.TestNetnsOK",
		"2 orphans, 1 run twice",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "helper") || strings.Contains(out.String(), "TestOtherModule") {
		t.Errorf("listed a non-test or another module's test:\n%s", out.String())
	}
}

const sampleJSON = `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: MEASURED thing=1\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:3: needs a unicorn\n"}
{"Action":"output","Package":"p","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestB"}
{"Action":"run","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:7: boom\n"}
{"Action":"fail","Package":"p","Test":"TestC"}
{"Action":"fail","Package":"p"}
{"Action":"skip","Package":"q"}
`

func TestReportFailsOnFailureAndUnlistedSkip(t *testing.T) {
	var out bytes.Buffer
	dir := t.TempDir()
	err := report(strings.NewReader(sampleJSON), &out, "test-x", false, allowlist{}, dir)
	if !errors.Is(err, errFailed) {
		t.Fatalf("err %v, want errFailed", err)
	}
	for _, want := range []string{"MEASURED thing=1", "--- FAIL: TestC (p)", "c_test.go:7: boom", "SKIP NOT ALLOWED: TestB (p): needs a unicorn",
		"== test-x: 1 passed, 1 failed, 1 skipped (1 not allowed)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	var tot bytes.Buffer
	if err := total(&tot, dir); !errors.Is(err, errFailed) || !strings.Contains(tot.String(), "\n1 passed, 1 failed, 1 skipped\n") {
		t.Errorf("total: %v\n%s", err, tot.String())
	}
}

func TestReportAllowsListedSkip(t *testing.T) {
	in := strings.Replace(sampleJSON, `{"Action":"fail","Package":"p","Test":"TestC"}`, `{"Action":"pass","Package":"p","Test":"TestC"}`, 1)
	in = strings.Replace(in, `{"Action":"fail","Package":"p"}`, `{"Action":"pass","Package":"p"}`, 1)
	var out bytes.Buffer
	if err := report(strings.NewReader(in), &out, "test-x", false, allowlist{"TestB": "unicorns are rare"}, ""); err != nil {
		t.Fatalf("err %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "allowed skip: TestB (p): needs a unicorn — allowlisted: unicorns are rare") {
		t.Errorf("report:\n%s", out.String())
	}
}

func TestReportNoTestsIsAnError(t *testing.T) {
	var out bytes.Buffer
	if err := report(strings.NewReader(`{"Action":"skip","Package":"q"}`+"\n"), &out, "test-x", false, allowlist{}, ""); !errors.Is(err, errNoTests) {
		t.Fatalf("err %v, want errNoTests", err)
	}
}

func TestReportBuildFailure(t *testing.T) {
	in := `{"ImportPath":"p [p.test]","Action":"build-output","Output":"x.go:1: syntax error\n"}
{"ImportPath":"p [p.test]","Action":"build-fail"}
{"Action":"start","Package":"p"}
{"Action":"output","Package":"p","Output":"FAIL\tp [build failed]\n"}
{"Action":"fail","Package":"p","FailedBuild":"p [p.test]"}
{"Action":"pass","Package":"r","Test":"TestR"}
`
	var out bytes.Buffer
	if err := report(strings.NewReader(in), &out, "test-x", false, allowlist{}, ""); !errors.Is(err, errFailed) {
		t.Fatalf("err %v, want errFailed\n%s", err, out.String())
	}
}

// The guest suite prints plain -test.v text.
func TestReportReadsPlainText(t *testing.T) {
	in := "=== RUN   TestIPVSGuestA\n--- PASS: TestIPVSGuestA (0.10s)\n=== RUN   TestIPVSGuestB\n    b_test.go:4: no module\n--- SKIP: TestIPVSGuestB (0.00s)\nPASS\n"
	var out bytes.Buffer
	err := report(strings.NewReader(in), &out, "test-ipvs", false, allowlist{}, "")
	if !errors.Is(err, errFailed) || !strings.Contains(out.String(), "SKIP NOT ALLOWED: TestIPVSGuestB (guest): no module") {
		t.Fatalf("err %v\n%s", err, out.String())
	}
}

func TestSoakTable(t *testing.T) {
	root := t.TempDir()
	for i, action := range []string{"pass", "fail", "pass"} {
		dir := filepath.Join(root, "run"+string(rune('1'+i)))
		if err := save(dir, "test-netns", []result{{Target: "test-netns", Package: "p", Test: "TestFlaky", Action: action}, {Target: "test-netns", Package: "p", Test: "TestSolid", Action: "pass"}}); err != nil {
			t.Fatal(err)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "run*"))
	var out bytes.Buffer
	err := soak(&out, dirs)
	if !errors.Is(err, errFailed) {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"2      1      0      test-netns p TestFlaky   <-- failed in run2", "3      0      0      test-netns p TestSolid\n", "soak: 1 tests or packages failed at least once"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("soak lacks %q:\n%s", want, out.String())
		}
	}
}

func TestReadAllowNeedsReason(t *testing.T) {
	if _, err := readAllow(strings.NewReader("TestX\n")); err == nil {
		t.Fatal("an entry without a reason was accepted")
	}
	a, err := readAllow(strings.NewReader("# c\nTestX  the reason\n"))
	if err != nil || a["TestX"] != "the reason" {
		t.Fatalf("%v %v", a, err)
	}
}

// A failed subtest's message comes after the daemon logs its cleanup prints
// and long before the run's end: the summary repeats it, under the failed
// test, as the last lines of the target's output (where a CI excerpt of the
// tail still shows it). Figures are left out.
func TestReportRepeatsFailureReasonInSummary(t *testing.T) {
	in := `{"Action":"run","Package":"p","Test":"TestF"}
{"Action":"run","Package":"p","Test":"TestF/a"}
{"Action":"output","Package":"p","Test":"TestF/a","Output":"    f_test.go:10: MEASURED kept=100/100\n"}
{"Action":"pass","Package":"p","Test":"TestF/a"}
{"Action":"run","Package":"p","Test":"TestF/b"}
{"Action":"output","Package":"p","Test":"TestF/b","Output":"    f_test.go:10: MEASURED kept=3/100\n"}
{"Action":"output","Package":"p","Test":"TestF/b","Output":"    f_test.go:20: not settled in 60 s: last unmet: a stream not flowing\n"}
{"Action":"output","Package":"p","Test":"TestF/b","Output":"    f_test.go:30: gw1 log (tail):\n"}
{"Action":"output","Package":"p","Test":"TestF/b","Output":"        time=... level=INFO msg=\"stopped\"\n"}
{"Action":"fail","Package":"p","Test":"TestF/b"}
{"Action":"fail","Package":"p","Test":"TestF"}
{"Action":"fail","Package":"p"}
`
	var out bytes.Buffer
	if err := report(strings.NewReader(in), &out, "test-x", true, allowlist{}, ""); !errors.Is(err, errFailed) {
		t.Fatalf("err %v, want errFailed", err)
	}
	s := out.String()
	tail := s[strings.Index(s, "== test-x:"):]
	want := "    FAILED: TestF (p)\n" +
		"        TestF/b: not settled in 60 s: last unmet: a stream not flowing\n" +
		"        TestF/b: gw1 log (tail):\n"
	if !strings.Contains(tail, want) {
		t.Errorf("summary lacks\n%s\ngot:\n%s", want, tail)
	}
	if strings.Contains(tail, "kept=") || strings.Contains(tail, "TestF/a") {
		t.Errorf("summary repeats a figure or a passing subtest:\n%s", tail)
	}
}
