package routetable

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"

	"github.com/birdcage/birdcage/dataplane/route"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrDeviceMissing is returned (wrapped) for a desired route whose device
// does not exist yet; the route is retried on the next Apply.
var ErrDeviceMissing = errors.New("device not present")

// v6DefaultMetric is the metric the kernel gives an IPv6 route written with
// metric 0 (IP6_RT_PRIO_USER); BIRD's and our IPv6 routes both land there.
const v6DefaultMetric = 1024

// metricFor is the kernel metric a desired route to dst ends up at.
func metricFor(dst netip.Prefix) int {
	if dst.Addr().Is6() {
		return v6DefaultMetric
	}
	return 0
}

// Stats counts what one Apply or Resync did.
type Stats struct {
	Added, Replaced, Deleted, Unchanged, Failed int
	// Owned is how many kernel routes the table believes are ours after
	// the pass (desired routes in place plus any it could not delete).
	Owned  int
	Errors []error
}

// Table reconciles desired routes into the main table through one netlink
// handle. It is not safe for concurrent use; the daemon drives it from one
// goroutine.
type Table struct {
	h      *netlink.Handle
	policy OwnershipPolicy
	log    *slog.Logger

	desired map[netip.Prefix]route.Route
	// kernel is what the table believes the main table holds: the last
	// dump, updated with every successful write since.
	kernel map[key]KernelRoute
	synced bool
}

// New returns a table writing through h (a handle in the node's netns; in
// the daemon, which runs inside the netns, netlink.NewHandle()).
func New(h *netlink.Handle, policy OwnershipPolicy, log *slog.Logger) *Table {
	if log == nil {
		log = slog.Default()
	}
	return &Table{h: h, policy: policy, log: log,
		desired: map[netip.Prefix]route.Route{}, kernel: map[key]KernelRoute{}}
}

// SetPolicy replaces the ownership policy (for example when the node's
// uplinks change); it takes effect at the next Apply.
func (t *Table) SetPolicy(p OwnershipPolicy) { t.policy = p }

// Policy returns the current ownership policy.
func (t *Table) Policy() OwnershipPolicy { return t.policy }

// SetDesired replaces the full set of desired routes; it takes effect at the
// next Apply.
func (t *Table) SetDesired(routes []route.Route) {
	t.desired = make(map[netip.Prefix]route.Route, len(routes))
	for _, r := range routes {
		t.desired[r.Dst] = r
	}
}

// Apply programs the difference between the desired routes and what the
// table believes the kernel holds. The first Apply is a Resync.
func (t *Table) Apply() (Stats, error) {
	if !t.synced {
		return t.Resync()
	}
	links, err := t.readLinks()
	if err != nil {
		return Stats{}, err
	}
	return t.reconcile(links), nil
}

// Resync re-reads the main table from the kernel, then reconciles: drift in
// our routes is fixed, and routes that are ours by policy but not desired
// (including BIRD's claimed tunnel routes) are deleted.
func (t *Table) Resync() (Stats, error) {
	links, err := t.readLinks()
	if err != nil {
		return Stats{}, err
	}
	kernel, err := t.readKernel(links)
	if err != nil {
		return Stats{}, err
	}
	t.kernel, t.synced = kernel, true
	return t.reconcile(links), nil
}

type linkIndex struct {
	byName map[string]int
	byIdx  map[int]string
}

func (t *Table) readLinks() (linkIndex, error) {
	ls, err := nsutil.Links(t.h)
	if err != nil {
		return linkIndex{}, fmt.Errorf("route table: %w", err)
	}
	li := linkIndex{byName: make(map[string]int, len(ls)), byIdx: make(map[int]string, len(ls))}
	for _, l := range ls {
		a := l.Attrs()
		li.byName[a.Name] = a.Index
		li.byIdx[a.Index] = a.Name
	}
	return li, nil
}

