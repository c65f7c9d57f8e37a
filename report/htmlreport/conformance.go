package htmlreport

import (
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
)

// ConformanceSide is one flavour's runs of one conformance case: each
// cell a tally over the runs ("pass ×4, fail ×1"; one value when every
// run agrees).
type ConformanceSide struct {
	Runs     int
	Verdict  string
	Lost     string // lost of sent
	Gap      string // longest probe gap, ms
	Windows  string // no-route windows at the case's node, and the longest
	Before   string // route shapes at the case's node when the action began
	After    string // ... and when it ended
	Requests string // the order of route requests per prefix, from the netlink trace
	Builds   string // the node's component versions, as its binaries report them

	// distinct is each compared column's distinct values over the runs,
	// sorted: what Differs compares, whatever the number of runs.
	distinct map[string]string
}

// ConformanceRow is one case, the model's runs beside real Calico's.
type ConformanceRow struct {
	Case        string
	Model, Real ConformanceSide
	// Differs names the columns in which the two sides differ.
	Differs []string
}

// Conformance pairs the rows of a model run and a real-Calico run by their
// conformance case (results.Conformance), sorted by case. A row whose case
// node ran the other flavour is an error: the table would hold the model
// against itself.
func Conformance(model, real *results.ResultsFile) ([]ConformanceRow, error) {
	bySide := [2]map[string][]results.ScenarioResult{{}, {}}
	for i, side := range []struct {
		f       *results.ResultsFile
		flavour string
	}{{model, "model"}, {real, "calico"}} {
		for _, s := range side.f.Scenarios {
			if s.Conformance == nil || s.VerdictOf() == results.VerdictSkip {
				continue
			}
			if got := s.Flavours[s.Conformance.Node]; got != "" && got != side.flavour {
				return nil, fmt.Errorf("row %q (case %q): node %s ran the %s flavour, but this side of the table is %s", s.Key(), s.Conformance.Case, s.Conformance.Node, got, side.flavour)
			}
			bySide[i][s.Conformance.Case] = append(bySide[i][s.Conformance.Case], s)
		}
	}
	cases := map[string]bool{}
	for _, m := range bySide {
		for c := range m {
			cases[c] = true
		}
	}
	var out []ConformanceRow
	for c := range cases {
		r := ConformanceRow{Case: c, Model: conformanceSide(bySide[0][c]), Real: conformanceSide(bySide[1][c])}
		if r.Model.Runs > 0 && r.Real.Runs > 0 {
			for _, col := range conformanceColumns {
				if r.Model.distinct[col] != r.Real.distinct[col] {
					r.Differs = append(r.Differs, col)
				}
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Case < out[j].Case })
	return out, nil
}

func conformanceSide(rows []results.ScenarioResult) ConformanceSide {
	s := ConformanceSide{Runs: len(rows)}
	if len(rows) == 0 {
		return s
	}
	var verdict, lost, lostN, gap, windows, before, after, reqs, builds []string
	for _, r := range rows {
		c := r.Conformance
		verdict = append(verdict, string(r.VerdictOf()))
		lost = append(lost, lostCell(r))
		if r.Probes != nil {
			lostN = append(lostN, fmt.Sprint(r.Probes.Total.Lost))
		}
		gap = append(gap, gapCell(r))
		windows = append(windows, windowsCell(r))
		evs := r.RouteEvents[c.Node]
		before = append(before, strings.Join(shapesAt(evs, c.From), ", "))
		after = append(after, strings.Join(shapesAt(evs, c.To), ", "))
		reqs = append(reqs, requestOrder(r.RouteRequests[c.Node], c.From, c.To))
		builds = append(builds, buildsCell(r, c.Node))
	}
	s.distinct = map[string]string{"verdict": distinct(verdict), "lost": distinct(lostN), "windows": distinct(windows),
		"shapes": distinct(before) + " | " + distinct(after), "requests": distinct(reqs)}
	s.Verdict, s.Lost, s.Gap, s.Windows = tally(verdict), tally(lost), tally(gap), tally(windows)
	s.Before, s.After, s.Requests, s.Builds = tally(before), tally(after), tally(reqs), tally(builds)
	return s
}

// conformanceColumns are the columns a row's Differs compares.
var conformanceColumns = []string{"verdict", "lost", "windows", "shapes", "requests"}

// distinct is vs's distinct values, sorted, as one string.
func distinct(vs []string) string {
	set := map[string]bool{}
	for _, v := range vs {
		set[v] = true
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
	return strings.Join(out, " ‖ ")
}

// windowsCell is the no-route windows the case's spec counted at its node
// (figures noRouteWindows, longestNoRouteWindowMs).
func windowsCell(r results.ScenarioResult) string {
	n, ok := r.Figures["noRouteWindows"]
	if !ok {
		return "–"
	}
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%.0f, longest %.1f ms", n, r.Figures["longestNoRouteWindowMs"])
}

func buildsCell(r results.ScenarioResult, node string) string {
	comp := r.Components[node]
	if len(comp) == 0 {
		return r.Flavours[node] + " " + r.Releases[node]
	}
	keys := make([]string, 0, len(comp))
	for k := range comp {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+" "+comp[k])
	}
	return strings.Join(parts, "; ")
}

// shapesAt is the distinct shapes (routeShape) of the routes a node's
// timeline holds at instant at: every event up to it replayed.
func shapesAt(evs []event.Event, at int64) []string {
	present := map[event.Key]kroute.Route{}
	for _, e := range evs {
		if e.At > at || e.Kind == event.GapKind || e.Route.Table != kroute.MainTable {
			continue
		}
		k := event.KeyOf(e.Route)
		if e.Kind == event.Delete {
			delete(present, k)
		} else {
			present[k] = e.Route
		}
	}
	set := map[string]bool{}
	for _, r := range present {
		set[routeShape(r)] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// requestOrder is the order of route requests to each prefix in [from,
// to), each request as "op proto [metric] [!ERRNO]" (one repeated back
// to back written once with its count), the prefixes that share an order
// counted together, the orders sorted: "3× del bird → add 80".
func requestOrder(rs []results.KernelRequest, from, to int64) string {
	if rs == nil {
		return "not traced"
	}
	per := map[netip.Prefix][]string{}
	var order []netip.Prefix
	for _, r := range rs {
		if r.At < from || (to != 0 && r.At >= to) {
			continue
		}
		if _, ok := per[r.Dst]; !ok {
			order = append(order, r.Dst)
		}
		tok := r.Op + " " + kroute.Protocol(r.Protocol).String()
		if r.Op == "del" && r.Protocol == 0 {
			tok = "del any"
		}
		if r.HasMetric {
			tok += fmt.Sprintf(" m%d", r.Metric)
		}
		if r.Errno != 0 {
			tok += " !" + unix.ErrnoName(unix.Errno(r.Errno))
		}
		per[r.Dst] = append(per[r.Dst], tok)
	}
	if len(order) == 0 {
		return "none"
	}
	count := map[string]int{}
	var pats []string
	for _, p := range order {
		pat := strings.Join(runs(per[p]), " → ")
		if count[pat] == 0 {
			pats = append(pats, pat)
		}
		count[pat]++
	}
	// Sorted by order, not by which prefix came first: which block a
	// component reached first is not part of its behaviour.
	sort.Strings(pats)
	var parts []string
	for _, p := range pats {
		parts = append(parts, fmt.Sprintf("%d× %s", count[p], p))
	}
	return strings.Join(parts, "; ")
}

// runs writes a request repeated back to back once, with its count
// ("add bird !EEXIST ×4"): the fork retries a refused add at every scan.
func runs(toks []string) []string {
	var out []string
	for i := 0; i < len(toks); {
		j := i
		for j < len(toks) && toks[j] == toks[i] {
			j++
		}
		if j-i > 1 {
			out = append(out, fmt.Sprintf("%s ×%d", toks[i], j-i))
		} else {
			out = append(out, toks[i])
		}
		i = j
	}
	return out
}

// tally is the one value every run gave, or each value with how many runs
// gave it, in first-seen order.
func tally(vs []string) string {
	count := map[string]int{}
	var order []string
	for _, v := range vs {
		if count[v] == 0 {
			order = append(order, v)
		}
		count[v]++
	}
	if len(order) == 1 {
		if len(vs) > 1 {
			return order[0] + fmt.Sprintf(" (×%d)", len(vs))
		}
		return order[0]
	}
	var parts []string
	for _, v := range order {
		parts = append(parts, fmt.Sprintf("%s ×%d", v, count[v]))
	}
	return strings.Join(parts, "; ")
}

// ConformanceMarkdown writes the model-vs-real table: per case a line for
// the model's runs and one for real Calico's, each with verdict, lost of
// sent, longest probe gap, no-route windows at the case's node, the route
// shapes there before and after the action as the kernel held them, and
// the order of the route requests its components sent (netlink trace);
// the real line names the columns that differ.
func ConformanceMarkdown(w io.Writer, model, real Run) error {
	rows, err := Conformance(model.File, real.File)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "MODEL %s: kernel %s\n\nREAL %s: kernel %s\n\n", mdEsc(model.Name), mdEsc(model.File.Kernel), mdEsc(real.Name), mdEsc(real.File.Kernel))
	b.WriteString("| case | side | runs | verdict | lost of sent | longest gap ms | no-route windows | route shapes before | route shapes after | kernel requests in order | differs |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	line := func(c, side string, s ConformanceSide, differs string) {
		if s.Runs == 0 {
			fmt.Fprintf(&b, "| %s | %s | 0 | not run | | | | | | | |\n", mdEsc(c), side)
			return
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", mdEsc(c), side, s.Runs,
			mdEsc(s.Verdict), mdEsc(s.Lost), mdEsc(s.Gap), mdEsc(s.Windows), mdEsc(s.Before), mdEsc(s.After), mdEsc(s.Requests), mdEsc(differs))
	}
	for _, r := range rows {
		line(r.Case, "model", r.Model, "")
		d := strings.Join(r.Differs, ", ")
		if d == "" && r.Model.Runs > 0 && r.Real.Runs > 0 {
			d = "none"
		}
		line(r.Case, "Calico", r.Real, d)
	}
	b.WriteString("\nRoute shapes and requests are the case's node's (the upgraded node, or the node watched); a shape is a route with its prefix (P) and gateway (GW) left out. " +
		"Requests are per prefix, in the order the trace saw them, prefixes with the same order counted together; `m` is the metric the request named (none: any). " +
		"A cell over several runs counts each value.\n")
	_, err = io.WriteString(w, b.String())
	return err
}
