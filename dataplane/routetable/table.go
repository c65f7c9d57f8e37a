package routetable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/birdcage/birdcage/dataplane/route"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrDeviceMissing is returned (wrapped) for a desired route whose device
// does not exist yet; the route is retried on the next Apply.
var ErrDeviceMissing = errors.New("device not present")

// v6DefaultMetric is the metric the kernel gives an IPv6 route written with
// metric 0 (IP6_RT_PRIO_USER); BIRD's and our IPv6 routes both land there.
const v6DefaultMetric = 1024

// metricFor is the kernel metric a desired route to dst ends up at: the
// key's priority, 1024 for IPv6 and Options.IPv4Metric (Felix's released 0)
// for IPv4.
func (t *Table) metricFor(dst netip.Prefix) int {
	if dst.Addr().Is6() {
		return v6DefaultMetric
	}
	return t.opts.IPv4Metric
}

// Stats counts what one Apply or Resync did.
type Stats struct {
	Added, Replaced, Deleted, Unchanged, Failed int
	// Owned is how many kernel routes the table believes are ours after
	// the pass (desired routes in place plus any it could not delete).
	Owned  int
	Errors []error
}

// Options are the table's emulation choices. The zero value is Felix's
// behaviour in 3.31, 3.32 and 3.33 except TunnelMTU, which the caller sets
// from the host's MTU (OptionsFor does both).
type Options struct {
	// WriteOrder: deletes before replaces (Felix) or after them.
	WriteOrder config.WriteOrder
	// DeleteNamesProtocol makes a delete name the dumped route's protocol,
	// so it cannot remove a route another component put at the same key
	// since the dump. Felix's deletes carry protocol 0, the wildcard
	// (route_table.go deleteRoute): false is Felix.
	DeleteNamesProtocol bool
	// TunnelMTU is the MTU (RTAX_MTU) written on IPIP tunnel routes; 0
	// writes none. Felix writes the IPIP MTU, host MTU - 20 by default.
	TunnelMTU int
	// WriteWindow caps the requests in flight at once: 1 sends each request
	// and waits for its answer before the next, as Felix does; 0 leaves the
	// writer's own window (up to 256 per send), which makes a pass shorter
	// than Felix's and so any gap inside it smaller.
	WriteWindow int
	// TakeoverGap is fault injection, not Felix: when > 0, a pass that
	// takes a route another component wrote at the route's own key first
	// deletes that route, waits this long, then writes its own — a
	// programmer that leaves a window where it should replace in one
	// operation, for the specs that must catch one. 0: off.
	TakeoverGap time.Duration
	// IPv4Metric is the priority of the key of every IPv4 route the table
	// writes (RTA_PRIORITY, named in the replace when not 0). Felix as
	// released writes IPv4 at 0 (normalizeRouteKey at release-v3.32
	// de60d98e97a7 and v3.33 6609dea54713; routeKeyForCIDR at v3.31
	// 3cdeae8f7ace); Calico PR #13856 proposes 1024, the metric a 3.32+
	// BIRD writes at. A what-if knob, not a release's behaviour.
	IPv4Metric int
}

// OptionsFor returns the options of a programmer of release rel on a host
// whose MTU is hostMTU (0: unknown, no MTU on tunnel routes).
func OptionsFor(rel config.Release, hostMTU int) Options {
	o := Options{WriteOrder: rel.ProgrammerWriteOrder(), WriteWindow: rel.ProgrammerRequestsInFlight()}
	if ov := rel.IPIPRouteMTUOverhead(); ov > 0 && hostMTU > ov {
		o.TunnelMTU = hostMTU - ov
	}
	return o
}

// Table reconciles desired routes into the main table of one network
// namespace: it reads the kernel through a netlink handle (dumps) and writes
// through a socket of its own, many requests in flight at once (writer). It
// is not safe for concurrent use; the daemon drives it from one goroutine.
type Table struct {
	h      *netlink.Handle
	w      *writer
	policy OwnershipPolicy
	opts   Options
	log    *slog.Logger

	desired map[netip.Prefix]route.Route
	// kernel is what the table believes the main table holds: the last
	// dump, updated with every successful write since.
	kernel map[key]kroute.Route
	// mtu is the RTAX_MTU of the kernel routes in kernel that have one
	// (kroute.Route does not carry it).
	mtu    map[key]int
	synced bool
	ops    []writeOp // reused across passes
}

