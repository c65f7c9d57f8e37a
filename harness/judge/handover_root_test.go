package judge

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/birdcage/birdcage/instrument/timeline"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/report/results"
)

// The handover analysis against a real route timeline: a replace is "new
// owner first" with no window; a delete then an add is a window as long as
// the kernel's gap between the two, attributed by who moved first.
func TestReadHandoversFromARealTimeline(t *testing.T) {
	n := testenv.NewNetNS(t, "ho")
	dev := n.Veth(t, "v0", "v0p", "10.50.0.1/24")
	mon, err := timeline.Start(timeline.Options{Name: "ho", Netns: n.NS.Path()})
	if err != nil {
		t.Fatal(err)
	}
	n.Run.Defer("route timeline", mon.Close)
	const programmer = kroute.Protocol(80)
	route := func(dst string, proto kroute.Protocol) *netlink.Route {
		_, ipn, _ := net.ParseCIDR(dst)
		return &netlink.Route{Dst: ipn, Gw: net.ParseIP("10.50.0.2"), LinkIndex: dev.Attrs().Index,
			Protocol: netlink.RouteProtocol(proto), Table: kroute.MainTable}
	}
	wait := func(p netip.Prefix, kind event.Kind, proto kroute.Protocol) event.Event {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		e, err := mon.WaitFor(ctx, func(e event.Event) bool {
			return !e.Existing && e.Route.Dst == p && e.Kind == kind && e.Route.Protocol == proto
		})
		if err != nil {
			t.Fatalf("%s %v proto %d: %v", p, kind, proto, err)
		}
		return e
	}
	replaced, windowed, untouched := netip.MustParsePrefix("10.60.0.0/24"), netip.MustParsePrefix("10.61.0.0/24"), netip.MustParsePrefix("10.62.0.0/24")
	for _, p := range []netip.Prefix{replaced, windowed, untouched} {
		if err := n.Handle.RouteAdd(route(p.String(), kroute.ProtoBIRD)); err != nil {
			t.Fatal(err)
		}
		wait(p, event.Add, kroute.ProtoBIRD)
	}

	start := monoclock.Now()
	if err := n.Handle.RouteReplace(route(replaced.String(), programmer)); err != nil {
		t.Fatal(err)
	}
	wait(replaced, event.Replace, programmer)
	if err := n.Handle.RouteDel(route(windowed.String(), kroute.ProtoBIRD)); err != nil {
		t.Fatal(err)
	}
	del := wait(windowed, event.Delete, kroute.ProtoBIRD)
	// The new owner's route at another metric than the old one's: the
	// handover reads both metrics (the kernel key) from the timeline.
	atOtherMetric := route(windowed.String(), programmer)
	atOtherMetric.Priority = 1024
	if err := n.Handle.RouteAdd(atOtherMetric); err != nil {
		t.Fatal(err)
	}
	add := wait(windowed, event.Add, programmer)
	end := monoclock.Now()

	hs := ReadHandovers([]HandoverNode{{Name: "ho", Timeline: mon, Blocks: []netip.Prefix{replaced, windowed, untouched}}},
		HandoverChange{From: kroute.ProtoBIRD, To: programmer, Start: start, End: end})
	if len(hs) != 3 {
		t.Fatalf("handovers: %+v, want one per block", hs)
	}
	byBlock := map[netip.Prefix]Handover{}
	for _, h := range hs {
		byBlock[h.Block] = h
	}
	if h := byBlock[replaced]; h.Ordering != NewOwnerFirst || h.WindowMs != 0 || h.OldGone != 0 {
		t.Errorf("replace: %+v, want new owner first, no window, old route never deleted", h)
	}
	wantMs := monoclock.Ms(add.At - del.At)
	if h := byBlock[windowed]; h.Ordering != BIRDWithdrewFirst || h.WindowMs != wantMs || h.OldGone != del.At || h.NewCame != add.At {
		t.Errorf("delete then add: %+v, want BIRD withdrew first, a window of %.3f ms from %d to %d", h, wantMs, del.At, add.At)
	}
	if h := byBlock[windowed]; h.OldMetric != 0 || h.NewMetric != 1024 {
		t.Errorf("delete then add: metrics %d → %d, want 0 → 1024 as written", h.OldMetric, h.NewMetric)
	}
	if h := byBlock[untouched]; h.Ordering != NoHandover || h.WindowMs != 0 {
		t.Errorf("untouched block: %+v, want no handover and no window", h)
	}

	var res results.ScenarioResult
	hs.AddFigures(&res)
	if res.Figures["longestNoRouteWindowMs"] != wantMs || res.Figures["handovers: "+string(BIRDWithdrewFirst)] != 1 ||
		res.Figures["handovers: "+string(NewOwnerFirst)] != 1 || res.Samples["noRouteWindowMs"].N != 3 {
		t.Errorf("figures %v samples %v: want the longest window %.3f ms and one handover of each ordering", res.Figures, res.Samples, wantMs)
	}
}

// Which component moved first decides the ordering; where BIRD tried first
// the scan explanation predicts the window.
func TestHandoverOrdering(t *testing.T) {
	for _, tc := range []struct {
		name   string
		h      Handover
		toBIRD bool
		want   Ordering
	}{
		{"never came", Handover{OldGone: 5}, false, NoHandover},
		{"replace", Handover{NewCame: 5}, true, NewOwnerFirst},
		{"added before the delete", Handover{OldGone: 9, NewCame: 5}, false, NewOwnerFirst},
		{"to the programmer after BIRD's delete", Handover{OldGone: 5, NewCame: 9}, false, BIRDWithdrewFirst},
		{"to BIRD, reconfigured before the delete", Handover{OldGone: 5, NewCame: 9, BIRDConfigured: 3}, true, BIRDTriedFirst},
		{"to BIRD, reconfigured before the delete, same key", Handover{OldGone: 5, NewCame: 9, BIRDConfigured: 3, OldMetric: 1024, NewMetric: 1024}, true, BIRDTriedFirst},
		{"to BIRD, reconfigured before the delete, BIRD's route at another metric", Handover{OldGone: 5, NewCame: 9, BIRDConfigured: 3, OldMetric: 0, NewMetric: 1024}, true, BIRDWroteAfterDelete},
		{"to BIRD at another metric, but after BIRD's reconfigure came the delete first", Handover{OldGone: 5, NewCame: 9, BIRDConfigured: 7, OldMetric: 0, NewMetric: 1024}, true, ProgrammerDeletedFirst},
		{"to BIRD at another metric, written before the delete", Handover{OldGone: 9, NewCame: 5, BIRDConfigured: 3, OldMetric: 0, NewMetric: 1024}, true, NewOwnerFirst},
		{"to BIRD, reconfigured after the delete", Handover{OldGone: 5, NewCame: 9, BIRDConfigured: 7}, true, ProgrammerDeletedFirst},
		{"to BIRD, reconfigure not seen (a lab)", Handover{OldGone: 5, NewCame: 9}, true, ProgrammerDeletedFirst},
	} {
		if got := orderingOf(tc.h, tc.toBIRD); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
