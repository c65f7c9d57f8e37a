// Package event is the route timeline's record of one route change: plain
// data, so the results model (harness/results) and its readers carry route
// timelines without importing the monitor and netlink. harness/timeline
// records events and aliases these types.
package event

import "github.com/birdcage/birdcage/internal/kroute"

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
}
