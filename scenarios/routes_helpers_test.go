package scenarios_test

// Route helpers more than one family uses: where a node's block is, what
// routes a node holds to some blocks and who wrote them, what BIRD learned
// and exports, and what a route timeline saw.

import (
	"context"
	"fmt"
	"net/netip"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/timeline"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/topo"
)

// blockOf returns a node's block in the named pool.
func blockOf(n *topo.NodeNS, pool string) netip.Prefix {
	GinkgoHelper()
	b, ok := n.Block(pool)
	if !ok {
		Fail(fmt.Sprintf("node %s has no block in pool %s (blocks %v)", n.Name, pool, n.Blocks))
	}
	return b
}

// deletesOf lists the timeline's deletes of exactly p in [from, to]. A
// span the route monitor did not see whole fails the spec as unjudgeable:
// a delete and re-add in a subscription gap left no event, so an empty
// list would prove nothing.
func deletesOf(m *timeline.Monitor, p netip.Prefix, from, to int64) []event.Event {
	GinkgoHelper()
	Expect(m.Judgeable(from, to)).To(Succeed(), "deletes of %s on %s's route timeline", p, m.Name())
	var out []event.Event
	for _, e := range m.EventsFor(p, from, to) {
		if e.Kind == event.Delete {
			out = append(out, e)
		}
	}
	return out
}

// routesExactly is n's main-table routes whose destination is exactly p.
func routesExactly(n *harness.Node, p netip.Prefix) ([]kroute.Route, error) {
	rs, err := n.Routes(p)
	if err != nil {
		return nil, err
	}
	var out []kroute.Route
	for _, r := range rs {
		if r.Dst == p.Masked() {
			out = append(out, r)
		}
	}
	return out, nil
}

// maxRoutesAtOnce replays the timeline's main-table routes to exactly p
// (from the monitor's start, so the state at from is known) and returns the
// most that were present at once in [from, to].
func maxRoutesAtOnce(m *timeline.Monitor, p netip.Prefix, from, to int64) int {
	type id struct{ metric, tos int }
	present := map[id]bool{}
	most := -1
	for _, e := range m.Events() {
		if e.At > to {
			break
		}
		if e.Route.Table != kroute.MainTable || e.Route.Dst != p.Masked() {
			continue
		}
		if e.At >= from && most < 0 {
			most = len(present) // the state at from
		}
		k := id{e.Route.Metric, e.Route.TOS}
		if e.Kind == event.Delete {
			delete(present, k)
		} else {
			present[k] = true
		}
		if e.At >= from && len(present) > most {
			most = len(present)
		}
	}
	if most < 0 { // nothing happened in the window: the state at from
		most = len(present)
	}
	return most
}

// birdMetricsTo lists the metrics of n's `proto bird` routes to the blocks.
func birdMetricsTo(n judge.RouteSource, blocks []netip.Prefix) []int {
	var out []int
	for _, r := range birdRoutesTo(n, blocks) {
		out = append(out, r.Metric)
	}
	return out
}

// birdRoutesTo lists n's `proto bird` routes to any of the blocks.
func birdRoutesTo(n judge.RouteSource, blocks []netip.Prefix) []kroute.Route {
	var out []kroute.Route
	for _, b := range blocks {
		rs, err := n.Routes(b)
		if err != nil {
			Fail(fmt.Sprintf("%v: read routes to %s: %v", n, b, err))
		}
		for _, r := range rs {
			if r.Protocol == kroute.ProtoBIRD {
				out = append(out, r)
			}
		}
	}
	return out
}

// nodeAddrOf is the address of the node block b is affine to, from the
// topology: the gateway every tunnel route to b must name.
func nodeAddrOf(c *harness.Cluster, b netip.Prefix) netip.Addr {
	nd := c.Net.NodeOfBlock(b)
	if nd == nil {
		Fail(fmt.Sprintf("no node of the topology has block %s", b))
	}
	return nd.Address.Addr()
}

// learnedOverBGP reports whether n's BIRD has a route to exactly p from one
// of its BGP sessions.
func learnedOverBGP(ctx context.Context, n *harness.Node, p netip.Prefix) bool {
	rs, err := n.BIRD.Client().Routes(ctx, p.String())
	if err != nil {
		return false
	}
	sessions := map[string]bool{}
	for _, peer := range n.Peers() {
		sessions[peer.Protocol] = true
	}
	for _, r := range rs {
		if r.Prefix == p && sessions[r.Protocol] {
			return true
		}
	}
	return false
}

// exportedToKernel reports whether n's BIRD exports p to its IPv4 kernel
// protocol.
func exportedToKernel(ctx context.Context, n *harness.Node, p netip.Prefix) bool {
	rs, err := n.BIRD.Client().Routes(ctx, "export kernel4")
	if err != nil {
		return false
	}
	for _, r := range rs {
		if r.Prefix == p {
			return true
		}
	}
	return false
}

func protoOf(o judge.Owner) kroute.Protocol {
	if o == judge.ByBIRD {
		return kroute.ProtoBIRD
	}
	return designProgrammerProtocol
}

// routesBeneathBest counts n's routes to exactly each of blocks beyond one
// per block: what lies beneath the route the kernel forwards by.
func routesBeneathBest(n *harness.Node, blocks []netip.Prefix) int {
	GinkgoHelper()
	extra := 0
	for _, b := range blocks {
		rs, err := n.Routes(b)
		Expect(err).NotTo(HaveOccurred())
		k := 0
		for _, r := range rs {
			if r.Dst == b {
				k++
			}
		}
		extra += max(0, k-1)
	}
	return extra
}