// Open returns a table for the network namespace ns (netns.None(): the
// calling thread's, as in the daemon, which runs inside the node's netns).
// Both its sockets are bound to ns when they are opened, so later
// namespace switches of the thread do not matter. Close releases them.
func Open(ns netns.NsHandle, policy OwnershipPolicy, log *slog.Logger) (*Table, error) {
	if log == nil {
		log = slog.Default()
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("route table: netlink handle: %w", err)
	}
	w, err := openWriter(ns)
	if err != nil {
		h.Close()
		return nil, err
	}
	return &Table{h: h, w: w, policy: policy, log: log,
		desired: map[netip.Prefix]route.Route{}, kernel: map[key]kroute.Route{}, mtu: map[key]int{}}, nil
}

// SetOptions replaces the emulation choices; they take effect at the next
// Apply.
func (t *Table) SetOptions(o Options) { t.opts = o }

// Options returns the emulation choices in force.
func (t *Table) Options() Options { return t.opts }

// Close releases the table's sockets; the kernel's routes stay.
func (t *Table) Close() {
	t.w.close()
	t.h.Close()
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
	kernel, mtu, err := t.readKernelMTU(links)
	if err != nil {
		return Stats{}, err
	}
	t.kernel, t.mtu, t.synced = kernel, mtu, true
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

func (t *Table) readKernel(links linkIndex) (map[key]kroute.Route, error) {
	k, _, err := t.readKernelMTU(links)
	return k, err
}

// readKernelMTU dumps the main table: every route, and the MTU of those
// that carry one.
func (t *Table) readKernelMTU(links linkIndex) (map[key]kroute.Route, map[key]int, error) {
	filter := &netlink.Route{Table: MainTable}
	type dump struct {
		routes map[key]kroute.Route
		mtu    map[key]int
	}
	// A dump interrupted by a concurrent change (BIRD programming routes
	// while we resync) is redone from scratch, a bounded number of times.
	d, err := nsutil.Dump("route table: list routes", func() (dump, error) {
		out := dump{make(map[key]kroute.Route, len(t.kernel)+len(t.desired)), map[key]int{}}
		for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			err := t.h.RouteListFilteredIter(fam, filter, netlink.RT_FILTER_TABLE, func(r netlink.Route) bool {
				k := fromNetlink(r, fam, links)
				out.routes[keyOf(k)] = k
				if r.MTU != 0 {
					out.mtu[keyOf(k)] = r.MTU
				}
				return true
			})
			if err != nil {
				return dump{}, err
			}
		}
		return out, nil
	})
	return d.routes, d.mtu, err
}

// fromNetlink is the table's own reading of a dumped route (see
// policy.go): family, destination, the fields ownership and equality look
// at, and next hops by device name. Multipath weights and next-hop flags
// other than onlink are not read: the table never writes them.
func fromNetlink(r netlink.Route, family int, links linkIndex) kroute.Route {
	k := kroute.Route{Family: 4, Table: r.Table, Metric: r.Priority, TOS: r.Tos, Type: kroute.Type(r.Type),
		Protocol: kroute.Protocol(r.Protocol), Scope: int(r.Scope)}
	if family == netlink.FAMILY_V6 {
		k.Family = 6
	}
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
	hop := func(idx int, gw net.IP, flags int) kroute.NextHop {
		h := kroute.NextHop{Device: links.byIdx[idx], Onlink: flags&unix.RTNH_F_ONLINK != 0}
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
		k.NextHops = []kroute.NextHop{hop(r.LinkIndex, r.Gw, r.Flags)}
	}
	return k
}

// asKernel is what the kernel holds after a successful replace of d.
func (t *Table) asKernel(d route.Route) kroute.Route {
	k := kroute.Route{Family: 4, Dst: d.Dst, Table: MainTable, Metric: t.metricFor(d.Dst), Type: kroute.Unicast,
		Protocol: kroute.Protocol(t.policy.Protocol), Scope: scopeOf(d), NextHops: make([]kroute.NextHop, len(d.NextHops))}
	if d.Dst.Addr().Is6() {
		k.Family = 6
	}
	for i, h := range d.NextHops {
		k.NextHops[i] = kroute.NextHop{Gateway: h.Gateway, Device: h.Device, Onlink: h.OnLink}
	}
	return k
}

// scopeOf is the scope the kernel reports for d once written.
func scopeOf(d route.Route) int {
	// IPv6 routes have no scope: the kernel reports every one as universe,
	// whatever was written, so expecting link would rewrite a local
	// workload's /128 at every resync.
	if d.ScopeLink() && d.Dst.Addr().Is4() {
		return unix.RT_SCOPE_LINK
	}
	return unix.RT_SCOPE_UNIVERSE
}

