package timeline

import (
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
)

// key is the kernel's identity of a route (event.Key).
type key = event.Key

func keyOf(r kroute.Route) key { return event.KeyOf(r) }
