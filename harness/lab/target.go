package lab

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/report/results"
)

// A lab is a harness.Target: the specs written against a Target (the
// headline upgrade among them) run on it as on a built cluster.
var _ harness.Target = (*Lab)(nil)

// TargetName is "lab:NAME".
func (l *Lab) TargetName() string { return "lab:" + l.M.Name }

// NodeNames lists the lab's nodes in manifest order.
func (l *Lab) NodeNames() []string {
	out := make([]string, len(l.Nodes))
	for i, n := range l.Nodes {
		out[i] = n.Name
	}
	return out
}

// NodeBlocks are node's own blocks (from the manifest and its datastore).
func (l *Lab) NodeBlocks(node string) []netip.Prefix {
	if n := l.Node(node); n != nil {
		return append([]netip.Prefix(nil), n.Blocks...)
	}
	return nil
}

// NodeRouteSource reads a node's main-table routes as its route timeline
// holds them; nil for an unknown node.
func (l *Lab) NodeRouteSource(node string) judge.RouteSource {
	if l.Node(node) == nil {
		return nil
	}
	return nodeRoutes{l: l, name: node}
}

// nodeRoutes is a lab node as a route source.
type nodeRoutes struct {
	l    *Lab
	name string
}

func (n nodeRoutes) NodeName() string { return n.name }

// Routes are the node's main-table routes to destinations inside dst (the
// zero prefix means all), from its timeline.
func (n nodeRoutes) Routes(dst netip.Prefix) ([]kroute.Route, error) {
	m := n.l.Timeline(n.name)
	if m == nil {
		return nil, fmt.Errorf("lab %s: node %s: no route timeline (detached?)", n.l.M.Name, n.name)
	}
	return m.RoutesTo(dst), nil
}

// WorkloadNode is the node whose workload has address a.
func (l *Lab) WorkloadNode(a netip.Addr) string {
	for _, n := range l.Nodes {
		if slices.ContainsFunc(n.Workloads, func(w report.Endpoint) bool { return w.Addr == a }) {
			return n.Name
		}
	}
	return ""
}

// BlockGateway: a manifest does not give the nodes' underlay addresses,
// so a lab does not know the gateway a tunnel route must name.
func (l *Lab) BlockGateway(netip.Prefix) (netip.Addr, bool) { return netip.Addr{}, false }

// ProgrammerProtocol is the manifest's route protocol.
func (l *Lab) ProgrammerProtocol(context.Context) kroute.Protocol { return l.M.RouteProtocol() }

// WaitConverged waits until every node's BIRD has all its sessions
// Established, by the manifest's birdc action; a manifest without one
// gives the lab's convergence no eyes, which the error says.
func (l *Lab) WaitConverged(ctx context.Context) error {
	if !l.M.Has(ActionBirdc) {
		return fmt.Errorf("lab %s: the manifest has no %s action, so BIRD's sessions cannot be seen", l.M.Name, ActionBirdc)
	}
	for _, n := range l.Nodes {
		if err := l.WaitBGPEstablished(ctx, n.Name); err != nil {
			return err
		}
	}
	return nil
}

// Result starts a results row judged on the lab: its probes, events and
// route swimlanes; the programmer's restarts and confd's reaction are the
// lab's own and not seen, which a note says.
func (l *Lab) Result(name string, rep *report.Report) results.ScenarioResult {
	s := results.ScenarioResult{Name: name, Topology: l.TargetName(), Tunnel: l.tunnel, Probes: rep, Events: l.Events(), Figures: map[string]float64{}, FigureKinds: map[string]results.FigureKind{},
		RouteEvents: l.RouteEvents()}
	if ev := l.Events(); len(ev) > 0 {
		s.Duration = monoclock.Ms(monoclock.Now()-ev[0].Mono) / 1000
	}
	s.Notes = append(s.Notes, "against a lab: the programmer's restarts and confd's reaction are the lab's own and not seen")
	return s
}
