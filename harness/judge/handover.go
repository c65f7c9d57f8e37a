package judge

// What happened to each cluster route while its owner changed, read from
// the route timeline, confd's actions and the programmer's restarts: who
// moved first, and the window without a route. The live-change specs, the
// sweep and the lab specs all judge and report a handover through this.

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/report/results"
)

// Ordering is how one route changed hands.
type Ordering string

const (
	// The new owner's route was written before the old one went (a
	// replace), or the old owner never removed it: no window.
	NewOwnerFirst Ordering = "new owner first"
	// Programmer → BIRD: the restarted programmer deleted its route before
	// BIRD was reconfigured, so BIRD's add went in at once.
	ProgrammerDeletedFirst Ordering = "programmer deleted before BIRD was reconfigured"
	// Programmer → BIRD: BIRD was reconfigured while the programmer's
	// route still stood; its add was refused ("File exists") and it wrote
	// the route at its next kernel scan after the delete.
	BIRDTriedFirst Ordering = "BIRD reconfigured before the programmer deleted (re-add at its next scan)"
	// Programmer → BIRD: BIRD was reconfigured while the programmer's
	// route still stood, and its route came after the delete, but on
	// another kernel key (metric) than the programmer's: no write of it
	// can have been refused for that route, so the scan explanation does
	// not apply. Seen on IPv4 from 3.32 (BIRD at 1024, the programmer at
	// 0), where BIRD's best path until the peers withdraw is their
	// re-advertisement of the programmer's route (docs/conformance.md).
	BIRDWroteAfterDelete Ordering = "BIRD reconfigured before the programmer deleted; its route, at another metric, came after the delete"
	// BIRD → programmer: BIRD withdrew before the restarted programmer
	// programmed: the window is the rest of the restart.
	BIRDWithdrewFirst Ordering = "BIRD withdrew before the programmer programmed"
	NoHandover        Ordering = "no handover seen"
)

// Handover is one remote block on one node.
type Handover struct {
	Node  string       `json:"node"`
	Block netip.Prefix `json:"block"`
	// OldGone is when the old owner's route went (0: never deleted);
	// NewCame when the new owner's route was written.
	OldGone int64 `json:"oldGone"`
	NewCame int64 `json:"newCame"`
	// OldMetric and NewMetric are the kernel metrics of the route that
	// went and of the one that came (part of a route's kernel key).
	OldMetric int     `json:"oldMetric"`
	NewMetric int     `json:"newMetric"`
	WindowMs  float64 `json:"windowMs"` // longest window without a route
	// Unjudgeable is set when the node's route monitor missed events in
	// the change's span (Timeline.Judgeable): OldGone, NewCame and
	// WindowMs may then be wrong, and the handover must fail, not pass.
	Unjudgeable string `json:"unjudgeable,omitempty"`
	// BIRDConfigured is the node's first confd reconfigure after the
	// change; Programmed the restarted programmer's first programming
	// pass. 0 where not seen (a lab does not show them).
	BIRDConfigured int64    `json:"birdConfigured"`
	Programmed     int64    `json:"programmed"`
	Ordering       Ordering `json:"ordering"`
	// PredictedWindowMs is, when BIRD tried first, the window the scan
	// explanation predicts: BIRD writes the route at its first kernel scan
	// after the delete, scans coming every scan time after its
	// reconfigure. −1 where it does not apply.
	PredictedWindowMs float64 `json:"predictedWindowMs"`
}

// HandoverNode is what a handover is read from on one node.
type HandoverNode struct {
	Name     string
	Timeline Timeline
	Blocks   []netip.Prefix // the remote blocks whose routes change hands
	// BIRDConfigured and Programmed as in Handover; 0 when unknown.
	BIRDConfigured, Programmed int64
}

// HandoverChange says which change is read: the routes move from the
// protocol From to To (the new owner being BIRD when ToBIRD), in the
// monotonic interval [Start, End].
type HandoverChange struct {
	From, To   kroute.Protocol
	ToBIRD     bool
	Start, End int64
	// ScanTime is BIRD's kernel scan time (0: no scan prediction).
	ScanTime time.Duration
}

// Handovers is the handover of every node's remote blocks.
type Handovers []Handover

