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
