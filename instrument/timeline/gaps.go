package timeline

import (
	"math"
	"strings"

	"github.com/birdcage/birdcage/instrument/timeline/event"
)

// ErrUnjudgeable is wrapped by every error that says a question about a
// span cannot be answered because the monitor missed events in it (the
// event package's, so judges test for it without the monitor).
var ErrUnjudgeable = event.ErrUnjudgeable

// UnjudgeableError names the gaps that make a span unjudgeable.
type UnjudgeableError struct {
	Gaps []event.Gap
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
func (m *Monitor) Gaps() []event.Gap {
	var out []event.Gap
	for _, e := range m.Events() {
		if e.Kind == event.GapKind && e.Gap != nil {
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
func (m *Monitor) GapsIn(from, to int64) []event.Gap {
	if to <= 0 {
		to = math.MaxInt64
	}
	var out []event.Gap
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
func Synthetic(name string, startedAt int64, events []event.Event) *Monitor {
	m := &Monitor{name: name, startedAt: startedAt, events: append([]event.Event(nil), events...), synthetic: true,
		changed: make(chan struct{})}
	return m
}
