package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

var (
	errInventory = errors.New("test inventory: every test must run in exactly one make target")
	errFailed    = errors.New("tests failed")
	errNoTests   = errors.New("no test ran")
)

// allowlist maps a test name to the reason its skip inside make test is fine.
type allowlist map[string]string

func (a allowlist) allowed(test string) (string, bool) {
	why, ok := a[test]
	return why, ok
}

// readAllow reads lines "TestName  reason" ('#' starts a comment). An entry
// without a reason is an error: the reason is the point of the list.
func readAllow(r io.Reader) (allowlist, error) {
	a := allowlist{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, why, _ := strings.Cut(l, " ")
		why = strings.TrimSpace(why)
		if !testRE.MatchString(name) || why == "" {
			return nil, fmt.Errorf("skips.txt:%d: want \"TestName reason\", got %q", n, l)
		}
		a[name] = why
	}
	return a, sc.Err()
}

func loadAllow(path string) (allowlist, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAllow(f)
}
