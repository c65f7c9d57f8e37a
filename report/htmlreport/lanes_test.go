package htmlreport

// Holds the swimlanes' reading of a route timeline in place: the owner at
// an instant is the lowest-metric forwarding route's protocol, a delete
// with nothing left is "none", blackholes and host routes get no lane.

import (
	"net/netip"
	"testing"

	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
)

func route(dst string, proto kroute.Protocol, metric int, typ kroute.Type) kroute.Route {
	return kroute.Route{Family: 4, Table: kroute.MainTable, Dst: netip.MustParsePrefix(dst), Protocol: proto, Metric: metric, Type: typ}
}

func TestLanes(t *testing.T) {
	u := kroute.Unicast
	block := "10.244.2.0/26"
	evs := map[string][]event.Event{"node-1": {
		{At: 100, Kind: event.Add, Existing: true, Route: route(block, kroute.ProtoBIRD, 0, u)},
		{At: 100, Kind: event.Add, Existing: true, Route: route("10.244.1.0/26", kroute.ProtoBIRD, 0, kroute.Blackhole)},
		{At: 100, Kind: event.Add, Existing: true, Route: route("10.244.1.5/32", kroute.ProtoBoot, 0, u)},
		{At: 200, Kind: event.Delete, Route: route(block, kroute.ProtoBIRD, 0, u)},
		{At: 250, Kind: event.Add, Route: route(block, kroute.ProtoCalicoDefault, 0, u)},
		{At: 300, Kind: event.Add, Route: route(block, kroute.ProtoStatic, 10, u)}, // higher metric: not used
	}}
	lanes := Lanes(evs, 400, 0)
	if len(lanes) != 1 || lanes[0].Prefix.String() != block {
		t.Fatalf("want one lane for %s (no blackhole, no host route), got %+v", block, lanes)
	}
	want := []Span{{100, 200, kroute.OwnerBIRD, ""}, {200, 250, kroute.OwnerNone, ""}, {250, 400, kroute.OwnerProgrammer, ""}}
	got := lanes[0].Spans
	if len(got) != len(want) {
		t.Fatalf("spans %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].From != want[i].From || got[i].To != want[i].To || got[i].Owner != want[i].Owner {
			t.Errorf("span %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// A cluster whose deviceRouteProtocol is not Calico's default: its routes
// are the programmer's, and proto 80 is another protocol's.
func TestLanesNonDefaultProgrammerProtocol(t *testing.T) {
	block := "10.244.2.0/26"
	evs := map[string][]event.Event{"node-1": {
		{At: 100, Kind: event.Add, Existing: true, Route: route(block, 99, 0, kroute.Unicast)},
		{At: 200, Kind: event.Add, Route: route(block, kroute.ProtoCalicoDefault, 0, kroute.Unicast)},
	}}
	lanes := Lanes(evs, 300, 99)
	if len(lanes) != 1 || len(lanes[0].Spans) != 2 {
		t.Fatalf("want one lane with two spans, got %+v", lanes)
	}
	if got := lanes[0].Spans; got[0].Owner != kroute.OwnerProgrammer || got[1].Owner != kroute.OwnerOther {
		t.Errorf("owners %s, %s; want programmer (proto 99), then other (proto 80)", got[0].Owner, got[1].Owner)
	}
}
