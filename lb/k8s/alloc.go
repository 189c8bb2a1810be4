package k8s

import (
	"net/netip"

	"github.com/edgelb/edgelb/lb"
)

// Allocator is what the controller needs of lb's pure allocator. The
// controller owns it from a single goroutine (the keeper, keeper.go), so
// it need not be safe for concurrent use; workers use it only inside the
// keeper's operations.
type Allocator interface {
	// ReplacePools replaces the pools. Assignments whose address left its
	// pool stay held and are reported; the controller moves those Services.
	ReplacePools(pools []lb.Pool) ([]lb.Orphan, error)
	// PoolOf returns the pool whose ranges contain ip.
	PoolOf(ip netip.Addr) (string, bool)
	// Assign gives svc exactly ip (restart adoption, requested IPs). It
	// refuses an address outside the pools or held by a Service it may not
	// share with. Assigning an address svc already holds re-checks it
	// against req.
	Assign(svc string, ip netip.Addr, req lb.Request) error
	// Adopt is Assign without the pool-selector check, for addresses a
	// Service held before this allocator (a new leader never drops one
	// break-before-make; reconcile re-checks it with Admitted).
	Adopt(svc string, ip netip.Addr, req lb.Request) error
	// Admitted reports (as *lb.NotAdmittedError) when ip's pool's
	// serviceAllocation no longer admits the Service req describes.
	Admitted(svc string, ip netip.Addr, req lb.Request) error
	// Allocate picks an address of family fam for svc.
	Allocate(svc string, fam lb.Family, req lb.Request) (netip.Addr, error)
	Release(svc string, ip netip.Addr)
	ReleaseAll(svc string)
	// IPs returns what svc holds, IPv4 first.
	IPs(svc string) []netip.Addr
	// Used returns how many distinct addresses of the pool are held.
	Used(pool string) int
	// Assigned lists the services holding addresses.
	Assigned() []string
}

// NewAllocatorFunc builds a fresh allocator (one per leadership term, so a
// new leader starts from what the API says, never from stale memory).
type NewAllocatorFunc func() Allocator
