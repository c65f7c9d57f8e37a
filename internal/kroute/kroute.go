// Package kroute is birdcage's one description of a kernel route: what a
// netlink dump or notification says, with device names resolved and every
// field typed, printed the way `ip route` prints it. It is plain data (no
// netlink dependency), so the results model can carry routes; the
// conversion from a netlink route is internal/kroute/nlroute.
//
// The harness's route queries, the route timeline, the CLI and the reports
// all speak this type; protocol numbers are named here and nowhere else.
package kroute

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Protocol is a route's rtm_protocol: who installed it.
type Protocol int

// The protocols birdcage meets. The kernel's own numbers come from
// <linux/rtnetlink.h>; Calico's default is Felix's deviceRouteProtocol.
const (
	ProtoUnspec Protocol = unix.RTPROT_UNSPEC // 0
	ProtoKernel Protocol = unix.RTPROT_KERNEL // 2: connected and local routes
	ProtoBoot   Protocol = unix.RTPROT_BOOT   // 3: `ip route add` without a proto
	ProtoStatic Protocol = unix.RTPROT_STATIC // 4
	ProtoBIRD   Protocol = unix.RTPROT_BIRD   // 12: what BIRD's kernel protocol writes
	// ProtoCalicoDefault is FelixConfiguration.deviceRouteProtocol's default
	// in Calico, the protocol a route programmer writes unless told otherwise.
	ProtoCalicoDefault Protocol = 80
)

// String is iproute2's name for a well-known protocol, else the number.
func (p Protocol) String() string {
	switch p {
	case ProtoUnspec:
		return "unspec"
	case ProtoKernel:
		return "kernel"
	case ProtoBoot:
		return "boot"
	case ProtoStatic:
		return "static"
	case ProtoBIRD:
		return "bird"
	}
	return fmt.Sprint(int(p))
}

// Type is a route's rtm_type.
type Type int

// The route types.
const (
	Unicast     Type = unix.RTN_UNICAST
	Local       Type = unix.RTN_LOCAL
	Broadcast   Type = unix.RTN_BROADCAST
	Multicast   Type = unix.RTN_MULTICAST
	Blackhole   Type = unix.RTN_BLACKHOLE
	Unreachable Type = unix.RTN_UNREACHABLE
	Prohibit    Type = unix.RTN_PROHIBIT
	Throw       Type = unix.RTN_THROW
)

func (t Type) String() string {
	switch t {
	case Unicast:
		return "unicast"
	case Local:
		return "local"
	case Broadcast:
		return "broadcast"
	case Multicast:
		return "multicast"
	case Blackhole:
		return "blackhole"
	case Unreachable:
		return "unreachable"
	case Prohibit:
		return "prohibit"
	case Throw:
		return "throw"
	}
	return fmt.Sprintf("type%d", int(t))
}

// MainTable is the kernel's main routing table.
const MainTable = unix.RT_TABLE_MAIN

// NextHop is one path of a route. A single-path route has one; a route
// with neither gateway nor device (a blackhole) has none.
type NextHop struct {
	Gateway netip.Addr `json:"gateway,omitzero"`
	Device  string     `json:"device,omitempty"`
	Onlink  bool       `json:"onlink,omitempty"`
	// Weight is the multipath weight (rtnh_hops+1); 0 on a single path.
	Weight int `json:"weight,omitempty"`
	// Flags are the other RTNH_F_ flags the kernel reported (dead, linkdown…).
	Flags []string `json:"flags,omitempty"`
}

func (h NextHop) String() string {
	var parts []string
	if h.Gateway.IsValid() {
		parts = append(parts, "via "+h.Gateway.String())
	}
	if h.Device != "" {
		parts = append(parts, "dev "+h.Device)
	}
	if h.Weight > 1 {
		parts = append(parts, fmt.Sprintf("weight %d", h.Weight))
	}
	if h.Onlink {
		parts = append(parts, "onlink")
	}
	parts = append(parts, h.Flags...)
	return strings.Join(parts, " ")
}

// Route is one kernel route.
type Route struct {
	Family   int          `json:"family"` // 4 or 6
	Table    int          `json:"table"`
	Dst      netip.Prefix `json:"dst"`
	Protocol Protocol     `json:"protocol"`
	Metric   int          `json:"metric"`
	Type     Type         `json:"type"`
	Scope    int          `json:"scope"`
	TOS      int          `json:"tos,omitempty"`
	NextHops []NextHop    `json:"nexthops,omitempty"`
}

// Within says whether p is dst or a prefix inside it: the routes "to dst"
// a node's route read and the route matchers look at.
func Within(dst, p netip.Prefix) bool { return dst.Bits() <= p.Bits() && dst.Contains(p.Addr()) }

// Forwards reports whether the route sends packets somewhere (unicast or
// local). A blackhole, unreachable or prohibit route is no route to its
// prefix for a workload's traffic.
func (r Route) Forwards() bool { return r.Type == Unicast || r.Type == Local }

// Onlink reports whether any next hop is onlink.
func (r Route) Onlink() bool {
	return slices.ContainsFunc(r.NextHops, func(h NextHop) bool { return h.Onlink })
}

// Devices is every next hop's device.
func (r Route) Devices() []string {
	var out []string
	for _, h := range r.NextHops {
		if h.Device != "" {
			out = append(out, h.Device)
		}
	}
	return out
}

// Gateways is every next hop's gateway.
func (r Route) Gateways() []netip.Addr {
	var out []netip.Addr
	for _, h := range r.NextHops {
		if h.Gateway.IsValid() {
			out = append(out, h.Gateway)
		}
	}
	return out
}

// Multipath reports whether the route has more than one next hop.
func (r Route) Multipath() bool { return len(r.NextHops) > 1 }

// String reads like `ip route`:
// "10.65.2.0/26 via 10.96.0.2 dev tunl0 proto bird metric 32 onlink",
// "blackhole 10.65.1.0/26 proto bird metric 0",
// "10.65.3.0/26 proto bird metric 0 nexthop via 10.1.0.1 dev eth0 weight 1 nexthop via …".
func (r Route) String() string {
	var b strings.Builder
	if r.Type != Unicast {
		b.WriteString(r.Type.String() + " ")
	}
	if r.Dst.Bits() == 0 && r.Dst.IsValid() {
		b.WriteString("default")
	} else {
		b.WriteString(r.Dst.String())
	}
	if len(r.NextHops) == 1 {
		h := r.NextHops[0]
		h.Onlink, h.Flags = false, nil // after proto/metric, as iproute2 prints them
		if s := h.String(); s != "" {
			b.WriteString(" " + s)
		}
	}
	fmt.Fprintf(&b, " proto %s metric %d", r.Protocol, r.Metric)
	if r.Table != MainTable && r.Table != 0 {
		fmt.Fprintf(&b, " table %d", r.Table)
	}
	if len(r.NextHops) == 1 {
		h := r.NextHops[0]
		if h.Onlink {
			b.WriteString(" onlink")
		}
		for _, f := range h.Flags {
			b.WriteString(" " + f)
		}
	}
	if len(r.NextHops) > 1 {
		for _, h := range r.NextHops {
			b.WriteString(" nexthop " + h.String())
		}
	}
	return b.String()
}
