package ipvs

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/proxy"
)

// Available reports whether the running kernel has IPVS. It asks the kernel
// for the generic-netlink family "IPVS" — the one moby/ipvs would use, which
// itself hides a missing family (New succeeds, NewService silently does
// nothing, GetConfig panics). If the family is missing it tries
// `modprobe ip_vs` once and asks again. The error wraps
// proxy.ErrKernelFeature and names what is missing.
func Available() error {
	err := genlIPVS()
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.ENOENT) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = exec.CommandContext(ctx, "modprobe", "-q", "ip_vs").Run() // best effort
		cancel()
		if err = genlIPVS(); err == nil {
			return nil
		}
	}
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("ipvs: the kernel has no IPVS: generic netlink family \"IPVS\" not found "+
			"(CONFIG_IP_VS is not set, or module ip_vs is not loaded: try `modprobe ip_vs`): %w: %w", proxy.ErrKernelFeature, err)
	}
	return fmt.Errorf("ipvs: probe the generic netlink family \"IPVS\": %w", err)
}

func genlIPVS() error {
	_, err := netlink.GenlFamilyGet("IPVS")
	return err
}

// Probe decides `dataplane: auto`: IPVS when the kernel has it, nftables
// otherwise. It returns the dataplane's name ("ipvs" or "nftables") and a
// sentence for the log saying why.
func Probe() (name, why string) {
	if err := Available(); err != nil {
		return "nftables", fmt.Sprintf("dataplane auto: using nftables because IPVS is unavailable: %v", err)
	}
	return "ipvs", "dataplane auto: using ipvs (the kernel has IPVS: generic netlink family \"IPVS\" found)"
}
