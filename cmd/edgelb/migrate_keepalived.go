package main

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/edgelb/edgelb/lb/migrate/keepalived"
)

// migrateKeepalived writes the edgelb config to stdout and the report to
// stderr (or --report).
func migrateKeepalived(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate keepalived", "-f keepalived.conf [--report FILE]", stdout)
	file := fs.String("f", "", "keepalived.conf (- for stdin)")
	reportPath := fs.String("report", "", "write the report here instead of stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return &exitError{code: 2, err: errors.New("-f keepalived.conf is required")}
	}
	var src []byte
	var err error
	if *file == "-" {
		src, err = io.ReadAll(os.Stdin)
	} else {
		src, err = os.ReadFile(*file)
	}
	if err != nil {
		return err
	}
	nodes, err := keepalived.Parse(string(src))
	if err != nil {
		return err
	}
	res, err := keepalived.Convert(nodes)
	if err != nil {
		return err
	}
	out, err := res.YAML()
	if err != nil {
		return err
	}
	return writeMigration(stdout, stderr, *reportPath, out, res.WriteReport)
}
