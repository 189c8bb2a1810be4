package metallb

import (
	"bytes"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"

	"github.com/edgelb/edgelb/lb"
)

// standaloneConfig is the edgelb config file a gateway without Kubernetes
// reads: pools and announce.
type standaloneConfig struct {
	Pools    []Pool   `json:"pools"`
	Announce Announce `json:"announce"`
}

type clusterConfig struct {
	Announce   Announce   `json:"announce"`
	Kubernetes kubeConfig `json:"kubernetes"`
}

// kubeConfig: MetalLB serves every LoadBalancer Service without a class,
// so the migrated daemon must too (handleClassless).
type kubeConfig struct {
	Enabled         bool `json:"enabled"`
	HandleClassless bool `json:"handleClassless"`
}

type ipPool struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       lb.PoolInput   `json:"spec"` // without name: metadata.name is the pool's
}

// Config renders the standalone config file: pools keep only their
// serviceAllocation priority (standalone services have no namespace or
// labels for selectors to match; the report says so).
func (r *Result) Config() ([]byte, error) {
	pools := make([]Pool, len(r.Pools))
	for i, p := range r.Pools {
		p.ServiceAllocation = standaloneAllocation(p.ServiceAllocation)
		pools[i] = p
	}
	return yaml.Marshal(standaloneConfig{Pools: pools, Announce: r.Announce})
}

// ClusterConfig renders the config file for Kubernetes mode (pools are
// IPPool objects there, see Objects).
func (r *Result) ClusterConfig() ([]byte, error) {
	return yaml.Marshal(clusterConfig{Announce: r.Announce, Kubernetes: kubeConfig{Enabled: true, HandleClassless: true}})
}

// Objects renders the pools as edgelb.io/v1alpha1 IPPool documents.
func (r *Result) Objects() ([]byte, error) {
	var buf bytes.Buffer
	for i, p := range r.Pools {
		o := ipPool{APIVersion: "edgelb.io/v1alpha1", Kind: "IPPool", Metadata: map[string]any{"name": p.Name},
			Spec: p}
		o.Spec.Name = ""
		b, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// WriteReport writes every unsupported field, every note and every
// skipped document, one per line, as "# " comments so it can sit in a
// YAML file.
func (r *Result) WriteReport(w io.Writer) {
	fmt.Fprintf(w, "# edgelb migrate metallb: %d pools, %d BGP peers, %d unsupported fields, %d notes\n",
		len(r.Pools), r.peerCount(), len(r.Unsupported), len(r.Notes))
	for _, f := range r.Unsupported {
		fmt.Fprintf(w, "# UNSUPPORTED %s\n", f)
	}
	for _, f := range r.Notes {
		fmt.Fprintf(w, "# NOTE %s\n", f)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "# SKIPPED %s\n", s)
	}
}

func (r *Result) peerCount() int {
	if r.Announce.BGP == nil {
		return 0
	}
	return len(r.Announce.BGP.Peers)
}
