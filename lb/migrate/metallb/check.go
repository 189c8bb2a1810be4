package metallb

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/edgelb/edgelb/lb/config"
)

// check runs the converted config through edgelb's own config parser and
// validator — the one the config file, REST and IPPool objects go through
// (config.CheckGenerated) — so the converter refuses what edgelb would
// refuse, naming the MetalLB object, instead of writing out a config
// `edgelb check` then rejects. MetalLB objects that came from a cluster
// passed the API server's checks; hand-written YAML (`edgelb migrate
// metallb -f FILE`) has not (FuzzConvert found a pool named "0A" passed on).
//
// What the report leaves to the user is filled in for the check only: the
// L2 interface when MetalLB named none and --l2-interface was not given (a
// note says to set it); password files are read as placeholders.
func (c *converter) check() error {
	res := c.res
	if res.Announce.L2 != nil && res.Announce.L2.Interface == "" {
		res.Announce.L2 = &L2{Interface: "placeholder0"}
	}
	cfg, err := res.Config()
	if err != nil {
		return fmt.Errorf("render the converted config: %w", err)
	}
	errs := config.CheckGenerated(cfg)
	if errs == nil {
		return nil
	}
	fe := errs.List[0]
	if o := c.objectOf(fe.Field); o != nil {
		return fmt.Errorf("%w: %s (%s): edgelb refuses its %v%s", ErrInput, o.Ref(), o.Source, fe, errs.Others(0))
	}
	return fmt.Errorf("%w: the converted config: %v%s", ErrInput, fe, errs.Others(0))
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
