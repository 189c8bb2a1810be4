package keepalived

import (
	"fmt"
	"strconv"

	"github.com/edgelb/edgelb/lb"
)

// realServers turns the real_server blocks into backends and their
// checkers into the service's one health check. edgelb checks every
// backend of a service with one check: a real server keepalived does not
// check, or checks differently, is reported — never given a sibling's
// check silently.
func (c *converter) realServers(vs *Node, st *vsSettings) error {
	host := ""
	if st.svc.HealthCheck != nil {
		host = st.svc.HealthCheck.Host
		st.svc.HealthCheck = nil
	}
	var health *lb.HealthCheckInput
	var healthFrom *Node
	var unchecked []*Node
	for _, rs := range st.real {
		if len(rs.Args) < 1 || len(rs.Args) > 2 {
			return valueErr(rs, "real_server", keyword(rs), "want IP [PORT]")
		}
		a, err := parseAddr(rs, rs.Args[0])
		if err != nil {
			return err
		}
		b := lb.BackendInput{Address: a.String(), Weight: new(int64(1))}
		if len(rs.Args) == 2 {
			p, err := parsePort(rs, rs.Args[1])
			if err != nil {
				return err
			}
			b.Port = int64(p)
		}
		if b.Port == 0 {
			c.note(rs, "no port: the backend takes the port the client addressed (the virtual server's; a fwmark service's packet's)")
		}
		t := st.timer
		rsHost := host
		var checks []*Node
		for _, k := range rs.Children {
			if ok, err := c.timer(&t, k); ok {
				if err != nil {
					return err
				}
				continue
			}
			switch {
			case k.Name == "weight":
				w, err := strconv.ParseInt(arg(k), 10, 32)
				if err != nil || w < 0 {
					return valueErr(k, "weight", arg(k), "want 0 or more")
				}
				b.Weight = &w
			case k.Name == "lvs_method":
				m, err := method(k)
				if err != nil {
					return err
				}
				if m != st.svc.Method {
					st.perService = append(st.perService, deferred{k, fmt.Sprintf("edgelb has one method per service (%s, the virtual_server's)", st.svc.Method), ScopeReal})
				}
			case k.Name == "uthreshold", k.Name == "lthreshold":
				st.perService = append(st.perService, deferred{k, "connection thresholds: edgelb sets none", ScopeReal})
			case k.Name == "alpha":
				st.perService = append(st.perService, deferred{k, "keepalived starts this real server down until its checker passes; edgelb starts it up", ScopeReal})
			case k.Name == "inhibit_on_failure":
				c.note(k, "edgelb sets a failed backend's weight to 0, as inhibit_on_failure does")
			case k.Name == "virtualhost":
				rsHost = arg(k)
			case carriedCheckers[k.Name]:
				checks = append(checks, k)
			case otherCheckers[k.Name]:
				c.unsupported(k, "edgelb's checks are TCP, HTTP and HTTPS; this real server's checker is not carried")
			case rsKeywords[k.Name]:
				c.unsupported(k, "no edgelb equivalent")
			default:
				if err := c.unknown(k, "in a real_server"); err != nil {
					return err
				}
			}
		}
		for i, k := range checks {
			h, err := c.checker(k, t, rsHost)
			if err != nil {
				return err
			}
			switch {
			case i > 0:
				c.unsupported(k, fmt.Sprintf("edgelb runs one check per backend; the one from line %d is used", checks[0].Line))
			case health == nil:
				health, healthFrom = h, k
			case !sameCheck(health, h):
				c.unsupported(k, fmt.Sprintf("edgelb runs one check per service; the one from %s:%d is used", healthFrom.File, healthFrom.Line))
			}
		}
		if len(checks) == 0 {
			unchecked = append(unchecked, rs)
		}
		st.svc.Backends = append(st.svc.Backends, b)
	}
	if health != nil {
		for _, rs := range unchecked {
			c.unsupported(rs, fmt.Sprintf("keepalived does not check this real server (no carried checker); edgelb checks every backend of the service, this one too, with the check from %s:%d",
				healthFrom.File, healthFrom.Line))
		}
		c.note(healthFrom, "keepalived retries a failed check after delay_before_retry and takes the real server out of the table; edgelb checks every interval (delay_loop) and sets a failed backend's weight to 0 after fall (retry+1) failures")
	} else if len(st.real) > 0 {
		c.note(vs, "no carried checker: edgelb sends to every backend, as keepalived does with none")
	}
	st.svc.HealthCheck = health
	return nil
}

