package timeline

import (
	"net/netip"

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

// Window is an interval with no route to a prefix.
type Window struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Open is set when the window was still open at the end of the query
	// (or now): the route had not come back.
	Open bool `json:"open,omitempty"`
}

// Duration is the window's length in nanoseconds.
func (w Window) Duration() int64 { return w.To - w.From }

// Ms is the window's length in milliseconds.
func (w Window) Ms() float64 { return monoclock.Ms(w.Duration()) }

// replay walks the events for p in the main table in order and calls visit
// with the time and the forwarding routes present after each event (Existing
// routes count as present from the start).
func (m *Monitor) replay(p netip.Prefix, visit func(at int64, present map[key]kroute.Route)) {
	p = p.Masked()
	present := map[key]kroute.Route{}
	for _, e := range m.Events() {
		r := e.Route
		if r.Table != kroute.MainTable || r.Dst != p {
			continue
		}
		if e.Kind == Delete || !r.Forwards() {
			delete(present, keyOf(r))
		} else {
			present[keyOf(r)] = r
		}
		visit(e.At, present)
	}
}

// NoRouteWindows returns every interval within [from, to] in which the main
// table had no forwarding route to exactly p. to <= 0 means now.
func (m *Monitor) NoRouteWindows(p netip.Prefix, from, to int64) []Window {
	if to <= 0 {
		to = monoclock.Now()
	}
	if from < m.startedAt {
		from = m.startedAt
	}
	var (
		out     []Window
		missing = true // until an Existing/added route says otherwise
		since   = from
	)
	clip := func(a, b int64) {
		if a < from {
			a = from
		}
		if b > to {
			b = to
		}
		if b > a {
			out = append(out, Window{From: a, To: b})
		}
	}
	m.replay(p, func(at int64, present map[key]kroute.Route) {
		now := len(present) == 0
		switch {
		case missing && !now: // the route came (back)
			clip(since, at)
		case !missing && now: // the last route went
			since = at
		}
		missing = now
	})
	if missing && since <= to {
		if since < from {
			since = from
		}
		out = append(out, Window{From: since, To: to, Open: true})
	}
	return out
}

// HadNoRoute reports whether there was any instant in [from, to] with no
// forwarding route to p in the main table.
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
	// start.
	Owners []kroute.Protocol `json:"owners"`
}

// Changes is the number of route events for the prefix in the window.
func (f Flaps) Changes() int { return f.Adds + f.Replaces + f.Deletes }

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
		case Add:
			f.Adds++
		case Replace:
			f.Replaces++
		case Delete:
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
