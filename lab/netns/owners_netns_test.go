//go:build netns

package netns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// childEnv makes the test binary a creator that never cleans up (TestMain).
const childEnv = "EDGELB_NETNS_TEST_CREATOR"

// TestMain: with childEnv set, the binary creates the namespace named in
// it, starts a process inside it that outlives the creator, prints that
// process's pid and waits to be killed.
func TestMain(m *testing.M) {
	name := os.Getenv(childEnv)
	if name == "" {
		os.Exit(m.Run())
	}
	n, err := New(name)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	cmd := n.Command(context.Background(), "sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // not killed with its creator
	if err := cmd.Start(); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("pid", cmd.Process.Pid)
	select {}
}

// killedCreator runs a creator of name in a child process, kills it with
// SIGKILL (no cleanup runs) and returns the pid of the process it left in
// the namespace.
func killedCreator(t *testing.T, name string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+name)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "pid ") {
		_ = cmd.Process.Kill()
		t.Fatalf("creator said %q (%v)", line, err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL); _, _ = Sweep() })
	return pid
}

func exists(name string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", name))
	return err == nil
}

// running: the process exists and is not a zombie (its parent, the killed
// creator, is gone; init reaps it).
func running(pid int) bool {
	f, err := statFields(pid)
	return err == nil && f[0] != "Z"
}

// TestNetnsSweepsDeadCreators: a creator killed before its cleanup leaves
// its namespace and a process in it; the next sweep kills the process and
// deletes the namespace, a fixed name is reclaimed by the next New, and a
// namespace this package did not create is never touched.
func TestNetnsSweepsDeadCreators(t *testing.T) {
	RequireRoot(t)
	left := Unique("elb-sw")
	pid := killedCreator(t, left)
	if !exists(left) || !running(pid) {
		t.Fatalf("the killed creator left no namespace %s (%v) or no process %d in it (%v)", left, exists(left), pid, running(pid))
	}
	if _, err := Sweep(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for running(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if exists(left) || running(pid) {
		t.Fatalf("after the sweep: namespace %s exists %v, process %d runs %v", left, exists(left), pid, running(pid))
	}
	if _, err := os.Stat(filepath.Join(OwnerDir, left)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("record of %s after the sweep: %v", left, err)
	}

	// A fixed name, as the demo's: the next New takes it over.
	fixed := Unique("elb-fx")
	killedCreator(t, fixed)
	n, err := New(fixed)
	if err != nil {
		t.Fatalf("New(%s) after its creator was killed: %v", fixed, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	// Not ours: made with ip netns add, no record. Neither a sweep nor New
	// deletes it.
	other := Unique("elb-ot")
	if out, err := exec.Command("ip", "netns", "add", other).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", other).Run() })
	if _, err := Sweep(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(other); !errors.Is(err, unix.EEXIST) {
		t.Fatalf("New over a namespace of someone else: %v, want EEXIST", err)
	}
	if !exists(other) {
		t.Fatalf("namespace %s, not created here, was deleted", other)
	}

	// A live creator's namespace stays: this process's own.
	mine := NewT(t, "elb-mi")
	if _, err := Sweep(); err != nil {
		t.Fatal(err)
	}
	if !exists(mine.Name) {
		t.Fatalf("a sweep deleted %s, whose creator runs", mine.Name)
	}
}
