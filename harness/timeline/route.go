package timeline

import (
	"net/netip"

	"github.com/birdcage/birdcage/internal/kroute"
)

// Kind is what happened to a route.
type Kind string

const (
	Add     Kind = "add"
	Replace Kind = "replace" // a new route took an existing route's place in one operation
	Delete  Kind = "delete"
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
