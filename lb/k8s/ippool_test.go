package k8s

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/edgelb/edgelb/lb"
)

func poolObj(name string, age time.Duration, addrs ...string) *unstructured.Unstructured {
	p := lb.Pool{Name: name, AutoAssign: true}
	u := poolToObject(p)
	a := make([]any, len(addrs))
	for i, s := range addrs {
		a[i] = s
	}
	_ = unstructured.SetNestedSlice(u.Object, a, "spec", "addresses")
	u.SetCreationTimestamp(metav1.NewTime(time.Unix(1_700_000_000, 0).Add(age)))
	return u
}

func TestComputePools(t *testing.T) {
	ps := computePools([]*unstructured.Unstructured{
		poolObj("late", 2*time.Second, "192.0.2.8/29"), // overlaps "first": refused
		poolObj("first", 0, "192.0.2.0/28"),            // oldest keeps its range
		poolObj("bad", time.Second, "192.0.2.1/24"),    // host bits set
		poolObj("v6", 3*time.Second, "2001:db8::/120"), // fine
		poolObj("rev", 4*time.Second, "198.51.100.9-198.51.100.1"),
	}, func(u *unstructured.Unstructured) (lb.Pool, error) { return poolFromObject(u, nil) })
	if len(ps.Valid) != 2 || ps.Valid[0].Name != "first" || ps.Valid[1].Name != "v6" {
		t.Fatalf("valid = %+v", ps.Valid)
	}
	var ce *lb.ConflictError
	if !errors.As(ps.Rejected["late"], &ce) {
		t.Fatalf("late: %v", ps.Rejected["late"])
	}
	var fe *lb.FieldError
	if !errors.As(ps.Rejected["bad"], &fe) || fe.Field != "spec.addresses[0]" || fe.Value != "192.0.2.1/24" {
		t.Fatalf("bad: %v", ps.Rejected["bad"])
	}
	if ps.Rejected["rev"] == nil {
		t.Fatal("reversed range accepted")
	}
	t.Logf("rejections: late=%v; bad=%v; rev=%v", ps.Rejected["late"], ps.Rejected["bad"], ps.Rejected["rev"])
}

func TestPoolRoundTrip(t *testing.T) {
	r, _ := lb.ParseRange("192.0.2.0/28")
	p := lb.Pool{Name: "rt", Ranges: []lb.Range{r}, AvoidBuggyIPs: true,
		Advertisement: lb.Advertisement{Communities: []string{"65000:1"}, LocalPref: 200, AggregationLen: 28}}
	got, err := poolFromObject(poolToObject(p), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != p.Name || got.AutoAssign || !got.AvoidBuggyIPs || got.Advertisement.LocalPref != 200 ||
		got.Advertisement.AggregationLen != 28 || got.RangeStrings()[0] != "192.0.2.0/28" || got.Advertisement.Communities[0] != "65000:1" {
		t.Fatalf("round trip: %+v", got)
	}
	if n := poolSize(&got); n != 15 { // avoidBuggyIPs: .0 is not handed out (issue 37)
		t.Fatalf("size %d", n)
	}
	huge, _ := lb.ParseRange("2001:db8::/32")
	if n := poolSize(&lb.Pool{Ranges: []lb.Range{huge}}); n != 1<<63-1 {
		t.Fatalf("huge size %d", n)
	}
}

// FuzzPoolFromObject: any addresses list is either a valid pool or a
// FieldError/ConflictError naming the field; never a panic.
func FuzzPoolFromObject(f *testing.F) {
	for _, s := range []string{"192.0.2.0/28", "192.0.2.1/24", "198.51.100.9-198.51.100.1", "2001:db8::/120", " 192.0.2.5 ", "::ffff:192.0.2.0/120", "a-b"} {
		f.Add(s, "192.0.2.64/30")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		p, err := poolFromObject(poolObj("fz", 0, a, b), nil)
		if err != nil {
			var fe *lb.FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "spec.") {
				t.Fatalf("error %v is not a FieldError on spec", err)
			}
			return
		}
		if len(p.Ranges) != 2 || p.Validate() != nil {
			t.Fatalf("accepted invalid pool %+v", p)
		}
	})
}

