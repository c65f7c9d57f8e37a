package harness

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/birdcage/birdcage/instrument/bgphold"
)

// HoldBGP stages the order of BGP messages between node and peer (an
// IPv4 address) with a bgphold.Hold in node's namespace, guarded by
// the run and marked as an event.
func (c *Cluster) HoldBGP(ctx context.Context, node string, peer netip.Addr, rules ...bgphold.Rule) (*bgphold.Hold, error) {
	n := c.lookup(node)
	if n == nil {
		return nil, fmt.Errorf("hold BGP: no node %q in topology %s", node, c.Net.Topology.Name)
	}
	return bgphold.Start(ctx, bgphold.Options{Node: node, Netns: n.NS.Path, Peer: peer, Guard: c.Run.Guard, Mark: func(name string) { c.Mark(name) }}, rules...)
}
