package timeline

// The timeline must tell a handover that keeps a route (a replace at the same
// metric: one event, never a moment without a route) from one that drops it
// (delete then add: two events and a window with no route between them), and
// keep recording while interfaces come and go.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/kroute/nlroute"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// node is one namespace with two veth pairs whose both ends stay inside it:
// v0 (10.50.0.1/24) <-> v0p, v1 (10.51.0.1/24) <-> v1p.
type node struct {
	path string
	mon  *Monitor
	h    *netlink.Handle
	dev  map[string]netlink.Link
}

func newNode(t *testing.T) *node {
	t.Helper()
	n := testenv.NewNetNS(t, "tl")
	nd := &node{path: n.NS.Path(), h: n.Handle, dev: map[string]netlink.Link{}}
	for _, v := range []struct{ name, peer, addr string }{{"v0", "v0p", "10.50.0.1/24"}, {"v1", "v1p", "10.51.0.1/24"}} {
		nd.dev[v.name] = n.Veth(t, v.name, v.peer, v.addr)
		l, err := n.Handle.LinkByName(v.peer)
		if err != nil {
			t.Fatal(err)
		}
		nd.dev[v.peer] = l
	}
	var err error
	nd.mon, err = Start(Options{Name: "tl", Netns: n.NS.Path()})
	if err != nil {
		t.Fatal(err)
	}
	n.Run.Defer("route timeline", nd.mon.Close)
	return nd
}

func (nd *node) route(dst string, proto kroute.Protocol, metric int, dev, gw string) *netlink.Route {
	_, ipn, _ := net.ParseCIDR(dst)
	return &netlink.Route{
		Dst:       ipn,
		Gw:        net.ParseIP(gw),
		LinkIndex: nd.dev[dev].Attrs().Index,
		Protocol:  netlink.RouteProtocol(proto),
		Priority:  metric,
		Table:     kroute.MainTable,
	}
}

func (nd *node) waitEvent(t *testing.T, what string, match func(event.Event) bool) event.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e, err := nd.mon.WaitFor(ctx, match)
	if err != nil {
		t.Fatalf("%s: %v; events: %v", what, err, nd.mon.Events())
	}
	return e
}

func is(kind event.Kind, p netip.Prefix, proto kroute.Protocol) func(event.Event) bool {
	return func(e event.Event) bool {
		return !e.Existing && e.Kind == kind && e.Route.Dst == p && e.Route.Protocol == proto
	}
}

