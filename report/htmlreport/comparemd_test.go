package htmlreport

// Holds the side-by-side table in place: the cells each side's timeline
// decides (no-route windows, route shapes) are read from hand-made
// timelines whose answer is known, then from a real run (the recorded VM
// upgrade, kernel ipip) against itself, where every cell must agree, and
// against copies broken the two ways a tunnel emulation could differ: its
// routes leave by another device, or a route goes and does not come back.

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/compare"
	"github.com/birdcage/birdcage/report/results"
)

const ms = int64(1e6)

func tunlRoute(dst, gw string, proto kroute.Protocol) kroute.Route {
	return kroute.Route{Family: 4, Table: kroute.MainTable, Dst: netip.MustParsePrefix(dst), Protocol: proto,
		Type: kroute.Unicast, NextHops: []kroute.NextHop{{Gateway: netip.MustParseAddr(gw), Device: "tunl0", Onlink: true}}}
}

func compareMarkdown(t *testing.T, base, nw *results.ResultsFile) string {
	t.Helper()
	r := compare.Compare("base.json", base, "new.json", nw, compare.Options{Thresholds: compare.DefaultThresholds()})
	if len(r.Scenarios) == 0 {
		t.Fatal("nothing paired: the table would be empty")
	}
	var b bytes.Buffer
	if err := CompareMarkdown(&b, Run{Name: "base.json", File: base}, Run{Name: "new.json", File: nw}, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// mdRow is the table row of scenario name.
func mdRow(t *testing.T, md, name string) string {
	t.Helper()
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "| "+name+" |") {
			return l
		}
	}
	t.Fatalf("no row for %q in:\n%s", name, md)
	return ""
}

func TestCompareMarkdownWindowsAndShapes(t *testing.T) {
	bird := tunlRoute("10.244.1.0/26", "10.10.1.12", kroute.ProtoBIRD)
	prog := tunlRoute("10.244.1.0/26", "10.10.1.12", 80)
	other := tunlRoute("10.244.2.0/26", "10.10.2.13", kroute.ProtoBIRD)
	own := kroute.Route{Family: 4, Table: kroute.MainTable, Dst: netip.MustParsePrefix("10.244.0.0/26"), Protocol: kroute.ProtoBIRD, Type: kroute.Blackhole}
	// BASE: BIRD's route goes at 1 s, the programmer's comes 50 ms later
	// (one window of 50 ms); the other block goes at 2 s and has not come
	// back when node-2's timeline ends at 3 s (open, 1 s). The node's own
	// blackhole block is never a forwarding route: no window.
	baseEvents := map[string][]event.Event{
		"node-1": {
			{At: 0, Kind: event.Add, Route: own, Existing: true},
			{At: 1, Kind: event.Add, Route: bird, Existing: true},
			{At: 2, Kind: event.Add, Route: other, Existing: true},
			{At: 1000 * ms, Kind: event.Delete, Route: bird},
			{At: 1050 * ms, Kind: event.Add, Route: prog},
			{At: 2000 * ms, Kind: event.Delete, Route: other},
		},
		"node-2": {{At: 3000 * ms, Kind: event.Add, Route: tunlRoute("10.244.0.0/26", "10.10.1.11", 80)}},
	}
	// NEW: the programmer replaces BIRD's route in place, the other block
	// stays, and its routes leave by eth0, not onlink via tunl0.
	bare := prog
	bare.NextHops = []kroute.NextHop{{Gateway: netip.MustParseAddr("10.10.1.12"), Device: "eth0"}}
	bare2 := tunlRoute("10.244.0.0/26", "10.10.1.11", 80)
	bare2.NextHops = []kroute.NextHop{{Gateway: netip.MustParseAddr("10.10.1.11"), Device: "eth0"}}
	newEvents := map[string][]event.Event{
		"node-1": {
			{At: 0, Kind: event.Add, Route: own, Existing: true},
			{At: 1, Kind: event.Add, Route: bird, Existing: true},
			{At: 2, Kind: event.Add, Route: other, Existing: true},
			{At: 1000 * ms, Kind: event.Replace, Route: bare},
		},
		"node-2": {{At: 3000 * ms, Kind: event.Add, Route: bare2}},
	}
	scen := func(evs map[string][]event.Event) *results.ResultsFile {
		return &results.ResultsFile{Kernel: "6.18", Scenarios: []results.ScenarioResult{{Name: "handover", Spec: "handover", Verdict: results.VerdictPass, Passed: true, Registered: true, RouteEvents: evs}}}
	}
	got := mdRow(t, compareMarkdown(t, scen(baseEvents), scen(newEvents)), "handover")
	for _, want := range []string{
		"| 2, longest 1000 ms, 1 open at the end / 0 |",
		"BASE only: P via GW dev tunl0 proto 80 metric 0 onlink",
		"NEW only: P via GW dev eth0 proto 80 metric 0",
		"both: P via GW dev tunl0 proto bird metric 0 onlink",
		"blackhole P proto bird metric 0",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("row lacks %q:\n%s", want, got)
		}
	}
	// Positive control: a side against itself agrees in every cell.
	same := mdRow(t, compareMarkdown(t, scen(baseEvents), scen(baseEvents)), "handover")
	if strings.Contains(same, " / ") || !strings.Contains(same, "same: ") {
		t.Errorf("a run against itself should have one value per cell and the same shapes:\n%s", same)
	}
}