func (t *Table) readKernel(links linkIndex) (map[key]KernelRoute, error) {
	filter := &netlink.Route{Table: MainTable}
	// A dump interrupted by a concurrent change (BIRD programming routes
	// while we resync) is redone from scratch, a bounded number of times.
	return nsutil.Dump("route table: list routes", func() (map[key]KernelRoute, error) {
		out := make(map[key]KernelRoute, len(t.kernel)+len(t.desired))
		for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			err := t.h.RouteListFilteredIter(fam, filter, netlink.RT_FILTER_TABLE, func(r netlink.Route) bool {
				k := fromNetlink(r, fam, links)
				out[k.key()] = k
				return true
			})
			if err != nil {
				return nil, err
			}
		}
		return out, nil
	})
}

func fromNetlink(r netlink.Route, family int, links linkIndex) KernelRoute {
	k := KernelRoute{Table: r.Table, Metric: r.Priority, TOS: r.Tos, Type: r.Type,
		Protocol: int(r.Protocol), Scope: int(r.Scope)}
	if r.Dst != nil {
		a, _ := netip.AddrFromSlice(r.Dst.IP)
		if family == netlink.FAMILY_V4 {
			a = a.Unmap()
		}
		ones, _ := r.Dst.Mask.Size()
		k.Dst = netip.PrefixFrom(a, ones)
	} else if family == netlink.FAMILY_V4 {
		k.Dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	} else {
		k.Dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	hop := func(idx int, gw net.IP, flags int) route.NextHop {
		h := route.NextHop{Device: links.byIdx[idx], OnLink: flags&unix.RTNH_F_ONLINK != 0}
		if h.Device == "" && idx != 0 {
			h.Device = fmt.Sprintf("if%d", idx)
		}
		if gw != nil {
			h.Gateway, _ = netip.AddrFromSlice(gw)
			if gw.To4() != nil {
				h.Gateway = h.Gateway.Unmap()
			}
		}
		return h
	}
	if len(r.MultiPath) > 0 {
		for _, nh := range r.MultiPath {
			k.NextHops = append(k.NextHops, hop(nh.LinkIndex, nh.Gw, nh.Flags))
		}
	} else if r.LinkIndex != 0 {
		k.NextHops = []route.NextHop{hop(r.LinkIndex, r.Gw, r.Flags)}
	}
	return k
}

// asKernel is what the kernel holds after a successful replace of d.
func (t *Table) asKernel(d route.Route) KernelRoute {
	scope := unix.RT_SCOPE_UNIVERSE
	// IPv6 routes have no scope: the kernel reports every one as universe,
	// whatever was written, so expecting link would rewrite a local
	// workload's /128 at every resync.
	if d.ScopeLink() && d.Dst.Addr().Is4() {
		scope = unix.RT_SCOPE_LINK
	}
	return KernelRoute{Dst: d.Dst, Table: MainTable, Metric: metricFor(d.Dst), Type: unix.RTN_UNICAST,
		Protocol: t.policy.Protocol, Scope: scope, NextHops: slices.Clone(d.NextHops)}
}

// matches reports whether the kernel route is exactly what d would write.
func (t *Table) matches(d route.Route, k KernelRoute) bool {
	want := t.asKernel(d)
	if k.Protocol != want.Protocol || k.Type != want.Type || k.Scope != want.Scope || len(k.NextHops) != len(want.NextHops) {
		return false
	}
	return slices.Equal(route.SortedNextHops(k.NextHops), route.SortedNextHops(want.NextHops))
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func (t *Table) toNetlink(d route.Route, links linkIndex) (*netlink.Route, error) {
	nr := &netlink.Route{Dst: ipNet(d.Dst), Table: MainTable, Type: unix.RTN_UNICAST,
		Protocol: netlink.RouteProtocol(t.policy.Protocol), Scope: netlink.SCOPE_UNIVERSE}
	if d.Dst.Addr().Is4() {
		nr.Family = netlink.FAMILY_V4
	} else {
		nr.Family = netlink.FAMILY_V6
	}
	if len(d.NextHops) == 0 {
		return nil, fmt.Errorf("route %s: no next hop", d.Dst)
	}
	idx := func(dev string) (int, error) {
		i, ok := links.byName[dev]
		if !ok {
			return 0, fmt.Errorf("route %s: device %s: %w", d, dev, ErrDeviceMissing)
		}
		return i, nil
	}
	flags := func(h route.NextHop) int {
		if h.OnLink {
			return int(netlink.FLAG_ONLINK)
		}
		return 0
	}
	gw := func(h route.NextHop) net.IP {
		if !h.Gateway.IsValid() {
			return nil
		}
		return h.Gateway.AsSlice()
	}
	if len(d.NextHops) == 1 {
		h := d.NextHops[0]
		i, err := idx(h.Device)
		if err != nil {
			return nil, err
		}
		nr.LinkIndex, nr.Gw, nr.Flags = i, gw(h), flags(h)
		if !h.Gateway.IsValid() {
			nr.Scope = netlink.SCOPE_LINK
		}
		return nr, nil
	}
	for _, h := range d.NextHops {
		i, err := idx(h.Device)
		if err != nil {
			return nil, err
		}
		nr.MultiPath = append(nr.MultiPath, &netlink.NexthopInfo{LinkIndex: i, Gw: gw(h), Flags: flags(h)})
	}
	return nr, nil
}

func (t *Table) reconcile(links linkIndex) Stats {
	var st Stats
	dsts := make([]netip.Prefix, 0, len(t.desired))
	for p := range t.desired {
		dsts = append(dsts, p)
	}
	slices.SortFunc(dsts, route.ComparePrefix) // stable log order
	for _, p := range dsts {
		d := t.desired[p]
		k := key{d.Dst, metricFor(d.Dst), 0}
		cur, had := t.kernel[k]
		if had && t.matches(d, cur) {
			st.Unchanged++
			continue
		}
		nr, err := t.toNetlink(d, links)
		if err == nil {
			err = t.h.RouteReplace(nr)
			if err != nil {
				err = fmt.Errorf("route table: replace %s: %w", d, err)
			}
		}
		if err != nil {
			st.Failed++
			st.Errors = append(st.Errors, err)
			t.log.Warn("route not programmed; will retry", "dst", d.Dst.String(), "route", d.String(),
				"class", d.Class.String(), "reason", d.Reason, "err", err)
			continue
		}
		t.kernel[k] = t.asKernel(d)
		if had {
			st.Replaced++
			ours, _ := t.policy.RouteIsOurs(cur)
			t.log.Info("route replaced", "dst", d.Dst.String(), "route", d.String(), "class", d.Class.String(),
				"reason", d.Reason, "previous", cur.String(), "previousWasOurs", ours)
		} else {
			st.Added++
			t.log.Info("route added", "dst", d.Dst.String(), "route", d.String(), "class", d.Class.String(), "reason", d.Reason)
		}
	}
	for k, cur := range t.kernel {
		if d, ok := t.desired[cur.Dst]; ok && k == (key{d.Dst, metricFor(d.Dst), 0}) {
			continue
		}
		ours, why := t.policy.RouteIsOurs(cur)
		if !ours {
			continue
		}
		// The delete names the route's protocol and metric, so it cannot
		// remove a route another component put in its place since the dump.
		// Scope "nowhere" matches any scope (device routes are scope link).
		err := t.h.RouteDel(&netlink.Route{Dst: ipNet(cur.Dst), Table: cur.Table, Priority: cur.Metric,
			Tos: cur.TOS, Protocol: netlink.RouteProtocol(cur.Protocol), Scope: netlink.SCOPE_NOWHERE})
		if err != nil && !errors.Is(err, unix.ESRCH) {
			st.Failed++
			err = fmt.Errorf("route table: delete %s: %w", cur, err)
			st.Errors = append(st.Errors, err)
			t.log.Warn("route not deleted; will retry", "dst", cur.Dst.String(), "route", cur.String(), "err", err)
			continue
		}
		delete(t.kernel, k)
		if err != nil {
			t.log.Info("route already gone", "dst", cur.Dst.String(), "route", cur.String())
			continue
		}
		st.Deleted++
		t.log.Info("route deleted", "dst", cur.Dst.String(), "route", cur.String(), "reason", "not desired; ours: "+why)
	}
	for _, cur := range t.kernel {
		if ours, _ := t.policy.RouteIsOurs(cur); ours {
			st.Owned++
		}
	}
	return st
}
