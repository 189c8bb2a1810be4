package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/announce/bgp"
	"github.com/edgelb/edgelb/lb/effects"
	"github.com/edgelb/edgelb/lb/engine"
	"github.com/edgelb/edgelb/lb/health"
	"github.com/edgelb/edgelb/lb/k8s"
	"github.com/edgelb/edgelb/proxy/statesync"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"sigs.k8s.io/yaml"
)

// nameRecorder is a Registerer that keeps the names of the metric families
// each collector describes (vectors included, before they have children).
// names maps a family to whether it is a histogram or summary (scraped as
// _bucket/_sum/_count series too).
type nameRecorder struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *nameRecorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	_, vec := c.(prometheus.ObserverVec)
	_, one := c.(prometheus.Observer)
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = vec || one
		}
	}
	return nil
}
func (r *nameRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}
func (r *nameRecorder) Unregister(prometheus.Collector) bool { return false }

// exportedMetrics lists every family the daemon's registry can carry, read
// from the collectors the packages register (not from a hand list):
// the engine, the Kubernetes controller, the BGP speaker, the health
// checker, the dataplane effects, start-up phases, Go and process.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	r := &nameRecorder{names: map[string]bool{}}
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	engine.DescribeMetrics(r)
	k8s.DescribeMetrics(r)
	health.DescribeMetrics(r)
	if err := bgp.DescribeMetrics(r); err != nil {
		t.Fatal(err)
	}
	effects.DescribeMetrics(r)
	(&startup{}).register(r)
	r.MustRegister(&syncCollector{s: statesync.NewFake()}, &ipvsSyncCollector{}, conntrackCollector{})
	out := map[string]bool{}
	for n, observed := range r.names {
		out[n] = true
		if !observed {
			continue
		}
		// A histogram or summary is scraped as these series.
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			out[n+s] = true
		}
	}
	return out
}

// metricRef finds the metric names a PromQL expression reads: edgelb's own
// and the process/Go collectors' families.
var metricRef = regexp.MustCompile(`\b(edgelb_[a-z0-9_]+|process_[a-z0-9_]+|go_[a-z0-9_]+)\b`)

func checkExpr(t *testing.T, where, expr string, exported map[string]bool) {
	t.Helper()
	for _, p := range exprProblems(expr, exported) {
		t.Errorf("%s: %s", where, p)
	}
}

func exprProblems(expr string, exported map[string]bool) []string {
	refs := metricRef.FindAllString(expr, -1)
	if len(refs) == 0 {
		return []string{fmt.Sprintf("query %q names no edgelb metric", expr)}
	}
	var out []string
	for _, n := range refs {
		if !exported[n] {
			out = append(out, fmt.Sprintf("query %q reads %q, which edgelb does not export", expr, n))
		}
	}
	return out
}

// The check itself: a misspelt or removed metric and a query over no edgelb
// metric are caught; a histogram's _bucket series is accepted.
func TestMetricCheckCatchesUnknownNames(t *testing.T) {
	exported := exportedMetrics(t)
	for expr, want := range map[string]int{
		`rate(edgelb_dataplane_syncs_total[5m])`:                            0,
		`rate(edgelb_dataplane_sync_duration_seconds_bucket[5m])`:           0,
		`rate(edgelb_dataplane_sync_total[5m])`:                             1,
		`edgelb_pool_used / edgelb_pool_sizes`:                              1,
		`vector(1)`:                                                         1,
		`edgelb_dataplane_syncs_total_bucket + edgelb_k8s_leader_count * 0`: 2,
	} {
		if got := exprProblems(expr, exported); len(got) != want {
			t.Errorf("%s: %d problems %q, want %d", expr, len(got), got, want)
		}
	}
}

func TestDashboardQueriesNameExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	if !exported["edgelb_dataplane_converged"] || !exported["edgelb_bgp_session_up"] || !exported["edgelb_k8s_leader"] {
		t.Fatalf("recorder missed known families: %d names", len(exported))
	}
	raw, err := os.ReadFile("../../../../docs/monitoring/grafana/edgelb.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard has uid %q and %d panels", dash.UID, len(dash.Panels))
	}
	used := map[string]bool{}
	queries := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %d %q has no query", p.ID, p.Title)
		}
		for _, q := range p.Targets {
			queries++
			checkExpr(t, "panel "+p.Title, q.Expr, exported)
			for _, n := range metricRef.FindAllString(q.Expr, -1) {
				used[n] = true
			}
		}
	}
	t.Logf("MEASURED dashboard: %d panels, %d queries, %d distinct metrics of %d exported names (histogram series included)", len(dash.Panels), queries, len(used), len(exported))
}

func TestAlertRulesNameExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	raw, err := os.ReadFile("../../../../docs/monitoring/prometheus/edgelb-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(raw, &rules); err != nil {
		t.Fatalf("rules YAML: %v", err)
	}
	var names []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			checkExpr(t, "alert "+r.Alert, r.Expr, exported)
		}
	}
	sort.Strings(names)
	// The alerts issue 20 asks for, by what they watch.
	for _, want := range []string{"EdgelbVIPWithoutOwner", "EdgelbBackendDown", "EdgelbSyncFailing", "EdgelbPoolNearlyExhausted", "EdgelbBGPSessionDown"} {
		if i := sort.SearchStrings(names, want); i == len(names) || names[i] != want {
			t.Errorf("alert %q missing; have %s", want, strings.Join(names, ", "))
		}
	}
}
