package timeline

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Kind is what happened to a route.
type Kind string

const (
	Add     Kind = "add"
	Replace Kind = "replace" // a new route took an existing route's place in one operation
	Delete  Kind = "delete"
)

// Well-known route protocols (rtm_protocol) in birdcage scenarios.
const (
	ProtoKernel = unix.RTPROT_KERNEL // 2
	ProtoBoot   = unix.RTPROT_BOOT   // 3
	ProtoStatic = unix.RTPROT_STATIC // 4
	ProtoBIRD   = unix.RTPROT_BIRD   // 12
	ProtoFelix  = 80                 // the route programmer's protocol
)

// MainTable is the table the queries consider.
const MainTable = unix.RT_TABLE_MAIN

// Nexthop is one path of a route. A single-path route has one Nexthop,
// possibly without a gateway (a device route).
type Nexthop struct {
	Gateway netip.Addr `json:"gateway,omitzero"`
	Device  string     `json:"device,omitempty"`
	Weight  int        `json:"weight,omitempty"` // multipath weight (hops+1)
	Flags   []string   `json:"flags,omitempty"`  // onlink, dead, linkdown, ...
}

// Route is a kernel route as a notification or a dump described it.
type Route struct {
	Family   int          `json:"family"` // 4 or 6
	Table    int          `json:"table"`
	Dst      netip.Prefix `json:"dst"`
	Protocol int          `json:"protocol"`
	Metric   int          `json:"metric"`
	Type     int          `json:"type"` // unix.RTN_UNICAST, RTN_BLACKHOLE, RTN_UNREACHABLE, ...
	Scope    int          `json:"scope"`
	Tos      int          `json:"tos,omitempty"`
	Flags    []string     `json:"flags,omitempty"` // route-level flags (onlink on a single-path route)
	Nexthops []Nexthop    `json:"nexthops,omitempty"`
}

// key is the kernel's identity of a route: a new route with the same key
// replaces the old one, a different metric makes a second route.
type key struct {
	family, table, tos, metric int
	dst                        netip.Prefix
}

func (r Route) key() key {
	return key{family: r.Family, table: r.Table, tos: r.Tos, metric: r.Metric, dst: r.Dst}
}

// Forwards reports whether the route sends packets somewhere: unicast (or
// local). Blackhole, unreachable and prohibit routes do not count as a route
// to their prefix in the queries.
func (r Route) Forwards() bool {
	return r.Type == unix.RTN_UNICAST || r.Type == unix.RTN_LOCAL
}

// Onlink reports whether the route or any of its nexthops is onlink.
func (r Route) Onlink() bool {
	if hasFlag(r.Flags, "onlink") {
		return true
	}
	for _, nh := range r.Nexthops {
		if hasFlag(nh.Flags, "onlink") {
			return true
		}
	}
	return false
}

// Devices returns the device of every nexthop.
func (r Route) Devices() []string {
	var out []string
	for _, nh := range r.Nexthops {
		if nh.Device != "" {
			out = append(out, nh.Device)
		}
	}
	return out
}

// Gateways returns the gateway of every nexthop that has one.
func (r Route) Gateways() []netip.Addr {
	var out []netip.Addr
	for _, nh := range r.Nexthops {
		if nh.Gateway.IsValid() {
			out = append(out, nh.Gateway)
		}
	}
	return out
}

// String reads like `ip route`: "10.0.2.0/26 via 10.97.0.2 dev tunl0 proto 12 metric 32 onlink".
func (r Route) String() string {
	var b strings.Builder
	if t := typeName(r.Type); t != "unicast" {
		b.WriteString(t + " ")
	}
	b.WriteString(r.Dst.String())
	single := len(r.Nexthops) == 1
	for _, nh := range r.Nexthops {
		if !single {
			b.WriteString(" nexthop")
		}
		if nh.Gateway.IsValid() {
			fmt.Fprintf(&b, " via %s", nh.Gateway)
		}
		if nh.Device != "" {
			fmt.Fprintf(&b, " dev %s", nh.Device)
		}
		if !single && nh.Weight > 1 {
			fmt.Fprintf(&b, " weight %d", nh.Weight)
		}
		for _, f := range nh.Flags {
			b.WriteString(" " + f)
		}
	}
	fmt.Fprintf(&b, " proto %d metric %d", r.Protocol, r.Metric)
	if r.Table != MainTable {
		fmt.Fprintf(&b, " table %d", r.Table)
	}
	for _, f := range r.Flags {
		b.WriteString(" " + f)
	}
	return b.String()
}

func typeName(t int) string {
	switch t {
	case unix.RTN_UNICAST:
		return "unicast"
	case unix.RTN_LOCAL:
		return "local"
	case unix.RTN_BROADCAST:
		return "broadcast"
	case unix.RTN_MULTICAST:
		return "multicast"
	case unix.RTN_BLACKHOLE:
		return "blackhole"
	case unix.RTN_UNREACHABLE:
		return "unreachable"
	case unix.RTN_PROHIBIT:
		return "prohibit"
	case unix.RTN_THROW:
		return "throw"
	}
	return fmt.Sprintf("type%d", t)
}

func hasFlag(fs []string, f string) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

func nhFlags(f int) []string {
	var out []string
	for _, x := range []struct {
		bit  int
		name string
	}{
		{unix.RTNH_F_ONLINK, "onlink"},
		{unix.RTNH_F_DEAD, "dead"},
		{unix.RTNH_F_LINKDOWN, "linkdown"},
		{unix.RTNH_F_PERVASIVE, "pervasive"},
		{unix.RTNH_F_OFFLOAD, "offload"},
	} {
		if f&x.bit != 0 {
			out = append(out, x.name)
		}
	}
	return out
}

func addrOf(ip net.IP) netip.Addr {
	if ip == nil {
		return netip.Addr{}
	}
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return a.Unmap()
}

// convert turns a netlink route into a Route; devName resolves ifindexes.
func convert(nr netlink.Route, devName func(int) string) Route {
	r := Route{
		Table:    nr.Table,
		Protocol: int(nr.Protocol),
		Metric:   nr.Priority,
		Type:     nr.Type,
		Scope:    int(nr.Scope),
		Tos:      nr.Tos,
	}
	switch nr.Family {
	case unix.AF_INET6:
		r.Family = 6
	default:
		r.Family = 4
	}
	if nr.Dst != nil {
		a := addrOf(nr.Dst.IP)
		ones, _ := nr.Dst.Mask.Size()
		r.Dst = netip.PrefixFrom(a, ones).Masked()
	} else if r.Family == 6 {
		r.Dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	} else {
		r.Dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	if len(nr.MultiPath) > 0 {
		for _, p := range nr.MultiPath {
			r.Nexthops = append(r.Nexthops, Nexthop{
				Gateway: addrOf(p.Gw),
				Device:  devName(p.LinkIndex),
				Weight:  p.Hops + 1,
				Flags:   nhFlags(p.Flags),
			})
		}
		r.Flags = nhFlags(nr.Flags)
	} else if nr.Gw != nil || nr.LinkIndex > 0 {
		r.Nexthops = []Nexthop{{
			Gateway: addrOf(nr.Gw),
			Device:  devName(nr.LinkIndex),
			Flags:   nhFlags(nr.Flags),
		}}
	} else {
		r.Flags = nhFlags(nr.Flags)
	}
	return r
}
