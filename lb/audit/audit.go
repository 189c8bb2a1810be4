// Package audit records every accepted change to pools and services: who
// (a token's name, "SIGHUP", "start-up", "kubernetes"), from where, what
// object, which action, and what it was before and after. The writer that
// accepted the change (lb/engine, the Kubernetes controller) records it once,
// after its commit; the Log keeps the newest entries in memory, appends each
// to a JSON-lines file (so they outlive a restart) and writes it to the
// journal as structured slog fields.
package audit

import (
	"context"
	"net/netip"
	"time"
)

// Actor is who asked for a change, carried in the request's context from
// the API boundary (where the token is known) to the writer.
type Actor struct {
	// Identity is the name of the token that authenticated the request, or
	// what made the change without one ("SIGHUP", "start-up", "kubernetes").
	Identity string
	// Source: "rest", "reload", "start-up", "kubernetes".
	Source string
	// Client is the TCP peer's address (REST only).
	Client netip.Addr
}

type actorKey struct{}

// WithActor returns ctx carrying a.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor ctx carries, if any.
func ActorFrom(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// Actions.
const (
	Create = "create"
	Update = "update"
	Delete = "delete"
	// More stands for the objects of one change beyond MaxPerChange.
	More = "more"
)

// Entry is one accepted change of one object (GET /api/v1/audit).
type Entry struct {
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time"`
	Identity string    `json:"identity"`
	Source   string    `json:"source"`
	Client   string    `json:"client,omitempty"`
	// Object is KIND/NAME: pool/web, service/web.
	Object string `json:"object"`
	Action string `json:"action"`
	// Before and After summarise the object (empty for create/delete).
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
}

// Change is what a writer hands to Record: one object's before and after.
type Change struct {
	Object, Action, Before, After string
}

// MaxPerChange bounds the entries one commit writes: a config reload that
// replaces 10,000 services writes this many and one "more" entry counting
// the rest, so one reload cannot push every older entry out.
const MaxPerChange = 50

// Recorder takes the changes of one accepted commit.
type Recorder interface {
	Record(a Actor, changes []Change)
}
