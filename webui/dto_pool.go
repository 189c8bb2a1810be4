package webui

import "github.com/edgelb/edgelb/lb"

type (
	// PoolSpec is the JSON body of POST /api/v1/pools and PUT
	// /api/v1/pools/{name}: lb's input schema, as in the config file and
	// an IPPool's spec.
	PoolSpec = lb.PoolInput
	// AdvertisementSpec carries the BGP attributes of a pool's routes.
	AdvertisementSpec = lb.AdvertisementInput
)

// PoolStatus is a pool as the API returns it: its spec and its usage.
type PoolStatus struct {
	Spec PoolSpec `json:"spec"`
	// Size is the number of addresses (capped at 2^64-1 for huge IPv6 pools).
	Size uint64 `json:"size"`
	// Used is how many of them are assigned to services.
	Used int `json:"used"`
	// Origin is who declared it: "config" (the config file: REST writes
	// are refused), "api" or "kubernetes" (an IPPool object).
	Origin string `json:"origin"`
}

// parsePool turns the body into an lb.Pool with lb's one validator, on the
// pool alone; overlaps with other pools and addresses in use are the
// Manager's to refuse (409), and so are the gateway's own addresses (the
// engine knows them: lb.ValidateStandalonePool).
func parsePool(s PoolSpec) (lb.Pool, error) { return lb.ParsePool(&s, nil) }

func poolStatusOf(p lb.PoolStatus) PoolStatus {
	return PoolStatus{Spec: lb.PoolInputOf(p.Pool), Size: p.Size, Used: p.Used, Origin: string(p.Origin)}
}
