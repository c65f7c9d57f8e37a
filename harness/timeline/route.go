package timeline

import (
	"github.com/birdcage/birdcage/harness/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
)

// Kind is what happened to a route (timeline/event, where the results
// model reads it).
type Kind = event.Kind

const (
	Add     = event.Add
	Replace = event.Replace
	Delete  = event.Delete
)

// key is the kernel's identity of a route (event.Key).
type key = event.Key

func keyOf(r kroute.Route) key { return event.KeyOf(r) }
