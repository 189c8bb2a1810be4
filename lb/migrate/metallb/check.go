package metallb

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/edgelb/edgelb/lb/config"
)

// check runs the converted config through edgelb's own config parser and
// validator — the one the config file, REST and IPPool objects go through
// — so the converter refuses what edgelb would refuse, naming the MetalLB
// object, instead of writing out a config `edgelb check` then rejects.
// MetalLB objects that came from a cluster passed the API server's checks;
// hand-written YAML (`edgelb migrate metallb FILE`) has not (FuzzConvert
// found a pool named "0A" and a CIDR with host bits that the converter
// passed on).
//
// Password files do not exist yet where the conversion runs (the report
// says to write them), so reading one yields a placeholder; an L2 interface
// the user must still choose is a placeholder too.
func (c *converter) check() error {
	// What the report leaves to the user is filled in for the check only:
	// the L2 interface when MetalLB named none and --l2-interface was not
	// given (a note says to set it), and password files (read below).
	res := c.res
	if res.Announce.L2 != nil && res.Announce.L2.Interface == "" {
		res.Announce.L2 = &L2{Interface: "placeholder0"}
	}
	cfg, err := res.Config()
	if err != nil {
		return fmt.Errorf("render the converted config: %w", err)
	}
	_, err = config.ParseWith(cfg, func(string) ([]byte, error) { return []byte("placeholder\n"), nil })
	var errs *config.Errors
	if err == nil || !errors.As(err, &errs) || len(errs.List) == 0 {
		return err
	}
	fe := errs.List[0] // the first, as the other refusals here
	o := c.objectOf(fe.Field)
	why := fe.Err.Error()
	if rest := errs.Lines()[1:]; len(rest) > 0 {
		why += "; also " + strings.Join(rest, "; ")
	}
	if o == nil {
		return fmt.Errorf("%w: the converted config: %s %q: %s", ErrInput, fe.Field, fe.Value, why)
	}
	return fmt.Errorf("%w: %s (%s): edgelb refuses its %s %q: %s", ErrInput, o.Ref(), o.Source, fe.Field, fe.Value, why)
}

var fieldIndex = regexp.MustCompile(`^(pools|announce\.bgp\.peers)\[(\d+)\]`)

// objectOf finds the MetalLB object behind an edgelb field path.
func (c *converter) objectOf(field string) *Object {
	m := fieldIndex.FindStringSubmatch(field)
	if m == nil {
		return nil
	}
	i, _ := strconv.Atoi(m[2])
	switch {
	case m[1] == "pools" && i < len(c.res.Pools):
		return c.objects["pool/"+c.res.Pools[i].Name]
	case m[1] != "pools" && c.res.Announce.BGP != nil && i < len(c.res.Announce.BGP.Peers):
		return c.objects["peer/"+c.res.Announce.BGP.Peers[i].Name]
	}
	return nil
}
