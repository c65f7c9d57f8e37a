package judge

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/instrument/timeline"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
)

// KeepRouteThroughout on timelines built by hand: the route replaced by
// the programmer's in one operation passes; the same timeline with a
// subscription gap in the span is unjudgeable (an error naming the gap),
// and a delete, a second route or a route of the wrong shape fail.
func TestKeepRouteThroughout(t *testing.T) {
	const ms = int64(1e6)
	p := netip.MustParsePrefix("10.65.2.0/26")
	hop := kroute.NextHop{Gateway: netip.MustParseAddr("10.0.0.3"), Device: "tunl0", Onlink: true}
	route := func(proto kroute.Protocol, metric int, h kroute.NextHop) kroute.Route {
		return kroute.Route{Family: 4, Table: kroute.MainTable, Dst: p, Protocol: proto, Metric: metric, Type: kroute.Unicast, NextHops: []kroute.NextHop{h}}
	}
	base := []event.Event{
		{At: 1000 * ms, Kind: event.Add, Route: route(kroute.ProtoBIRD, 0, hop), Existing: true},
		{At: 2000 * ms, Kind: event.Replace, Route: route(kroute.ProtoCalicoDefault, 0, hop)},
	}
	with := func(evs ...event.Event) *timeline.Monitor {
		return timeline.Synthetic("node-2", 1000*ms, append(append([]event.Event(nil), base...), evs...))
	}
	match := func(tl *timeline.Monitor) (bool, error, string) {
		m := KeepRouteThroughout(p, 1500*ms, 4000*ms).Shaped(hop)
		ok, err := m.Match(tl)
		return ok, err, m.FailureMessage(tl)
	}

	// Positive control: a replace keeps the route.
	if ok, err, msg := match(with()); !ok || err != nil {
		t.Fatalf("a replace should keep the route: %v %v %s", ok, err, msg)
	}
	// A gap in the span: unjudgeable, whatever the events say.
	gap := event.Event{At: 3050 * ms, Kind: event.GapKind, Gap: &event.Gap{Node: "node-2", From: 3000 * ms, To: 3050 * ms}}
	ok, err, _ := match(with(gap))
	if ok || err == nil || !strings.Contains(err.Error(), "unjudgeable: the route monitor missed events from 3000000000 to 3050000000") || !strings.Contains(err.Error(), "on node node-2") {
		t.Fatalf("over a gap: ok %v, err %v; want an unjudgeable error", ok, err)
	}
	// Beside the span, a gap does not matter.
	late := event.Event{At: 5050 * ms, Kind: event.GapKind, Gap: &event.Gap{Node: "node-2", From: 5000 * ms, To: 5050 * ms}}
	if ok, err, msg := match(with(late)); !ok || err != nil {
		t.Fatalf("a gap after the span: %v %v %s", ok, err, msg)
	}
	// Each way of losing the route fails, with the reason.
	for name, tc := range map[string]struct {
		evs  []event.Event
		want string
	}{
		"delete and re-add": {[]event.Event{
			{At: 3000 * ms, Kind: event.Delete, Route: route(kroute.ProtoCalicoDefault, 0, hop)},
			{At: 3001 * ms, Kind: event.Add, Route: route(kroute.ProtoCalicoDefault, 0, hop)}}, "deleted at"},
		"a second route": {[]event.Event{{At: 3000 * ms, Kind: event.Add, Route: route(kroute.ProtoBIRD, 32, hop)}}, "2 routes at"},
		"wrong gateway": {[]event.Event{{At: 3000 * ms, Kind: event.Replace,
			Route: route(kroute.ProtoCalicoDefault, 0, kroute.NextHop{Gateway: netip.MustParseAddr("10.0.0.4"), Device: "tunl0", Onlink: true})}}, "not via 10.0.0.3"},
		"not onlink": {[]event.Event{{At: 3000 * ms, Kind: event.Replace,
			Route: route(kroute.ProtoCalicoDefault, 0, kroute.NextHop{Gateway: hop.Gateway, Device: "tunl0"})}}, "onlink"},
	} {
		ok, err, msg := match(with(tc.evs...))
		if ok || err != nil || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: ok %v err %v, message %q (want it to say %q)", name, ok, err, msg, tc.want)
		}
	}
}