func TestReplaceIsOneEventDeleteAddIsAWindow(t *testing.T) {
	nd := newNode(t)
	p := netip.MustParsePrefix("10.60.0.0/24")
	t0 := monoclock.Now()

	// 1. BIRD's route (proto 12, metric 0), then the programmer's replace
	// (proto 80, same metric): one operation in the kernel.
	if err := nd.h.RouteAdd(nd.route("10.60.0.0/24", kroute.ProtoBIRD, 0, "v0", "10.50.0.2")); err != nil {
		t.Fatal(err)
	}
	added := nd.waitEvent(t, "proto bird add", is(event.Add, p, kroute.ProtoBIRD))
	if err := nd.h.RouteReplace(nd.route("10.60.0.0/24", kroute.ProtoCalicoDefault, 0, "v0", "10.50.0.2")); err != nil {
		t.Fatal(err)
	}
	replaced := nd.waitEvent(t, "proto 80 replace", is(event.Replace, p, kroute.ProtoCalicoDefault))

	evs := nd.mon.EventsFor(p, t0, 0)
	if len(evs) != 2 || evs[0].Kind != event.Add || evs[1].Kind != event.Replace {
		t.Fatalf("replace of proto bird by proto 80: events %v, want exactly [add, replace] and no delete", evs)
	}
	if evs[1].NlFlags&unix.NLM_F_REPLACE == 0 {
		t.Errorf("the replace notification carries no NLM_F_REPLACE (flags %#x)", evs[1].NlFlags)
	}
	if w := nd.mon.NoRouteWindows(p, added.At, monoclock.Now()); len(w) != 0 {
		t.Errorf("a replace left windows with no route to %s: %+v", p, w)
	}
	if f := nd.mon.Flaps(p, t0, 0); f.Changes() != 2 || f.OwnerChanges != 2 || !slices.Equal(f.Owners, []kroute.Protocol{0, kroute.ProtoBIRD, kroute.ProtoCalicoDefault}) {
		t.Errorf("flaps = %+v, want 2 changes, owners none -> bird(12) -> 80", f)
	}
	got := replaced.Route
	if got.Metric != 0 || got.Table != kroute.MainTable || !slices.Equal(got.Devices(), []string{"v0"}) ||
		!slices.Equal(got.Gateways(), []netip.Addr{netip.MustParseAddr("10.50.0.2")}) {
		t.Errorf("replace recorded as %s, want 10.60.0.0/24 via 10.50.0.2 dev v0 proto 80 metric 0", got)
	}

	// 2. Delete + add: two events, and a window with no route between them.
	t1 := monoclock.Now()
	if err := nd.h.RouteDel(nd.route("10.60.0.0/24", kroute.ProtoCalicoDefault, 0, "v0", "10.50.0.2")); err != nil {
		t.Fatal(err)
	}
	del := nd.waitEvent(t, "delete", is(event.Delete, p, kroute.ProtoCalicoDefault))
	if err := nd.h.RouteAdd(nd.route("10.60.0.0/24", kroute.ProtoBIRD, 0, "v0", "10.50.0.2")); err != nil {
		t.Fatal(err)
	}
	readd := nd.waitEvent(t, "re-add", func(e event.Event) bool { return is(event.Add, p, kroute.ProtoBIRD)(e) && e.At > del.At })

	if evs := nd.mon.EventsFor(p, t1, 0); len(evs) != 2 || evs[0].Kind != event.Delete || evs[1].Kind != event.Add {
		t.Fatalf("delete + add: events %v, want [delete, add]", evs)
	}
	w := nd.mon.NoRouteWindows(p, t1, monoclock.Now())
	if len(w) != 1 || w[0].From != del.At || w[0].To != readd.At || w[0].Open {
		t.Fatalf("delete + add: windows %+v, want one closed window [%d, %d]", w, del.At, readd.At)
	}
	t.Logf("delete+add window %.3f ms", w[0].Ms())
	if !nd.mon.HadNoRoute(p, t1, 0) || nd.mon.HadNoRoute(p, added.At, t1) {
		t.Error("HadNoRoute disagrees with NoRouteWindows")
	}

	// 3. Routes by protocol now.
	byProto := nd.mon.RoutesByProtocol()
	if rs := byProto[kroute.ProtoBIRD]; len(rs) != 1 || rs[0].Dst != p {
		t.Errorf("proto bird routes now: %v, want just %s", rs, p)
	}
	if rs := byProto[kroute.ProtoCalicoDefault]; len(rs) != 0 {
		t.Errorf("proto 80 routes now: %v, want none", rs)
	}
	if len(byProto[kroute.ProtoKernel]) < 2 {
		t.Errorf("kernel routes now: %v, want the two connected /24s", byProto[kroute.ProtoKernel])
	}
}

