package metallb

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
)

// TestReadCluster: objects listed from a cluster (every namespace) convert
// like the same objects read from files.
func TestReadCluster(t *testing.T) {
	u := func(av, kind, name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": av, "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": "metallb-system"}, "spec": spec}}
	}
	lists := map[schema.GroupVersionResource]string{}
	for _, g := range clusterKinds {
		kind := map[string]string{"ipaddresspools": "IPAddressPool", "l2advertisements": "L2Advertisement",
			"bgppeers": "BGPPeer", "bgpadvertisements": "BGPAdvertisement", "communities": "Community",
			"bfdprofiles": "BFDProfile"}[g.Resource]
		lists[g] = kind + "List"
	}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists,
		u("metallb.io/v1beta1", "IPAddressPool", "pool", map[string]any{"addresses": []any{"192.0.2.0/28"}, "autoAssign": false}),
		u("metallb.io/v1beta2", "BGPPeer", "tor", map[string]any{"myASN": int64(64500), "peerASN": int64(64501), "peerAddress": "10.0.0.1",
			"bfdProfile": "fast"}),
	)
	objs, missing, err := ReadCluster(context.Background(), dyn)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || len(missing) != 0 {
		t.Fatalf("objs %d missing %v", len(objs), missing)
	}
	res, err := Convert(objs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Pools) != 1 || *res.Pools[0].AutoAssign || res.Announce.BGP == nil || res.Announce.BGP.Peers[0].ASN != 64501 {
		t.Fatalf("result %+v", res)
	}
	if got := fields(res.Unsupported); strings.Join(got, ",") != "BGPPeer/tor spec.bfdProfile,IPAddressPool/pool announcement" {
		t.Fatalf("unsupported %v", got)
	}
}
