package daemon

import (
	"crypto/tls"
	"reflect"
	"time"

	"github.com/edgelb/edgelb/lb/config"
)

func tlsConfig(t *config.TLS) *tls.Config {
	if t == nil {
		return nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{t.Certificate}}
	if t.ClientCAs != nil {
		c.ClientCAs = t.ClientCAs
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c
}

// restartNeeded names the sections a reload cannot apply: SIGHUP changes
// pools and services (what the one writer owns); the rest is wiring.
func restartNeeded(old, cur *config.Config) []string {
	var out []string
	for name, pair := range map[string][2]any{
		"announce":   {old.Announce, cur.Announce},
		"dataplane":  {old.Dataplane, cur.Dataplane},
		"api":        {old.API, cur.API},
		"kubernetes": {old.Kubernetes, cur.Kubernetes},
		"state":      {old.State, cur.State},
		"stateSync":  {old.StateSync, cur.StateSync},
		"allocation": {old.AllocationOrder, cur.AllocationOrder},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			out = append(out, name)
		}
	}
	return out
}

// flowWatchIdle maps api.liveFlows to webui.Options.FlowWatchIdle.
func flowWatchIdle(lf config.LiveFlows) time.Duration {
	if lf == config.LiveFlowsAlways {
		return -1
	}
	return 0 // the web UI's default: while viewed, and 30 s after
}
