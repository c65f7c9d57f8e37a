package timeline

// Root: a real monitor whose subscription overflows (ENOBUFS) records the
// gap, and a delete and re-add of a route inside it, which left no event,
// makes the span unjudgeable instead of clean. The positive control is the
// same delete-free span on a monitor that kept up.

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/vishvananda/netlink"
)

func TestSubscriptionGapIsRecorded(t *testing.T) {
	n := testenv.NewNetNS(t, "tg")
	nd := &node{path: n.NS.Path(), h: n.Handle, dev: map[string]netlink.Link{}}
	nd.dev["v0"] = n.Veth(t, "v0", "v0p", "10.50.0.1/24")
	// The smallest receive buffer the kernel allows, so the overflow
	// comes after a few notifications beyond the channel's 4096.
	mon, err := Start(Options{Name: "node-x", Netns: nd.path, ReceiveBuffer: 4096})
	if err != nil {
		t.Fatal(err)
	}
	n.Run.Defer("route timeline", mon.Close)
	nd.mon = mon

	// 1. The watched route, seen added.
	p := netip.MustParsePrefix("10.60.0.0/24")
	watched := nd.route(p.String(), kroute.ProtoCalicoDefault, 0, "v0", "10.50.0.2")
	if err := nd.h.RouteAdd(watched); err != nil {
		t.Fatal(err)
	}
	added := nd.waitEvent(t, "the watched route's add", is(event.Add, p, kroute.ProtoCalicoDefault))
	before := monoclock.Now()

	// 2. The monitor stops reading (as a slow reader under load would:
	// its loop blocks recording), 6000 route adds fill its channel and its
	// socket buffer, and then the watched route is deleted and re-added —
	// notifications the kernel can no longer queue.
	mon.mu.Lock()
	const flood = 6000
	var floodErr error
	for i := range flood {
		r := nd.route(fmt.Sprintf("10.%d.%d.0/24", 100+i/250, i%250), kroute.ProtoCalicoDefault, 0, "v0", "10.50.0.2")
		if floodErr = nd.h.RouteAdd(r); floodErr != nil {
			break
		}
	}
	delAt := monoclock.Now()
	if err := nd.h.RouteDel(watched); err != nil {
		floodErr = err
	}
	if err := nd.h.RouteAdd(watched); err != nil {
		floodErr = err
	}
	mon.mu.Unlock()
	if floodErr != nil {
		t.Fatal(floodErr)
	}

	// 3. The monitor re-subscribes and records the gap as an event.
	gapEv := nd.waitEvent(t, "the subscription gap", func(e event.Event) bool { return e.Kind == event.GapKind })
	after := monoclock.Now()
	g := gapEv.Gap
	// The gap must cover the delete's real time, although the loop
	// stamped the notifications it still took after it (the channel's
	// backlog) later than that.
	if g == nil || g.Node != "node-x" || g.From > delAt || g.To < delAt {
		t.Fatalf("gap %+v: want node-x's gap to cover the delete at %d (the add was at %d)", g, delAt, added.At)
	}
	if gs := mon.Gaps(); len(gs) != 1 {
		t.Fatalf("Gaps %+v, want one", gs)
	}
	t.Logf("gap %s; errors %v", g, mon.Errors())

	// 4. The delete and re-add left no event: the observed events alone
	// would say the route never went. Every query over the span says
	// unjudgeable instead.
	for _, e := range mon.EventsFor(p, before, after) {
		if e.Kind == event.Delete {
			t.Fatalf("the delete was seen after all (%+v): the test did not make a gap over it", e)
		}
	}
	if w := mon.observedNoRouteWindows(p, before, after); len(w) != 0 {
		t.Fatalf("observed windows %v: the delete was seen", w)
	}
	ws := mon.NoRouteWindows(p, before, after)
	if len(ws) != 1 || !strings.Contains(ws[0].Unjudgeable, "unjudgeable: the route monitor missed events from") || !strings.Contains(ws[0].Unjudgeable, "node node-x") {
		t.Fatalf("NoRouteWindows over the gap: %+v, want one unjudgeable window", ws)
	}
	if err := mon.Judgeable(before, after); !errors.Is(err, ErrUnjudgeable) {
		t.Fatalf("Judgeable over the gap: %v", err)
	}
	if f := mon.Flaps(p, before, after); f.Changes() == 0 {
		t.Fatalf("flaps over the gap %+v: no change", f)
	}

	// 5. The monitor records again after the gap, and a span after it is
	// judgeable: a delete now is seen as a window.
	t2 := monoclock.Now()
	if err := nd.h.RouteDel(watched); err != nil {
		t.Fatal(err)
	}
	gone := nd.waitEvent(t, "a delete after the gap", func(e event.Event) bool { return e.Kind == event.Delete && e.Route.Dst == p && e.At >= t2 })
	if err := mon.Judgeable(t2, 0); err != nil {
		t.Fatalf("after the gap: %v", err)
	}
	if w := mon.NoRouteWindows(p, t2, 0); len(w) != 1 || w[0].Unjudgeable != "" || w[0].From != gone.At {
		t.Fatalf("after the gap: windows %+v", w)
	}
}

// The positive control: the same flood read by a monitor that keeps up
// (nothing blocks it, the default buffer) leaves no gap, and the span with
// no delete of the watched route is judged clean.
func TestNoGapWhenTheMonitorKeepsUp(t *testing.T) {
	nd := newNode(t)
	p := netip.MustParsePrefix("10.60.0.0/24")
	if err := nd.h.RouteAdd(nd.route(p.String(), kroute.ProtoCalicoDefault, 0, "v0", "10.50.0.2")); err != nil {
		t.Fatal(err)
	}
	nd.waitEvent(t, "the watched route's add", is(event.Add, p, kroute.ProtoCalicoDefault))
	before := monoclock.Now()
	const flood = 2000
	for i := range flood {
		if err := nd.h.RouteAdd(nd.route(fmt.Sprintf("10.%d.%d.0/24", 100+i/250, i%250), kroute.ProtoCalicoDefault, 0, "v0", "10.50.0.2")); err != nil {
			t.Fatal(err)
		}
	}
	last := netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", 100+(flood-1)/250, (flood-1)%250))
	nd.waitEvent(t, "the flood's last add", is(event.Add, last, kroute.ProtoCalicoDefault))
	after := monoclock.Now()
	if gs := nd.mon.Gaps(); len(gs) != 0 {
		t.Fatalf("gaps %v on a monitor that kept up", gs)
	}
	if err := nd.mon.Judgeable(before, after); err != nil {
		t.Fatal(err)
	}
	if w := nd.mon.NoRouteWindows(p, before, after); len(w) != 0 {
		t.Fatalf("windows %v", w)
	}
}
