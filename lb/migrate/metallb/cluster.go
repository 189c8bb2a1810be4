package metallb

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// clusterKinds are read from a live cluster, each at the version MetalLB
// serves as storage today (the API server converts older objects).
var clusterKinds = []schema.GroupVersionResource{
	{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"},
	{Group: "metallb.io", Version: "v1beta1", Resource: "l2advertisements"},
	{Group: "metallb.io", Version: "v1beta2", Resource: "bgppeers"},
	{Group: "metallb.io", Version: "v1beta1", Resource: "bgpadvertisements"},
	{Group: "metallb.io", Version: "v1beta1", Resource: "communities"},
	{Group: "metallb.io", Version: "v1beta1", Resource: "bfdprofiles"},
}

// ReadCluster lists MetalLB's objects in every namespace. A resource the
// cluster does not serve (an older MetalLB) is skipped and named in
// missing, not treated as an error.
func ReadCluster(ctx context.Context, dyn dynamic.Interface) (objs []*Object, missing []string, err error) {
	for _, gvr := range clusterKinds {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			missing = append(missing, gvr.Resource+"."+gvr.Group+"/"+gvr.Version+" (not served by this cluster)")
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("listing %s: %w", gvr.Resource, err)
		}
		for i := range list.Items {
			it := list.Items[i].Object
			o, err := objectOf(it, "cluster")
			if err != nil {
				return nil, nil, err
			}
			if o == nil {
				return nil, nil, errors.New("listing " + gvr.Resource + ": object outside metallb.io")
			}
			objs = append(objs, o)
		}
	}
	return objs, missing, nil
}
