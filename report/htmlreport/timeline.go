package htmlreport

import (
	"fmt"
	"html"
	"math"
	"net/netip"
	"sort"
	"strings"

	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
)

// Span is an interval [From, To) in monotonic ns with one owner.
type Span struct {
	From, To int64
	Owner    kroute.Owner
	Route    string // the route in force, ip-route style ("" for none)
}

// Lane is one node's view of one cluster prefix over time.
type Lane struct {
	Node   string
	Prefix netip.Prefix
	Spans  []Span
}

// Lanes turns each node's route events into owner spans per prefix, from
// the first event to end. A prefix's owner at an instant is the protocol of
// its forwarding route with the lowest metric (the one the kernel uses);
// host routes (a workload's /32, /128) and prefixes that never had a
// forwarding route (a node's own block's blackhole) get no lane.
func Lanes(events map[string][]event.Event, end int64, programmer kroute.Protocol) []Lane {
	nodes := make([]string, 0, len(events))
	for n := range events {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var out []Lane
	for _, node := range nodes {
		byPrefix := map[netip.Prefix][]event.Event{}
		for _, e := range events[node] {
			d := e.Route.Dst
			if d.Bits() == d.Addr().BitLen() {
				continue
			}
			byPrefix[d] = append(byPrefix[d], e)
		}
		prefixes := make([]netip.Prefix, 0, len(byPrefix))
		for p := range byPrefix {
			prefixes = append(prefixes, p)
		}
		sort.Slice(prefixes, func(i, j int) bool {
			a, b := prefixes[i], prefixes[j]
			if a.Addr().Is4() != b.Addr().Is4() {
				return a.Addr().Is4()
			}
			return a.Addr().Less(b.Addr()) || (a.Addr() == b.Addr() && a.Bits() < b.Bits())
		})
		for _, p := range prefixes {
			if l, ok := lane(node, p, byPrefix[p], end, programmer); ok {
				out = append(out, l)
			}
		}
	}
	return out
}

func lane(node string, p netip.Prefix, evs []event.Event, end int64, programmer kroute.Protocol) (Lane, bool) {
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].At < evs[j].At })
	type rkey struct{ metric, tos int }
	state := map[rkey]kroute.Route{}
	l := Lane{Node: node, Prefix: p}
	forwarded := false
	current := func() (kroute.Owner, string) {
		best, found := kroute.Route{}, false
		for _, r := range state {
			if !r.Forwards() {
				continue
			}
			if !found || r.Metric < best.Metric {
				best, found = r, true
			}
		}
		if !found {
			return kroute.OwnerNone, ""
		}
		return kroute.OwnerOf(best.Protocol, programmer), best.String()
	}
	for i, e := range evs {
		k := rkey{e.Route.Metric, e.Route.TOS}
		if e.Kind == event.Delete {
			delete(state, k)
		} else {
			state[k] = e.Route
		}
		// Events at the same instant (a dump at start) settle first.
		if i+1 < len(evs) && evs[i+1].At == e.At {
			continue
		}
		o, r := current()
		if o != kroute.OwnerNone {
			forwarded = true
		}
		if n := len(l.Spans); n > 0 {
			last := &l.Spans[n-1]
			if last.Owner == o && last.Route == r {
				continue
			}
			last.To = e.At
		}
		l.Spans = append(l.Spans, Span{From: e.At, To: end, Owner: o, Route: r})
	}
	return l, forwarded
}

// window is the time axis of a scenario's chart, in monotonic ns.
type window struct{ from, to int64 }

func (w window) ms(t int64) float64 { return float64(t-w.from) / 1e6 }

// scenarioWindow is the chart's time axis: from the first probe (zero;
// the cluster's start-up before it is not drawn, its events are listed
// with negative times) to the last probe, event or route change. Without
// probes it spans the events and route changes.
func scenarioWindow(s results.ScenarioResult) (window, bool) {
	w := window{from: math.MaxInt64, to: math.MinInt64}
	add := func(t int64) {
		if t == 0 {
			return
		}
		w.from, w.to = min(w.from, t), max(w.to, t)
	}
	if s.Probes != nil && s.Probes.StartNs > 0 {
		add(s.Probes.StartNs)
		add(s.Probes.EndNs)
	} else {
		for _, e := range s.Events {
			add(e.Mono)
		}
	}
	for _, e := range s.Events {
		if e.Mono > w.to && w.to != math.MinInt64 {
			w.to = e.Mono
		}
	}
	for _, evs := range s.RouteEvents {
		for _, e := range evs {
			if !e.Existing && e.At > w.from && e.At > w.to {
				w.to = e.At
			}
		}
	}
	if w.from >= w.to {
		return w, false
	}
	return w, true
}

