package htmlreport

// Holds the swimlanes' reading of a route timeline in place: the owner at
// an instant is the lowest-metric forwarding route's protocol, a delete
// with nothing left is "none", blackholes and host routes get no lane.

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/harness/timeline"
)

func route(dst string, proto, metric, typ int) timeline.Route {
	return timeline.Route{Family: 4, Table: timeline.MainTable, Dst: netip.MustParsePrefix(dst), Protocol: proto, Metric: metric, Type: typ}
}

func TestLanes(t *testing.T) {
	u := unix.RTN_UNICAST
	block := "10.244.2.0/26"
	evs := map[string][]timeline.Event{"node-1": {
		{At: 100, Kind: timeline.Add, Existing: true, Route: route(block, timeline.ProtoBIRD, 0, u)},
		{At: 100, Kind: timeline.Add, Existing: true, Route: route("10.244.1.0/26", timeline.ProtoBIRD, 0, unix.RTN_BLACKHOLE)},
		{At: 100, Kind: timeline.Add, Existing: true, Route: route("10.244.1.5/32", timeline.ProtoBoot, 0, u)},
		{At: 200, Kind: timeline.Delete, Route: route(block, timeline.ProtoBIRD, 0, u)},
		{At: 250, Kind: timeline.Add, Route: route(block, timeline.ProtoFelix, 0, u)},
		{At: 300, Kind: timeline.Add, Route: route(block, timeline.ProtoStatic, 10, u)}, // higher metric: not used
	}}
	lanes := Lanes(evs, 400)
	if len(lanes) != 1 || lanes[0].Prefix.String() != block {
		t.Fatalf("want one lane for %s (no blackhole, no host route), got %+v", block, lanes)
	}
	want := []Span{{100, 200, OwnerBIRD, ""}, {200, 250, OwnerNone, ""}, {250, 400, OwnerProgrammer, ""}}
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
