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

	"github.com/spf13/cobra"

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

func newStoreCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "store",
		Short: "store copy --from bbolt:PATH --to etcd:URL: move a gateway's state into a fleet's etcd",
	}
	group(c)
	c.AddCommand(newStoreCopyCmd())
	return c
}

// storeCopyOptions are store copy's flags, the specs parsed.
type storeCopyOptions struct {
	src, dst      storeSpec
	prefix        string
	ca, cert, key string
}

func newStoreCopyCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "copy --from bbolt:PATH --to etcd:URL[,URL...] [--prefix /edgelb] [--ca F --cert F --key F]",
		Short: "move a stopped gateway's state file into a fleet's etcd, in one transaction, read back and compared",
		Args:  noArgs,
	}
	var o storeCopyOptions
	f := c.Flags()
	from := f.String("from", "", "source: bbolt:PATH (a stopped gateway's edgelb.db)")
	to := f.String("to", "", "destination: etcd:URL[,URL...] (the fleet's members)")
	f.StringVar(&o.prefix, "prefix", config.DefaultEtcdPrefix, "key prefix of the fleet's state in etcd")
	f.StringVar(&o.ca, "ca", "", "etcd: CA certificate file")
	f.StringVar(&o.cert, "cert", "", "etcd: client certificate file")
	f.StringVar(&o.key, "key", "", "etcd: client key file")
	c.RunE = func(c *cobra.Command, _ []string) error {
		var err error
		if o.src, err = parseStoreSpec("from", *from); err != nil {
			return usageError(c, err)
		}
		if o.dst, err = parseStoreSpec("to", *to); err != nil {
			return usageError(c, err)
		}
		if o.src.kind != "bbolt" || o.dst.kind != "etcd" {
			return usageError(c, fmt.Errorf("copy goes from bbolt: to etcd: (moving a gateway into a fleet); got %s: to %s:", o.src.kind, o.dst.kind))
		}
		cfg := &config.Config{State: config.State{Dir: "/", Type: config.StateEtcd, Etcd: &config.Etcd{Endpoints: o.dst.endpoints,
			Prefix: o.prefix, CA: o.ca, Cert: o.cert, Key: o.key}}}
		if err := cfg.ValidateState(); err != nil {
			return usageError(c, err)
		}
		return storeCopy(c.Context(), o, c.OutOrStdout())
	}
	return c
}

// storeCopy copies the file into an empty etcd prefix and reads it back.
func storeCopy(ctx context.Context, o storeCopyOptions, stdout io.Writer) error {
	src, dst := o.src, o.dst
	tc, err := store.EtcdTLS("--", o.ca, o.cert, o.key)
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
	e, err := store.OpenEtcd(ctx, store.EtcdOptions{Endpoints: dst.endpoints, TLS: tc, Prefix: o.prefix, Gateway: host + " (store copy)",
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
			o.prefix, len(have.Pools), len(have.Services), len(have.Assignments))
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
		len(st.Pools), len(st.Services), len(st.Assignments), src.path, o.prefix, e.Revision())
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