func TestPoolServiceAllocation(t *testing.T) {
	r, _ := lb.ParseRange("192.0.2.0/28")
	sa := &lb.ServiceAllocation{Priority: 7, Namespaces: []string{"blue"},
		NamespaceSelectors: []lb.LabelSelector{{MatchLabels: map[string]string{"tier": "gold"}}},
		ServiceSelectors: []lb.LabelSelector{{MatchExpressions: []lb.LabelRequirement{
			{Key: "app", Operator: lb.OpIn, Values: []string{"web", "api"}}}}}}
	p := lb.Pool{Name: "sa", AutoAssign: true, Ranges: []lb.Range{r}, Allocation: sa}
	got, err := poolFromObject(poolToObject(p), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Allocation, sa) {
		t.Fatalf("round trip: %+v, want %+v", got.Allocation, sa)
	}
	// The validator's field path, under spec.
	bad := poolToObject(p)
	_ = unstructured.SetNestedSlice(bad.Object, []any{map[string]any{"matchExpressions": []any{
		map[string]any{"key": "app", "operator": "Equals", "values": []any{"x"}}}}}, "spec", "serviceAllocation", "serviceSelectors")
	_, err = poolFromObject(bad, nil)
	var fe *lb.FieldError
	if !errors.As(err, &fe) || fe.Field != "spec.serviceAllocation.serviceSelectors[0].matchExpressions[0].operator" || fe.Value != "Equals" {
		t.Fatalf("bad operator: %v", err)
	}
	// A field of the wrong type is a FieldError naming it (the strict decoder).
	_ = unstructured.SetNestedField(bad.Object, "high", "spec", "serviceAllocation", "priority")
	if _, err = poolFromObject(bad, nil); !errors.As(err, &fe) || fe.Field != "spec.serviceAllocation.priority" {
		t.Fatalf("priority as a string: %v", err)
	}
}

// FuzzPoolServiceAllocation: any serviceAllocation JSON in an IPPool is
// either a pool the validator accepts (and that renders back to the same
// allocation) or a FieldError under spec.serviceAllocation; never a panic.
func FuzzPoolServiceAllocation(f *testing.F) {
	for _, s := range []string{`{"priority":5}`, `{"namespaces":["a","b"]}`, `{"priority":-1}`,
		`{"namespaceSelectors":[{"matchLabels":{"team":"blue"}}]}`, `{"serviceSelectors":[{"matchExpressions":[{"key":"app","operator":"In","values":["x"]}]}]}`,
		`{"serviceSelectors":[{"matchExpressions":[{"key":"app","operator":"Equals"}]}]}`, `{"priority":"x"}`, `{"nope":1}`, `[]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, js string) {
		var sa any
		if err := utiljson.Unmarshal([]byte(js), &sa); err != nil {
			return
		}
		u := poolObj("fz", 0, "192.0.2.0/28")
		_ = unstructured.SetNestedField(u.Object, sa, "spec", "serviceAllocation")
		p, err := poolFromObject(u, nil)
		if err != nil {
			var fe *lb.FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "spec.serviceAllocation") {
				t.Fatalf("error %v is not a FieldError on spec.serviceAllocation", err)
			}
			return
		}
		if _, isMap := sa.(map[string]any); !isMap || p.Validate() != nil {
			t.Fatalf("accepted %s as %+v", js, p.Allocation)
		}
		back, err := poolFromObject(poolToObject(p), nil)
		if err != nil || !reflect.DeepEqual(back.Allocation, p.Allocation) {
			t.Fatalf("round trip of %s: %+v, %v", js, back.Allocation, err)
		}
	})
}
