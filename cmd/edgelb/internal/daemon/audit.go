package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelb/edgelb/lb/audit"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/webui"
)

// AuditFile is the audit trail's file in the state directory: JSON lines,
// the newest audit.DefaultKeep entries (a fleet's gateways each keep the
// changes they accepted).
const AuditFile = "audit.jsonl"

// openAudit opens the audit trail in the state directory; its file writes
// that fail (a full disk) count in edgelb_audit_write_failures_total.
func openAudit(cfg *config.Config, reg prometheus.Registerer, log *slog.Logger) (*audit.Log, error) {
	if err := os.MkdirAll(cfg.State.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	l, err := audit.Open(filepath.Join(cfg.State.Dir, AuditFile), audit.DefaultKeep, log.With("component", "audit"))
	if err != nil {
		return nil, err
	}
	failures := prometheus.NewCounter(prometheus.CounterOpts{Name: "edgelb_audit_write_failures_total",
		Help: "Audit entries that could not be written to the audit file (kept in memory; the change itself was committed)."})
	if err := reg.Register(failures); err != nil {
		return nil, err
	}
	l.OnWriteError = func(error) { failures.Inc() }
	return l, nil
}

// Actors of changes that come from the config file.
var (
	actorStartup = audit.Actor{Identity: "start-up", Source: "start-up"}
	actorReload  = audit.Actor{Identity: "SIGHUP", Source: "reload"}
)

func withActor(ctx context.Context, a audit.Actor) context.Context { return audit.WithActor(ctx, a) }

// apiTokens are the config's named tokens as the API takes them.
func apiTokens(a config.API) []webui.Token {
	out := make([]webui.Token, 0, len(a.Tokens))
	for _, t := range a.Tokens {
		out = append(out, webui.Token{Name: t.Name, Secret: string(t.Secret), Role: webui.Role(t.Role)})
	}
	return out
}
