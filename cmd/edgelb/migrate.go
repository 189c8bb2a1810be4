package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgelb/edgelb/lb/migrate/metallb"
)

func newMigrateCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "migrate",
		Short: "convert MetalLB objects or a keepalived.conf into edgelb configuration, with a report",
	}
	group(c)
	c.AddCommand(newMigrateMetalLBCmd(), newMigrateKeepalivedCmd())
	return c
}

// metallbOptions are migrate metallb's flags.
type metallbOptions struct {
	files      []string
	kubeconfig string
	output     string
	l2if       string
	secretDir  string
	reportPath string
	skip       bool
}

func newMigrateMetalLBCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "metallb (-f FILE... | --kubeconfig PATH) [-o config|crds|cluster-config] [--l2-interface IF]",
		Short: "MetalLB objects → edgelb config, IPPools, or the Kubernetes-mode config; the report to stderr or --report",
		Args:  noArgs,
	}
	var o metallbOptions
	f := c.Flags()
	f.StringArrayVarP(&o.files, "filename", "f", nil, "MetalLB YAML (multi-document; repeatable; - for stdin)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "read MetalLB's objects from this cluster instead of files")
	out := addChoiceFlag(c, "output", "o", "config: a standalone edgelb config (pools + announce); crds: edgelb.io IPPool objects; "+
		"cluster-config: the config for Kubernetes mode", "config", "crds", "cluster-config")
	f.StringVar(&o.l2if, "l2-interface", "", "interface for L2 announcements when MetalLB names none")
	f.StringVar(&o.secretDir, "secret-dir", "/etc/edgelb", "where BGP password files for passwordSecret peers are expected")
	f.StringVar(&o.reportPath, "report", "", "write the report here instead of stderr")
	f.BoolVar(&o.skip, "skip-unknown", false, "skip (and report) documents that are not MetalLB configuration or do not parse, instead of failing")
	_ = c.MarkFlagFilename("filename", "yaml", "yml")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if (len(o.files) == 0) == (o.kubeconfig == "") {
			return usageError(c, errors.New("give -f FILE or --kubeconfig PATH (one of them)"))
		}
		o.output = out.val
		return migrateMetalLB(c.Context(), o, c.InOrStdin(), c.OutOrStdout(), c.ErrOrStderr())
	}
	return c
}

// migrateMetalLB writes the converted configuration to stdout and the
// report (every unsupported field, every note) to stderr, or to --report.
func migrateMetalLB(ctx context.Context, o metallbOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	var objs []*metallb.Object
	var skipped []string
	for _, f := range o.files {
		r := stdin
		if f != "-" {
			fh, err := os.Open(f)
			if err != nil {
				return err
			}
			defer fh.Close()
			r = fh
		}
		o, s, err := metallb.ReadDocuments(r, f, o.skip)
		if err != nil {
			return err
		}
		objs, skipped = append(objs, o...), append(skipped, s...)
	}
	if o.kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
		if err != nil {
			return fmt.Errorf("--kubeconfig %q: %w", o.kubeconfig, err)
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
	res, err := metallb.Convert(objs, metallb.Options{L2Interface: o.l2if, SecretDir: o.secretDir})
	if err != nil {
		return err
	}
	res.Skipped = skipped
	var out []byte
	switch o.output {
	case "crds":
		out, err = res.Objects()
	case "cluster-config":
		out, err = res.ClusterConfig()
	default:
		out, err = res.Config()
	}
	if err != nil {
		return err
	}
	return writeMigration(stdout, stderr, o.reportPath, out, res.WriteReport)
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
