package main

import (
	"errors"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/edgelb/edgelb/lb/migrate/keepalived"
)

// migrateKeepalived writes the edgelb config to stdout and the report to
// stderr (or --report).
func newMigrateKeepalivedCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "keepalived -f keepalived.conf [--report FILE]",
		Short: "keepalived's virtual servers, checkers, groups and VRRP VIPs → edgelb config, with a report",
		Args:  noArgs,
	}
	file := c.Flags().StringP("filename", "f", "", "keepalived.conf (- for stdin)")
	reportPath := c.Flags().String("report", "", "write the report here instead of stderr")
	_ = c.MarkFlagFilename("filename", "conf")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if *file == "" {
			return usageError(c, errors.New("-f keepalived.conf is required"))
		}
		return migrateKeepalived(*file, *reportPath, c.InOrStdin(), c.OutOrStdout(), c.ErrOrStderr())
	}
	return c
}

func migrateKeepalived(file, reportPath string, stdin io.Reader, stdout, stderr io.Writer) error {
	var src []byte
	var err error
	if file == "-" {
		src, err = io.ReadAll(stdin)
	} else {
		src, err = os.ReadFile(file)
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
	return writeMigration(stdout, stderr, reportPath, out, res.WriteReport)
}
