package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/edgelb/edgelb/webui"
)

var (
	poolsKind    = objectKind{name: "pools", get: getPools, apply: applyPools}
	servicesKind = objectKind{name: "services", get: getServices, apply: applyServices}
)

// getList reads every item of a collection, or the named ones.
func getList[T any](ctx context.Context, c *apiClient, kind string, names []string) ([]T, error) {
	var items []T
	if len(names) == 0 {
		if _, err := c.do(ctx, http.MethodGet, "/api/v1/"+kind, nil, &items); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		var it T
		if _, err := c.do(ctx, http.MethodGet, "/api/v1/"+kind+"/"+url.PathEscape(n), nil, &it); err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	return items, nil
}

func getPools(ctx context.Context, c *apiClient, names []string, format string, w io.Writer) error {
	ps, err := getList[webui.PoolStatus](ctx, c, "pools", names)
	if err != nil {
		return err
	}
	if done, err := writeStructured(w, format, ps); done {
		return err
	}
	wide := format == outWide
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "NAME\tADDRESSES\tAUTOASSIGN\tSIZE\tUSED\tORIGIN")
	if wide {
		fmt.Fprint(tw, "\tAVOIDBUGGYIPS\tCOMMUNITIES\tLOCALPREF")
	}
	fmt.Fprintln(tw)
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%t\t%d\t%d\t%s", p.Spec.Name, strings.Join(p.Spec.Addresses, ","),
			p.Spec.AutoAssign == nil || *p.Spec.AutoAssign, p.Size, p.Used, dash(p.Origin))
		if wide {
			comm, pref := "-", "-"
			if a := p.Spec.Advertisement; a != nil {
				if all := append(append([]string(nil), a.Communities...), a.LargeCommunities...); len(all) > 0 {
					comm = strings.Join(all, ",")
				}
				if a.LocalPref != 0 {
					pref = strconv.FormatInt(a.LocalPref, 10)
				}
			}
			fmt.Fprintf(tw, "\t%t\t%s\t%s", p.Spec.AvoidBuggyIPs, comm, pref)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// applyPools creates each pool, or replaces it when it exists (POST
// answers 409 for a name in use; PUT then replaces).
func applyPools(ctx context.Context, c *apiClient, file string, stdin io.Reader, w io.Writer) error {
	ps, err := readObjects[webui.PoolSpec](file, stdin)
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

func getServices(ctx context.Context, c *apiClient, names []string, format string, w io.Writer) error {
	ss, err := getList[webui.ServiceStatus](ctx, c, "services", names)
	if err != nil {
		return err
	}
	if done, err := writeStructured(w, format, ss); done {
		return err
	}
	wide := format == outWide
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "NAME\tVIPS\tPORTS\tBACKENDS\tPOOL\tORIGIN")
	if wide {
		fmt.Fprint(tw, "\tSCHEDULER\tMETHOD\tENDPOINTS\tFAILED")
	}
	fmt.Fprintln(tw, "\tPENDING")
	for _, s := range ss {
		var ports []string
		for _, p := range s.Spec.Ports {
			ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s", s.Spec.Name, strings.Join(s.Assigned, ","), strings.Join(ports, ","),
			len(s.Spec.Backends), s.Spec.Pool, dash(s.Origin))
		if wide {
			var eps []string
			for _, b := range s.Spec.Backends {
				ep := b.Address
				if b.Port != 0 {
					ep = net.JoinHostPort(b.Address, strconv.FormatInt(b.Port, 10))
				}
				eps = append(eps, ep)
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s", dash(s.Spec.Scheduler), dash(s.Spec.Method), dash(strings.Join(eps, ",")), dash(s.Failed))
		}
		fmt.Fprintf(tw, "\t%s\n", s.Pending)
	}
	return tw.Flush()
}

func applyServices(ctx context.Context, c *apiClient, file string, stdin io.Reader, w io.Writer) error {
	ss, err := readObjects[webui.ServiceSpec](file, stdin)
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

// dash stands for an empty cell, and for an ORIGIN the server does not
// send (an edgelb from before the field).
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
