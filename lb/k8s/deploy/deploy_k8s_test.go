//go:build k8s

package deploy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/edgelb/edgelb/lab/k8slab"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/k8s/deploy"
)

type kustomization struct {
	Resources []string `json:"resources"`
	Images    []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

// render builds the kustomization the way `kubectl apply -k` does for what it
// uses: resources (files, or directories holding a kustomization) in order,
// then the images transform. Anything else in the file is an error here, so
// the test cannot pass over a feature it does not apply.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	var name string
	for _, n := range []string{"kustomization.yaml", "kustomization.yml"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			name = n
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(raw, &k, yaml.DisallowUnknownFields); err != nil {
		// apiVersion/kind are the only other fields allowed.
		var loose map[string]any
		_ = yaml.Unmarshal(raw, &loose)
		for f := range loose {
			if f != "apiVersion" && f != "kind" && f != "resources" && f != "images" {
				t.Fatalf("%s: field %q not applied by this test", filepath.Join(dir, name), f)
			}
		}
		if err := yaml.Unmarshal(raw, &k); err != nil {
			t.Fatal(err)
		}
	}
	var out []*unstructured.Unstructured
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			out = append(out, render(t, p)...)
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range bytes.Split(b, []byte("\n---")) {
			var m map[string]any
			if err := yaml.Unmarshal(part, &m); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if len(m) > 0 {
				out = append(out, &unstructured.Unstructured{Object: m})
			}
		}
	}
	for _, img := range k.Images {
		for _, u := range out {
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			for _, c := range cs {
				c := c.(map[string]any)
				ref, _ := c["image"].(string)
				base, _, _ := strings.Cut(ref, ":")
				if base != img.Name {
					continue
				}
				if img.NewName != "" {
					base = img.NewName
				}
				c["image"] = base + ":" + img.NewTag
			}
			if len(cs) > 0 {
				_ = unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers")
			}
		}
	}
	return out
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

// TestK8sManifestsServerDryRun: every object of `kubectl apply -k
// lb/k8s/deploy` is accepted by a real kube-apiserver with --dry-run=server
// (admission, validation, defaulting, RBAC escalation checks), the DaemonSet
// runs as the ServiceAccount rbac.yaml binds — the same file the controller
// tests run under — with host networking and only NET_ADMIN/NET_RAW, and the
// ServiceAccount gets what the controller needs and nothing broader.
func TestK8sManifestsServerDryRun(t *testing.T) {
	lab := k8slab.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	objs := render(t, ".")
	rbacFile, err := os.ReadFile("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rbacFile, deploy.RBAC()) {
		t.Fatal("deploy.RBAC() (what the k8s tests apply) differs from rbac.yaml")
	}
	var k kustomization
	raw, _ := os.ReadFile("kustomization.yaml")
	if err := yaml.Unmarshal(raw, &k); err != nil || !slices.Contains(k.Resources, "rbac.yaml") {
		t.Fatalf("kustomization.yaml does not ship rbac.yaml (%v): %v", err, k.Resources)
	}

	ds := find(objs, "DaemonSet", "edgelb")
	if ds == nil {
		t.Fatal("no DaemonSet edgelb in the kustomization")
	}
	sa, _, _ := unstructured.NestedString(ds.Object, "spec", "template", "spec", "serviceAccountName")
	if find(objs, "ServiceAccount", sa) == nil || find(objs, "ClusterRoleBinding", "edgelb") == nil {
		t.Fatalf("DaemonSet runs as ServiceAccount %q, which rbac.yaml does not define and bind", sa)
	}
	if hn, _, _ := unstructured.NestedBool(ds.Object, "spec", "template", "spec", "hostNetwork"); !hn {
		t.Fatal("DaemonSet without hostNetwork")
	}
	cs, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		sc := c.(map[string]any)["securityContext"].(map[string]any)
		caps := sc["capabilities"].(map[string]any)
		add := fmt.Sprint(caps["add"])
		if add != "[NET_ADMIN NET_RAW]" || fmt.Sprint(caps["drop"]) != "[ALL]" || sc["privileged"] != false {
			t.Fatalf("container capabilities add %s drop %v privileged %v; want add [NET_ADMIN NET_RAW], drop [ALL], not privileged",
				add, caps["drop"], sc["privileged"])
		}
		t.Logf("container %s: image %s, capabilities add %s drop %v", c.(map[string]any)["name"], c.(map[string]any)["image"], add, caps["drop"])
	}
	// The ConfigMap's config is one edgelb accepts.
	cm := find(objs, "ConfigMap", "edgelb-config")
	text, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("ConfigMap edgelb-config: %v", err)
	}
	if !cfg.Kubernetes.Enabled {
		t.Fatal("ConfigMap edgelb-config is not cluster mode")
	}

	// Namespaced objects can be dry-run only into a namespace that exists
	// (kubectl apply --dry-run=server on a fresh cluster fails the same way),
	// so the Namespace is created for real first.
	ns := find(objs, "Namespace", "edgelb-system")
	if err := k8slab.Apply(ctx, lab.Config, mustYAML(t, ns)); err != nil {
		t.Fatal(err)
	}
	dc := dynamic.NewForConfigOrDie(lab.Config)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(lab.Config)))
	dry := []string{metav1.DryRunAll}
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk.Kind, u.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dc.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dc.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		verb := "create"
		cur, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
		switch {
		case err == nil: // the CRD (k8slab installs it) and the Namespace
			verb = "update"
			u = u.DeepCopy()
			u.SetResourceVersion(cur.GetResourceVersion())
			_, err = ri.Update(ctx, u, metav1.UpdateOptions{DryRun: dry})
		case apierrors.IsNotFound(err):
			_, err = ri.Create(ctx, u, metav1.CreateOptions{DryRun: dry})
		}
		if err != nil {
			t.Fatalf("--dry-run=server %s %s %s/%s: %v", verb, gvk.Kind, u.GetNamespace(), u.GetName(), err)
		}
		t.Logf("accepted (dry-run=server %s): %s %s", verb, gvk.Kind, strings.TrimPrefix(u.GetNamespace()+"/"+u.GetName(), "/"))
	}
	// Dry-run stored nothing.
	if _, err := kubernetes.NewForConfigOrDie(lab.Config).AppsV1().DaemonSets("edgelb-system").Get(ctx, "edgelb", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("dry-run stored the DaemonSet: %v", err)
	}

	// The ServiceAccount's rights, asked of the API server's authorizer once
	// rbac.yaml is in: what the controller does is allowed, the rest is not.
	if err := k8slab.Apply(ctx, lab.Config, deploy.RBAC()); err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:edgelb-system:" + sa
	cs2 := kubernetes.NewForConfigOrDie(lab.Config)
	for _, c := range []struct {
		verb, group, resource, sub, ns string
		want                           bool
	}{
		{"list", "", "services", "", "", true},
		{"update", "", "services", "status", "default", true},
		{"watch", "discovery.k8s.io", "endpointslices", "", "", true},
		{"update", "coordination.k8s.io", "leases", "", "edgelb-system", true},
		{"watch", "coordination.k8s.io", "leases", "", "edgelb-system", true}, // a release is seen at once (lb/k8s/handover.go)
		{"create", "edgelb.io", "ippools", "", "", true},
		{"update", "", "services", "", "default", false},
		{"list", "", "secrets", "", "", false},
		{"update", "coordination.k8s.io", "leases", "", "kube-system", false},
		{"create", "", "pods", "", "edgelb-system", false},
	} {
		r, err := cs2.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authv1.SubjectAccessReview{Spec: authv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:edgelb-system", "system:authenticated"},
			ResourceAttributes: &authv1.ResourceAttributes{Verb: c.verb, Group: c.group, Resource: c.resource, Subresource: c.sub, Namespace: c.ns},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("%s %s/%s %s in %q", c.verb, c.group, c.resource, c.sub, c.ns)
		if r.Status.Allowed != c.want {
			t.Errorf("%s: %s allowed=%v, want %v", user, what, r.Status.Allowed, c.want)
		}
		t.Logf("%s: %s allowed=%v", sa, what, r.Status.Allowed)
	}
	t.Logf("MEASURED manifests: %d objects accepted by kube-apiserver --dry-run=server", len(objs))
}

func mustYAML(t *testing.T, u *unstructured.Unstructured) []byte {
	t.Helper()
	b, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
