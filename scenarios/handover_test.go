package scenarios_test

// What happened to each cluster route during a live change, read from the
// route timeline, confd's actions and the programmer's restarts: who moved
// first, and the window without a route.

import (
	"net/netip"
	"time"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/timeline"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/monoclock"
)

// Orderings of a handover.
const (
	// The new owner's route was written before the old one went (a
	// replace), or the old owner never removed it: no window.
	newOwnerFirst = "new owner first"
	// Programmer → BIRD: the restarted programmer deleted its route
	// before BIRD was reconfigured, so BIRD's add went in at once.
	programmerDeletedFirst = "programmer deleted before BIRD was reconfigured"
	// Programmer → BIRD: BIRD was reconfigured while the programmer's
	// route still stood; its add was refused ("File exists") and it wrote
	// the route at its next kernel scan after the delete.
	birdTriedFirst = "BIRD reconfigured before the programmer deleted (re-add at its next scan)"
	// BIRD → programmer: BIRD withdrew before the restarted programmer
	// programmed: the window is the rest of the restart.
	birdWithdrewFirst = "BIRD withdrew before the programmer programmed"
	noHandover        = "no handover seen"
)

// handover is one remote block on one node.
type handover struct {
	Node  string       `json:"node"`
	Block netip.Prefix `json:"block"`
	// OldGone is when the old owner's route went (0: never deleted);
	// NewCame when the new owner's route was written.
	OldGone  int64   `json:"oldGone"`
	NewCame  int64   `json:"newCame"`
	WindowMs float64 `json:"windowMs"` // longest window without a route
	// BIRDConfigured is the node's first confd reconfigure after the
	// change; Programmed the restarted programmer's first programming pass.
	BIRDConfigured int64  `json:"birdConfigured"`
	Programmed     int64  `json:"programmed"`
	Ordering       string `json:"ordering"`
	// PredictedWindowMs is, when BIRD tried first, the window the scan
	// explanation predicts: BIRD writes the route at its first kernel scan
	// after the delete, scans coming every scan time after its reconfigure.
	// −1 where it does not apply.
	PredictedWindowMs float64 `json:"predictedWindowMs"`
}

func protoOf(o harness.Owner) kroute.Protocol {
	if o == harness.ByBIRD {
		return kroute.ProtoBIRD
	}
	return designProgrammerProtocol
}

// handovers reads, for every node and remote block, how the route moved
// from `from` to `to` in [change, end].
func handovers(c *harness.Cluster, from, to harness.Owner, change, end int64) []handover {
	var out []handover
	for _, n := range c.Nodes() {
		h0 := handover{Node: n.Name}
		for _, a := range n.ConfdActions() {
			if a.SeenMono >= change {
				h0.BIRDConfigured = a.ConfiguredMono
				break
			}
		}
		for _, r := range n.Programmer.Restarts() {
			if r.ExitMono >= change && r.ProgrammedMono != 0 {
				h0.Programmed = r.ProgrammedMono
				break
			}
		}
		tl := c.Timeline(n.Name)
		for _, b := range c.RemoteBlocks(n.Name) {
			h := h0
			h.Block = b
			for _, e := range tl.EventsFor(b, change, end) {
				p := e.Route.Protocol
				switch {
				case h.OldGone == 0 && p == protoOf(from) && e.Kind == timeline.Delete:
					h.OldGone = e.At
				case h.NewCame == 0 && p == protoOf(to) && e.Kind != timeline.Delete:
					h.NewCame = e.At
				}
			}
			for _, w := range tl.NoRouteWindows(b, change, end) {
				h.WindowMs = max(h.WindowMs, w.Ms())
			}
			h.Ordering = orderingOf(h, to)
			h.PredictedWindowMs = -1
			if scan := int64(c.Timing().BIRDScanTime); h.Ordering == birdTriedFirst && scan > 0 {
				k := (h.OldGone - h.BIRDConfigured + scan - 1) / scan
				h.PredictedWindowMs = monoclock.Ms(h.BIRDConfigured + k*scan - h.OldGone)
			}
			out = append(out, h)
		}
	}
	return out
}

func orderingOf(h handover, to harness.Owner) string {
	switch {
	case h.NewCame == 0:
		return noHandover
	case h.OldGone == 0 || h.NewCame <= h.OldGone:
		return newOwnerFirst
	case to == harness.ByBIRD && h.BIRDConfigured != 0 && h.BIRDConfigured < h.OldGone:
		return birdTriedFirst
	case to == harness.ByBIRD:
		return programmerDeletedFirst
	}
	return birdWithdrewFirst
}

// orderings counts handovers per ordering.
func orderings(hs []handover) map[string]int {
	out := map[string]int{}
	for _, h := range hs {
		out[h.Ordering]++
	}
	return out
}

func windows(hs []handover, ordering string) []float64 {
	var out []float64
	for _, h := range hs {
		if ordering == "" || h.Ordering == ordering {
			out = append(out, h.WindowMs)
		}
	}
	return out
}

// confdReactMs is, over every node's confd reaction after change, the
// longest from the change reaching it to `birdc configure` returning, less
// the model's latency: what the harness's render and BIRD's configure took.
func confdReactMs(c *harness.Cluster, change int64) float64 {
	var worst float64
	lat := c.Timing().ConfdLatency
	for _, n := range c.Nodes() {
		for _, a := range n.ConfdActions() {
			if a.SeenMono >= change {
				worst = max(worst, monoclock.Ms(a.ConfiguredMono-a.SeenMono-int64(lat)))
			}
		}
	}
	return worst
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
