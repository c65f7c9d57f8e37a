package event

import (
	"net/netip"

	"github.com/birdcage/birdcage/internal/kroute"
)

// Key is the kernel's identity of a route: a new route with the same key
// replaces the old one, a different metric makes a second route.
type Key struct {
	Family, Table, TOS, Metric int
	Dst                        netip.Prefix
}

// KeyOf is r's Key.
func KeyOf(r kroute.Route) Key {
	return Key{Family: r.Family, Table: r.Table, TOS: r.TOS, Metric: r.Metric, Dst: r.Dst}
}

// Replay walks the events for p (main table, exact destination) in order
// and calls visit with the time and the forwarding routes present after
// each one. Existing routes count as present from the start; a blackhole,
// unreachable or prohibit route takes its key's place as no route. Gap
// events carry no route and are passed over: what a gap hides is the
// caller's to judge. Replay reads a live monitor's events and a results
// file's alike.
func Replay(events []Event, p netip.Prefix, visit func(at int64, present map[Key]kroute.Route)) {
	p = p.Masked()
	present := map[Key]kroute.Route{}
	for _, e := range events {
		r := e.Route
		if e.Kind == GapKind || r.Table != kroute.MainTable || r.Dst != p {
			continue
		}
		if e.Kind == Delete || !r.Forwards() {
			delete(present, KeyOf(r))
		} else {
			present[KeyOf(r)] = r
		}
		visit(e.At, present)
	}
}

// NoRouteWindows is every interval within [from, to] in which the events
// leave no forwarding route to exactly p (main table), in order. The state
// before the first event is unknown and taken as no route, so a window may
// start at from; one still open at to ends there and is marked Open. It
// sees only what the events say: subscription gaps are the caller's (the
// live monitor adds them as Unjudgeable windows).
func NoRouteWindows(events []Event, p netip.Prefix, from, to int64) []Window {
	var (
		out     []Window
		missing = true // until an Existing/added route says otherwise
		since   = from
	)
	clip := func(a, b int64) {
		a, b = max(a, from), min(b, to)
		if b > a {
			out = append(out, Window{From: a, To: b})
		}
	}
	Replay(events, p, func(at int64, present map[Key]kroute.Route) {
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
		out = append(out, Window{From: max(since, from), To: to, Open: true})
	}
	return out
}
