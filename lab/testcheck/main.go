// Command testcheck keeps `make test` honest (see README.md):
//
//	testcheck inventory [-v]                 every test runs in exactly one make target
//	go test -json ... | testcheck report -target NAME [-v] [-save DIR]
//	                                         concise output; fails on a failure or a skip not on skips.txt
//	testcheck total DIR                      the closing line of make test
//	testcheck soak RUNDIR...                 pass/fail table per test over several runs
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	root, err := findRoot()
	if err != nil {
		fail(err)
	}
	cmd, args := os.Args[1], os.Args[2:]
	switch cmd {
	case "inventory":
		fs := flag.NewFlagSet(cmd, flag.ExitOnError)
		v := fs.Bool("v", false, "print every test with its target")
		fs.Parse(args)
		err = inventory(root, os.Stdout, *v)
	case "report":
		fs := flag.NewFlagSet(cmd, flag.ExitOnError)
		target := fs.String("target", "", "the make target whose output this is")
		v := fs.Bool("v", false, "print every output line (otherwise: failures, skips, MEASURED lines, package results)")
		saveDir := fs.String("save", "", "write this target's results to DIR/TARGET.json")
		fs.Parse(args)
		if *target == "" {
			usage()
		}
		var allow allowlist
		if allow, err = loadAllow(filepath.Join(root, "lab/testcheck/skips.txt")); err == nil {
			err = report(os.Stdin, os.Stdout, *target, *v, allow, *saveDir)
		}
	case "total":
		if len(args) != 1 {
			usage()
		}
		err = total(os.Stdout, args[0])
	case "soak":
		if len(args) == 0 {
			usage()
		}
		err = soak(os.Stdout, args)
	default:
		usage()
	}
	if err != nil {
		fail(err)
	}
}

// findRoot is the module root (the directory holding go.mod) at or above the
// working directory.
func findRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		p := filepath.Dir(d)
		if p == d {
			return "", fmt.Errorf("testcheck: no go.mod at or above the working directory")
		}
		d = p
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testcheck inventory [-v] | report -target NAME [-v] [-save DIR] | total DIR | soak RUNDIR...")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "testcheck:", err)
	os.Exit(1)
}