// mtuFor is the MTU a replace of d writes (0: none).
func (t *Table) mtuFor(d route.Route) int {
	if d.Class == route.ClassIPIPTunnel {
		return t.opts.TunnelMTU
	}
	return 0
}

// matches reports whether the kernel route is exactly what d would write.
func (t *Table) matches(d route.Route, k kroute.Route) bool {
	if t.mtu[keyOf(k)] != t.mtuFor(d) {
		return false
	}
	if k.Protocol != kroute.Protocol(t.policy.Protocol) || k.Type != kroute.Unicast || k.Scope != scopeOf(d) || len(k.NextHops) != len(d.NextHops) {
		return false
	}
	same := func(k kroute.NextHop, h route.NextHop) bool {
		return k.Gateway == h.Gateway && k.Device == h.Device && k.Onlink == h.OnLink
	}
	if len(k.NextHops) == 1 { // the common case, without the sorted copies
		return same(k.NextHops[0], d.NextHops[0])
	}
	have := make([]route.NextHop, len(k.NextHops))
	for i, h := range k.NextHops {
		have[i] = route.NextHop{Gateway: h.Gateway, Device: h.Device, OnLink: h.Onlink}
	}
	return slices.Equal(route.SortedNextHops(have), route.SortedNextHops(d.NextHops))
}

// writeOp is one kernel write of a pass: a replace of a desired route, or
// a delete of a kernel route of ours that is not desired.
type writeOp struct {
	del bool
	d   route.Route // replace: the desired route
	k   key
	cur kroute.Route // replace: what was there (if had); delete: the route
	had bool
}

// encodeReplace appends the RTM_NEWROUTE body that makes d the kernel's
// route: metric 0 for IPv4 and 1024 for IPv6, named in the request as Felix
// names it (RTA_PRIORITY only when not 0), our protocol, the main table;
// scope link for a single next hop without a gateway; RTAX_MTU when the
// options give tunnel routes one.
func (t *Table) encodeReplace(d route.Route, links linkIndex, b []byte) ([]byte, error) {
	if len(d.NextHops) == 0 {
		return nil, fmt.Errorf("route %s: no next hop", d.Dst)
	}
	fam, alen := uint8(unix.AF_INET), 4
	if d.Dst.Addr().Is6() {
		fam, alen = unix.AF_INET6, 16
	}
	idx := func(dev string) (uint32, error) {
		i, ok := links.byName[dev]
		if !ok {
			return 0, fmt.Errorf("route %s: device %s: %w", d, dev, ErrDeviceMissing)
		}
		return uint32(i), nil
	}
	for _, h := range d.NextHops {
		if h.Gateway.IsValid() && h.Gateway.Unmap().BitLen() != alen*8 {
			return nil, fmt.Errorf("route %s: gateway %s is not of the destination's family", d, h.Gateway)
		}
	}
	scope, flags := uint8(unix.RT_SCOPE_UNIVERSE), uint32(0)
	if len(d.NextHops) == 1 {
		h := d.NextHops[0]
		if !h.Gateway.IsValid() {
			scope = unix.RT_SCOPE_LINK
		}
		if h.OnLink {
			flags = unix.RTNH_F_ONLINK
		}
	}
	b = appendRtMsg(b, fam, uint8(d.Dst.Bits()), 0, MainTable, uint8(t.policy.Protocol), scope, unix.RTN_UNICAST, flags)
	b = appendAddrAttr(b, unix.RTA_DST, d.Dst.Addr())
	if m := t.metricFor(d.Dst); m > 0 {
		b = appendAttrU32(b, unix.RTA_PRIORITY, uint32(m))
	}
	if mtu := t.mtuFor(d); mtu > 0 {
		// RTA_METRICS holding one nested RTAX_MTU.
		b = binary.NativeEndian.AppendUint16(b, unix.SizeofRtAttr*2+4)
		b = binary.NativeEndian.AppendUint16(b, unix.RTA_METRICS)
		b = appendAttrU32(b, unix.RTAX_MTU, uint32(mtu))
	}
	if len(d.NextHops) == 1 {
		h := d.NextHops[0]
		i, err := idx(h.Device)
		if err != nil {
			return nil, err
		}
		if h.Gateway.IsValid() {
			b = appendAddrAttr(b, unix.RTA_GATEWAY, h.Gateway)
		}
		return appendAttrU32(b, unix.RTA_OIF, i), nil
	}
	// RTA_MULTIPATH: one rtnexthop (len, flags, hops, ifindex) per hop,
	// each followed by its nested RTA_GATEWAY.
	mp := len(b)
	b = append(b, make([]byte, unix.SizeofRtAttr)...)
	for _, h := range d.NextHops {
		i, err := idx(h.Device)
		if err != nil {
			return nil, err
		}
		nh := len(b)
		var nf uint8
		if h.OnLink {
			nf = unix.RTNH_F_ONLINK
		}
		b = binary.NativeEndian.AppendUint16(b, 0)
		b = append(b, nf, 0)
		b = binary.NativeEndian.AppendUint32(b, i)
		if h.Gateway.IsValid() {
			b = appendAddrAttr(b, unix.RTA_GATEWAY, h.Gateway)
		}
		binary.NativeEndian.PutUint16(b[nh:], uint16(len(b)-nh))
	}
	binary.NativeEndian.PutUint16(b[mp:], uint16(len(b)-mp))
	binary.NativeEndian.PutUint16(b[mp+2:], unix.RTA_MULTIPATH)
	return b, nil
}

