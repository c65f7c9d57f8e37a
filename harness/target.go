package harness

import (
	"context"
	"net/netip"
	"syscall"

	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/instrument/timeline"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
)

// Target is what a claim is judged on: the cluster birdcage built
// (*Cluster) or a lab it attached to (*lab.Lab). A spec written against a
// Target runs on both, so each claim exists once; what only one of them
// can see (the programmer's restarts, confd's reaction) stays on it.
//
// One signature per action: an action returns the event that stamps when
// it began, on the monotonic clock the probes, counters and timelines use.
type Target interface {
	// TargetName names the target in results: the topology's name, or
	// "lab:NAME".
	TargetName() string
	// NodeNames lists the target's nodes in order.
	NodeNames() []string
	// RemoteBlocks are the blocks of every node but node.
	RemoteBlocks(node string) []netip.Prefix
	// NodeBlocks are node's own blocks.
	NodeBlocks(node string) []netip.Prefix
	// NodeRouteSource reads a node's main-table routes: what the route
	// matchers (judge.HaveClusterRoute) take.
	NodeRouteSource(node string) judge.RouteSource
	// WorkloadNode is the node hosting the workload with address a ("" for
	// none).
	WorkloadNode(a netip.Addr) string
	// BlockGateway is the underlay address of the node block b lives on —
	// the gateway a tunnel route to b names — when the target knows it.
	BlockGateway(b netip.Prefix) (netip.Addr, bool)
	// ProgrammerProtocol is the protocol the route programmers write with.
	ProgrammerProtocol(ctx context.Context) kroute.Protocol
	// Timeline is a node's route monitor.
	Timeline(node string) *timeline.Monitor

	// Mark records a named instant, taken once every node's route
	// timeline has recorded the changes made before the call
	// (SyncTimelines), and marks it in every probe session.
	Mark(name string) results.Event
	// SyncTimelines returns once every node's route timeline has recorded
	// every route change made before the call (timeline.Sync).
	SyncTimelines() error
	Events() []results.Event
	// Probes starts probe traffic and returns once every flow delivers
	// (unless o.MayNotFlow).
	Probes(ctx context.Context, o ProbeOptions) (*probe.Session, error)

	UpgradeNode(ctx context.Context, node string, to config.Release, o UpgradeOptions) (results.Event, error)
	KillBIRD(ctx context.Context, node string, sig syscall.Signal) (results.Event, error)
	StartBIRD(ctx context.Context, node string, o StartBIRDOptions) (results.Event, error)
	SetProgramClusterRoutes(ctx context.Context, felix, bgp config.ProgramClusterRoutes) (results.Event, error)
	// WaitConverged waits until every BGP session the target can see is
	// Established and every programmer it can see has synced.
	WaitConverged(ctx context.Context) error

	// Result starts a results row for a scenario judged on the target.
	Result(name string, rep *probe.Report) results.ScenarioResult
}

var _ Target = (*Cluster)(nil)

// TargetName is the topology's name.
func (c *Cluster) TargetName() string { return c.Net.Topology.Name }

// NodeBlocks are node's own blocks (none for an unknown node).
func (c *Cluster) NodeBlocks(node string) []netip.Prefix {
	var out []netip.Prefix
	if n := c.lookup(node); n != nil {
		for _, b := range n.NS.Blocks {
			out = append(out, b.CIDR)
		}
	}
	return out
}

// NodeRouteSource is the node itself (a *Node reads its routes); nil for
// an unknown node, which a matcher reports as an error.
func (c *Cluster) NodeRouteSource(node string) judge.RouteSource {
	if n := c.lookup(node); n != nil {
		return n
	}
	return nil
}

// lookup is the named node, nil when there is none (Node panics).
func (c *Cluster) lookup(name string) *Node {
	for _, n := range c.nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// WorkloadNode is the node hosting the workload with address a.
func (c *Cluster) WorkloadNode(a netip.Addr) string {
	if nd := c.Net.NodeOfWorkloadAddr(a); nd != nil {
		return nd.Name
	}
	return ""
}

// BlockGateway is the underlay address of the node b is affine to.
func (c *Cluster) BlockGateway(b netip.Prefix) (netip.Addr, bool) {
	if nd := c.Net.NodeOfBlock(b); nd != nil {
		return nd.Address.Addr(), true
	}
	return netip.Addr{}, false
}