// TestCompareMarkdownRecordedRun reads a real run. Its expectations come
// from the recorded timelines themselves, read apart from this code: in
// the SIGTERM upgrade node-1, node-3 and node-4 lose their route to
// node-2's block 10.245.0.64/26 at the old BIRD's Cease (at 50.098 s,
// 50.136 s, 50.136 s) and have none when the timelines end at 51.444 s:
// three open windows, the longest 1346 ms. The SIGKILL upgrade has none.
// Every block route is via tunl0 onlink, BIRD's and then the programmer's
// (proto 80).
func TestCompareMarkdownRecordedRun(t *testing.T) {
	f, err := results.ReadResults(recordedUpgrade)
	if err != nil {
		t.Fatal(err)
	}
	md := compareMarkdown(t, f, f)
	killed, termed := mdRow(t, md, "upgrade handover IPIP (killed)"), mdRow(t, md, "upgrade handover IPIP (terminated)")
	if !strings.Contains(termed, "| 3, longest 1346 ms, 3 open at the end |") {
		t.Errorf("SIGTERM row: want the three open windows the timelines hold:\n%s", termed)
	}
	if !strings.Contains(killed, " | 0 | ") {
		t.Errorf("SIGKILL row: want no window:\n%s", killed)
	}
	for _, r := range []string{killed, termed} {
		for _, want := range []string{"same: ", "P via GW dev tunl0 proto bird metric 0 onlink", "P via GW dev tunl0 proto 80 metric 0 onlink", "P dev cali* proto 80 metric 0"} {
			if !strings.Contains(r, want) {
				t.Errorf("row lacks %q:\n%s", want, r)
			}
		}
		if strings.Contains(r, " / ") {
			t.Errorf("a run against itself differs in a cell:\n%s", r)
		}
	}

	// The same run with every tunl0 next hop moved to eth0, and with the
	// SIGTERM upgrade's routes back at once (no delete).
	broken := copyResults(t, f)
	for i := range broken.Scenarios {
		s := &broken.Scenarios[i]
		for node, evs := range s.RouteEvents {
			var kept []event.Event
			for _, e := range evs {
				if e.Kind == event.Delete && strings.Contains(s.Name, "terminated") {
					continue
				}
				hops := append([]kroute.NextHop(nil), e.Route.NextHops...)
				for j := range hops {
					if hops[j].Device == "tunl0" {
						hops[j].Device, hops[j].Onlink, hops[j].Flags = "eth0", false, nil
					}
				}
				e.Route.NextHops = hops
				kept = append(kept, e)
			}
			s.RouteEvents[node] = kept
		}
	}
	md = compareMarkdown(t, f, broken)
	termed = mdRow(t, md, "upgrade handover IPIP (terminated)")
	for _, want := range []string{"| 3, longest 1346 ms, 3 open at the end / 0 |", "BASE only: P via GW dev tunl0 proto 80 metric 0 onlink", "NEW only: ", "P via GW dev eth0 proto 80 metric 0"} {
		if !strings.Contains(termed, want) {
			t.Errorf("broken copy's row lacks %q:\n%s", want, termed)
		}
	}
}

func copyResults(t *testing.T, f *results.ResultsFile) *results.ResultsFile {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var c results.ResultsFile
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}