// Chart geometry (SVG user units).
const (
	chartWidth = 1300
	labelWidth = 250
	plotWidth  = chartWidth - labelWidth - 20
	laneHeight = 14
	laneGap    = 4
	headHeight = 34
)

var ownerColour = map[kroute.Owner]string{
	kroute.OwnerProgrammer: "#2f6fdb",
	kroute.OwnerBIRD:       "#e08a1e",
	kroute.OwnerOther:      "#8a5fbf",
	kroute.OwnerNone:       "#d62728",
}

// chartSVG draws a scenario: its flows' delivery, its nodes' route lanes,
// and its events, on one clock (ms since the window's start).
func chartSVG(s results.ScenarioResult, id string) string {
	w, ok := scenarioWindow(s)
	if !ok {
		return ""
	}
	x := func(t int64) float64 {
		t = min(max(t, w.from), w.to)
		return labelWidth + float64(t-w.from)/float64(w.to-w.from)*plotWidth
	}
	lanes := Lanes(s.RouteEvents, w.to, kroute.Protocol(s.ProgrammerProtocol))
	flows := 0
	if s.Probes != nil {
		flows = len(s.Probes.Flows)
	}
	rows := flows + len(lanes)
	if flows > 0 && len(lanes) > 0 {
		rows++ // a spacer between the two groups
	}
	height := headHeight + rows*(laneHeight+laneGap) + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" id="%s" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg" role="img" data-window-ms="%.1f">`,
		id, chartWidth, height, w.ms(w.to))
	fmt.Fprintf(&b, `<title>%s: probe delivery per flow, cluster-route owner per node, harness events; ms since the first probe</title>`,
		esc(s.Name))
	// Time axis.
	step := niceStep(w.ms(w.to) / 10)
	axisY := height - 22
	for t := 0.0; t <= w.ms(w.to)+1e-9; t += step {
		px := labelWidth + t/w.ms(w.to)*plotWidth
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" class="grid"/>`, px, headHeight-4, px, axisY)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick">%s</text>`, px, axisY+14, fmtMs(t))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" class="axis">ms</text>`, labelWidth-30, axisY+14)
	y := headHeight
	row := func(label, title string) int {
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="lane-label"><title>%s</title>%s</text>`, labelWidth-6, y+laneHeight-3, esc(title), esc(label))
		cur := y
		y += laneHeight + laneGap
		return cur
	}
	if s.Probes != nil {
		fl := append([]probeFlow(nil), flowsOf(s)...)
		for _, f := range fl {
			g := f.g
			yy := row(g.Flow, fmt.Sprintf("%s: sent %d, lost %d, longest gap %.1f ms, %d disruptions", g.Flow, g.Sent, g.Lost, g.LongestGapMs, g.DisruptionCount))
			fmt.Fprintf(&b, `<g class="flow" data-flow="%s" data-lost="%d" data-longest-gap-ms="%.1f" data-disruptions="%d">`,
				esc(g.Flow), g.Lost, g.LongestGapMs, g.DisruptionCount)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" class="lane-bg"/>`, x(s.Probes.StartNs), yy, x(s.Probes.EndNs)-x(s.Probes.StartNs), laneHeight)
			if d := g.Delivery; d != nil {
				binNs := int64(d.BinMs * 1e6)
				for _, r := range deliveryRuns(d) {
					from, to := d.StartNs+int64(r.from)*binNs, d.StartNs+int64(r.to)*binNs
					cls := "deliv-full"
					switch {
					case r.level == 0:
						cls = "deliv-none"
					case r.level == 1:
						cls = "deliv-part"
					}
					fmt.Fprintf(&b, `<rect x="%.2f" y="%d" width="%.2f" height="%d" class="%s"><title>%s: %s from %s to %s ms</title></rect>`,
						x(from), yy, max(x(to)-x(from), 0.6), laneHeight, cls, esc(g.Flow), levelName(r.level), fmtMs(w.ms(from)), fmtMs(w.ms(to)))
				}
			} else {
				// Results written before delivery series: the flow delivered
				// throughout except its longest gap.
				fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" class="deliv-full"/>`, x(s.Probes.StartNs), yy, x(s.Probes.EndNs)-x(s.Probes.StartNs), laneHeight)
				if g.Gap.EndNs > g.Gap.StartNs {
					fmt.Fprintf(&b, `<rect x="%.2f" y="%d" width="%.2f" height="%d" class="deliv-none"/>`, x(g.Gap.StartNs), yy, max(x(g.Gap.EndNs)-x(g.Gap.StartNs), 1.2), laneHeight)
				}
			}
			if g.LongestGapMs > 0 && g.Gap.EndNs > g.Gap.StartNs {
				fmt.Fprintf(&b, `<rect x="%.2f" y="%d" width="%.2f" height="%d" class="gap"><title>%s: longest gap %.1f ms (BPF, arrival to arrival), +%s to +%s ms%s</title></rect>`,
					x(g.Gap.StartNs), yy, max(x(g.Gap.EndNs)-x(g.Gap.StartNs), 1.2), laneHeight, esc(g.Flow), g.LongestGapMs,
					fmtMs(w.ms(g.Gap.StartNs)), fmtMs(w.ms(g.Gap.EndNs)), sinceMark(g.Gap.Mark, g.Gap.SinceMarkMs))
			}
			b.WriteString(`</g>`)
		}
		if len(lanes) > 0 {
			y += laneHeight + laneGap
		}
	}
	for _, l := range lanes {
		yy := row(l.Node+" "+l.Prefix.String(), "node "+l.Node+": route to "+l.Prefix.String())
		fmt.Fprintf(&b, `<g class="route-lane" data-node="%s" data-prefix="%s">`, esc(l.Node), l.Prefix)
		for _, sp := range l.Spans {
			if sp.To <= w.from {
				continue
			}
			from := max(sp.From, w.from)
			what := string(sp.Owner)
			if sp.Route != "" {
				what += ": " + sp.Route
			} else {
				what = "no route"
			}
			fmt.Fprintf(&b, `<rect x="%.2f" y="%d" width="%.2f" height="%d" class="own-%s" data-owner="%s"><title>%s %s, +%s to +%s ms: %s</title></rect>`,
				x(from), yy, max(x(sp.To)-x(from), 0.8), laneHeight, sp.Owner, sp.Owner, esc(l.Node), l.Prefix, fmtMs(w.ms(from)), fmtMs(w.ms(sp.To)), esc(what))
		}
		b.WriteString(`</g>`)
	}
	// Events: numbered vertical markers; the legend below the chart names them.
	for i, e := range s.Events {
		if e.Mono < w.from {
			continue // before the first probe: listed, not drawn
		}
		px := x(e.Mono)
		fmt.Fprintf(&b, `<g class="event" data-event="%s" data-ms="%.1f"><line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/><circle cx="%.1f" cy="%d" r="8"/><text x="%.1f" y="%d">%d</text><title>%d. %s at +%s ms</title></g>`,
			esc(e.Name), w.ms(e.Mono), px, headHeight-14, px, axisY, px, headHeight-16, px, headHeight-12, i+1, i+1, esc(e.Name), fmtMs(w.ms(e.Mono)))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

type probeFlow struct{ g gapReport }

func flowsOf(s results.ScenarioResult) []probeFlow {
	var out []probeFlow
	for _, g := range s.Probes.Flows {
		out = append(out, probeFlow{g})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].g.Flow < out[j].g.Flow })
	return out
}