// A route at a different metric is a second route: deleting one leaves the
// other, and the prefix always has a route.
func TestMetricsAreDifferentRoutes(t *testing.T) {
	nd := newNode(t)
	p := netip.MustParsePrefix("10.61.0.0/24")
	t0 := monoclock.Now()
	if err := nd.h.RouteAdd(nd.route("10.61.0.0/24", kroute.ProtoBIRD, 32, "v0", "10.50.0.2")); err != nil {
		t.Fatal(err)
	}
	nd.waitEvent(t, "bird at 32", is(event.Add, p, kroute.ProtoBIRD))
	if err := nd.h.RouteReplace(nd.route("10.61.0.0/24", kroute.ProtoCalicoDefault, 0, "v0", "10.50.0.2")); err != nil {
		t.Fatal(err)
	}
	nd.waitEvent(t, "felix at 0 (an add, not a replace)", is(event.Add, p, kroute.ProtoCalicoDefault))
	if err := nd.h.RouteDel(nd.route("10.61.0.0/24", kroute.ProtoBIRD, 32, "v0", "10.50.0.2")); err != nil {
		t.Fatal(err)
	}
	del := nd.waitEvent(t, "bird delete", is(event.Delete, p, kroute.ProtoBIRD))
	if w := nd.mon.NoRouteWindows(p, nd.mon.EventsFor(p, t0, 0)[0].At+1, del.At+1); len(w) != 0 {
		t.Errorf("windows %+v, want none: proto 80 at metric 0 stayed", w)
	}
	if f := nd.mon.Flaps(p, t0, 0); f.OwnerChanges != 2 || !slices.Equal(f.Owners, []kroute.Protocol{0, kroute.ProtoBIRD, kroute.ProtoCalicoDefault}) {
		t.Errorf("flaps %+v: want owner none -> bird -> 80 (metric 0 wins), and no change on the bird delete", f)
	}
}

// Multipath nexthops, onlink and blackhole routes are recorded as such; a
// blackhole counts as no route.
func TestMultipathOnlinkBlackhole(t *testing.T) {
	nd := newNode(t)
	p := netip.MustParsePrefix("10.70.0.0/24")
	_, ipn, _ := net.ParseCIDR(p.String())
	mp := &netlink.Route{
		Dst: ipn, Protocol: netlink.RouteProtocol(kroute.ProtoBIRD), Table: kroute.MainTable,
		MultiPath: []*netlink.NexthopInfo{
			{LinkIndex: nd.dev["v0"].Attrs().Index, Gw: net.ParseIP("192.0.2.1"), Flags: int(netlink.FLAG_ONLINK)},
			{LinkIndex: nd.dev["v1"].Attrs().Index, Gw: net.ParseIP("192.0.2.2"), Flags: int(netlink.FLAG_ONLINK)},
		},
	}
	if err := nd.h.RouteAdd(mp); err != nil {
		t.Fatal(err)
	}
	e := nd.waitEvent(t, "multipath add", is(event.Add, p, kroute.ProtoBIRD))
	if !slices.Equal(e.Route.Devices(), []string{"v0", "v1"}) || len(e.Route.Gateways()) != 2 || !e.Route.Onlink() {
		t.Errorf("multipath route recorded as %s, want two onlink nexthops via v0 and v1", e.Route)
	}
	t.Logf("recorded: %s", e.Route)

	bh := &netlink.Route{Dst: ipn, Type: unix.RTN_BLACKHOLE, Protocol: netlink.RouteProtocol(kroute.ProtoStatic), Table: kroute.MainTable}
	if err := nd.h.RouteReplace(bh); err != nil {
		t.Fatal(err)
	}
	e = nd.waitEvent(t, "blackhole replace", is(event.Replace, p, kroute.ProtoStatic))
	if w := nd.mon.NoRouteWindows(p, e.At, 0); len(w) != 1 || !w[0].Open || w[0].From != e.At {
		t.Errorf("after a blackhole replace: windows %+v, want one open window from %d", w, e.At)
	}
}

