package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/edgelb/edgelb/webui"
)

func cmdPools(ctx context.Context, args []string, stdout, _ io.Writer) error {
	return objectVerbs("pools", ctx, args, stdout, getPools, applyPools)
}

func cmdServices(ctx context.Context, args []string, stdout, _ io.Writer) error {
	return objectVerbs("services", ctx, args, stdout, getServices, applyServices)
}

func getPools(c *apiClient, ctx context.Context, names []string, asJSON bool, w io.Writer) error {
	var ps []webui.PoolStatus
	if len(names) == 0 {
		if _, err := c.do(ctx, http.MethodGet, "/api/v1/pools", nil, &ps); err != nil {
			return err
		}
	}
	for _, n := range names {
		var p webui.PoolStatus
		if _, err := c.do(ctx, http.MethodGet, "/api/v1/pools/"+url.PathEscape(n), nil, &p); err != nil {
			return err
		}
		ps = append(ps, p)
	}
	if asJSON {
		return writeJSON(w, ps)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADDRESSES\tAUTOASSIGN\tSIZE\tUSED")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%t\t%d\t%d\n", p.Spec.Name, strings.Join(p.Spec.Addresses, ","), p.Spec.AutoAssign == nil || *p.Spec.AutoAssign, p.Size, p.Used)
	}
	return tw.Flush()
}

// applyPools creates each pool, or replaces it when it exists (POST
// answers 409 for a name in use; PUT then replaces).
func applyPools(c *apiClient, ctx context.Context, file string, w io.Writer) error {
	ps, err := readObjects[webui.PoolSpec](file, os.Stdin)
	if err != nil {
		return err
	}
	for _, p := range ps {
		code, err := c.do(ctx, http.MethodGet, "/api/v1/pools/"+url.PathEscape(p.Name), nil, nil)
		switch {
		case err == nil:
			if _, err := c.do(ctx, http.MethodPut, "/api/v1/pools/"+url.PathEscape(p.Name), p, nil); err != nil {
				return err
			}
			fmt.Fprintf(w, "pools/%s configured\n", p.Name)
		case code == http.StatusNotFound:
			if _, err := c.do(ctx, http.MethodPost, "/api/v1/pools", p, nil); err != nil {
				return err
			}
			fmt.Fprintf(w, "pools/%s created\n", p.Name)
		default:
			return err
		}
	}
	return nil
}

func getServices(c *apiClient, ctx context.Context, names []string, asJSON bool, w io.Writer) error {
	var ss []webui.ServiceStatus
	if len(names) == 0 {
		if _, err := c.do(ctx, http.MethodGet, "/api/v1/services", nil, &ss); err != nil {
			return err
		}
	}
	for _, n := range names {
		var s webui.ServiceStatus
		if _, err := c.do(ctx, http.MethodGet, "/api/v1/services/"+url.PathEscape(n), nil, &s); err != nil {
			return err
		}
		ss = append(ss, s)
	}
	if asJSON {
		return writeJSON(w, ss)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVIPS\tPORTS\tBACKENDS\tPOOL\tPENDING")
	for _, s := range ss {
		var ports []string
		for _, p := range s.Spec.Ports {
			ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.Spec.Name, strings.Join(s.Assigned, ","), strings.Join(ports, ","),
			len(s.Spec.Backends), s.Spec.Pool, s.Pending)
	}
	return tw.Flush()
}

func applyServices(c *apiClient, ctx context.Context, file string, w io.Writer) error {
	ss, err := readObjects[webui.ServiceSpec](file, os.Stdin)
	if err != nil {
		return err
	}
	for _, s := range ss {
		if _, err := c.do(ctx, http.MethodPut, "/api/v1/services/"+url.PathEscape(s.Name), s, nil); err != nil {
			return err
		}
		fmt.Fprintf(w, "services/%s applied\n", s.Name)
	}
	return nil
}
