package keepalived

import (
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// YAML renders the edgelb config file.
func (r *Result) YAML() ([]byte, error) { return yaml.Marshal(r.Config) }

// WriteReport writes every unsupported keyword and every note, one per
// line, as "# " comments.
func (r *Result) WriteReport(w io.Writer) {
	fmt.Fprintf(w, "# edgelb migrate keepalived: %d services, %d unsupported keywords, %d notes\n",
		len(r.Config.Services), len(r.Unsupported), len(r.Notes))
	for _, f := range r.Unsupported {
		fmt.Fprintf(w, "# UNSUPPORTED %s\n", f)
	}
	for _, f := range r.Notes {
		fmt.Fprintf(w, "# NOTE %s\n", f)
	}
}
