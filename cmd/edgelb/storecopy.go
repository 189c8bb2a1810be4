package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/store"
)

// storeSpec is where `edgelb store copy` reads or writes: a bbolt file or
// an etcd cluster.
type storeSpec struct {
	kind      string   // "bbolt" or "etcd"
	path      string   // bbolt
	endpoints []string // etcd
}

var errStoreSpec = errors.New(`want bbolt:PATH or etcd:URL[,URL...] (like etcd:https://10.0.0.1:2379)`)

// parseStoreSpec parses --from/--to once into a typed value; errors quote
// the value and name the flag.
func parseStoreSpec(flag, s string) (storeSpec, error) {
	kind, rest, ok := strings.Cut(s, ":")
	switch {
	case !ok || rest == "":
		return storeSpec{}, fmt.Errorf("--%s %q: %w", flag, s, errStoreSpec)
	case kind == "bbolt":
		return storeSpec{kind: kind, path: rest}, nil
	case kind == "etcd":
		eps := strings.Split(rest, ",")
		// The config's own rule for endpoints: a fleet's gateways and this
		// tool accept the same URLs.
		c := &config.Config{State: config.State{Dir: "/", Type: config.StateEtcd,
			Etcd: &config.Etcd{Endpoints: eps, Prefix: config.DefaultEtcdPrefix}}}
		if err := c.ValidateState(); err != nil {
			return storeSpec{}, fmt.Errorf("--%s %q: %w", flag, s, err)
		}
		return storeSpec{kind: kind, endpoints: eps}, nil
	}
	return storeSpec{}, fmt.Errorf("--%s %q: %w", flag, s, errStoreSpec)
}

func cmdStore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const use = "Usage: edgelb store copy --from bbolt:PATH --to etcd:URL[,URL...] [flags] (edgelb store copy --help)\n"
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, use)
		if len(args) == 0 {
			return &exitError{code: 2, err: errors.New("")}
		}
		return nil
	}
	if args[0] != "copy" {
		fmt.Fprint(stderr, use)
		return &exitError{code: 2, err: fmt.Errorf("unknown store command %q", args[0])}
	}
	fs := newFlags("store copy", "--from bbolt:PATH --to etcd:URL[,URL...]", stdout)
	from := fs.String("from", "", "source: bbolt:PATH (a stopped gateway's edgelb.db)")
	to := fs.String("to", "", "destination: etcd:URL[,URL...] (the fleet's members)")
	prefix := fs.String("prefix", config.DefaultEtcdPrefix, "key prefix of the fleet's state in etcd")
	ca := fs.String("ca", "", "etcd: CA certificate file")
	cert := fs.String("cert", "", "etcd: client certificate file")
	key := fs.String("key", "", "etcd: client key file")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	src, err := parseStoreSpec("from", *from)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	dst, err := parseStoreSpec("to", *to)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if src.kind != "bbolt" || dst.kind != "etcd" {
		return &exitError{code: 2, err: fmt.Errorf("copy goes from bbolt: to etcd: (moving a gateway into a fleet); got %s: to %s:", src.kind, dst.kind)}
	}
	c := &config.Config{State: config.State{Dir: "/", Type: config.StateEtcd, Etcd: &config.Etcd{Endpoints: dst.endpoints, Prefix: *prefix, CA: *ca, Cert: *cert, Key: *key}}}
	if err := c.ValidateState(); err != nil {
		return &exitError{code: 2, err: err}
	}
	tc, err := store.EtcdTLS("--", *ca, *cert, *key)
	if err != nil {
		return err
	}
	// Read-only, with a short lock wait: a running gateway holds the file
	// (stop it first: it must not allocate while its state moves).
	b, err := store.OpenBoltReadOnly(src.path, time.Second)
	if err != nil {
		return err
	}
	defer b.Close()
	st, err := b.Load()
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	e, err := store.OpenEtcd(ctx, store.EtcdOptions{Endpoints: dst.endpoints, TLS: tc, Prefix: *prefix, Gateway: host + " (store copy)",
		StartTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer e.Close()
	have, err := e.Load()
	if err != nil {
		return err
	}
	if n := len(have.Pools) + len(have.Services) + len(have.Assignments); n > 0 {
		return fmt.Errorf("etcd prefix %s already holds %d pools, %d services, %d assignments: copying would merge two "+
			"states that may give one address to two services; copy into an empty prefix (a new fleet) only",
			*prefix, len(have.Pools), len(have.Services), len(have.Assignments))
	}
	ch := store.Change{PutAssignments: st.Assignments}
	for _, n := range store.Names(st.Pools) {
		ch.PutPools = append(ch.PutPools, st.Pools[n])
	}
	for _, n := range store.Names(st.Services) {
		ch.PutServices = append(ch.PutServices, st.Services[n])
	}
	// One transaction: the fleet sees all of it or nothing (etcd's
	// --max-txn-ops, 128 by default, must exceed the records + 1).
	if err := e.Commit(ch); err != nil {
		return fmt.Errorf("copy to etcd: %w", err)
	}
	back, err := e.Load()
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	if !reflect.DeepEqual(normalState(back), normalState(st)) {
		return errors.New("read back from etcd differs from the file: the copy is not trustworthy; remove the prefix and retry")
	}
	fmt.Fprintf(stdout, "copied %d pools, %d services, %d assignments from %s to etcd prefix %s (revision %d); read back identical\n",
		len(st.Pools), len(st.Services), len(st.Assignments), src.path, *prefix, e.Revision())
	return nil
}

// normalState makes empty and nil the same for comparison.
func normalState(s store.State) store.State {
	out := store.NewState()
	for k, v := range s.Pools {
		out.Pools[k] = v
	}
	for k, v := range s.Services {
		out.Services[k] = v
	}
	for k, v := range s.Assignments {
		if len(v) > 0 {
			out.Assignments[k] = v
		}
	}
	return out
}
