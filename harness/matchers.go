package harness

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/onsi/gomega/types"

	"github.com/birdcage/birdcage/dataplane/config"
	"github.com/birdcage/birdcage/harness/probe"
)

// Owner is who wrote a kernel route, told by its protocol.
type Owner int

const (
	AnyOwner Owner = iota
	ByProgrammer
	ByBIRD
)

func (o Owner) String() string {
	switch o {
	case ByProgrammer:
		return "the programmer (proto 80)"
	case ByBIRD:
		return "BIRD (proto bird)"
	}
	return "anyone"
}

// ClusterRouteMatcher matches a *Node that has a main-table route to exactly
// a prefix, optionally written by a given owner, via a given device.
type ClusterRouteMatcher struct {
	prefix   netip.Prefix
	owner    Owner
	device   string
	protocol int
	actual   []KernelRoute
	readErr  error
}

// HaveClusterRoute matches a node with a route to prefix:
//
//	Expect(c.Node("node-2")).To(HaveClusterRoute(block).ProgrammedBy(ByProgrammer).Via("tunl0"))
func HaveClusterRoute(prefix netip.Prefix) *ClusterRouteMatcher {
	return &ClusterRouteMatcher{prefix: prefix, protocol: config.DefaultDeviceRouteProtocol}
}

// ProgrammedBy requires the route's protocol to be the owner's.
func (m *ClusterRouteMatcher) ProgrammedBy(o Owner) *ClusterRouteMatcher { m.owner = o; return m }

// Via requires the route (or every nexthop) to leave through device.
func (m *ClusterRouteMatcher) Via(device string) *ClusterRouteMatcher { m.device = device; return m }

// WithProgrammerProtocol sets the programmer's protocol when it is not 80.
func (m *ClusterRouteMatcher) WithProgrammerProtocol(p int) *ClusterRouteMatcher {
	m.protocol = p
	return m
}

func (m *ClusterRouteMatcher) Match(actual any) (bool, error) {
	n, ok := actual.(*Node)
	if !ok {
		return false, fmt.Errorf("HaveClusterRoute expects a *harness.Node, got %T", actual)
	}
	m.actual, m.readErr = n.Routes(m.prefix)
	if m.readErr != nil {
		return false, nil // keep polling; the message shows the error
	}
	for _, r := range m.actual {
		if r.Dst == m.prefix && m.routeMatches(r) {
			return true, nil
		}
	}
	return false, nil
}

func (m *ClusterRouteMatcher) routeMatches(r KernelRoute) bool {
	switch m.owner {
	case ByProgrammer:
		if r.Protocol != m.protocol {
			return false
		}
	case ByBIRD:
		if r.Protocol != config.RTProtBIRD {
			return false
		}
	}
	if m.device == "" {
		return true
	}
	if len(r.Nexthops) > 0 {
		for _, nh := range r.Nexthops {
			if !strings.HasSuffix(nh, " dev "+m.device) {
				return false
			}
		}
		return true
	}
	return r.Device == m.device
}

func (m *ClusterRouteMatcher) want() string {
	s := fmt.Sprintf("a route to %s programmed by %s", m.prefix, m.owner)
	if m.device != "" {
		s += " via " + m.device
	}
	return s
}

func (m *ClusterRouteMatcher) seen() string {
	if m.readErr != nil {
		return "could not read routes: " + m.readErr.Error()
	}
	if len(m.actual) == 0 {
		return "no route to " + m.prefix.String() + " (or inside it)"
	}
	var b strings.Builder
	for _, r := range m.actual {
		b.WriteString("\n    " + r.String())
	}
	return "routes to " + m.prefix.String() + ":" + b.String()
}

func (m *ClusterRouteMatcher) FailureMessage(actual any) string {
	return fmt.Sprintf("expected %s to have %s; it has %s", nodeName(actual), m.want(), m.seen())
}

func (m *ClusterRouteMatcher) NegatedFailureMessage(actual any) string {
	return fmt.Sprintf("expected %s not to have %s; it has %s", nodeName(actual), m.want(), m.seen())
}

func nodeName(actual any) string {
	if n, ok := actual.(*Node); ok {
		return "node " + n.Name
	}
	return fmt.Sprint(actual)
}

var _ types.GomegaMatcher = (*ClusterRouteMatcher)(nil)

