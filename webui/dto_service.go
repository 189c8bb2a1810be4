package webui

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"time"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

// ServiceSpec is the JSON body of PUT /api/v1/services/{name}: a standalone
// service. Addresses, protocols, schedulers and durations are strings parsed
// once here into lb.ServiceSpec.
type ServiceSpec struct {
	Name string `json:"name"`
	// VIPs requested explicitly (at most one per family); empty: allocate.
	VIPs []string `json:"vips,omitempty"`
	// Families to allocate for when vips is empty: "IPv4", "IPv6" (default IPv4).
	Families        []string         `json:"families,omitempty"`
	Pool            string           `json:"pool,omitempty"`
	SharingKey      string           `json:"sharingKey,omitempty"`
	Ports           []PortSpec       `json:"ports"`
	Backends        []BackendSpec    `json:"backends"`
	Scheduler       string           `json:"scheduler,omitempty"`
	AffinityTimeout string           `json:"affinityTimeout,omitempty"`
	Method          string           `json:"method,omitempty"`
	HealthCheck     *HealthCheckSpec `json:"healthCheck,omitempty"`
}

// PortSpec is one port of a service.
type PortSpec struct {
	Name       string `json:"name,omitempty"`
	Port       int    `json:"port"`
	Protocol   string `json:"protocol,omitempty"`
	NodePort   int    `json:"nodePort,omitempty"`
	TargetPort int    `json:"targetPort,omitempty"`
}

// BackendSpec is one real server; weight defaults to 1, 0 drains it.
type BackendSpec struct {
	Address string `json:"address"`
	Port    int    `json:"port,omitempty"`
	Weight  *int64 `json:"weight,omitempty"`
}

// HealthCheckSpec is an active check against every backend.
type HealthCheckSpec struct {
	Type         string `json:"type"`
	Path         string `json:"path,omitempty"`
	Host         string `json:"host,omitempty"`
	ExpectStatus int    `json:"expectStatus,omitempty"`
	Interval     string `json:"interval,omitempty"`
	Timeout      string `json:"timeout,omitempty"`
	Rise         int    `json:"rise,omitempty"`
	Fall         int    `json:"fall,omitempty"`
	Port         int    `json:"port,omitempty"`
}

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

func fieldErr(field, value, format string, args ...any) error {
	return &lb.FieldError{Field: field, Value: value, Err: fmt.Errorf(format, args...)}
}

func checkPort(field string, v int, allowZero bool) (uint16, error) {
	lo := 1
	if allowZero {
		lo = 0
	}
	if v < lo || v > math.MaxUint16 {
		return 0, fieldErr(field, strconv.Itoa(v), "must be %d..65535", lo)
	}
	return uint16(v), nil
}

func parseAddr(field, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fieldErr(field, s, "not an IP address")
	}
	if a.Zone() != "" {
		return netip.Addr{}, fieldErr(field, s, "zones are not allowed")
	}
	return a.Unmap(), nil
}

func parseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fieldErr(field, s, "want a duration such as 30s, 5m or 3h")
	}
	if d < 0 {
		return 0, fieldErr(field, s, "must not be negative")
	}
	return d, nil
}

// parsePositiveDuration is parseDuration for a duration that, when given,
// must be more than 0 (absent stays 0: the default applies).
func parsePositiveDuration(field, s string) (time.Duration, error) {
	d, err := parseDuration(field, s)
	if err == nil && s != "" && d == 0 {
		return 0, fieldErr(field, s, "must be more than 0")
	}
	return d, err
}

