// Package event is the route timeline's record of one route change, and
// the shapes of its answers (a window without a route, the routes at one
// instant): plain data, so the results model (report/results), its
// readers and the judges (harness/judge) carry route timelines without
// importing the monitor and netlink. instrument/timeline records events and
// aliases these types.
package event

import (
	"errors"
	"fmt"

	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/monoclock"
)

// Kind is what happened to a route.
type Kind string

const (
	Add     Kind = "add"
	Replace Kind = "replace" // a new route took an existing route's place in one operation
	Delete  Kind = "delete"
)

// Event is one change of one route, stamped with CLOCK_MONOTONIC nanoseconds
// (internal/monoclock) when the monitor received it.
type Event struct {
	At    int64        `json:"at"`
	Kind  Kind         `json:"kind"`
	Route kroute.Route `json:"route"`
	// Existing marks the routes found when the monitor started (Kind Add,
	// At = start): the state before anything was observed, not a change.
	Existing bool `json:"existing,omitempty"`
	// Resync marks a delete the kernel did not announce (IPv4 routes go
	// silently when their device goes down or away, or notifications were
	// lost); the monitor saw it by re-reading the tables, so At is when it
	// noticed, not when the kernel acted.
	Resync bool `json:"resync,omitempty"`
	// NlFlags are the NLM_F_* flags of the notification (NLM_F_REPLACE etc.).
	NlFlags uint16 `json:"nlFlags,omitempty"`
	// Gap is set on a GapKind event (At = the gap's end): the interval in
	// which the monitor may have missed changes. Route is empty then.
	Gap *Gap `json:"gap,omitempty"`
}

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

// Window is an interval with no route to a prefix.
type Window struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Open is set when the window was still open at the end of the query
	// (or now): the route had not come back.
	Open bool `json:"open,omitempty"`
	// Unjudgeable is set on a window that is a subscription gap, not an
	// observed absence: "unjudgeable: the route monitor missed events from
	// T1 to T2 on node X". Whether the route was there is unknown.
	Unjudgeable string `json:"unjudgeable,omitempty"`
}

// Duration is the window's length in nanoseconds.
func (w Window) Duration() int64 { return w.To - w.From }

// Ms is the window's length in milliseconds.
func (w Window) Ms() float64 { return monoclock.Ms(w.Duration()) }

// State is the forwarding routes to a prefix at one instant.
type State struct {
	At     int64          `json:"at"`
	Routes []kroute.Route `json:"routes"`
}