// sameCheck: two real servers' checkers are one check.
func sameCheck(a, b *lb.HealthCheckInput) bool {
	ia, ib := *a, *b
	ia.Fall, ib.Fall, ia.Rise, ib.Rise = nil, nil, nil, nil
	return ia == ib && *a.Fall == *b.Fall
}

// checker converts TCP_CHECK, HTTP_GET or SSL_GET with keepalived's
// defaults written out: delay_loop 60 s, connect_timeout 5 s, retry 1
// (fall = retry+1: keepalived retries that many times before it marks the
// server down), rise 1 (one success brings it back).
func (c *converter) checker(k *Node, t timers, host string) (*lb.HealthCheckInput, error) {
	h := &lb.HealthCheckInput{Type: "tcp"}
	if k.Name != "TCP_CHECK" {
		h.Type = "http"
		if k.Name == "SSL_GET" {
			h.Type = "https"
		}
		h.Host = host
	}
	urls := 0
	for _, o := range k.Children {
		if ok, err := c.timer(&t, o); ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		switch o.Name {
		case "connect_port":
			p, err := parsePort(o, arg(o))
			if err != nil {
				return nil, err
			}
			h.Port = int64(p)
		case "virtualhost":
			if h.Type != "tcp" {
				h.Host = arg(o)
			}
		case "url":
			if h.Type == "tcp" {
				return nil, valueErr(o, "url", keyword(o), "a TCP_CHECK has no url")
			}
			urls++
			if urls > 1 {
				c.unsupported(o, "edgelb checks one URL; the first is used")
				continue
			}
			if err := c.url(o, h); err != nil {
				return nil, err
			}
		default:
			if !checkerKeywords[o.Name] {
				if err := c.unknown(o, "in a "+k.Name); err != nil {
					return nil, err
				}
				continue
			}
			c.unsupported(o, "no edgelb equivalent")
		}
	}
	if h.Type != "tcp" && h.Path == "" {
		h.Path = "/"
	}
	if h.Type != "tcp" && h.ExpectStatus == 0 {
		h.ExpectStatus = 200
		c.note(k, "keepalived accepts any status 200-299 by default; edgelb expects exactly 200")
	}
	h.Interval, h.Timeout = t.delayLoop, t.connectTimeout
	if h.Interval == "" {
		h.Interval = defaultDelayLoop
	}
	if h.Timeout == "" {
		h.Timeout = defaultConnectTimeout
	}
	retry := int64(defaultRetry)
	if t.set {
		retry = t.retry
	}
	h.Fall, h.Rise = new(retry+1), new(int64(1))
	if t.delayBeforeRetry != "" {
		c.note(k, fmt.Sprintf("delay_before_retry %s: edgelb retries at its interval (%s)", t.delayBeforeRetry, h.Interval))
	}
	return h, nil
}

func (c *converter) url(o *Node, h *lb.HealthCheckInput) error {
	for _, u := range o.Children {
		switch u.Name {
		case "path":
			h.Path = arg(u)
		case "status_code":
			v, err := strconv.ParseInt(arg(u), 10, 64)
			if len(u.Args) != 1 || err != nil || v < 100 || v > 599 {
				c.unsupported(u, "edgelb expects one status code; 200 used")
				continue
			}
			h.ExpectStatus = v
		case "virtualhost":
			h.Host = arg(u)
		default:
			if !urlKeywords[u.Name] {
				if err := c.unknown(u, "in a url"); err != nil {
					return err
				}
				continue
			}
			c.unsupported(u, "edgelb checks the status code only")
		}
	}
	return nil
}
