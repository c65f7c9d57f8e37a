package harness

import "fmt"

// Router returns the named BGP-speaking router; it panics on a name the
// cluster does not run BIRD on, which is a bug in the scenario.
func (c *Cluster) Router(name string) *Router {
	for _, r := range c.routers {
		if r.Name == name {
			return r
		}
	}
	panic(fmt.Sprintf("harness: no BGP-speaking router %q in topology %s", name, c.Net.Topology.Name))
}

// FailRouterLinks takes every interface of a router down, as when a ToR
// loses power: its point-to-point peers lose carrier and its switches lose
// its port, but nothing tells BGP — its BIRD keeps running, cut off, and
// its peers notice only by their own means (hold timer, link state). The
// returned event is the moment the first link went down.
func (c *Cluster) FailRouterLinks(name string) (Event, error) {
	r := c.Router(name)
	h, err := r.NS.Handle()
	if err != nil {
		return Event{}, fmt.Errorf("fail router %s: %w", name, err)
	}
	defer h.Close()
	e := c.Mark(fmt.Sprintf("FailRouterLinks(%s)", name))
	for _, ifc := range r.NS.Spec.Interfaces {
		l, err := h.LinkByName(ifc.Name)
		if err != nil {
			return e, fmt.Errorf("fail router %s: interface %s: %w", name, ifc.Name, err)
		}
		if err := h.LinkSetDown(l); err != nil {
			return e, fmt.Errorf("fail router %s: interface %s down: %w", name, ifc.Name, err)
		}
	}
	return e, nil
}