// parseService turns the DTO into an lb.ServiceSpec. It checks what can be
// checked on the service alone (syntax, ranges, duplicates); whether a VIP
// is in a pool and free is the Manager's to decide.
func parseService(s ServiceSpec) (lb.ServiceSpec, error) {
	out := lb.ServiceSpec{Name: s.Name, Pool: s.Pool, SharingKey: s.SharingKey}
	if err := lb.ValidateName(s.Name); err != nil {
		return lb.ServiceSpec{}, &lb.FieldError{Field: "name", Value: s.Name, Err: err}
	}
	if s.Pool != "" {
		if err := lb.ValidateName(s.Pool); err != nil {
			return lb.ServiceSpec{}, &lb.FieldError{Field: "pool", Value: s.Pool, Err: err}
		}
	}
	fams := map[bool]int{}
	for i, v := range s.VIPs {
		f := fmt.Sprintf("vips[%d]", i)
		a, err := parseAddr(f, v)
		if err != nil {
			return lb.ServiceSpec{}, err
		}
		if j, dup := fams[a.Is4()]; dup {
			return lb.ServiceSpec{}, fieldErr(f, v, "a service has at most one VIP per family (vips[%d] is also %s)", j, famName(a.Is4()))
		}
		fams[a.Is4()] = i
		out.VIPs = append(out.VIPs, a)
	}
	seenFam := map[lb.Family]bool{}
	for i, f := range s.Families {
		var fam lb.Family
		switch f {
		case "IPv4", "ipv4":
			fam = lb.IPv4
		case "IPv6", "ipv6":
			fam = lb.IPv6
		default:
			return lb.ServiceSpec{}, fieldErr(fmt.Sprintf("families[%d]", i), f, "want IPv4 or IPv6")
		}
		if seenFam[fam] {
			return lb.ServiceSpec{}, fieldErr(fmt.Sprintf("families[%d]", i), f, "listed twice")
		}
		seenFam[fam] = true
		out.Families = append(out.Families, fam)
	}
	if len(s.Ports) == 0 {
		return lb.ServiceSpec{}, fieldErr("ports", "", "a service needs at least one port")
	}
	seenPort := map[lb.PortProto]int{}
	for i, p := range s.Ports {
		f := fmt.Sprintf("ports[%d]", i)
		port, err := checkPort(f+".port", p.Port, false)
		if err != nil {
			return lb.ServiceSpec{}, err
		}
		proto, err := proxy.ParseProtocol(p.Protocol)
		if err != nil {
			return lb.ServiceSpec{}, &lb.FieldError{Field: f + ".protocol", Value: p.Protocol, Err: err}
		}
		np, err := checkPort(f+".nodePort", p.NodePort, true)
		if err != nil {
			return lb.ServiceSpec{}, err
		}
		tp, err := checkPort(f+".targetPort", p.TargetPort, true)
		if err != nil {
			return lb.ServiceSpec{}, err
		}
		k := lb.PortProto{Port: port, Protocol: proto}
		if j, dup := seenPort[k]; dup {
			return lb.ServiceSpec{}, fieldErr(f+".port", strconv.Itoa(p.Port), "port %d/%s is already ports[%d]", port, proto, j)
		}
		seenPort[k] = i
		out.Ports = append(out.Ports, lb.PortSpec{Name: p.Name, Port: port, Protocol: proto, NodePort: np, TargetPort: tp})
	}
	for i, b := range s.Backends {
		f := fmt.Sprintf("backends[%d]", i)
		a, err := parseAddr(f+".address", b.Address)
		if err != nil {
			return lb.ServiceSpec{}, err
		}
		port, err := checkPort(f+".port", b.Port, true)
		if err != nil {
			return lb.ServiceSpec{}, err
		}
		w := int64(1)
		if b.Weight != nil {
			w = *b.Weight
		}
		if w < 0 || w > lb.MaxWeight {
			return lb.ServiceSpec{}, fieldErr(f+".weight", strconv.FormatInt(w, 10), "out of range 0-%d (0 drains the backend)", lb.MaxWeight)
		}
		out.Backends = append(out.Backends, lb.BackendSpec{Addr: a, Port: port, Weight: uint32(w)})
	}
	var err error
	if out.Scheduler, err = proxy.ParseScheduler(s.Scheduler); err != nil {
		return lb.ServiceSpec{}, &lb.FieldError{Field: "scheduler", Value: s.Scheduler, Err: err}
	}
	if out.Method, err = proxy.ParseMethod(s.Method); err != nil {
		return lb.ServiceSpec{}, &lb.FieldError{Field: "method", Value: s.Method, Err: err}
	}
	if out.Affinity, err = parseDuration("affinityTimeout", s.AffinityTimeout); err != nil {
		return lb.ServiceSpec{}, err
	}
	if h := s.HealthCheck; h != nil {
		hc := &lb.HealthCheck{Type: h.Type, Path: h.Path, Host: h.Host, Expect: h.ExpectStatus, Rise: h.Rise, Fall: h.Fall}
		switch h.Type {
		case "", "tcp", "http", "https": // "" = tcp (lb.NormalizeHealth), as in the config file
		default:
			return lb.ServiceSpec{}, fieldErr("healthCheck.type", h.Type, "want tcp, http or https")
		}
		if h.ExpectStatus != 0 && (h.ExpectStatus < 100 || h.ExpectStatus > 599) {
			return lb.ServiceSpec{}, fieldErr("healthCheck.expectStatus", strconv.Itoa(h.ExpectStatus), "want an HTTP status 100..599")
		}
		// Absent: lb.NormalizeHealth's default, as in the config file; given
		// as 0: refused, as in the config file ("0s": must be more than 0).
		if hc.Interval, err = parsePositiveDuration("healthCheck.interval", h.Interval); err != nil {
			return lb.ServiceSpec{}, err
		}
		if hc.Timeout, err = parsePositiveDuration("healthCheck.timeout", h.Timeout); err != nil {
			return lb.ServiceSpec{}, err
		}
		if h.Rise < 0 {
			return lb.ServiceSpec{}, fieldErr("healthCheck.rise", strconv.Itoa(h.Rise), "must not be negative")
		}
		if h.Fall < 0 {
			return lb.ServiceSpec{}, fieldErr("healthCheck.fall", strconv.Itoa(h.Fall), "must not be negative")
		}
		if hc.Port, err = checkPort("healthCheck.port", h.Port, true); err != nil {
			return lb.ServiceSpec{}, err
		}
		out.Health = hc
	}
	return out, nil
}

