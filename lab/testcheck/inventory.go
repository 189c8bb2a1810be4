package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// A target is one `test-*` rule of the Makefile as far as test selection goes:
// the build tags its `go test` (or the guest suite) compiles with, the -run
// pattern, and the packages. The Makefile is the one source: the checker reads
// the recipes instead of keeping a second list that could drift from them.
type target struct {
	Name string
	Tags []string
	Run  *regexp.Regexp // nil: every test
	Pkgs []string       // "./..." or "./dir" or "./dir/..."
}

// A testFunc is one Test or Fuzz function (a fuzz target's seed corpus runs as
// a test under `go test`).
type testFunc struct {
	Dir  string // relative, "./lb/engine"
	File string
	Name string
}

var (
	ruleRE = regexp.MustCompile(`^(test-[A-Za-z0-9_-]+):`)
	tagsRE = regexp.MustCompile(`(?:-tags[ =]|EDGELB_GUEST_TAGS=)'?([A-Za-z0-9_, ]+?)'?(?:\s|$)`)
	runRE  = regexp.MustCompile(`(?:-run[ =]|EDGELB_GUEST_RUN=)'([^']*)'`)
	pkgRE  = regexp.MustCompile(`(?:^|\s)(\./[^\s']*)`)
	testRE = regexp.MustCompile(`^(Test|Fuzz)([A-Z0-9_].*)?$`)
)

// parseTargets reads the Makefile's test-* rules whose recipe runs tests: a
// line with `$(GOTEST)`/`go test`, or the guest suite (lab/guest/run-suite.sh,
// whose tags and pattern the Makefile passes as EDGELB_GUEST_TAGS/_RUN).
// Rules that only call other rules (test:) or run no go test are not targets.
func parseTargets(r io.Reader) ([]target, error) {
	var out []target
	var cur *target
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if m := ruleRE.FindStringSubmatch(line); m != nil {
			cur = &target{Name: m[1]}
			continue
		}
		if cur == nil || !strings.HasPrefix(line, "\t") {
			if !strings.HasPrefix(line, "\t") && strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") {
				cur = nil
			}
			continue
		}
		isGo := strings.Contains(line, "$(GOTEST)") || strings.Contains(line, "go test")
		isGuest := strings.Contains(line, "run-suite.sh")
		if !isGo && !isGuest {
			continue
		}
		t := target{Name: cur.Name}
		if m := tagsRE.FindStringSubmatch(line); m != nil {
			for _, tag := range strings.FieldsFunc(m[1], func(r rune) bool { return r == ',' || r == ' ' }) {
				t.Tags = append(t.Tags, tag)
			}
		}
		if m := runRE.FindStringSubmatch(line); m != nil {
			re, err := regexp.Compile(m[1])
			if err != nil {
				return nil, fmt.Errorf("Makefile %s: -run %q: %w", cur.Name, m[1], err)
			}
			t.Run = re
		}
		if strings.Contains(line, "$(PKGS)") {
			t.Pkgs = []string{"./..."}
		}
		for _, m := range pkgRE.FindAllStringSubmatch(line, -1) {
			t.Pkgs = append(t.Pkgs, m[1])
		}
		if isGuest && len(t.Pkgs) == 0 {
			t.Pkgs = []string{"./..."} // run-suite.sh's default (EDGELB_GUEST_PKGS)
		}
		if isGuest && len(t.Tags) == 0 {
			return nil, fmt.Errorf("Makefile %s: the guest suite needs EDGELB_GUEST_TAGS=... on its line", cur.Name)
		}
		if len(t.Pkgs) == 0 {
			return nil, fmt.Errorf("Makefile %s: cannot tell which packages %q tests", cur.Name, strings.TrimSpace(line))
		}
		out = append(out, t)
	}
	return out, sc.Err()
}

// covers reports whether the target's package list includes dir.
func (t target) covers(dir string) bool {
	for _, p := range t.Pkgs {
		switch {
		case p == "./...":
			return true
		case strings.HasSuffix(p, "/..."):
			base := strings.TrimSuffix(p, "/...")
			if dir == base || strings.HasPrefix(dir, base+"/") {
				return true
			}
		case p == dir:
			return true
		}
	}
	return false
}

