package main

import (
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/edgelb/edgelb/lb/migrate/keepalived"
)

// migrateKeepalived writes the edgelb config to stdout and the report to
// stderr (or --report).
func newMigrateKeepalivedCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "keepalived -f keepalived.conf [--report FILE] [--skip-unknown]",
		Short: "keepalived's virtual servers, checkers, groups and VRRP VIPs → edgelb config, with a report",
		Args:  noArgs,
	}
	file := c.Flags().StringP("filename", "f", "", "keepalived.conf (- for stdin)")
	reportPath := c.Flags().String("report", "", "write the report here instead of stderr")
	skip := c.Flags().Bool("skip-unknown", false, "report and skip keywords keepalived itself does not know instead of failing")
	_ = c.MarkFlagFilename("filename", "conf")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if *file == "" {
			return usageError(c, errors.New("-f keepalived.conf is required"))
		}
		return migrateKeepalived(*file, *reportPath, keepalived.Options{SkipUnknown: *skip}, c.InOrStdin(), c.OutOrStdout(), c.ErrOrStderr())
	}
	return c
}

// A file is read with its includes (relative to the file, globs as
// keepalived expands them); stdin has no directory, so its includes are
// reported instead.
func migrateKeepalived(file, reportPath string, opts keepalived.Options, stdin io.Reader, stdout, stderr io.Writer) error {
	var nodes []*keepalived.Node
	var err error
	if file == "-" {
		var src []byte
		if src, err = io.ReadAll(stdin); err != nil {
			return err
		}
		nodes, err = keepalived.ParseText("<stdin>", string(src))
	} else {
		nodes, err = keepalived.ParseFile(file)
	}
	if err != nil {
		return err
	}
	res, err := keepalived.Convert(nodes, opts)
	if err != nil {
		return err
	}
	out, err := res.YAML()
	if err != nil {
		return err
	}
	return writeMigration(stdout, stderr, reportPath, out, res.WriteReport)
}
