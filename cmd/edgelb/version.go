package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgelb/edgelb/cmd/edgelb/internal/version"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintln(c.OutOrStdout(), version.String())
			return nil
		},
	}
}
