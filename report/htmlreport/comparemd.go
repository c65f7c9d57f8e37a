package htmlreport

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/compare"
	"github.com/birdcage/birdcage/report/results"
)

// CompareMarkdown writes two runs side by side as one Markdown table, a row
// per scenario both ran (r's pairing): each side's verdict, lost probes,
// longest probe gap and no-route windows, and the route shapes the two
// route timelines hold, the same or which side alone had one. It is the
// table that holds one way of building a cluster against another (the
// eBPF tunl0 against the kernel's ipip; one release against another) spec
// by spec; the scenarios one side lacks are listed under it.
func CompareMarkdown(w io.Writer, base, nw Run, r *compare.Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "BASE %s: kernel %s; %s\n\nNEW %s: kernel %s; %s\n\n",
		mdEsc(base.Name), mdEsc(base.File.Kernel), mdEsc(base.File.Env.String()),
		mdEsc(nw.Name), mdEsc(nw.File.Kernel), mdEsc(nw.File.Env.String()))
	b.WriteString("| scenario | verdict | lost of sent | longest gap ms | no-route windows | route shapes |\n|---|---|---|---|---|---|\n")
	for _, d := range r.Scenarios {
		bs, ns := base.File.Scenarios[d.BaseIndex], nw.File.Scenarios[d.NewIndex]
		lb, ln := lostCell(bs), lostCell(ns)
		gb, gn := gapCell(bs), gapCell(ns)
		wb, wn := summariseWindows(bs.RouteEvents), summariseWindows(ns.RouteEvents)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", mdEsc(d.Name),
			sides(string(bs.VerdictOf()), string(ns.VerdictOf())), sides(lb, ln), sides(gb, gn),
			sides(wb.String(), wn.String()), mdEsc(shapesCell(RouteShapes(bs.RouteEvents), RouteShapes(ns.RouteEvents))))
	}
	b.WriteString("\nEach cell is BASE / NEW, or one value where both are the same. No-route windows are every " +
		"node's, per cluster-route prefix, after the first forwarding route to it; a route shape is a route " +
		"with its prefix (P) and gateway (GW) left out.\n")
	for _, n := range r.OnlyInBase {
		fmt.Fprintf(&b, "\n- only in BASE: %s", mdEsc(n))
	}
	for _, n := range r.OnlyInNew {
		fmt.Fprintf(&b, "\n- only in NEW: %s", mdEsc(n))
	}
	if len(r.OnlyInBase)+len(r.OnlyInNew) > 0 {
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// sides is "a" when both sides agree, else "a / b".
func sides(a, b string) string {
	if a == b {
		return a
	}
	return a + " / " + b
}

func lostCell(s results.ScenarioResult) string {
	if s.Probes == nil {
		return "–"
	}
	return fmt.Sprintf("%d of %d", s.Probes.Total.Lost, s.Probes.Total.Sent)
}

func gapCell(s results.ScenarioResult) string {
	if s.Probes != nil {
		return fmt.Sprintf("%.0f", s.Probes.Total.LongestGapMs)
	}
	if g, ok := s.Figures["longestProbeGapMs"]; ok {
		return fmt.Sprintf("%.0f", g)
	}
	return "–"
}

// Windows summarises the no-route windows of a scenario's route timelines.
type Windows struct {
	// Count is every window, Open those still open when the timelines end;
	// LongestMs is the longest closed or open one.
	Count, Open int
	LongestMs   float64
	// Recorded is false when the scenario kept no route timeline.
	Recorded bool
	// Gaps counts the monitor's subscription gaps: spans in which a window
	// may have gone unseen.
	Gaps int
}

func (w Windows) String() string {
	switch {
	case !w.Recorded:
		return "–"
	case w.Count == 0 && w.Gaps == 0:
		return "0"
	}
	s := fmt.Sprintf("%d, longest %.0f ms", w.Count, w.LongestMs)
	if w.Open > 0 {
		s += fmt.Sprintf(", %d open at the end", w.Open)
	}
	if w.Gaps > 0 {
		s += fmt.Sprintf(", %d monitor gaps", w.Gaps)
	}
	return s
}

// summariseWindows counts, for every node and every prefix its timeline
// holds, the windows with no forwarding route to it between the first
// forwarding route to the prefix and the last event of any node
// (event.NoRouteWindows). A prefix never forwarded (a node's own block,
// a blackhole) has none.
func summariseWindows(byNode map[string][]event.Event) Windows {
	var w Windows
	var end int64
	for _, evs := range byNode {
		w.Recorded = true
		for _, e := range evs {
			end = max(end, e.At)
		}
	}
	for _, evs := range byNode {
		first := map[netip.Prefix]int64{}
		for _, e := range evs {
			if e.Kind == event.GapKind {
				w.Gaps++
				continue
			}
			if _, ok := first[e.Route.Dst]; !ok && e.Route.Table == kroute.MainTable && e.Kind != event.Delete && e.Route.Forwards() {
				first[e.Route.Dst] = e.At
			}
		}
		for p, from := range first {
			for _, win := range event.NoRouteWindows(evs, p, from, end) {
				w.Count++
				w.LongestMs = max(w.LongestMs, win.Ms())
				if win.Open {
					w.Open++
				}
			}
		}
	}
	return w
}

// RouteShapes is the distinct shapes of the routes a scenario's timelines
// added or found, sorted: each route as `ip route` prints it with its
// prefix written P, its gateways GW and a workload's device cali*, so
// "P via GW dev tunl0 proto bird metric 0 onlink" is one shape however many
// blocks and nodes have it.
func RouteShapes(byNode map[string][]event.Event) []string {
	set := map[string]bool{}
	for _, evs := range byNode {
		for _, e := range evs {
			if e.Kind == event.GapKind || e.Kind == event.Delete {
				continue
			}
			set[routeShape(e.Route)] = true
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func routeShape(r kroute.Route) string {
	// A workload's device is named from its workload ("cali" and a hash):
	// one shape for all of them.
	r.NextHops = slices.Clone(r.NextHops)
	for i, h := range r.NextHops {
		if strings.HasPrefix(h.Device, "cali") {
			r.NextHops[i].Device = "cali*"
		}
	}
	s := r.String()
	if r.Dst.IsValid() {
		if r.Dst.Bits() == 0 {
			s = strings.Replace(s, "default", "P", 1)
		} else {
			s = strings.Replace(s, r.Dst.String(), "P", 1)
		}
	}
	for _, gw := range r.Gateways() {
		s = strings.ReplaceAll(s, "via "+gw.String()+" ", "via GW ")
	}
	return s
}

// shapesCell says whether both sides' route shapes are the same set, and
// where not, which shapes one side alone had.
func shapesCell(base, nw []string) string {
	if slices.Equal(base, nw) {
		if len(base) == 0 {
			return "none recorded"
		}
		return "same: " + strings.Join(base, ", ")
	}
	var parts []string
	if only := without(base, nw); len(only) > 0 {
		parts = append(parts, "BASE only: "+strings.Join(only, ", "))
	}
	if only := without(nw, base); len(only) > 0 {
		parts = append(parts, "NEW only: "+strings.Join(only, ", "))
	}
	if common := without(base, without(base, nw)); len(common) > 0 {
		parts = append(parts, "both: "+strings.Join(common, ", "))
	}
	return strings.Join(parts, "; ")
}

// without is a's elements that b lacks.
func without(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}
