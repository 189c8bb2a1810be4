package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/edgelb/edgelb/cmd/edgelb/internal/version"
)

// newRoot builds the whole command line: spf13/cobra over spf13/pflag, the
// convention of kubectl, etcdctl and gobgp — flags before or after
// arguments, `--` ends the flags, an unknown flag is an error, and
// `edgelb completion bash|zsh|fish|powershell` (cobra's own command).
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "edgelb",
		Short: "a front door for LoadBalancer and NodePort services on bare-metal gateways",
		Long:  "edgelb: a front door for LoadBalancer and NodePort services on bare-metal gateways",
		// The version also answers `edgelb --version`.
		Version: version.String(),
		// realMain prints the error once, prefixed with the command.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	// A group is runnable only to refuse a missing or unknown command
	// (group), so its usage shows "edgelb pools [command]" alone, not
	// "edgelb pools [flags]" as well.
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(), "{{if .Runnable}}", "{{if and .Runnable (not .HasAvailableSubCommands)}}", 1))
	root.SetFlagErrorFunc(flagError)
	group(root)
	root.AddCommand(
		newRunCmd(),
		newCheckCmd(),
		newCleanupCmd(),
		newBackendSetupCmd(),
		newStatusCmd(),
		newObjectCmd(poolsKind),
		newObjectCmd(servicesKind),
		newStoreCmd(),
		newMigrateCmd(),
		newVersionCmd(),
	)
	return root
}

// group makes c a command that only holds subcommands: run without one,
// or with a word that names none, it is a usage error (exit 2) — cobra
// would print the help and exit 0, and a script would not notice.
func group(c *cobra.Command) {
	c.Args = cobra.ArbitraryArgs
	// `edgelb pools remove x --server U`: the verb is what is wrong, not
	// --server (a verb's flag, which the group does not know).
	c.FParseErrWhitelist.UnknownFlags = true
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			c.SetOut(c.ErrOrStderr())
			_ = c.Help()
			return &exitError{exitUsage, fmt.Errorf("want a command: %s", strings.Join(subcommandNames(c), ", "))}
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
		}
		return usageError(c, errors.New(msg))
	}
}

func subcommandNames(c *cobra.Command) []string {
	var out []string
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			out = append(out, s.Name())
		}
	}
	return out
}

// usageError is exit code 2 with a pointer to the command's help.
func usageError(c *cobra.Command, err error) error {
	return &exitError{exitUsage, fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
}

// flagError is every command's answer to a flag pflag refused (unknown,
// missing or bad value). Go's flag package, which edgelb used before,
// took -config for --config; pflag reads it as the shorthands -c -o -n…,
// so the message says what to write instead.
func flagError(c *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if errors.As(err, &ne) {
		long, _, _ := strings.Cut(ne.GetSpecifiedShortnames(), "=")
		if len(long) > 1 && c.Flags().Lookup(long) != nil {
			err = fmt.Errorf("%w: long flags take two dashes: --%s", err, long)
		}
	}
	return usageError(c, err)
}

// noArgs refuses positional arguments: before cobra they were silently
// ignored (`edgelb run extra` ran).
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError(c, fmt.Errorf("takes no arguments; got %q", args))
	}
	return nil
}

// minArgs wants at least n positional arguments, named what.
func minArgs(n int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) < n {
			return usageError(c, fmt.Errorf("needs at least %d %s", n, what))
		}
		return nil
	}
}