// ReadHandovers reads every block's handover from the nodes' timelines.
func ReadHandovers(nodes []HandoverNode, ch HandoverChange) Handovers {
	var out Handovers
	for _, n := range nodes {
		for _, b := range n.Blocks {
			h := Handover{Node: n.Name, Block: b, BIRDConfigured: n.BIRDConfigured, Programmed: n.Programmed, PredictedWindowMs: -1}
			for _, e := range n.Timeline.EventsFor(b, ch.Start, ch.End) {
				p := e.Route.Protocol
				switch {
				case h.OldGone == 0 && p == ch.From && e.Kind == event.Delete:
					h.OldGone, h.OldMetric = e.At, e.Route.Metric
				case h.NewCame == 0 && p == ch.To && e.Kind != event.Delete:
					h.NewCame, h.NewMetric = e.At, e.Route.Metric
				}
			}
			for _, w := range n.Timeline.NoRouteWindows(b, ch.Start, ch.End) {
				if w.Unjudgeable == "" {
					h.WindowMs = max(h.WindowMs, w.Ms())
				}
			}
			if err := n.Timeline.Judgeable(ch.Start, ch.End); err != nil {
				h.Unjudgeable = err.Error()
			}
			h.Ordering = orderingOf(h, ch.ToBIRD)
			if scan := int64(ch.ScanTime); h.Ordering == BIRDTriedFirst && scan > 0 {
				k := (h.OldGone - h.BIRDConfigured + scan - 1) / scan
				h.PredictedWindowMs = monoclock.Ms(h.BIRDConfigured + k*scan - h.OldGone)
			}
			out = append(out, h)
		}
	}
	return out
}

func orderingOf(h Handover, toBIRD bool) Ordering {
	switch {
	case h.NewCame == 0:
		return NoHandover
	case h.OldGone == 0 || h.NewCame <= h.OldGone:
		return NewOwnerFirst
	case toBIRD && h.BIRDConfigured != 0 && h.BIRDConfigured < h.OldGone && h.NewMetric != h.OldMetric:
		return BIRDWroteAfterDelete
	case toBIRD && h.BIRDConfigured != 0 && h.BIRDConfigured < h.OldGone:
		return BIRDTriedFirst
	case toBIRD:
		return ProgrammerDeletedFirst
	}
	return BIRDWithdrewFirst
}

// Orderings counts handovers per ordering.
func (hs Handovers) Orderings() map[Ordering]int {
	out := map[Ordering]int{}
	for _, h := range hs {
		out[h.Ordering]++
	}
	return out
}

// Windows lists the no-route windows of the handovers with ordering o
// ("" for all).
func (hs Handovers) Windows(o Ordering) []float64 {
	var out []float64
	for _, h := range hs {
		if o == "" || h.Ordering == o {
			out = append(out, h.WindowMs)
		}
	}
	return out
}

// AddFigures records the handovers in a result: the no-route windows
// (all, and per ordering), how many handovers took each ordering, and,
// where the scan explanation applies, how far the windows were from it.
func (hs Handovers) AddFigures(res *results.ScenarioResult) {
	if res.Samples == nil {
		res.Samples = map[string]results.Stats{}
	}
	res.Samples["noRouteWindowMs"] = results.Summarize(hs.Windows(""))
	res.Figure("longestNoRouteWindowMs", res.Samples["noRouteWindowMs"].Max, results.KindGap)
	var predErr []float64
	for _, h := range hs {
		if h.PredictedWindowMs >= 0 {
			predErr = append(predErr, h.WindowMs-h.PredictedWindowMs)
		}
	}
	if len(predErr) > 0 {
		res.Samples["noRouteWindowMinusScanPredictionMs"] = results.Summarize(predErr)
	}
	for o, n := range hs.Orderings() {
		res.Figure("handovers: "+string(o), float64(n), results.KindSize)
		res.Samples["noRouteWindowMs: "+string(o)] = results.Summarize(hs.Windows(o))
	}
}

// Judgeable is nil when every handover was read from a timeline that
// missed nothing in the change's span; otherwise it names each node's gap
// (wrapping event.ErrUnjudgeable), and the handovers' windows and
// orderings cannot be trusted.
func (hs Handovers) Judgeable() error {
	seen := map[string]bool{}
	var msgs []string
	for _, h := range hs {
		if h.Unjudgeable != "" && !seen[h.Unjudgeable] {
			seen[h.Unjudgeable] = true
			msgs = append(msgs, h.Unjudgeable)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: handovers: %s", event.ErrUnjudgeable, strings.Join(msgs, "; "))
}

// Table lists every block's handover: who moved first, the window.
func (hs Handovers) Table() string {
	var b strings.Builder
	b.WriteString("\nhandovers (per node and remote block):\n")
	for _, h := range hs {
		pred := ""
		if h.PredictedWindowMs >= 0 {
			pred = fmt.Sprintf(" (the scan predicts %.1f ms)", h.PredictedWindowMs)
		}
		if h.Unjudgeable != "" {
			pred += "; " + h.Unjudgeable
		}
		fmt.Fprintf(&b, "  %s %s: %.1f ms without a route%s; %s\n", h.Node, h.Block, h.WindowMs, pred, h.Ordering)
	}
	return b.String()
}
