package webui

import (
	"errors"
	"strings"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

// The REST bodies are lb's input schema, the config file's field names
// (lb/spec.go): one shape of a service and of a pool everywhere.
type (
	// ServiceSpec is the JSON body of PUT /api/v1/services/{name}.
	ServiceSpec = lb.ServiceInput
	// PortSpec is one port of a service.
	PortSpec = lb.PortInput
	// BackendSpec is one real server.
	BackendSpec = lb.BackendInput
	// AffinitySpec is ClientIP affinity.
	AffinitySpec = lb.AffinityInput
	// HealthCheckSpec is an active check against every backend.
	HealthCheckSpec = lb.HealthCheckInput
)

// ServiceStatus is a service as the API returns it: its spec, the VIPs
// edgelb assigned and, when it has none yet, why.
type ServiceStatus struct {
	Spec     ServiceSpec `json:"spec"`
	Assigned []string    `json:"assigned"`
	Pending  string      `json:"pending,omitempty"`
	// Failed is why the running dataplane refused this service at its last
	// apply (the others were programmed); "" while it is programmed.
	Failed string `json:"failed,omitempty"`
	// Origin is who declared it: "config" (the config file: REST writes
	// are refused), "api" or "kubernetes" (a Service object).
	Origin string `json:"origin"`
}

// parseService turns the body into an lb.ServiceSpec with lb's one
// validator, on the service alone; whether a VIP is in a pool and free is
// the Manager's to decide (with the same validator).
func parseService(s ServiceSpec) (lb.ServiceSpec, error) {
	return lb.ParseService(&s, proxy.NAT, lb.ValidateOptions{SingleVIP: s.VIP != ""})
}

// asWritten names a VIP the way the body wrote it: the Manager's errors
// say vips[0], a body with vip: wrote "vip".
func asWritten(dto *ServiceSpec, err error) error {
	if dto.VIP == "" {
		return err
	}
	var list *lb.Errors
	var fe *lb.FieldError
	switch {
	case errors.As(err, &list):
		for _, e := range list.List {
			e.Field = renameVIP(e.Field)
		}
	case errors.As(err, &fe):
		fe.Field = renameVIP(fe.Field)
	}
	return err
}

func renameVIP(f string) string {
	if rest, ok := strings.CutPrefix(f, "vips[0]"); ok {
		return "vip" + rest
	}
	return f
}

func serviceStatusOf(s lb.ServiceStatus) ServiceStatus {
	out := ServiceStatus{Spec: lb.InputOf(s.Spec), Assigned: []string{}, Pending: s.Pending, Failed: s.Failed,
		Origin: string(s.Origin)}
	for _, v := range s.VIPs {
		out.Assigned = append(out.Assigned, v.String())
	}
	return out
}
