package harness

import "fmt"

// birdRuns is calico/node's decision to run BIRD on a node once
// confd has rendered its config (BGP is enabled): BIRD is run only when the
// node has at least one BGP peer. With none — the cluster has no peers, e.g.
// the node-to-node mesh switched off and no BGPPeer — BIRD is not run, one
// of the ways the design (§4, "Where BIRD does not come back") names in
// which BIRD does not return to reconcile its persisted routes. The harness
// marks the decision on the run's clock.
func (l confdLoop) birdRuns(n *Node) bool {
	if len(n.Peers()) > 0 {
		return true
	}
	l.c.Mark(fmt.Sprintf("BIRD(%s) not run: no BGP peers", n.Name))
	return false
}
