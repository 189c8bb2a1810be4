package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/edgelb/edgelb/lab/demo"
)

func newDemoCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "demo [--duration 20s] [--ui 127.0.0.1:8080]",
		Short: "build a namespace lab and show edgelb forwarding real traffic",
		Args:  noArgs,
	}
	var o demo.RunOptions
	c.Flags().DurationVar(&o.Duration, "duration", 0, "stop after this long and exit 0 only if every backend was reached (0: until Ctrl-C)")
	c.Flags().StringVar(&o.UIAddr, "ui", "127.0.0.1:8080", "host loopback address the web UI is forwarded to")
	c.Flags().IntVar(&o.Rate, "rate", 20, "client requests per second to the VIP")
	c.RunE = func(c *cobra.Command, _ []string) error {
		o.Out = c.OutOrStdout()
		return runDemo(c.Context(), o)
	}
	return c
}

func runDemo(ctx context.Context, o demo.RunOptions) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the demo creates network namespaces: run it as root (sudo make demo)")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	o.Exe = exe
	return demo.RunDemo(ctx, o)
}
