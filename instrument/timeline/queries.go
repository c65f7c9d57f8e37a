package timeline

import (
	"net/netip"
	"sort"

	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/monoclock"
)

// The queries below look at one prefix in the main table only, by exact
// destination match: a covering route (a default route, a shorter pool
// route) does not count as a route to P. A route at any metric counts, as
// long as it forwards (unicast or local); blackhole, unreachable and
// prohibit routes count as no route. Times are monotonic nanoseconds; the
// state before the monitor started is unknown, so windows start no earlier
// than StartedAt.
//
// A span that overlaps a subscription gap (gaps.go) cannot be judged: a
// delete and re-add inside the gap left no event. NoRouteWindows then
// returns the gap as a window marked Unjudgeable, and Flaps counts it as a
// change with an unknown owner, so that a check that the span was clean
// fails instead of passing; Judgeable says why.

// replay is event.Replay over the monitor's events.
func (m *Monitor) replay(p netip.Prefix, visit func(at int64, present map[key]kroute.Route)) {
	event.Replay(m.Events(), p, visit)
}

// NoRouteWindows returns every interval within [from, to] in which the main
// table had no forwarding route to exactly p, and every subscription gap
// in it as an Unjudgeable window (in order of From). to <= 0 means now.
func (m *Monitor) NoRouteWindows(p netip.Prefix, from, to int64) []event.Window {
	if to <= 0 {
		to = monoclock.Now()
	}
	out := m.observedNoRouteWindows(p, from, to)
	for _, g := range m.GapsIn(max(from, m.startedAt), to) {
		w := event.Window{From: max(g.From, from), To: g.To, Unjudgeable: (&UnjudgeableError{Gaps: []event.Gap{g}}).Error()}
		if w.To <= 0 || w.To > to {
			w.To = to
		}
		out = append(out, w)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].From < out[j].From })
	return out
}

// observedNoRouteWindows is NoRouteWindows from the recorded events alone.
func (m *Monitor) observedNoRouteWindows(p netip.Prefix, from, to int64) []event.Window {
	if to <= 0 {
		to = monoclock.Now()
	}
	return event.NoRouteWindows(m.Events(), p, max(from, m.startedAt), to)
}

// HadNoRoute reports whether there was any instant in [from, to] with no
// forwarding route to p in the main table, or a subscription gap (then it
// is not known that there was none).
func (m *Monitor) HadNoRoute(p netip.Prefix, from, to int64) bool {
	return len(m.NoRouteWindows(p, from, to)) > 0
}

// Flaps summarises how a prefix's route changed in a window.
type Flaps struct {
	Prefix   netip.Prefix `json:"prefix"`
	Adds     int          `json:"adds"`
	Replaces int          `json:"replaces"`
	Deletes  int          `json:"deletes"`
	// OwnerChanges counts changes of the owner, the protocol of the route
	// the kernel uses (lowest metric among forwarding routes; 0 = none).
	OwnerChanges int `json:"ownerChanges"`
	// Owners is the owner sequence, starting with the owner at the window's
	// start. A subscription gap in the window adds OwnerUnknown at the
	// end (and counts as an owner change): who owned the route in it is
	// not known.
	Owners []kroute.Protocol `json:"owners"`
	// Unjudgeable lists the subscription gaps in the window; each counts
	// as one change in Changes, since how many were missed is unknown.
	Unjudgeable []event.Gap `json:"unjudgeable,omitempty"`
}

// OwnerUnknown stands in Flaps.Owners for a subscription gap. It is no
// protocol number the kernel can carry (those are 0–255).
const OwnerUnknown kroute.Protocol = -1

// Changes is the number of route events for the prefix in the window, plus
// one per subscription gap in it.
func (f Flaps) Changes() int { return f.Adds + f.Replaces + f.Deletes + len(f.Unjudgeable) }

// Flaps counts the events for p (main table, exact prefix) in [from, to] and
// how often its owner protocol changed. to <= 0 means now.
func (m *Monitor) Flaps(p netip.Prefix, from, to int64) Flaps {
	if to <= 0 {
		to = monoclock.Now()
	}
	f := Flaps{Prefix: p.Masked()}
	owner, started := kroute.ProtoUnspec, false
	for _, e := range m.EventsFor(p, from, to) {
		switch e.Kind {
		case event.Add:
			f.Adds++
		case event.Replace:
			f.Replaces++
		case event.Delete:
			f.Deletes++
		}
	}
	m.replay(p, func(at int64, present map[key]kroute.Route) {
		if at > to {
			return
		}
		o := ownerOf(present)
		if at < from {
			owner = o
			return
		}
		if !started {
			f.Owners = append(f.Owners, owner)
			started = true
		}
		if o != owner {
			f.OwnerChanges++
			f.Owners = append(f.Owners, o)
			owner = o
		}
	})
	if !started {
		f.Owners = []kroute.Protocol{owner}
	}
	if gs := m.GapsIn(max(from, m.startedAt), to); len(gs) > 0 {
		f.Unjudgeable = gs
		f.OwnerChanges += len(gs)
		f.Owners = append(f.Owners, OwnerUnknown)
	}
	return f
}

func ownerOf(present map[key]kroute.Route) kroute.Protocol {
	best, proto := -1, kroute.ProtoUnspec
	for _, r := range present {
		if best < 0 || r.Metric < best {
			best, proto = r.Metric, r.Protocol
		}
	}
	return proto
}

// States returns the forwarding routes to p (main table, exact prefix) at
// from and after every event for p in (from, to], oldest first, each state
// sorted by metric. to <= 0 means now. It knows nothing of gaps: check
// Judgeable over the same span.
func (m *Monitor) States(p netip.Prefix, from, to int64) []event.State {
	if to <= 0 {
		to = monoclock.Now()
	}
	if from < m.startedAt {
		from = m.startedAt
	}
	snap := func(at int64, present map[key]kroute.Route) event.State {
		s := event.State{At: at}
		for _, r := range present {
			s.Routes = append(s.Routes, r)
		}
		sort.Slice(s.Routes, func(i, j int) bool { return s.Routes[i].Metric < s.Routes[j].Metric })
		return s
	}
	out := []event.State{{At: from}}
	m.replay(p, func(at int64, present map[key]kroute.Route) {
		switch {
		case at <= from:
			out[0] = snap(from, present)
		case at <= to:
			out = append(out, snap(at, present))
		}
	})
	return out
}