// builds reports whether file (in dir, relative to root) is compiled when the
// target's tags are set, by the go tool's own rules (//go:build lines and
// _GOOS/_GOARCH file name suffixes).
func (t target) builds(root, dir, file string) (bool, error) {
	ctx := build.Default
	ctx.BuildTags = t.Tags
	ctx.CgoEnabled = false
	return ctx.MatchFile(filepath.Join(root, dir), file)
}

// findTests lists every Test and Fuzz function in the module at root,
// skipping nested modules (lab/tools/*: their own go.mod, not ./...),
// testdata and hidden directories.
func findTests(root string) ([]testFunc, error) {
	var out []testFunc
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		dir := "./" + filepath.ToSlash(rel)
		if rel == "." {
			dir = "."
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !testRE.MatchString(fn.Name.Name) || !isTestSignature(fn) {
				continue
			}
			out = append(out, testFunc{Dir: dir, File: filepath.Base(path), Name: fn.Name.Name})
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Dir != out[j].Dir {
			return out[i].Dir < out[j].Dir
		}
		return out[i].Name < out[j].Name
	})
	return out, err
}

// isTestSignature: func TestX(t *testing.T) or func FuzzX(f *testing.F).
func isTestSignature(fn *ast.FuncDecl) bool {
	p := fn.Type.Params.List
	if len(p) != 1 || len(p[0].Names) > 1 || fn.Type.Results != nil {
		return false
	}
	star, ok := p[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	want := "T"
	if strings.HasPrefix(fn.Name.Name, "Fuzz") {
		want = "F"
	}
	return sel.Sel.Name == want
}

// An assignment says which targets run one test.
type assignment struct {
	Test    testFunc
	Targets []string
}

func assign(root string, targets []target, tests []testFunc) ([]assignment, error) {
	out := make([]assignment, 0, len(tests))
	for _, tf := range tests {
		a := assignment{Test: tf}
		for _, t := range targets {
			if !t.covers(tf.Dir) {
				continue
			}
			if t.Run != nil && !t.Run.MatchString(tf.Name) {
				continue
			}
			ok, err := t.builds(root, tf.Dir, tf.File)
			if err != nil {
				return nil, err
			}
			if ok {
				a.Targets = append(a.Targets, t.Name)
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// inventory prints every test's target and fails on a test that no target
// runs (it proves nothing) or that two targets run (a second run of the same
// proof, usually a name that does not follow its file's tag).
func inventory(root string, w io.Writer, verbose bool) error {
	mf, err := os.Open(filepath.Join(root, "Makefile"))
	if err != nil {
		return err
	}
	defer mf.Close()
	targets, err := parseTargets(mf)
	if err != nil {
		return err
	}
	tests, err := findTests(root)
	if err != nil {
		return err
	}
	as, err := assign(root, targets, tests)
	if err != nil {
		return err
	}
	counts := map[string]int{}
	var orphans, doubles []assignment
	for _, a := range as {
		switch len(a.Targets) {
		case 0:
			orphans = append(orphans, a)
		case 1:
			counts[a.Targets[0]]++
		default:
			doubles = append(doubles, a)
		}
		if verbose {
			fmt.Fprintf(w, "%-16s %s.%s (%s)\n", strings.Join(a.Targets, ","), a.Test.Dir, a.Test.Name, a.Test.File)
		}
	}
	fmt.Fprintf(w, "test inventory: %d test functions, %d targets\n", len(as), len(targets))
	for _, t := range targets {
		run := "all"
		if t.Run != nil {
			run = t.Run.String()
		}
		fmt.Fprintf(w, "  %-14s %4d tests  (tags %q, run %s, packages %s)\n", t.Name, counts[t.Name], strings.Join(t.Tags, ","), run, strings.Join(t.Pkgs, " "))
	}
	for _, a := range orphans {
		fmt.Fprintf(w, "ORPHAN  %s.%s (%s): no make target runs it — give it a target's build tag and name prefix\n", a.Test.Dir, a.Test.Name, a.Test.File)
	}
	for _, a := range doubles {
		fmt.Fprintf(w, "TWICE   %s.%s (%s): run by %s\n", a.Test.Dir, a.Test.Name, a.Test.File, strings.Join(a.Targets, " and "))
	}
	fmt.Fprintf(w, "%d orphans, %d run twice\n", len(orphans), len(doubles))
	if len(orphans)+len(doubles) > 0 {
		return errInventory
	}
	return nil
}