func famName(is4 bool) string {
	if is4 {
		return "IPv4"
	}
	return "IPv6"
}

func durString(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// serviceSpecOf renders an lb.ServiceSpec back into the DTO.
func serviceSpecOf(s lb.ServiceSpec) ServiceSpec {
	out := ServiceSpec{Name: s.Name, Pool: s.Pool, SharingKey: s.SharingKey, Scheduler: string(s.Scheduler),
		Method: string(s.Method), AffinityTimeout: durString(s.Affinity),
		Ports: []PortSpec{}, Backends: []BackendSpec{}}
	for _, v := range s.VIPs {
		out.VIPs = append(out.VIPs, v.String())
	}
	for _, f := range s.Families {
		out.Families = append(out.Families, f.String())
	}
	for _, p := range s.Ports {
		out.Ports = append(out.Ports, PortSpec{Name: p.Name, Port: int(p.Port), Protocol: p.Protocol.String(),
			NodePort: int(p.NodePort), TargetPort: int(p.TargetPort)})
	}
	for _, b := range s.Backends {
		w := int64(b.Weight)
		out.Backends = append(out.Backends, BackendSpec{Address: b.Addr.String(), Port: int(b.Port), Weight: &w})
	}
	if h := s.Health; h != nil {
		out.HealthCheck = &HealthCheckSpec{Type: h.Type, Path: h.Path, Host: h.Host, ExpectStatus: h.Expect,
			Interval: durString(h.Interval), Timeout: durString(h.Timeout), Rise: h.Rise, Fall: h.Fall, Port: int(h.Port)}
	}
	return out
}

func serviceStatusOf(s lb.ServiceStatus) ServiceStatus {
	out := ServiceStatus{Spec: serviceSpecOf(s.Spec), Assigned: []string{}, Pending: s.Pending, Failed: s.Failed,
		Origin: string(s.Origin)}
	for _, v := range s.VIPs {
		out.Assigned = append(out.Assigned, v.String())
	}
	return out
}
