// Package deploy ships what a cluster needs to run edgelb besides the CRDs:
// its namespace, service account and least-privilege RBAC, as YAML embedded
// in the binary (the k8s lab applies exactly this and runs the controller
// as that user).
package deploy

import _ "embed"

//go:embed rbac.yaml
var rbac []byte

// RBAC returns the multi-document YAML: Namespace edgelb-system,
// ServiceAccount edgelb, ClusterRole/Binding edgelb, Role/Binding edgelb-leader.
func RBAC() []byte { return rbac }