// encodeDelete appends the RTM_DELROUTE body for cur: its key (table,
// destination, TOS, metric), scope "nowhere" and type 0, which match any
// scope and type (device routes are scope link). Like Felix's delete it
// names protocol 0, which matches any protocol, unless named is set: then it
// names cur's protocol, so it cannot remove a route another component put at
// the same key since the dump.
func encodeDelete(cur kroute.Route, named bool, b []byte) []byte {
	proto := uint8(0)
	if named {
		proto = uint8(cur.Protocol)
	}
	fam := uint8(unix.AF_INET)
	if cur.Dst.Addr().Is6() {
		fam = unix.AF_INET6
	}
	table := uint8(cur.Table)
	if cur.Table >= 256 {
		table = unix.RT_TABLE_UNSPEC
	}
	b = appendRtMsg(b, fam, uint8(cur.Dst.Bits()), uint8(cur.TOS), table, proto, unix.RT_SCOPE_NOWHERE, 0, 0)
	b = appendAddrAttr(b, unix.RTA_DST, cur.Dst.Addr())
	if cur.Table >= 256 {
		b = appendAttrU32(b, unix.RTA_TABLE, uint32(cur.Table))
	}
	if cur.Metric > 0 {
		b = appendAttrU32(b, unix.RTA_PRIORITY, uint32(cur.Metric))
	}
	return b
}

func appendAddrAttr(b []byte, typ uint16, a netip.Addr) []byte {
	if a.Is4() || a.Is4In6() {
		v := a.Unmap().As4()
		return appendAttr(b, typ, v[:])
	}
	v := a.As16()
	return appendAttr(b, typ, v[:])
}

func (t *Table) reconcile(links linkIndex) Stats {
	var st Stats
	ops := t.ops[:0]
	dsts := make([]netip.Prefix, 0, len(t.desired))
	for p := range t.desired {
		dsts = append(dsts, p)
	}
	slices.SortFunc(dsts, route.ComparePrefix) // stable log and write order
	var replaces, deletes []writeOp
	for _, p := range dsts {
		d := t.desired[p]
		k := key{d.Dst, t.metricFor(d.Dst), 0}
		cur, had := t.kernel[k]
		if had && t.matches(d, cur) {
			st.Unchanged++
			continue
		}
		replaces = append(replaces, writeOp{d: d, k: k, cur: cur, had: had})
	}
	for k, cur := range t.kernel {
		if d, ok := t.desired[cur.Dst]; ok && k == (key{d.Dst, t.metricFor(d.Dst), 0}) {
			continue
		}
		if ours, _ := t.policy.RouteIsOurs(cur); ours {
			deletes = append(deletes, writeOp{del: true, k: k, cur: cur})
		}
	}
	// Felix's deletes go out in map order; ours are sorted, so a pass's
	// requests are the same from run to run.
	slices.SortFunc(deletes, func(a, b writeOp) int {
		if c := route.ComparePrefix(a.k.dst, b.k.dst); c != 0 {
			return c
		}
		if a.k.metric != b.k.metric {
			return a.k.metric - b.k.metric
		}
		return a.k.tos - b.k.tos
	})
	// All writes of the pass go out pipelined in one order, the kernel
	// applies them in it: Felix's deletes first, then replaces (the
	// WriteOrder knob turns it round).
	if t.opts.WriteOrder == config.ReplaceFirst {
		ops = append(append(ops, replaces...), deletes...)
	} else {
		ops = append(append(ops, deletes...), replaces...)
	}
	t.ops = ops
	if t.opts.TakeoverGap > 0 {
		t.openTakeoverGap(ops)
	}

	var errs []error
	if len(ops) > 0 {
		if t.opts.WriteWindow > 0 && t.opts.WriteWindow < t.w.window {
			full := t.w.window
			t.w.window = t.opts.WriteWindow
			defer func() { t.w.window = full }()
		}
		errs = t.w.exchange(len(ops), func(i int, b []byte) ([]byte, uint16, uint16, error) {
			op := &ops[i]
			if op.del {
				return encodeDelete(op.cur, t.opts.DeleteNamesProtocol, b), unix.RTM_DELROUTE, 0, nil
			}
			b, err := t.encodeReplace(op.d, links, b)
			return b, unix.RTM_NEWROUTE, unix.NLM_F_CREATE | unix.NLM_F_REPLACE, err
		})
	}
	for i := range ops {
		op, err := &ops[i], errs[i]
		if op.del {
			t.deleted(&st, op.k, op.cur, err)
		} else {
			t.replaced(&st, op, err)
		}
	}
	for _, cur := range t.kernel {
		if ours, _ := t.policy.RouteIsOurs(cur); ours {
			st.Owned++
		}
	}
	clear(t.ops) // drop references to routes until the next pass
	return st
}

