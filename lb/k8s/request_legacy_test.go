package k8s

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgelb/edgelb/lb"
)

// TestLegacyMetalLBAnnotations: the metallb.universe.tf keys are read like the
// metallb.io ones, with edgelb.io > metallb.io > metallb.universe.tf, and an
// error names the key the user wrote.
func TestLegacyMetalLBAnnotations(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ann      map[string]string
		ip       string
		pool, sk string
		errField string
	}{
		{name: "legacy only", ann: map[string]string{
			LegacyMetalLBAnnotationIPs: "192.0.2.11", LegacyMetalLBAnnotationPool: "old", LegacyMetalLBAnnotationSh: "k-old"},
			ip: "192.0.2.11", pool: "old", sk: "k-old"},
		{name: "metallb.io wins over legacy", ann: map[string]string{
			LegacyMetalLBAnnotationIPs: "192.0.2.11", MetalLBAnnotationIPs: "192.0.2.12",
			LegacyMetalLBAnnotationPool: "old", MetalLBAnnotationPool: "new",
			LegacyMetalLBAnnotationSh: "k-old", MetalLBAnnotationSh: "k-new"},
			ip: "192.0.2.12", pool: "new", sk: "k-new"},
		{name: "edgelb.io wins over both", ann: map[string]string{
			LegacyMetalLBAnnotationPool: "old", MetalLBAnnotationPool: "new", AnnotationPool: "ours",
			LegacyMetalLBAnnotationSh: "k-old", AnnotationShared: "k-ours"},
			pool: "ours", sk: "k-ours"},
		{name: "legacy shared key alone", ann: map[string]string{LegacyMetalLBAnnotationSh: "k1"}, sk: "k1"},
		{name: "bad legacy pool named", ann: map[string]string{LegacyMetalLBAnnotationPool: "Not_A_Name"},
			errField: "metadata.annotations[" + LegacyMetalLBAnnotationPool + "]"},
		{name: "bad legacy ip named", ann: map[string]string{LegacyMetalLBAnnotationIPs: "nope"},
			errField: "metadata.annotations[" + LegacyMetalLBAnnotationIPs + "]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := lbService("a", func(s *corev1.Service) {
				for k, v := range tc.ann {
					s.Annotations[k] = v
				}
			})
			in, err := parseIntent(svc, nil)
			if tc.errField != "" {
				var fe *lb.FieldError
				if !errors.As(err, &fe) || fe.Field != tc.errField {
					t.Fatalf("err = %v, want a FieldError on %s", err, tc.errField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if in.Req.Pool != tc.pool || in.Req.SharingKey != tc.sk {
				t.Fatalf("pool %q sharing %q, want %q %q", in.Req.Pool, in.Req.SharingKey, tc.pool, tc.sk)
			}
			got := ""
			if a, ok := in.Requested[lb.IPv4]; ok {
				got = a.String()
			}
			if got != tc.ip {
				t.Fatalf("requested %q, want %q", got, tc.ip)
			}
		})
	}
}
