// Command edgelb-demo builds the demo lab (lab/demo: a client, a gateway
// and three HTTP backends in network namespaces), runs the real edgelb
// daemon in the gateway and drives traffic through it. It is a lab tool,
// not part of the product: `make demo` builds and runs it with the edgelb
// binary `make build` made.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/edgelb/edgelb/lab/demo"
)

func main() {
	fs := flag.NewFlagSet("edgelb-demo", flag.ContinueOnError)
	exe := fs.String("edgelb", "", "the edgelb binary to run in the gateway (default: edgelb beside this program)")
	dur := fs.Duration("duration", 0, "stop after this long and exit 0 only if every backend was reached (0: until Ctrl-C)")
	ui := fs.String("ui", "127.0.0.1:8080", "host loopback address the web UI is forwarded to")
	rate := fs.Int("rate", 20, "client requests per second to the VIP")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if err := run(*exe, *dur, *ui, *rate); err != nil {
		fmt.Fprintf(os.Stderr, "edgelb-demo: %v\n", err)
		os.Exit(1)
	}
}

func run(exe string, dur time.Duration, ui string, rate int) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the demo creates network namespaces: run it as root (sudo make demo)")
	}
	if exe == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		exe = filepath.Join(filepath.Dir(self), "edgelb")
	}
	exe, err := filepath.Abs(exe)
	if err != nil {
		return err
	}
	if _, err := os.Stat(exe); err != nil {
		return fmt.Errorf("--edgelb: %w (build it with make build)", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return demo.RunDemo(ctx, demo.RunOptions{Exe: exe, Duration: dur, UIAddr: ui, Out: os.Stdout, Rate: rate})
}
