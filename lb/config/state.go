package config

import (
	"fmt"
	"net/url"
	"strings"
)

// StateType says where standalone mode keeps its state.
type StateType string

const (
	// StateBolt: a bbolt file in State.Dir, this gateway's alone (the
	// default; "" means it too).
	StateBolt StateType = "bbolt"
	// StateEtcd: an etcd cluster shared by a fleet of gateways.
	StateEtcd StateType = "etcd"
)

// DefaultEtcdPrefix is the key prefix of a fleet's state in etcd.
const DefaultEtcdPrefix = "/edgelb"

// Etcd is the shared store of a fleet (state.type etcd).
type Etcd struct {
	// Endpoints are client URLs, http:// or https://HOST:PORT.
	Endpoints []string
	// TLS files (paths resolved against the config file's directory):
	// CA verifies the members; Cert and Key, together, authenticate this
	// gateway. All empty: plain http or the system's roots.
	CA, Cert, Key string
	// Prefix holds every key; gateways with the same prefix are one fleet.
	Prefix string
	// Gateway is this gateway's name in the fleet (GET /api/v1/fleet, who
	// committed last); "" means the host name.
	Gateway string
}

type rawEtcdTLS struct {
	CA   string `json:"ca"`
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

func convertState(r *rawState, e env, c *collector) State {
	s := State{Dir: DefaultStateDir} // Type "": bbolt
	if r.Dir != "" {
		s.Dir = e.path(r.Dir)
	}
	switch StateType(r.Type) {
	case "", StateBolt:
		if len(r.Endpoints) > 0 || r.Prefix != "" || r.Gateway != "" || r.TLS != (rawEtcdTLS{}) {
			c.add("state.type", r.Type, "endpoints, prefix, gateway and tls are for type %q", StateEtcd)
		}
		return s
	case StateEtcd:
	default:
		c.add("state.type", r.Type, "want %q or %q", StateBolt, StateEtcd)
		return s
	}
	s.Type = StateEtcd
	et := &Etcd{Endpoints: append([]string(nil), r.Endpoints...), Prefix: DefaultEtcdPrefix, Gateway: r.Gateway,
		CA: e.path(r.TLS.CA), Cert: e.path(r.TLS.Cert), Key: e.path(r.TLS.Key)}
	if r.Prefix != "" {
		et.Prefix = r.Prefix
	}
	s.Etcd = et
	return s
}

// validateState checks what convertState built (Validate runs it again on
// a Config built in code).
func (c *Config) validateState(col *collector) {
	if c.State.Dir == "" {
		col.add("state.dir", "", "required")
	}
	switch c.State.Type {
	case StateBolt, "":
		if c.State.Etcd != nil {
			col.add("state.type", string(c.State.Type), "etcd settings given for type %q", c.State.Type)
		}
		return
	case StateEtcd:
	default:
		col.add("state.type", string(c.State.Type), "want %q or %q", StateBolt, StateEtcd)
		return
	}
	et := c.State.Etcd
	if et == nil {
		col.add("state.endpoints", "", "required for type %q", StateEtcd)
		return
	}
	if len(et.Endpoints) == 0 {
		col.add("state.endpoints", "", "required for type %q: the members' client URLs, like \"https://10.0.0.1:2379\"", StateEtcd)
	}
	seen := map[string]bool{}
	for i, ep := range et.Endpoints {
		f := index("state.endpoints", i)
		if err := checkEndpoint(ep); err != nil {
			col.add(f, ep, "%v", err)
		} else if seen[ep] {
			col.add(f, ep, "listed twice")
		}
		seen[ep] = true
	}
	if (et.Cert == "") != (et.Key == "") {
		col.add("state.tls", et.Cert+" "+et.Key, "cert and key go together")
	}
	if g := et.Gateway; len(g) > 253 || strings.ContainsFunc(g, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_')
	}) {
		col.add("state.gateway", g, "want a name of letters, digits, '-', '.', '_' (at most 253)")
	}
	p := et.Prefix
	switch {
	case !strings.HasPrefix(p, "/") || len(p) < 2:
		col.add("state.prefix", p, "want a key prefix like %q", DefaultEtcdPrefix)
	case strings.HasSuffix(p, "/") || strings.Contains(p, "//"):
		col.add("state.prefix", p, "no trailing or doubled \"/\"")
	case strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		col.add("state.prefix", p, "no spaces or control characters")
	}
}

// checkEndpoint accepts http(s)://HOST:PORT and nothing else (a path, a
// user or a query would be silently ignored by the client).
func checkEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("want http://HOST:PORT or https://HOST:PORT")
	}
	if u.Host == "" || u.Port() == "" || u.Hostname() == "" {
		return fmt.Errorf("want HOST:PORT after %s://", u.Scheme)
	}
	if (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("only a scheme, host and port")
	}
	return nil
}

// ValidateState checks the state section alone (`edgelb store copy`
// checks its --to with the rule the config file's endpoints follow).
func (c *Config) ValidateState() error {
	var col collector
	c.validateState(&col)
	return col.err("")
}
