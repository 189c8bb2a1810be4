package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

// MaxSize bounds a config file (and any file it points at): 32 MiB holds
// 50,000 services × 10 backends written out plainly, one per line (~22 MB,
// TestParseFiftyThousandPlain), while a mistaken path to a huge file still
// fails at once instead of exhausting memory (parsing costs ~10× the file).
const MaxSize = 32 << 20

// env is what parsing needs from the outside world: where relative paths
// start and how files are read (tests and the fuzzer use a fake).
type env struct {
	dir      string
	readFile func(path string) ([]byte, error)
}

// Load reads and parses the config file at path. Relative paths inside it
// (tokenFile, passwordFile, tls, state.dir...) are relative to the file's
// directory. A bad config returns *Errors with every problem.
func Load(path string) (*Config, error) {
	data, err := readRegular(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	cfg, err := parse(data, env{dir: filepath.Dir(path), readFile: readRegular})
	var errs *Errors
	if errors.As(err, &errs) {
		errs.Source = path
	}
	if cfg != nil {
		cfg.File = path
	}
	return cfg, err
}

// Parse parses a config held in memory; relative paths are relative to the
// working directory.
func Parse(data []byte) (*Config, error) {
	return parse(data, env{readFile: readRegular})
}

// CheckGenerated runs a config a tool generated (lb/migrate's converters)
// through the parser and validator every config goes through, and returns
// what edgelb would refuse in it (nil: it loads). The files it names —
// password files the user writes after the conversion — are read as
// placeholders.
func CheckGenerated(data []byte) *Errors {
	_, err := parse(data, env{readFile: func(string) ([]byte, error) { return []byte("placeholder\n"), nil }})
	if err == nil {
		return nil
	}
	var errs *Errors
	if errors.As(err, &errs) && len(errs.List) > 0 {
		return errs
	}
	// Not a field error (the document itself): one without a field.
	return &Errors{List: []*lb.FieldError{{Err: err}}}
}

// readRegular reads a regular file of at most MaxSize bytes. Devices, FIFOs
// and directories are refused before opening, so a path like /dev/zero or
// a pipe cannot hang or exhaust `edgelb check`.
func readRegular(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Sized from Stat (the file may still grow or shrink meanwhile; the
	// limit holds either way): io.ReadAll's doubling allocated and copied
	// ~2× a 5.5 MB config.
	var buf bytes.Buffer
	buf.Grow(int(min(st.Size(), MaxSize)) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxSize+1)); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%s: larger than %d MiB, the limit for a config file (lb/config MaxSize)", path, MaxSize>>20)
	}
	return b, nil
}

func parse(data []byte, e env) (*Config, error) {
	var c collector
	if len(data) > MaxSize {
		c.add("yaml", "", "config larger than %d MiB (lb/config MaxSize)", MaxSize>>20)
		return nil, c.err("")
	}
	// YAML 1.1 as Kubernetes reads it (go-yaml v2: `on`/`yes` are
	// booleans, `0x1F` is 31; duplicate keys refused), then the strict JSON
	// decoder REST bodies go through: unknown fields and wrong types are
	// errors naming their path.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		c.addErr("yaml", "", errors.New(yamlMessage(err)))
		return nil, c.err("")
	}
	var raw rawConfig
	switch t := bytes.TrimSpace(js); {
	case len(t) == 0 || string(t) == "null": // an empty file is a valid config of defaults
	case t[0] != '{':
		c.add("config", shorten(string(t)), "want a mapping of sections (pools:, services:, ...) at the top level")
		return nil, c.err("")
	default:
		if err := lb.DecodeStrict(js, &raw); err != nil {
			if fe, ok := err.(*lb.FieldError); ok {
				c.addErr(fe.Field, fe.Value, fe.Err)
			} else {
				c.addErr("yaml", "", err)
			}
			return nil, c.err("")
		}
	}
	cfg := convert(&raw, e, &c)
	cfg.validate(&c)
	if err := c.err(""); err != nil {
		return nil, err
	}
	return cfg, nil
}

