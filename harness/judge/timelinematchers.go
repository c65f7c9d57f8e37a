package judge

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"

	"github.com/onsi/gomega/types"

	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
)

// Timeline is a node's route timeline as the judges read it: a
// *timeline.Monitor (instrument/timeline), or anything else that answers the
// same questions about one prefix over a span of monotonic nanoseconds.
type Timeline interface {
	Name() string
	// Judgeable is nil when the timeline missed nothing in [from, to];
	// otherwise an error wrapping event.ErrUnjudgeable.
	Judgeable(from, to int64) error
	EventsFor(p netip.Prefix, from, to int64) []event.Event
	NoRouteWindows(p netip.Prefix, from, to int64) []event.Window
	States(p netip.Prefix, from, to int64) []event.State
}

// timelineOf is actual as a Timeline; a nil pointer in it is none.
func timelineOf(actual any) (Timeline, bool) {
	tl, ok := actual.(Timeline)
	if !ok || tl == nil {
		return nil, false
	}
	if v := reflect.ValueOf(tl); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, false
	}
	return tl, true
}

// KeptRouteMatcher matches a node's route timeline (a Timeline) on
// which a prefix kept its route through a span: at no instant without a
// forwarding route, never deleted (a change of owner is a replace), at
// every instant exactly one route, and, if Shaped, that route leaving as
// described. A span the monitor did not see whole (a subscription gap) is
// an error, "unjudgeable: ...": neither To nor NotTo passes on it.
type KeptRouteMatcher struct {
	prefix   netip.Prefix
	from, to int64
	hop      *kroute.NextHop
	problems []string
}

// KeepRouteThroughout matches a timeline on which p kept one route, never
// deleted, through [from, to] (monotonic ns; to <= 0: now):
//
//	Expect(c.Timeline("node-2")).To(judge.KeepRouteThroughout(block, begin.Mono, end.Mono).Shaped(hop))
func KeepRouteThroughout(p netip.Prefix, from, to int64) *KeptRouteMatcher {
	return &KeptRouteMatcher{prefix: p.Masked(), from: from, to: to}
}

// Shaped also requires the route, at every instant, to have one nexthop
// with hop's gateway, device and onlink flag.
func (m *KeptRouteMatcher) Shaped(hop kroute.NextHop) *KeptRouteMatcher {
	m.hop = &hop
	return m
}

func (m *KeptRouteMatcher) Match(actual any) (bool, error) {
	tl, ok := timelineOf(actual)
	if !ok {
		return false, fmt.Errorf("KeepRouteThroughout expects a route timeline (a *timeline.Monitor), got %T", actual)
	}
	if err := tl.Judgeable(m.from, m.to); err != nil {
		return false, fmt.Errorf("%s's route to %s: %w", tl.Name(), m.prefix, err)
	}
	m.problems = nil
	for _, w := range tl.NoRouteWindows(m.prefix, m.from, m.to) {
		m.problems = append(m.problems, fmt.Sprintf("no route for %.1f ms (from %d)", w.Ms(), w.From))
	}
	for _, e := range tl.EventsFor(m.prefix, m.from, m.to) {
		if e.Kind == event.Delete {
			m.problems = append(m.problems, fmt.Sprintf("deleted at %d: %s", e.At, e.Route))
		}
	}
	for _, st := range tl.States(m.prefix, m.from, m.to) {
		switch {
		case len(st.Routes) > 1:
			var rs []string
			for _, r := range st.Routes {
				rs = append(rs, r.String())
			}
			m.problems = append(m.problems, fmt.Sprintf("%d routes at %d: %s", len(st.Routes), st.At, strings.Join(rs, " | ")))
		case len(st.Routes) == 1 && m.hop != nil && !shapedAs(st.Routes[0], *m.hop):
			m.problems = append(m.problems, fmt.Sprintf("at %d the route is %s, not %s", st.At, st.Routes[0], m.hop))
		}
	}
	return len(m.problems) == 0, nil
}

func shapedAs(r kroute.Route, hop kroute.NextHop) bool {
	return len(r.NextHops) == 1 && r.NextHops[0].Gateway == hop.Gateway && r.NextHops[0].Device == hop.Device && r.NextHops[0].Onlink == hop.Onlink
}

func (m *KeptRouteMatcher) want() string {
	s := fmt.Sprintf("keep exactly one route to %s, never deleted, from %d to %d", m.prefix, m.from, m.to)
	if m.hop != nil {
		s += ", " + m.hop.String()
	}
	return s
}

func timelineName(actual any) string {
	if tl, ok := timelineOf(actual); ok {
		return "node " + tl.Name()
	}
	return fmt.Sprintf("%T", actual)
}

func (m *KeptRouteMatcher) FailureMessage(actual any) string {
	return fmt.Sprintf("expected %s to %s:\n  %s", timelineName(actual), m.want(), strings.Join(m.problems, "\n  "))
}

func (m *KeptRouteMatcher) NegatedFailureMessage(actual any) string {
	return fmt.Sprintf("expected %s not to %s; it did", timelineName(actual), m.want())
}

var _ types.GomegaMatcher = (*KeptRouteMatcher)(nil)
