// Package crds ships edgelb's CustomResourceDefinitions as YAML, embedded so
// the test lab (lab/k8slab) installs exactly the files users apply.
package crds

import "embed"

//go:embed *.yaml
var files embed.FS

// IPPoolYAML is the IPPool CRD (group edgelb.io, cluster-scoped).
func IPPoolYAML() []byte {
	b, err := files.ReadFile("edgelb.io_ippools.yaml")
	if err != nil {
		panic("crds: embedded IPPool CRD missing: " + err.Error())
	}
	return b
}

// All returns every CRD edgelb needs, in install order.
func All() [][]byte { return [][]byte{IPPoolYAML()} }
