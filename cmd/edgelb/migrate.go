package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgelb/edgelb/lb/migrate/metallb"
)

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &exitError{code: 2, err: errors.New("want a source: metallb or keepalived")}
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprintf(stdout, "Usage: edgelb migrate metallb|keepalived [flags]\n\nRun 'edgelb migrate SOURCE --help' for a source's flags.\n")
		return flag.ErrHelp
	case "metallb":
		return migrateMetalLB(ctx, args[1:], stdout, stderr)
	case "keepalived":
		return migrateKeepalived(ctx, args[1:], stdout, stderr)
	}
	return &exitError{code: 2, err: fmt.Errorf("unknown source %q: want metallb or keepalived", args[0])}
}

// migrateMetalLB writes the converted configuration to stdout and the
// report (every unsupported field, every note) to stderr, or to --report.
func migrateMetalLB(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate metallb", "(-f FILE ... | --kubeconfig PATH) [-o config|crds|cluster-config] [--l2-interface IF]", stdout)
	var files stringList
	fs.Var(&files, "f", "MetalLB YAML (multi-document; repeatable; - for stdin)")
	kubeconfig := fs.String("kubeconfig", "", "read MetalLB's objects from this cluster instead of files")
	output := fs.String("o", "config", "config: a standalone edgelb config (pools + announce); crds: edgelb.io IPPool objects; cluster-config: the config for Kubernetes mode")
	l2if := fs.String("l2-interface", "", "interface for L2 announcements when MetalLB names none")
	secretDir := fs.String("secret-dir", "/etc/edgelb", "where BGP password files for passwordSecret peers are expected")
	reportPath := fs.String("report", "", "write the report here instead of stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (len(files) == 0) == (*kubeconfig == "") {
		return &exitError{code: 2, err: errors.New("give -f FILE or --kubeconfig PATH (one of them)")}
	}
	var objs []*metallb.Object
	var skipped []string
	for _, f := range files {
		var r io.Reader = os.Stdin
		if f != "-" {
			fh, err := os.Open(f)
			if err != nil {
				return err
			}
			defer fh.Close()
			r = fh
		}
		o, s, err := metallb.ReadDocuments(r, f)
		if err != nil {
			return err
		}
		objs, skipped = append(objs, o...), append(skipped, s...)
	}
	if *kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
		if err != nil {
			return fmt.Errorf("--kubeconfig %q: %w", *kubeconfig, err)
		}
		dyn, err := dynamic.NewForConfig(rc)
		if err != nil {
			return err
		}
		o, missing, err := metallb.ReadCluster(ctx, dyn)
		if err != nil {
			return err
		}
		objs, skipped = append(objs, o...), append(skipped, missing...)
	}
	res, err := metallb.Convert(objs, metallb.Options{L2Interface: *l2if, SecretDir: *secretDir})
	if err != nil {
		return err
	}
	res.Skipped = skipped
	var out []byte
	switch *output {
	case "config":
		out, err = res.Config()
	case "crds":
		out, err = res.Objects()
	case "cluster-config":
		out, err = res.ClusterConfig()
	default:
		return &exitError{code: 2, err: fmt.Errorf("-o %q: want config, crds or cluster-config", *output)}
	}
	if err != nil {
		return err
	}
	return writeMigration(stdout, stderr, *reportPath, out, res.WriteReport)
}

// writeMigration writes a converted configuration to stdout and its report
// of every field without an equivalent to reportPath (stderr when empty):
// the one tail of both migrate commands.
func writeMigration(stdout, stderr io.Writer, reportPath string, out []byte, report func(io.Writer)) error {
	rw := stderr
	if reportPath != "" {
		fh, err := os.Create(reportPath)
		if err != nil {
			return err
		}
		defer fh.Close()
		rw = fh
	}
	report(rw)
	_, err := stdout.Write(out)
	return err
}
