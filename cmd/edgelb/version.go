package main

import (
	"context"
	"fmt"
	"io"

	"github.com/edgelb/edgelb/cmd/edgelb/internal/version"
)

func cmdVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "", stdout)
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, version.String())
	return nil
}
