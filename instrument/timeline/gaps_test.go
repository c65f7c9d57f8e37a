package timeline

// A subscription gap makes every window, delete and flap question over a
// span that contains it unjudgeable: these tests build a timeline by hand
// (Synthetic) with a gap in the middle and check that each query says so,
// and that the same timeline without the gap answers as before. The
// monitor recording a real gap is TestSubscriptionGapIsRecorded
// (gapsroot_test.go).

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
)

const ms = int64(1e6)

func synthRoute(p netip.Prefix, proto kroute.Protocol) kroute.Route {
	return kroute.Route{Family: 4, Table: kroute.MainTable, Dst: p, Protocol: proto, Type: kroute.Unicast,
		NextHops: []kroute.NextHop{{Gateway: netip.MustParseAddr("10.50.0.2"), Device: "tunl0", Onlink: true}}}
}

// synthTimeline: the route to p is there from the start (t=1000 ms),
// replaced by the programmer's at 2000 ms; with gap, the monitor missed
// events from 3000 to 3050 ms.
func synthTimeline(p netip.Prefix, gap bool) *Monitor {
	t0 := 1000 * ms
	evs := []event.Event{
		{At: t0, Kind: event.Add, Route: synthRoute(p, kroute.ProtoBIRD), Existing: true},
		{At: 2000 * ms, Kind: event.Replace, Route: synthRoute(p, kroute.ProtoCalicoDefault)},
	}
	if gap {
		evs = append(evs, event.Event{At: 3050 * ms, Kind: event.GapKind, Gap: &event.Gap{Node: "node-2", From: 3000 * ms, To: 3050 * ms, Reason: "route subscription ended"}})
	}
	return Synthetic("node-2", t0, evs)
}

func TestGapMakesWindowsUnjudgeable(t *testing.T) {
	p := netip.MustParsePrefix("10.65.1.0/26")
	clean, gapped := synthTimeline(p, false), synthTimeline(p, true)

	// Positive control: no gap, no window, no delete, judgeable.
	if w := clean.NoRouteWindows(p, 1500*ms, 4000*ms); len(w) != 0 {
		t.Fatalf("clean timeline: windows %v, want none", w)
	}
	if err := clean.Judgeable(1500*ms, 4000*ms); err != nil {
		t.Fatalf("clean timeline: %v", err)
	}
	if f := clean.Flaps(p, 2500*ms, 4000*ms); f.Changes() != 0 || !slices.Equal(f.Owners, []kroute.Protocol{kroute.ProtoCalicoDefault}) {
		t.Fatalf("clean timeline: flaps %+v", f)
	}

	// Over the gap: a window marked unjudgeable, naming the node and the
	// times; the flaps count it; Judgeable says why.
	w := gapped.NoRouteWindows(p, 1500*ms, 4000*ms)
	if len(w) != 1 || w[0].Unjudgeable == "" || w[0].From != 3000*ms || w[0].To != 3050*ms {
		t.Fatalf("gapped timeline: windows %+v, want the gap as one unjudgeable window", w)
	}
	for _, want := range []string{"unjudgeable: the route monitor missed events from 3000000000 to 3050000000", "on node node-2"} {
		if !strings.Contains(w[0].Unjudgeable, want) {
			t.Errorf("window's reason %q does not say %q", w[0].Unjudgeable, want)
		}
	}
	if !gapped.HadNoRoute(p, 1500*ms, 4000*ms) {
		t.Error("HadNoRoute over a gap: false; it is not known that the route stayed")
	}
	err := gapped.Judgeable(1500*ms, 4000*ms)
	var ue *UnjudgeableError
	if !errors.Is(err, ErrUnjudgeable) || !errors.As(err, &ue) || len(ue.Gaps) != 1 || ue.Gaps[0].Node != "node-2" {
		t.Fatalf("Judgeable over the gap: %v", err)
	}
	f := gapped.Flaps(p, 2500*ms, 4000*ms)
	if f.Changes() != 1 || len(f.Unjudgeable) != 1 || !slices.Equal(f.Owners, []kroute.Protocol{kroute.ProtoCalicoDefault, OwnerUnknown}) {
		t.Fatalf("flaps over the gap %+v: want one change, the owner unknown", f)
	}
	if evs := gapped.EventsFor(p, 2500*ms, 4000*ms); len(evs) != 1 || evs[0].Kind != event.GapKind {
		t.Fatalf("EventsFor over the gap: %+v, want the gap event", evs)
	}

	// A span that ends before or starts after the gap is judgeable.
	for _, span := range [][2]int64{{1500 * ms, 2999 * ms}, {3051 * ms, 4000 * ms}} {
		if err := gapped.Judgeable(span[0], span[1]); err != nil {
			t.Errorf("span %v beside the gap: %v", span, err)
		}
		if w := gapped.NoRouteWindows(p, span[0], span[1]); len(w) != 0 {
			t.Errorf("span %v beside the gap: windows %v", span, w)
		}
	}
	// A span that overlaps part of it is not; its window is clipped.
	if w := gapped.NoRouteWindows(p, 3020*ms, 4000*ms); len(w) != 1 || w[0].From != 3020*ms || w[0].Unjudgeable == "" {
		t.Errorf("span starting inside the gap: windows %+v", w)
	}
	// An observed window and a gap are told apart, in time order.
	evs := gapped.Events()
	evs = append(evs, event.Event{At: 3500 * ms, Kind: event.Delete, Route: synthRoute(p, kroute.ProtoCalicoDefault)},
		event.Event{At: 3600 * ms, Kind: event.Add, Route: synthRoute(p, kroute.ProtoCalicoDefault)})
	both := Synthetic("node-2", 1000*ms, evs)
	w = both.NoRouteWindows(p, 1500*ms, 4000*ms)
	if len(w) != 2 || w[0].Unjudgeable == "" || w[1].Unjudgeable != "" || w[1].From != 3500*ms || w[1].To != 3600*ms {
		t.Fatalf("gap then a real window: %+v", w)
	}
}

func TestOpenGapIsUnjudgeableUpToNow(t *testing.T) {
	p := netip.MustParsePrefix("10.65.1.0/26")
	m := synthTimeline(p, false)
	m.openGap = &event.Gap{Node: "node-2", From: 3000 * ms, Reason: "route subscription ended"}
	if err := m.Judgeable(3500*ms, 0); !errors.Is(err, ErrUnjudgeable) || !strings.Contains(err.Error(), "still re-subscribing") {
		t.Fatalf("open gap: %v", err)
	}
	if gs := m.Gaps(); len(gs) != 1 || gs[0].To != 0 {
		t.Fatalf("open gap: Gaps %+v", gs)
	}
}

func TestStatesReplayTheRoutes(t *testing.T) {
	p := netip.MustParsePrefix("10.65.1.0/26")
	m := synthTimeline(p, false)
	st := m.States(p, 1500*ms, 4000*ms)
	if len(st) != 2 || st[0].At != 1500*ms || len(st[0].Routes) != 1 || st[0].Routes[0].Protocol != kroute.ProtoBIRD ||
		st[1].At != 2000*ms || len(st[1].Routes) != 1 || st[1].Routes[0].Protocol != kroute.ProtoCalicoDefault {
		t.Fatalf("states %+v", st)
	}
}
