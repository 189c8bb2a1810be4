package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// soak reads the results of N runs (one directory per run, each holding one
// results file per target, as `report -save` writes them) and prints one row
// per test: how often it passed, failed and skipped, and in which runs it
// failed. A test that failed in any run is a flake to hunt (or a real bug).
func soak(w io.Writer, runDirs []string) error {
	type tally struct {
		pass, fail, skip int
		failedIn         []string
	}
	rows := map[string]*tally{}
	for _, d := range runDirs {
		files, err := filepath.Glob(filepath.Join(d, "*.json"))
		if err != nil {
			return err
		}
		for _, f := range files {
			rs, err := readResults(f)
			if err != nil {
				return err
			}
			for _, r := range rs {
				if strings.Contains(r.Test, "/") {
					continue
				}
				name := r.Target + " " + r.Package + " " + r.Test
				if r.Test == "" {
					name = r.Target + " " + r.Package + " (package)"
				}
				t := rows[name]
				if t == nil {
					t = &tally{}
					rows[name] = t
				}
				switch r.Action {
				case "pass":
					t.pass++
				case "fail":
					t.fail++
					t.failedIn = append(t.failedIn, filepath.Base(d))
				case "skip":
					t.skip++
				}
			}
		}
	}
	names := make([]string, 0, len(rows))
	for n := range rows {
		names = append(names, n)
	}
	sort.Strings(names)
	flaky := 0
	fmt.Fprintf(w, "soak: %d runs\n%-6s %-6s %-6s %s\n", len(runDirs), "pass", "fail", "skip", "target package test")
	for _, n := range names {
		t := rows[n]
		if t.pass == 0 && t.fail == 0 && t.skip == 0 {
			continue
		}
		mark := ""
		if t.fail > 0 {
			flaky++
			mark = "   <-- failed in " + strings.Join(t.failedIn, ",")
		}
		fmt.Fprintf(w, "%-6d %-6d %-6d %s%s\n", t.pass, t.fail, t.skip, n, mark)
	}
	fmt.Fprintf(w, "soak: %d tests or packages failed at least once\n", flaky)
	if flaky > 0 {
		return errFailed
	}
	return nil
}

func readResults(path string) ([]result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []result
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// total sums the results files of one run (make test's closing line).
func total(w io.Writer, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	var pass, fail, skip int
	for _, f := range files {
		rs, err := readResults(f)
		if err != nil {
			return err
		}
		var p, fl, s int
		for _, r := range rs {
			if strings.Contains(r.Test, "/") || (r.Test == "" && r.Action != "fail") {
				continue
			}
			switch r.Action {
			case "pass":
				p++
			case "fail":
				fl++
			case "skip":
				s++
			}
		}
		fmt.Fprintf(w, "  %-16s %5d passed, %d failed, %d skipped\n", strings.TrimSuffix(filepath.Base(f), ".json"), p, fl, s)
		pass, fail, skip = pass+p, fail+fl, skip+s
	}
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", pass, fail, skip)
	if fail > 0 {
		return errFailed
	}
	return nil
}