func shorten(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// yamlMessage drops the prefixes go-yaml (and sigs.k8s.io/yaml) add.
func yamlMessage(err error) string {
	s := err.Error()
	for _, p := range []string{"error converting YAML to JSON: ", "yaml: "} {
		s = strings.TrimPrefix(s, p)
	}
	// Some messages span lines ("unmarshal errors:\n  line 2: ..."): one line each.
	return strings.Join(strings.Fields(strings.ReplaceAll(s, ":\n", ": ")), " ")
}

func convert(r *rawConfig, e env, c *collector) *Config {
	cfg := &Config{}
	// The dataplane first: its snat default decides services' default method.
	cfg.Dataplane = convertDataplane(&r.Dataplane, c)
	for i := range r.Pools {
		cfg.Pools = append(cfg.Pools, lb.ConvertPool(&c.Collector, index("pools", i), &r.Pools[i]))
	}
	method := proxy.NAT
	if !cfg.Dataplane.SNAT {
		method = proxy.NATNoSNAT
	}
	if len(r.Services) > 0 {
		cfg.Services = make([]lb.ServiceSpec, 0, len(r.Services))
		cfg.wroteVIP = make([]bool, len(r.Services))
	}
	for i := range r.Services {
		cfg.Services = append(cfg.Services, lb.ConvertService(&c.Collector, index("services", i), &r.Services[i], method))
		cfg.wroteVIP[i] = r.Services[i].VIP != ""
	}
	cfg.Announce = convertAnnounce(&r.Announce, e, c)
	cfg.API = convertAPI(&r.API, e, c)
	cfg.Kubernetes = convertKubernetes(&r.Kubernetes, e, cfg.Dataplane.SNAT, c)
	cfg.State = convertState(&r.State, e, c)
	cfg.Health = Health{AllDown: AllDownKeep, MaxInFlight: DefaultHealthInFlight}
	if r.Health.AllDown != "" {
		cfg.Health.AllDown = AllDownPolicy(r.Health.AllDown)
	}
	if r.Health.MaxInFlight != 0 {
		cfg.Health.MaxInFlight = intIn(c, "health.maxInFlight", r.Health.MaxInFlight, 1, 100000)
	}
	cfg.Log = convertLog(&r.Log, c)
	cfg.StateSync = convertStateSync(&r.StateSync, c)
	return cfg
}

// path resolves a file name against the config file's directory.
func (e env) path(p string) string {
	if p == "" || filepath.IsAbs(p) || e.dir == "" {
		return p
	}
	return filepath.Join(e.dir, p)
}

// secretFile reads a file holding one secret (token, password, key):
// surrounding whitespace trimmed, empty refused.
func (e env) secretFile(c *collector, field, p string) (string, string) {
	full := e.path(p)
	b, err := e.readFile(full)
	if err != nil {
		c.add(field, p, "cannot read: %v", err)
		return full, ""
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		c.add(field, p, "file is empty")
	}
	return full, s
}

// parseDuration parses a Go duration; def when empty; negative refused.
func parseDuration(c *collector, field string, d duration, def time.Duration) time.Duration {
	if d == "" {
		return def
	}
	v, err := time.ParseDuration(d)
	if err != nil {
		c.add(field, d, "want a duration like \"10s\", \"500ms\" or \"3h\"")
		return def
	}
	if v < 0 {
		c.add(field, d, "must not be negative")
		return def
	}
	return v
}

// parseAddr parses one IP address (no zone, IPv4-mapped IPv6 unmapped).
func parseAddr(c *collector, field, s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		c.add(field, s, "not an IP address")
		return netip.Addr{}, false
	}
	if a.Zone() != "" {
		c.add(field, s, "zones are not allowed")
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// intIn range-checks an integer, reporting and clamping to lo when outside.
func intIn(c *collector, field string, v, lo, hi int64) int {
	if v < lo || v > hi {
		c.add(field, fmt.Sprint(v), "out of range %d-%d", lo, hi)
		return int(lo)
	}
	return int(v)
}

func port16(c *collector, field string, v int64, lo int64) uint16 {
	if v == 0 && lo == 0 {
		return 0
	}
	if v < lo || v > 65535 {
		c.add(field, fmt.Sprint(v), "port out of range %d-65535", lo)
		return 0
	}
	return uint16(v)
}

func convertLog(r *rawLog, c *collector) Log {
	l := Log{Format: "text"}
	switch strings.ToLower(r.Level) {
	case "", "info":
	case "debug":
		l.Level = slog.LevelDebug
	case "warn", "warning":
		l.Level = slog.LevelWarn
	case "error":
		l.Level = slog.LevelError
	default:
		c.add("log.level", r.Level, "want debug, info, warn or error")
	}
	if r.Format != "" {
		l.Format = r.Format
	}
	return l
}
