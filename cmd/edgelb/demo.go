package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/edgelb/edgelb/lab/demo"
)

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", "[--duration 20s] [--ui 127.0.0.1:8080]", stdout)
	dur := fs.Duration("duration", 0, "stop after this long and exit 0 only if every backend was reached (0: until Ctrl-C)")
	ui := fs.String("ui", "127.0.0.1:8080", "host loopback address the web UI is forwarded to")
	rate := fs.Int("rate", 20, "client requests per second to the VIP")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("the demo creates network namespaces: run it as root (sudo make demo)")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return demo.RunDemo(ctx, demo.RunOptions{Exe: exe, Duration: *dur, UIAddr: *ui, Out: stdout, Rate: *rate})
}
