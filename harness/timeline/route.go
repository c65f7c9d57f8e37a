package timeline

import (
	"net/netip"

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

// key is the kernel's identity of a route: a new route with the same key
// replaces the old one, a different metric makes a second route.
type key struct {
	family, table, tos, metric int
	dst                        netip.Prefix
}

func keyOf(r kroute.Route) key {
	return key{family: r.Family, table: r.Table, tos: r.TOS, metric: r.Metric, dst: r.Dst}
}
