package route

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Class is why a route exists. When two sources want the same destination
// the lower class wins, so a local workload beats a remote claim on its
// address.
type Class int

const (
	// ClassLocalWorkload: a workload on this node; `dev cali… scope link`.
	ClassLocalWorkload Class = iota
	// ClassIPIPSameSubnet: an IPIP CrossSubnet pool's destination on a node
	// in one of this node's connected subnets; sent unencapsulated.
	ClassIPIPSameSubnet
	// ClassIPIPTunnel: an IPIP pool's destination; `via <node> dev tunl0
	// onlink`.
	ClassIPIPTunnel
	// ClassNoEncap: a no-encap pool's destination; via the node, or via an
	// uplink gateway where the node is not directly connected.
	ClassNoEncap
)

func (c Class) String() string {
	switch c {
	case ClassLocalWorkload:
		return "local-workload"
	case ClassIPIPSameSubnet:
		return "ipip-same-subnet"
	case ClassIPIPTunnel:
		return "ipip-tunnel"
	case ClassNoEncap:
		return "no-encap"
	}
	return fmt.Sprintf("class(%d)", int(c))
}

// IsIPIP reports whether the class is one of the IPIP pool classes, which
// the programmer owns when ProgramIPIPClusterRoutes is true.
func (c Class) IsIPIP() bool { return c == ClassIPIPSameSubnet || c == ClassIPIPTunnel }

// NextHop is one path of a route. A zero Gateway means a device route
// (scope link), used for local workloads.
type NextHop struct {
	Gateway netip.Addr
	Device  string
	OnLink  bool
}

func (h NextHop) String() string { return string(h.appendTo(make([]byte, 0, 48))) }

// appendTo appends String's text without fmt: the programmer logs every
// route it writes, and at 10k routes fmt's cost showed in the first pass.
func (h NextHop) appendTo(b []byte) []byte {
	if h.Gateway.IsValid() {
		b = append(b, "via "...)
		b = h.Gateway.AppendTo(b)
		b = append(b, ' ')
	}
	b = append(b, "dev "...)
	b = append(b, h.Device...)
	if h.OnLink {
		b = append(b, " onlink"...)
	}
	return b
}

// Route is one desired route in the main table.
type Route struct {
	Dst      netip.Prefix
	Class    Class
	NextHops []NextHop // one for a single path; more for multipath
	// Reason says in words why the route is desired, for the log line that
	// reports it being added or replaced.
	Reason string
}

// Multipath reports whether the route has more than one next hop.
func (r Route) Multipath() bool { return len(r.NextHops) > 1 }

// ScopeLink reports whether the route is a device route (no gateway).
func (r Route) ScopeLink() bool { return len(r.NextHops) == 1 && !r.NextHops[0].Gateway.IsValid() }

// String renders the route roughly as `ip route` would.
func (r Route) String() string {
	b := r.Dst.AppendTo(make([]byte, 0, 64))
	if len(r.NextHops) == 1 {
		b = r.NextHops[0].appendTo(append(b, ' '))
		if r.ScopeLink() {
			b = append(b, " scope link"...)
		}
		return string(b)
	}
	for _, h := range r.NextHops {
		b = h.appendTo(append(b, " nexthop "...))
	}
	return string(b)
}

// Equal reports whether two routes program the same kernel state; Reason is
// ignored and multipath next hops compare as a set.
func (r Route) Equal(o Route) bool {
	if r.Dst != o.Dst || r.Class != o.Class || len(r.NextHops) != len(o.NextHops) {
		return false
	}
	a, b := SortedNextHops(r.NextHops), SortedNextHops(o.NextHops)
	return slices.Equal(a, b)
}

// SortedNextHops returns a sorted copy, for set comparison.
func SortedNextHops(hs []NextHop) []NextHop {
	out := slices.Clone(hs)
	slices.SortFunc(out, func(x, y NextHop) int {
		if c := x.Gateway.Compare(y.Gateway); c != 0 {
			return c
		}
		return strings.Compare(x.Device, y.Device)
	})
	return out
}

// ComparePrefix orders prefixes by address, then length.
func ComparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
