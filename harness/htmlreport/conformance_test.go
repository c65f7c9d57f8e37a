package htmlreport

import (
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/harness/results"
	"github.com/birdcage/birdcage/harness/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
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
