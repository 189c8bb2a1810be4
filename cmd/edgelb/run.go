package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/edgelb/edgelb/cmd/edgelb/internal/daemon"
	"github.com/edgelb/edgelb/cmd/edgelb/internal/version"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/store"
)

func newRunCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "run [--config FILE]",
		Short: "run the gateway daemon",
		Args:  noArgs,
	}
	path := c.Flags().String("config", "/etc/edgelb/config.yaml", "config file")
	format := c.Flags().String("log-format", "", "log format: text or json (default: the config's log.format, else text)")
	level := c.Flags().String("log-level", "", "log level: debug, info, warn, error (default: the config's log.level, else info)")
	_ = c.MarkFlagFilename("config", "yaml", "yml")
	c.RunE = func(c *cobra.Command, _ []string) error {
		return runDaemon(c.Context(), *path, *format, *level, c.ErrOrStderr())
	}
	return c
}

func runDaemon(ctx context.Context, path, format, level string, stderr io.Writer) error {
	var lvl slog.Level
	if level != "" {
		if err := lvl.UnmarshalText([]byte(level)); err != nil {
			return &exitError{exitUsage, fmt.Errorf("--log-level %q: %w", level, err)}
		}
	}
	var lvlFlag *slog.Level
	if level != "" {
		lvlFlag = &lvl
	}
	newLog := daemonLogger(stderr, format, lvlFlag)
	log := newLog(config.Log{Format: "text"})
	log.Info("starting", "version", version.String(), "config", path, "pid", os.Getpid())
	return runExit(daemon.Run(ctx, daemon.Options{ConfigPath: path, Logger: log, NewLogger: newLog}))
}

// daemonLogger makes the daemon's logger from the config's log section
// once it is read; the flags (format "" and level nil: not given) win. The
// unit passes no flags, so under systemd the config is the only way to set
// them (issue 38: log.format json was parsed and then ignored).
func daemonLogger(w io.Writer, format string, level *slog.Level) func(config.Log) *slog.Logger {
	return func(l config.Log) *slog.Logger {
		if format != "" {
			l.Format = format
		}
		if level != nil {
			l.Level = *level
		}
		opts := &slog.HandlerOptions{Level: l.Level}
		mk := func(w io.Writer) slog.Handler {
			if l.Format == "json" {
				return slog.NewJSONHandler(w, opts)
			}
			return slog.NewTextHandler(w, opts)
		}
		if toJournal(w) {
			return slog.New(withPriority(w, mk))
		}
		return slog.New(mk(w))
	}
}

// Exit codes of `edgelb run` beyond 0, 1 (any other failure) and 2 (usage):
// a state that cannot be trusted is not something a restart fixes, so the
// systemd unit lists them in RestartPreventExitStatus instead of looping.
const (
	exitStoreUntrusted = 3 // the state file is damaged, from a newer edgelb, or holds conflicting assignments
	exitStateGone      = 4 // the state file is missing or empty while edgelb's tables are in the kernel
)

func runExit(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrDamaged), errors.Is(err, store.ErrVersion), errors.Is(err, store.ErrConflict):
		return &exitError{exitStoreUntrusted, err}
	case errors.Is(err, daemon.ErrStateGone):
		return &exitError{exitStateGone, err}
	}
	return err
}