// openTakeoverGap is the TakeoverGap fault: every foreign route that a
// replace of this pass would take over at its key is deleted first, and
// the pass goes on TakeoverGap later.
func (t *Table) openTakeoverGap(ops []writeOp) {
	var taken []kroute.Route
	for _, op := range ops {
		if !op.del && op.had && op.cur.Protocol != kroute.Protocol(t.policy.Protocol) {
			taken = append(taken, op.cur)
		}
	}
	if len(taken) == 0 {
		return
	}
	errs := t.w.exchange(len(taken), func(i int, b []byte) ([]byte, uint16, uint16, error) {
		return encodeDelete(taken[i], true, b), unix.RTM_DELROUTE, 0, nil
	})
	if err := errors.Join(errs...); err != nil {
		t.log.Warn("takeover gap: delete before the replace failed", "err", err)
	}
	t.log.Warn("takeover gap (fault injection): foreign routes deleted, replacing after a pause", "routes", len(taken), "gap", t.opts.TakeoverGap)
	time.Sleep(t.opts.TakeoverGap) // the injected fault itself
}

// replaced books the result of a replace.
func (t *Table) replaced(st *Stats, op *writeOp, err error) {
	d := op.d
	if err != nil {
		var ke *KernelError
		if errors.As(err, &ke) || errors.Is(err, ErrNoAck) {
			err = fmt.Errorf("route table: replace %s: %w", d, err)
		}
		st.Failed++
		st.Errors = append(st.Errors, err)
		t.log.Warn("route not programmed; will retry", "dst", d.Dst.String(), "route", d.String(),
			"class", d.Class.String(), "reason", d.Reason, "err", err)
		return
	}
	t.kernel[op.k] = t.asKernel(d)
	if mtu := t.mtuFor(d); mtu > 0 {
		t.mtu[op.k] = mtu
	} else {
		delete(t.mtu, op.k)
	}
	if op.had {
		st.Replaced++
		ours, _ := t.policy.RouteIsOurs(op.cur)
		t.log.Info("route replaced", "dst", d.Dst.String(), "route", d.String(), "class", d.Class.String(),
			"reason", d.Reason, "previous", op.cur.String(), "previousWasOurs", ours)
		return
	}
	st.Added++
	t.log.Info("route added", "dst", d.Dst.String(), "route", d.String(), "class", d.Class.String(), "reason", d.Reason)
}

// deleted books the result of a delete.
func (t *Table) deleted(st *Stats, k key, cur kroute.Route, err error) {
	if err != nil && !errors.Is(err, unix.ESRCH) {
		st.Failed++
		err = fmt.Errorf("route table: delete %s: %w", cur, err)
		st.Errors = append(st.Errors, err)
		t.log.Warn("route not deleted; will retry", "dst", cur.Dst.String(), "route", cur.String(), "err", err)
		return
	}
	delete(t.kernel, k)
	delete(t.mtu, k)
	if err != nil {
		t.log.Info("route already gone", "dst", cur.Dst.String(), "route", cur.String())
		return
	}
	st.Deleted++
	_, why := t.policy.RouteIsOurs(cur)
	t.log.Info("route deleted", "dst", cur.Dst.String(), "route", cur.String(), "reason", "not desired; ours: "+why)
}
