// Package crds ships edgelb's CustomResourceDefinitions as YAML, embedded so the
// binary can print or install them and the test lab installs exactly what users get.
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
