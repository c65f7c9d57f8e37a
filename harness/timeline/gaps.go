package timeline

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/birdcage/birdcage/internal/monoclock"
)

// GapKind marks an Event that is not a route change but a subscription
// gap: the monitor's netlink subscription ended (ENOBUFS when
// notifications came faster than they were read, or any other receive
// error) and was re-established. Between the last notification the old
// subscription delivered and the new subscription's re-read of the tables,
// changes may have been missed: a delete and re-add inside the gap leaves
// no event at all, and the re-read synthesises deletes only for routes
// that are absent by then. Event.Gap says when; Event.Route is empty.
const GapKind Kind = "gap"

// Gap is an interval in which the monitor may have missed route events.
type Gap struct {
	Node string `json:"node"`
	// From is when the subscription that ended last delivered a
	// notification (or was established, if it delivered none): a missed
	// change comes after it. To is when the new subscription had re-read
	// the tables; 0 while the gap is still open.
	From int64 `json:"from"`
	To   int64 `json:"to,omitempty"`
	// Reason is why the subscription ended, as the netlink library said.
	Reason string `json:"reason,omitempty"`
}

func (g Gap) String() string {
	to := "now (still re-subscribing)"
	if g.To > 0 {
		to = fmt.Sprintf("%d", g.To)
	}
	s := fmt.Sprintf("the route monitor missed events from %d to %s (monotonic ns, %.1f ms) on node %s", g.From, to, g.Ms(), g.Node)
	if g.Reason != "" {
		s += " (" + g.Reason + ")"
	}
	return s
}

// Ms is the gap's length in milliseconds (an open gap: up to now).
func (g Gap) Ms() float64 {
	to := g.To
	if to <= 0 {
		to = monoclock.Now()
	}
	return monoclock.Ms(to - g.From)
}

// ErrUnjudgeable is wrapped by every error that says a question about a
// span cannot be answered because the monitor missed events in it.
var ErrUnjudgeable = errors.New("unjudgeable")

// UnjudgeableError names the gaps that make a span unjudgeable.
type UnjudgeableError struct {
	Gaps []Gap
}

func (e *UnjudgeableError) Error() string {
	parts := make([]string, len(e.Gaps))
	for i, g := range e.Gaps {
		parts[i] = g.String()
	}
	return "unjudgeable: " + strings.Join(parts, "; ")
}

func (e *UnjudgeableError) Unwrap() error { return ErrUnjudgeable }

// Gaps returns every subscription gap so far, oldest first, including one
// still open.
func (m *Monitor) Gaps() []Gap {
	var out []Gap
	for _, e := range m.Events() {
		if e.Kind == GapKind && e.Gap != nil {
			out = append(out, *e.Gap)
		}
	}
	m.mu.Lock()
	if m.openGap != nil {
		out = append(out, *m.openGap)
	}
	m.mu.Unlock()
	return out
}

// GapsIn returns the gaps that overlap [from, to] (to <= 0: up to now).
func (m *Monitor) GapsIn(from, to int64) []Gap {
	if to <= 0 {
		to = math.MaxInt64
	}
	var out []Gap
	for _, g := range m.Gaps() {
		end := g.To
		if end <= 0 {
			end = math.MaxInt64
		}
		if g.From <= to && end >= from {
			out = append(out, g)
		}
	}
	return out
}

// Judgeable is nil when the monitor saw every route event in [from, to]
// (to <= 0: up to now), and an *UnjudgeableError naming the gaps
// otherwise. Every window, delete or flap question over the span must
// check it: a missed delete and re-add leaves no trace.
func (m *Monitor) Judgeable(from, to int64) error {
	if gs := m.GapsIn(from, to); len(gs) > 0 {
		return &UnjudgeableError{Gaps: gs}
	}
	return nil
}

// Synthetic is a monitor that records nothing: it holds the given events
// (gaps among them, as GapKind events) as if it had, for unit tests of the
// queries and of the matchers built on them. Close is a no-op.
func Synthetic(name string, startedAt int64, events []Event) *Monitor {
	m := &Monitor{name: name, startedAt: startedAt, events: append([]Event(nil), events...), synthetic: true,
		changed: make(chan struct{})}
	return m
}
