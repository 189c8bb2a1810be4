package syncd

import (
	"errors"
	"fmt"
)

// Desired is what edgelb wants running: a master, a backup, both or
// neither (nil = off). edgelb runs both on every gateway: each sends the
// connections it forwards and receives the others'.
type Desired struct {
	Master *Params
	Backup *Params
}

// State is what the kernel runs, read back (kernel defaults filled in).
type State struct {
	Master *Params
	Backup *Params
}

// Syncer converges the kernel's sync daemons to a Desired state.
type Syncer struct{ K Kernel }

// Get reads the running daemons back.
func (s Syncer) Get() (State, error) {
	ds, err := s.K.List()
	if err != nil {
		return State{}, err
	}
	var st State
	for _, d := range ds {
		p := d.Params
		switch d.Role {
		case Master:
			st.Master = &p
		case Backup:
			st.Backup = &p
		}
	}
	return st, nil
}

// Set converges: a role that should be off is stopped, a role that should
// run is started, and a running role whose parameters differ from the
// wanted ones is stopped and started again (the kernel cannot change a
// running daemon). A role already as wanted is not touched, so Set is cheap
// to call on every resync. Both roles are attempted; the errors are joined.
func (s Syncer) Set(want Desired) error {
	for _, p := range []*Params{want.Master, want.Backup} {
		if p != nil {
			if err := p.Validate(); err != nil {
				return err
			}
		}
	}
	st, err := s.Get()
	if err != nil {
		return err
	}
	return errors.Join(
		s.converge(Master, st.Master, want.Master),
		s.converge(Backup, st.Backup, want.Backup),
	)
}

func (s Syncer) converge(role Role, got, want *Params) error {
	switch {
	case want == nil && got == nil:
		return nil
	case want == nil:
		return s.K.Stop(role)
	case got != nil && Matches(*want, *got):
		return nil
	}
	if got != nil {
		if err := s.K.Stop(role); err != nil {
			return fmt.Errorf("restart with new parameters: %w", err)
		}
	}
	return s.K.Start(role, *want)
}

// Matches reports whether a running daemon's parameters (got, as the kernel
// reports them, defaults filled) satisfy the wanted ones. A zero wanted
// field means the kernel's default; a zero reported field means the kernel
// did not report it (before 4.3 there is no group, port or ttl), which is
// taken as satisfied rather than restarting the daemon on every resync.
func Matches(want, got Params) bool {
	if want.Interface != got.Interface || want.SyncID != got.SyncID {
		return false
	}
	wg := want.Group
	if !wg.IsValid() {
		wg = DefaultGroup
	}
	if got.Group.IsValid() && wg != got.Group {
		return false
	}
	if got.Port != 0 && orDefault(want.Port, DefaultPort) != got.Port {
		return false
	}
	if got.TTL != 0 && uint16(orDefault(uint16(want.TTL), DefaultTTL)) != uint16(got.TTL) {
		return false
	}
	// MaxLen is not compared: the kernel derives it from the interface's
	// MTU when zero and clamps a wanted value, so the reported one differs.
	return true
}

func orDefault(v, def uint16) uint16 {
	if v == 0 {
		return def
	}
	return v
}
