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
	// ClaimBIRDTunnelRoutes takes `proto bird` routes whose one next hop is
	// TunnelDevice as ours. Set it with NewOwnershipPolicy, which sets it
	// only when the programmer owns IPIP cluster routes and the release has
	// the rule (Felix's OwnBIRDIPIPRoutes, 3.33).
	ClaimBIRDTunnelRoutes bool
	// ProtocolOnAnyDevice takes every main-table route with Protocol as
	// ours, whatever its device or type (Felix's "exclusive" route
	// protocol, all three releases). Without it a route of Protocol is ours
	// only on our devices (birdcage's narrower rule before issue 25).
	ProtocolOnAnyDevice bool
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
		ProtocolOnAnyDevice:   rel.OwnsProtocolOnAnyDevice(),
	}
}

// ownsBIRDTunnelRoutes is the 3.33 rule: BIRD's persisted routes via the
// tunnel device are the programmer's to clean up exactly when it is the
// configured owner of IPIP cluster routes (release-v3.33 6609dea54713,
// felix/routetable/ownershippol/main_route_table_policy.go, NewMainTable's
// programIPIPClusterRoutes argument; no such field on release-v3.31 or
// release-v3.32).
func ownsBIRDTunnelRoutes(owner config.ProgramClusterRoutes, rel config.Release) bool {
	return owner.ProgramIPIPClusterRoutes() && rel.OwnsBIRDIPIPRoutes()
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
	if p.ProtocolOnAnyDevice && r.Protocol == kroute.Protocol(p.Protocol) {
		return true, fmt.Sprintf("proto %d, the programmer's own protocol, on any device", r.Protocol)
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
		// Felix reads a multipath route as one with no device
		// (route_table.go routeIsSpecialNoIfRoute), so only a single-hop
		// route via the tunnel device is ever claimed.
		if len(r.NextHops) != 1 || r.NextHops[0].Device != p.TunnelDevice {
			return false, fmt.Sprintf("proto bird on %s: only single-hop proto bird via %s is ever claimed", devices(r.NextHops), p.TunnelDevice)
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
