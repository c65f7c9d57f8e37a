package routetable

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/kroute"
	"golang.org/x/sys/unix"
)

// MainTable is the kernel's main routing table.
const MainTable = unix.RT_TABLE_MAIN

// The table holds the kernel's routes as internal/kroute's Route, the one
// kernel-route type of the project, with device names resolved, so
// ownership decisions can be tested without netlink. It reads them with its
// own netlink conversion (fromNetlink in table.go), not nlroute.FromNetlink:
// the programmer is the code under test and the harness judges it through
// nlroute.FromNetlink, so a conversion bug must not hide on both sides.

// key is how the kernel tells routes apart in one table.
type key struct {
	dst    netip.Prefix
	metric int
	tos    int
}

func keyOf(k kroute.Route) key { return key{k.Dst, k.Metric, k.TOS} }

// OwnershipPolicy decides which kernel routes are the programmer's.
type OwnershipPolicy struct {
	// Protocol is the programmer's route protocol.
	Protocol int
	// TunnelDevice is the IPIP device ("tunl0").
	TunnelDevice string
	// WorkloadPrefixes are the name prefixes of workload interfaces ("cali").
	WorkloadPrefixes []string
	// Uplinks are the node's uplink devices, which carry no-encap and
	// CrossSubnet same-subnet cluster routes.
	Uplinks []string
	// ClaimBIRDTunnelRoutes takes `proto bird` routes via TunnelDevice as
	// ours. Set it with NewOwnershipPolicy, which sets it only when the
	// programmer owns IPIP cluster routes and the release has the rule.
	ClaimBIRDTunnelRoutes bool
}

// NewOwnershipPolicy builds the policy for a programmer of release rel whose
// effective programClusterRoutes is owner.
func NewOwnershipPolicy(protocol int, tunnel string, uplinks []string, owner config.ProgramClusterRoutes, rel config.Release) OwnershipPolicy {
	return OwnershipPolicy{
		Protocol:              protocol,
		TunnelDevice:          tunnel,
		WorkloadPrefixes:      []string{"cali"},
		Uplinks:               uplinks,
		ClaimBIRDTunnelRoutes: ownsBIRDTunnelRoutes(owner, rel),
	}
}

// ownsBIRDTunnelRoutes is the 3.33 rule: BIRD's persisted routes via the
// tunnel device are the programmer's to clean up exactly when it is the
// configured owner of IPIP cluster routes.
func ownsBIRDTunnelRoutes(owner config.ProgramClusterRoutes, rel config.Release) bool {
	return owner.ProgramIPIPClusterRoutes() && rel.ClaimsBIRDTunnelRoutes()
}

// ourDevice reports whether dev is one the programmer programs routes on.
func (p OwnershipPolicy) ourDevice(dev string) bool {
	if dev == "" {
		return false
	}
	if dev == p.TunnelDevice {
		return true
	}
	for _, pre := range p.WorkloadPrefixes {
		if strings.HasPrefix(dev, pre) {
			return true
		}
	}
	for _, u := range p.Uplinks {
		if dev == u {
			return true
		}
	}
	return false
}

// RouteIsOurs reports whether the programmer owns a kernel route, and why
// (or why not), in words for the log.
func (p OwnershipPolicy) RouteIsOurs(r kroute.Route) (bool, string) {
	if r.Table != MainTable {
		return false, fmt.Sprintf("table %d is not the main table", r.Table)
	}
	if r.Type != kroute.Unicast {
		return false, "not a unicast route"
	}
	if len(r.NextHops) == 0 {
		return false, "no next-hop device"
	}
	switch r.Protocol {
	case kroute.Protocol(p.Protocol):
		for _, h := range r.NextHops {
			if !p.ourDevice(h.Device) {
				return false, fmt.Sprintf("proto %d on %s, which is not one of our devices", r.Protocol, h.Device)
			}
		}
		return true, fmt.Sprintf("proto %d on our device %s", r.Protocol, devices(r.NextHops))
	case kroute.ProtoBIRD:
		for _, h := range r.NextHops {
			if h.Device != p.TunnelDevice {
				return false, fmt.Sprintf("proto bird on %s: only proto bird via %s is ever claimed", h.Device, p.TunnelDevice)
			}
		}
		if !p.ClaimBIRDTunnelRoutes {
			return false, fmt.Sprintf("proto bird via %s, not claimed (the programmer does not own IPIP cluster routes, or the release has no claim rule)", p.TunnelDevice)
		}
		return true, fmt.Sprintf("proto bird via %s, claimed because the programmer owns IPIP cluster routes", p.TunnelDevice)
	}
	return false, fmt.Sprintf("proto %s is neither ours (%d) nor bird", r.Protocol, p.Protocol)
}

func devices(hs []kroute.NextHop) string {
	var s []string
	for _, h := range hs {
		s = append(s, h.Device)
	}
	return strings.Join(s, ",")
}