// Interfaces going away take their IPv4 routes with them without a
// notification; the monitor must see it and keep recording afterwards.
func TestSurvivesInterfaceChurn(t *testing.T) {
	nd := newNode(t)
	p := netip.MustParsePrefix("10.80.0.0/24")
	if err := nd.h.RouteAdd(nd.route(p.String(), kroute.ProtoCalicoDefault, 0, "v1", "10.51.0.2")); err != nil {
		t.Fatal(err)
	}
	nd.waitEvent(t, "route via v1", is(event.Add, p, kroute.ProtoCalicoDefault))

	// 1. v1 goes away (and with it, silently, the route).
	if err := nd.h.LinkDel(nd.dev["v1"]); err != nil {
		t.Fatal(err)
	}
	gone := nd.waitEvent(t, "route removed with v1", is(event.Delete, p, kroute.ProtoCalicoDefault))
	t.Logf("route removal seen as resync=%v", gone.Resync)

	// 2. New interfaces and routes are still recorded.
	if err := nd.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "v9"}, PeerName: "v9p"}); err != nil {
		t.Fatal(err)
	}
	l, err := nd.h.LinkByName("v9")
	if err != nil {
		t.Fatal(err)
	}
	if err := nd.h.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	nd.dev["v9"] = l
	if err := nd.h.RouteAdd(nd.route(p.String(), kroute.ProtoBIRD, 0, "v9", "")); err != nil {
		t.Fatal(err)
	}
	back := nd.waitEvent(t, "route via new v9", is(event.Add, p, kroute.ProtoBIRD))
	if !slices.Equal(back.Route.Devices(), []string{"v9"}) {
		t.Errorf("new route recorded with devices %v, want [v9]", back.Route.Devices())
	}
	if w := nd.mon.NoRouteWindows(p, gone.At-1, 0); len(w) != 1 || w[0].Open {
		t.Errorf("windows %+v, want one closed window from the removal to the new route", w)
	}
	if errs := nd.mon.Errors(); len(errs) != 0 {
		t.Errorf("subscription errors: %v", errs)
	}
}

// Under churn (links created and deleted, routes added and removed) the
// monitor's own dumps get interrupted by the kernel (NLM_F_DUMP_INTR); it must
// re-dump, never report it as an error nor take a partial dump for the
// truth, and its view must end equal to the kernel's.
func TestMonitorUnderChurn(t *testing.T) {
	nd := newNode(t)
	nd.mon.Close() // this test starts its own monitors, under churn
	// 1. Enough links that a link dump takes several netlink messages (the
	// kernel can flag a dump interrupted only between two of them), and a
	// veth to churn routes through.
	for i := range 60 {
		if err := nd.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("s%d", i)}, PeerName: fmt.Sprintf("s%dp", i)}); err != nil {
			t.Fatal(err)
		}
	}

	// 2. Churn: a veth pair made and deleted over and over (each delete
	// makes every running monitor re-read its tables), and routes via v0
	// added and deleted.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var churnErr error
	var churned atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			if err := nd.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "cx"}, PeerName: "cxp"}); err != nil {
				churnErr = fmt.Errorf("churn: add cx: %w", err)
				return
			}
			rt := nd.route(fmt.Sprintf("10.90.%d.0/24", i%200), kroute.ProtoCalicoDefault, 0, "v0", "10.50.0.2")
			if err := nd.h.RouteAdd(rt); err != nil {
				churnErr = fmt.Errorf("churn: add %s: %w", rt.Dst, err)
				return
			}
			l, err := nd.h.LinkByName("cx")
			if err == nil {
				err = nd.h.LinkDel(l)
			}
			if err != nil {
				churnErr = fmt.Errorf("churn: delete cx: %w", err)
				return
			}
			if err := nd.h.RouteDel(rt); err != nil {
				churnErr = fmt.Errorf("churn: delete %s: %w", rt.Dst, err)
				return
			}
			churned.Add(1)
		}
	}()
	defer func() { cancel(); wg.Wait() }()

	// 3. Monitors started one after another while that goes on, each
	// running through some churn.
	var mons []*Monitor
	defer func() {
		for _, m := range mons {
			m.Close()
		}
	}()
	for i := range 20 {
		m, err := Start(Options{Name: fmt.Sprintf("churn-%d", i), Netns: nd.path})
		if err != nil {
			t.Fatalf("start monitor %d under churn: %v", i, err)
		}
		mons = append(mons, m)
		c0 := churned.Load()
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = m.WaitFor(wctx, func(e event.Event) bool { return e.Resync || churned.Load() > c0+2 })
		wcancel()
		if err != nil {
			t.Fatalf("monitor %d: no churn seen: %v", i, err)
		}
	}
	cancel()
	wg.Wait()
	if churnErr != nil {
		t.Fatal(churnErr)
	}
	if churned.Load() < 20 {
		t.Fatalf("only %d churn rounds: the test did not churn", churned.Load())
	}

	// 4. Verdict: no monitor reported an error, and each one's routes are
	// the kernel's once the last notifications are in.
	kernel := func() map[key]bool {
		out := map[key]bool{}
		for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			rs, err := nsutil.Routes(nd.h, fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				if r.Flags&unix.RTM_F_CLONED == 0 {
					out[keyOf(nlroute.FromNetlink(r, func(int) string { return "" }))] = true
				}
			}
		}
		return out
	}
	for _, m := range mons {
		if errs := m.Errors(); len(errs) != 0 {
			t.Errorf("monitor %s reported errors under churn: %v", m.Name(), errs)
		}
		var diff []string
		deadline := time.Now().Add(5 * time.Second)
		for {
			diff = diff[:0]
			kernel := kernel()
			have := map[key]bool{}
			for _, r := range m.Routes() {
				have[keyOf(r)] = true
				if !kernel[keyOf(r)] {
					diff = append(diff, "extra "+r.String())
				}
			}
			for k := range kernel {
				if !have[k] {
					diff = append(diff, fmt.Sprintf("missing %v", k))
				}
			}
			if len(diff) == 0 || time.Now().After(deadline) {
				break
			}
			<-time.After(20 * time.Millisecond) // polling interval
		}
		if len(diff) != 0 {
			t.Errorf("monitor %s disagrees with the kernel after the churn: %v", m.Name(), diff)
		}
	}
	t.Logf("%d churn rounds over %d monitors", churned.Load(), len(mons))
}

