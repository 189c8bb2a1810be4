package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/edgelb/edgelb/cmd/edgelb/internal/daemon"
	"github.com/edgelb/edgelb/cmd/edgelb/internal/version"
)

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "--config FILE [--log-format text|json] [--log-level info]", stdout)
	path := fs.String("config", "/etc/edgelb/config.yaml", "config file")
	format := fs.String("log-format", "", "log format: text or json (default: the config's log.format, else text)")
	level := fs.String("log-level", "", "log level: debug, info, warn, error (default: the config's log.level, else info)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var lvl slog.Level
	if *level != "" {
		if err := lvl.UnmarshalText([]byte(*level)); err != nil {
			return &exitError{2, err}
		}
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler = slog.NewTextHandler(stderr, opts)
	if *format == "json" {
		h = slog.NewJSONHandler(stderr, opts)
	}
	log := slog.New(h)
	log.Info("starting", "version", version.String(), "config", *path, "pid", os.Getpid())
	return daemon.Run(ctx, daemon.Options{ConfigPath: *path, Logger: log})
}
