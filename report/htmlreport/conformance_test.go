package htmlreport

import (
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
)

var confBlock = netip.MustParsePrefix("10.244.1.0/26")

func confRoute(proto kroute.Protocol, metric int, dev string, onlink bool) kroute.Route {
	return kroute.Route{Family: 4, Table: kroute.MainTable, Dst: confBlock, Protocol: proto, Metric: metric, Type: kroute.Unicast,
		NextHops: []kroute.NextHop{{Gateway: netip.MustParseAddr("10.0.0.2"), Device: dev, Onlink: onlink}}}
}

// confRow is one upgrade row of flavour fl: BIRD's route at metric before,
// the programmer's after, the given requests between 100 and 200.
func confRow(fl string, before, after kroute.Route, reqs []results.KernelRequest, windows float64) results.ScenarioResult {
	return results.ScenarioResult{
		Name: "upgrade " + fl, Verdict: results.VerdictPass, Passed: true,
		Flavours:    map[string]string{"node-2": fl},
		Figures:     map[string]float64{"noRouteWindows": windows, "longestNoRouteWindowMs": 3.5 * windows},
		Conformance: &results.Conformance{Case: "upgrade 3.32 → 3.33, ipip, killed", Node: "node-2", From: 100, To: 200},
		RouteEvents: map[string][]event.Event{"node-2": {
			{At: 10, Kind: event.Add, Route: before, Existing: true},
			{At: 150, Kind: event.Delete, Route: before},
			{At: 151, Kind: event.Add, Route: after},
			{At: 300, Kind: event.Delete, Route: after}, // after To: not in the end state
		}},
		RouteRequests: map[string][]results.KernelRequest{"node-2": reqs},
	}
}

func TestConformancePairsByCase(t *testing.T) {
	bird := confRoute(kroute.ProtoBIRD, 1024, "tunl0", true)
	felix := confRoute(80, 0, "tunl0", true)
	del := results.KernelRequest{At: 150, Op: "del", Dst: confBlock, Protocol: int(kroute.ProtoBIRD), Answered: true}
	add := results.KernelRequest{At: 151, Op: "add", Dst: confBlock, Protocol: 80, Answered: true}
	refused := results.KernelRequest{At: 152, Op: "add", Dst: confBlock, Protocol: 80, Errno: int(unix.EEXIST), Answered: true}
	outside := results.KernelRequest{At: 250, Op: "del", Dst: confBlock, Protocol: 80}
	model := &results.ResultsFile{Scenarios: []results.ScenarioResult{
		confRow("model", bird, felix, []results.KernelRequest{del, add, outside}, 1),
		{Name: "no case"},
	}}
	real := &results.ResultsFile{Scenarios: []results.ScenarioResult{
		confRow("calico", bird, felix, []results.KernelRequest{del, add, refused}, 1),
		confRow("calico", bird, felix, []results.KernelRequest{del, add}, 0),
	}}
	rows, err := Conformance(model, real)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("want one case, got %+v", rows)
	}
	r := rows[0]
	if r.Model.Runs != 1 || r.Real.Runs != 2 {
		t.Errorf("runs: model %d, real %d; want 1, 2", r.Model.Runs, r.Real.Runs)
	}
	if want := "1× del bird → add 80"; r.Model.Requests != want {
		t.Errorf("model requests %q, want %q (the delete after To left out)", r.Model.Requests, want)
	}
	if want := "1× del bird → add 80 → add 80 !EEXIST ×1; 1× del bird → add 80 ×1"; r.Real.Requests != want {
		t.Errorf("real requests %q, want %q", r.Real.Requests, want)
	}
	if got := requestOrder([]results.KernelRequest{refused, refused, refused, del, add}, 0, 0); got != "1× add 80 !EEXIST ×3 → del bird → add 80" {
		t.Errorf("a refused add retried: %q", got)
	}
	if want := "1× del bird → add 80 → add 80 !EEXIST ×1; 1× del bird → add 80 ×1"; r.Real.Requests != want {
		t.Errorf("real requests %q, want %q", r.Real.Requests, want)
	}
	if want := "P via GW dev tunl0 proto bird metric 1024 onlink"; r.Model.Before != want {
		t.Errorf("model before %q, want %q", r.Model.Before, want)
	}
	if want := "P via GW dev tunl0 proto 80 metric 0 onlink"; r.Model.After != want {
		t.Errorf("model after %q, want %q", r.Model.After, want)
	}
	if want := "1, longest 3.5 ms ×1; 0 ×1"; r.Real.Windows != want {
		t.Errorf("real windows %q, want %q", r.Real.Windows, want)
	}
	if got := strings.Join(r.Differs, ","); got != "windows,requests" {
		t.Errorf("differs %q, want windows,requests", got)
	}

	var b strings.Builder
	if err := ConformanceMarkdown(&b, Run{Name: "m.json", File: model}, Run{Name: "r.json", File: real}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| upgrade 3.32 → 3.33, ipip, killed | model | 1 | pass |", "| upgrade 3.32 → 3.33, ipip, killed | Calico | 2 | pass (×2) |", "| windows, requests |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}