// RoutesTo is the main table's routes inside a prefix, as the monitor holds
// them: a /26 inside the /24 asked for and the /24 itself, not a route
// outside it; the zero prefix is every main-table route.
func TestRoutesToSelectsInsideThePrefix(t *testing.T) {
	nd := newNode(t)
	for _, r := range []struct {
		dst    string
		metric int
	}{{"10.62.0.0/24", 0}, {"10.62.0.64/26", 0}, {"10.62.0.64/26", 1024}, {"10.63.0.0/26", 0}} {
		if err := nd.h.RouteAdd(nd.route(r.dst, kroute.ProtoBIRD, r.metric, "v0", "10.50.0.2")); err != nil {
			t.Fatal(err)
		}
		p := netip.MustParsePrefix(r.dst)
		nd.waitEvent(t, r.dst, func(e event.Event) bool { return !e.Existing && e.Route.Dst == p && e.Route.Metric == r.metric })
	}
	got := func(dst netip.Prefix) []string {
		var out []string
		for _, r := range nd.mon.RoutesTo(dst) {
			if r.Protocol == kroute.ProtoBIRD {
				out = append(out, fmt.Sprintf("%s/%d", r.Dst, r.Metric))
			}
		}
		return out
	}
	if g, want := got(netip.MustParsePrefix("10.62.0.0/24")), []string{"10.62.0.0/24/0", "10.62.0.64/26/0", "10.62.0.64/26/1024"}; !slices.Equal(g, want) {
		t.Errorf("RoutesTo(10.62.0.0/24) = %v, want %v", g, want)
	}
	if g, want := got(netip.MustParsePrefix("10.62.0.64/26")), []string{"10.62.0.64/26/0", "10.62.0.64/26/1024"}; !slices.Equal(g, want) {
		t.Errorf("RoutesTo(10.62.0.64/26) = %v, want %v (not the covering /24)", g, want)
	}
	if g := got(netip.Prefix{}); len(g) != 4 {
		t.Errorf("RoutesTo(zero) = %v, want all 4 bird routes", g)
	}
}
