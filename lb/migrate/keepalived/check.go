package keepalived

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/edgelb/edgelb/lb/config"
)

// check runs the converted config through edgelb's own config parser and
// validator (config.CheckGenerated), so the converter refuses what edgelb
// would refuse, naming the virtual_server's line, instead of writing out a
// config `edgelb check` then rejects (FuzzParse found a VIP of 0.0.0.10,
// "this network", passed on).
func (c *converter) check() error {
	out, err := c.res.YAML()
	if err != nil {
		return fmt.Errorf("render the converted config: %w", err)
	}
	errs := config.CheckGenerated(out)
	if errs == nil {
		return nil
	}
	// Lead with an error a virtual_server can be named for (the pool is
	// made of every VIP: its errors repeat a service's).
	for k, fe := range errs.List {
		if m := svcIndex.FindStringSubmatch(fe.Field); m != nil {
			if i, _ := strconv.Atoi(m[1]); i < len(c.svcNodes) {
				n := c.svcNodes[i]
				return &Error{n.File, n.Line, fmt.Sprintf("edgelb refuses the converted %v%s", fe, errs.Others(k)), ErrValue}
			}
		}
	}
	return fmt.Errorf("%w: edgelb refuses the converted %v%s", ErrValue, errs.List[0], errs.Others(0))
}

var svcIndex = regexp.MustCompile(`^services\[(\d+)\]`)
