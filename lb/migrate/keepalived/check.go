package keepalived

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/edgelb/edgelb/lb/config"
)

// check runs the converted config through edgelb's own config parser and
// validator — the one the config file, REST and Kubernetes go through — so
// the converter refuses what edgelb would refuse, naming the
// virtual_server's line, instead of writing out a config `edgelb check`
// then rejects (FuzzParse found a VIP of 0.0.0.10, "this network", passed
// on). Files the config names do not exist where the conversion runs, so
// reading one yields a placeholder.
func (c *converter) check() error {
	out, err := c.res.YAML()
	if err != nil {
		return fmt.Errorf("render the converted config: %w", err)
	}
	_, err = config.ParseWith(out, func(string) ([]byte, error) { return []byte("placeholder\n"), nil })
	var errs *config.Errors
	if err == nil || !errors.As(err, &errs) || len(errs.List) == 0 {
		return err
	}
	// Lead with an error a virtual_server can be named for (the pool is
	// made of every VIP: its errors repeat a service's).
	first, line := 0, ""
	for k, fe := range errs.List {
		if m := svcIndex.FindStringSubmatch(fe.Field); m != nil {
			if i, _ := strconv.Atoi(m[1]); i < len(c.svcNodes) {
				first, line = k, fmt.Sprintf("line %d: ", c.svcNodes[i].Line)
				break
			}
		}
	}
	fe := errs.List[first]
	why := fe.Err.Error()
	var rest []string
	for k, l := range errs.Lines() {
		if k != first {
			rest = append(rest, l)
		}
	}
	if len(rest) > 0 {
		why += "; also " + strings.Join(rest, "; ")
	}
	return fmt.Errorf("%w: %sedgelb refuses the converted %s %q: %s", ErrSyntax, line, fe.Field, fe.Value, why)
}

var svcIndex = regexp.MustCompile(`^services\[(\d+)\]`)
