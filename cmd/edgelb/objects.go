package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

// objectKind is what `edgelb pools` and `edgelb services` differ in.
type objectKind struct {
	name  string // the command and the API's collection: "pools", "services"
	get   func(ctx context.Context, c *apiClient, names []string, format string, w io.Writer) error
	apply func(ctx context.Context, c *apiClient, file string, stdin io.Reader, w io.Writer) error
}

// newObjectCmd is `edgelb pools|services get|apply|delete`: a thin client
// of the REST API. Every verb takes the client flags, before or after its
// names.
func newObjectCmd(k objectKind) *cobra.Command {
	c := &cobra.Command{
		Use:   k.name,
		Short: "REST client: " + k.name + " get|apply -f|delete",
	}
	group(c)
	c.AddCommand(newGetCmd(k), newApplyCmd(k), newDeleteCmd(k))
	return c
}

func newGetCmd(k objectKind) *cobra.Command {
	c := &cobra.Command{
		Use:     "get [NAME...]",
		Aliases: []string{"list"},
		Short:   "show " + k.name + " (all, or the ones named) with their origin: config file, REST API or Kubernetes",
		Args:    cobra.ArbitraryArgs,
	}
	cf := addClientFlags(c.Flags())
	out := addOutputFlag(c, outTable, outWide, outJSON, outYAML)
	c.RunE = func(c *cobra.Command, names []string) error {
		cl, err := cf.client()
		if err != nil {
			return &exitError{exitUsage, err}
		}
		return k.get(c.Context(), cl, names, out.val, c.OutOrStdout())
	}
	c.ValidArgsFunction = nameCompletion(k, cf)
	return c
}

func newApplyCmd(k objectKind) *cobra.Command {
	c := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "create or replace " + k.name + " from a file: one object or a list, JSON or YAML (unknown keys refused)",
		Args:  noArgs,
	}
	cf := addClientFlags(c.Flags())
	file := c.Flags().StringP("filename", "f", "", "file with one object or a list, JSON or YAML (- for stdin)")
	_ = c.MarkFlagFilename("filename", "yaml", "yml", "json")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if *file == "" {
			return usageError(c, errors.New("needs -f FILE"))
		}
		cl, err := cf.client()
		if err != nil {
			return &exitError{exitUsage, err}
		}
		return k.apply(c.Context(), cl, *file, c.InOrStdin(), c.OutOrStdout())
	}
	return c
}

func newDeleteCmd(k objectKind) *cobra.Command {
	c := &cobra.Command{
		Use:   "delete NAME...",
		Short: "delete " + k.name + " by name",
		Args:  minArgs(1, "NAME"),
	}
	cf := addClientFlags(c.Flags())
	c.RunE = func(c *cobra.Command, names []string) error {
		cl, err := cf.client()
		if err != nil {
			return &exitError{exitUsage, err}
		}
		for _, n := range names {
			if _, err := cl.do(c.Context(), http.MethodDelete, "/api/v1/"+k.name+"/"+url.PathEscape(n), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "%s/%s deleted\n", k.name, n)
		}
		return nil
	}
	c.ValidArgsFunction = nameCompletion(k, cf)
	return c
}

// nameCompletion completes NAME from the API the command line's own
// --server (and token) point at; cobra has parsed the flags typed so far.
func nameCompletion(k objectKind, cf *clientFlags) cobra.CompletionFunc {
	return func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		cl, err := cf.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var items []struct {
			Spec struct {
				Name string `json:"name"`
			} `json:"spec"`
		}
		if _, err := cl.do(c.Context(), http.MethodGet, "/api/v1/"+k.name, nil, &items); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, it := range items {
			if strings.HasPrefix(it.Spec.Name, toComplete) {
				out = append(out, it.Spec.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