// lossMatcher matches a probe.GapReport or *probe.Report with at most n
// probes lost.
type lossMatcher struct{ max int64 }

// HaveLostAtMost matches a flow (probe.GapReport) or a whole report
// (*probe.Report) that lost at most n probes.
func HaveLostAtMost(n int64) types.GomegaMatcher { return &lossMatcher{max: n} }

// HaveNoGap matches a flow or report that lost no probe.
func HaveNoGap() types.GomegaMatcher { return &lossMatcher{max: 0} }

func lostOf(actual any) (int64, string, error) {
	switch a := actual.(type) {
	case probe.GapReport:
		return a.Lost, fmt.Sprintf("flow %s lost %d of %d probes (longest gap %.1f ms, %s)", a.Flow, a.Lost, a.Sent, a.LongestGapMs, gapWhere(a.Gap)), nil
	case *probe.GapReport:
		return lostOf(*a)
	case *probe.Report:
		return a.Total.Lost, fmt.Sprintf("%d flows lost %d of %d probes (longest gap %.1f ms on %s)", a.Total.FlowsWithLoss, a.Total.Lost, a.Total.Sent, a.Total.LongestGapMs, a.Total.LongestGapFlow), nil
	}
	return 0, "", fmt.Errorf("loss matchers expect a probe.GapReport or *probe.Report, got %T", actual)
}

func gapWhere(g probe.Gap) string {
	if g.Mark == "" {
		return "no mark"
	}
	return fmt.Sprintf("began %+.1f ms after %s", g.SinceMarkMs, g.Mark)
}

func (m *lossMatcher) Match(actual any) (bool, error) {
	lost, _, err := lostOf(actual)
	return err == nil && lost <= m.max, err
}

func (m *lossMatcher) FailureMessage(actual any) string {
	_, s, _ := lostOf(actual)
	return fmt.Sprintf("expected at most %d lost probes: %s", m.max, s)
}

func (m *lossMatcher) NegatedFailureMessage(actual any) string {
	_, s, _ := lostOf(actual)
	return fmt.Sprintf("expected more than %d lost probes: %s", m.max, s)
}

// ExportMatcher matches a *Node whose BIRD exports a prefix to one BGP peer.
type ExportMatcher struct {
	prefix   netip.Prefix
	peer     netip.Addr
	protocol string
	exported []string
	err      error
}

// BeExportedTo matches a node whose BIRD exports prefix to the BGP peer at
// peer — what the peer would learn from it:
//
//	Expect(c.Node("node-1")).NotTo(harness.BeExportedTo(node3Block, node2Addr))
func BeExportedTo(prefix netip.Prefix, peer netip.Addr) *ExportMatcher {
	return &ExportMatcher{prefix: prefix, peer: peer}
}

func (m *ExportMatcher) Match(actual any) (bool, error) {
	n, ok := actual.(*Node)
	if !ok {
		return false, fmt.Errorf("BeExportedTo expects a *harness.Node, got %T", actual)
	}
	m.protocol, m.exported, m.err = "", nil, nil
	for _, p := range n.Peers() {
		if p.Address == m.peer {
			m.protocol = p.Protocol
		}
	}
	if m.protocol == "" {
		return false, fmt.Errorf("node %s has no BGP session to %s (its peers: %v)", n.Name, m.peer, n.Peers())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rs, err := n.BIRD.Client().Routes(ctx, "export "+m.protocol)
	if err != nil {
		m.err = err
		return false, nil
	}
	found := false
	for _, r := range rs {
		m.exported = append(m.exported, r.Prefix.String())
		if r.Prefix == m.prefix {
			found = true
		}
	}
	return found, nil
}

func (m *ExportMatcher) describe(actual any) string {
	if m.err != nil {
		return fmt.Sprintf("%s: birdc show route export %s: %v", nodeName(actual), m.protocol, m.err)
	}
	return fmt.Sprintf("%s exports to %s (%s): %v", nodeName(actual), m.peer, m.protocol, m.exported)
}

func (m *ExportMatcher) FailureMessage(actual any) string {
	return fmt.Sprintf("expected %s to be exported; %s", m.prefix, m.describe(actual))
}

func (m *ExportMatcher) NegatedFailureMessage(actual any) string {
	return fmt.Sprintf("expected %s not to be exported; %s", m.prefix, m.describe(actual))
}