type deliveryRun struct {
	from, to int // bins
	level    int // 0 nothing arrived, 1 some, 2 all
}

// deliveryRuns merges consecutive bins of the same level, so a long
// session is a handful of rectangles, not thousands.
func deliveryRuns(d *deliveryT) []deliveryRun {
	var out []deliveryRun
	for i := range d.Sent {
		lv := 2
		switch {
		case d.Sent[i] == 0:
			lv = -1 // the sender sent nothing: no verdict on the path
		case d.Received[i] == 0:
			lv = 0
		case d.Received[i] < d.Sent[i]:
			lv = 1
		}
		if lv < 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].level == lv && out[n-1].to == i {
			out[n-1].to = i + 1
			continue
		}
		out = append(out, deliveryRun{from: i, to: i + 1, level: lv})
	}
	return out
}

func levelName(l int) string {
	switch l {
	case 0:
		return "nothing delivered"
	case 1:
		return "some lost"
	}
	return "all delivered"
}

func sinceMark(mark string, ms float64) string {
	if mark == "" {
		return ""
	}
	return fmt.Sprintf("; began %+.1f ms after %s", ms, mark)
}

// niceStep rounds a tick step up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func fmtMs(v float64) string {
	if math.Abs(v) >= 100 || v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func esc(s string) string { return html.EscapeString(s) }