func TestConformanceRefusesTheWrongFlavour(t *testing.T) {
	r := confRoute(kroute.ProtoBIRD, 1024, "tunl0", true)
	model := &results.ResultsFile{Scenarios: []results.ScenarioResult{confRow("calico", r, r, nil, 0)}}
	if _, err := Conformance(model, &results.ResultsFile{}); err == nil || !strings.Contains(err.Error(), "ran the calico flavour, but this side of the table is model") {
		t.Errorf("a real row on the model's side: err %v", err)
	}
}

// TestConformanceOnRecordedRuns reads the two recorded sides of the
// model-vs-real table (testdata/results/README.md): every case ran on both
// flavours, and the differences docs/conformance.md explains are the ones
// the table finds.
func TestConformanceOnRecordedRuns(t *testing.T) {
	model, err := results.ReadResults("../../testdata/results/conformance-model.json")
	if err != nil {
		t.Fatal(err)
	}
	real, err := results.ReadResults("../../testdata/results/conformance-calico.json")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := Conformance(model, real)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 12 {
		t.Fatalf("%d cases, want at least 12", len(rows))
	}
	by := map[string]ConformanceRow{}
	for _, r := range rows {
		if r.Model.Runs == 0 || r.Real.Runs == 0 {
			t.Errorf("case %q: model %d runs, Calico %d: want both", r.Case, r.Model.Runs, r.Real.Runs)
		}
		by[r.Case] = r
	}
	up := by["upgrade 3.32 → 3.33, ipip, killed"]
	// The same write order on both: Felix deletes BIRD's metric-1024
	// route (any protocol) before it adds its own.
	for _, side := range []ConformanceSide{up.Model, up.Real} {
		if !strings.Contains(side.Requests, "3× del any m1024 → add 80") {
			t.Errorf("3.32 → 3.33 IPIP requests %q: want Felix's delete-first per remote block", side.Requests)
		}
	}
	// Real Felix alone writes a blackhole for its own IPIP block, and its
	// workload routes at proto boot metric 1024.
	if !strings.Contains(up.Real.After, "blackhole P proto 80 metric 0") || strings.Contains(up.Model.After, "blackhole P proto 80") {
		t.Errorf("own-block blackhole: model %q, Calico %q", up.Model.After, up.Real.After)
	}
	if !strings.Contains(up.Real.After, "P dev cali* proto boot metric 1024") || !strings.Contains(up.Model.After, "P dev cali* proto 80 metric 0") {
		t.Errorf("workload routes: model %q, Calico %q", up.Model.After, up.Real.After)
	}
	if r := by["upgrade 3.31 → 3.33, noencap, killed"]; !strings.Contains(r.Real.Requests, "del any → add boot m1024") || r.Model.Requests != "none" {
		t.Errorf("3.31 → 3.33 no-encap: Calico rewrites each workload route at its new metric, the model writes nothing: model %q, Calico %q", r.Model.Requests, r.Real.Requests)
	}
	if r := by["live change ipip, Felix → BIRD"]; r.Model.Verdict != "fail" || r.Real.Verdict != "pass" {
		t.Errorf("IPIP Felix → BIRD: model %q, Calico %q; want the model's BIRD 2 failing where the fork passes", r.Model.Verdict, r.Real.Verdict)
	}
	for _, c := range []string{"re-advertisement ipip (Felix owns it), owner withdraws", "re-advertisement noencap (Felix owns it), owner withdraws", "cleanup: BIRD killed, strays (block released, node gone, pool deleted), Felix given IPIP"} {
		if r := by[c]; r.Model.Verdict != "pass" || r.Real.Verdict != "pass" {
			t.Errorf("%s: model %q, Calico %q; want both to pass", c, r.Model.Verdict, r.Real.Verdict)
		}
	}
	var b strings.Builder
	if err := ConformanceMarkdown(&b, Run{Name: "model", File: model}, Run{Name: "calico", File: real}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "\n| "); n != 2*len(rows)+1 {
		t.Errorf("markdown has %d table lines, want the header and 2 per case (%d)", n, 2*len(rows)+1)
	}
}
