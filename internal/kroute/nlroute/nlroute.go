// Package nlroute converts netlink's routes into kroute's: the one place
// the route description meets vishvananda/netlink, so kroute stays plain
// data that packages reading results files can import.
package nlroute

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/internal/kroute"
)

// FromNetlink converts a netlink route; devName resolves an ifindex to its
// device name ("" when unknown).
func FromNetlink(nr netlink.Route, devName func(int) string) kroute.Route {
	r := kroute.Route{
		Family:   4,
		Table:    nr.Table,
		Protocol: kroute.Protocol(nr.Protocol),
		Metric:   nr.Priority,
		Type:     kroute.Type(nr.Type),
		Scope:    int(nr.Scope),
		TOS:      nr.Tos,
	}
	if nr.Family == unix.AF_INET6 {
		r.Family = 6
	}
	switch {
	case nr.Dst != nil:
		ones, _ := nr.Dst.Mask.Size()
		r.Dst = netip.PrefixFrom(addrOf(nr.Dst.IP), ones).Masked()
	case r.Family == 6:
		r.Dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	default:
		r.Dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	if len(nr.MultiPath) > 0 {
		for _, p := range nr.MultiPath {
			h := nextHop(addrOf(p.Gw), devName(p.LinkIndex), p.Flags)
			h.Weight = p.Hops + 1
			r.NextHops = append(r.NextHops, h)
		}
	} else if nr.Gw != nil || nr.LinkIndex > 0 {
		r.NextHops = []kroute.NextHop{nextHop(addrOf(nr.Gw), devName(nr.LinkIndex), nr.Flags)}
	}
	return r
}

// DevNames is a devName for FromNetlink from an ifindex → name map.
func DevNames(names map[int]string) func(int) string {
	return func(i int) string { return names[i] }
}

func nextHop(gw netip.Addr, dev string, flags int) kroute.NextHop {
	h := kroute.NextHop{Gateway: gw, Device: dev, Onlink: flags&unix.RTNH_F_ONLINK != 0}
	for _, x := range []struct {
		bit  int
		name string
	}{
		{unix.RTNH_F_DEAD, "dead"},
		{unix.RTNH_F_LINKDOWN, "linkdown"},
		{unix.RTNH_F_PERVASIVE, "pervasive"},
		{unix.RTNH_F_OFFLOAD, "offload"},
	} {
		if flags&x.bit != 0 {
			h.Flags = append(h.Flags, x.name)
		}
	}
	return h
}

func addrOf(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return a.Unmap()
}
