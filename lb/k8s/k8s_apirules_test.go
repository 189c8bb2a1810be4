//go:build k8s

package k8s

import "testing"

// TestK8sPoolAPIRules runs on a real kube-apiserver the checks that
// TestFakePoolAPIRules runs on fakePoolAPI: the unit tests' fake plays
// the API server as it is.
func TestK8sPoolAPIRules(t *testing.T) {
	e := newEnv(t)
	checkPoolAPIRules(t, e.ctx, e.dyn.Resource(IPPoolGVR))
}
