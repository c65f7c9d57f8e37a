package judge

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/onsi/gomega/types"

	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/internal/kroute"
)

// RouteSource is what the route matchers read: a *harness.Node, or
// anything else that lists a node's main-table routes to a prefix (and
// inside it).
type RouteSource interface {
	Routes(dst netip.Prefix) ([]kroute.Route, error)
}

// ClusterRouteMatcher matches a node that has a main-table route to exactly
// a prefix, optionally written by a given owner, via a given device; in its
// exclusive form (Only), that route must be the node's only route to the
// prefix.
type ClusterRouteMatcher struct {
	prefix    netip.Prefix
	owner     Owner
	device    string
	gateway   netip.Addr
	onlink    bool
	protocol  kroute.Protocol
	exclusive bool
	best      bool
	actual    []kroute.Route
	readErr   error
}

// HaveClusterRoute matches a node with a route that forwards to prefix (a
// blackhole, unreachable or prohibit route is no cluster route):
//
//	Expect(c.Node("node-2")).To(HaveClusterRoute(block).ProgrammedBy(ByProgrammer).Via("tunl0"))
//
// It passes while another route to the prefix sits beside the one it
// wants (another protocol or metric); a claim that a route moves to an
// owner, or that an owner owns it, needs Only.
func HaveClusterRoute(prefix netip.Prefix) *ClusterRouteMatcher {
	return &ClusterRouteMatcher{prefix: prefix, protocol: kroute.ProtoCalicoDefault}
}

// ProgrammedBy requires the route's protocol to be the owner's.
func (m *ClusterRouteMatcher) ProgrammedBy(o Owner) *ClusterRouteMatcher { m.owner = o; return m }

// Via requires the route (or every nexthop) to leave through device.
func (m *ClusterRouteMatcher) Via(device string) *ClusterRouteMatcher { m.device = device; return m }

// Gateway requires every next hop of the route to go via gw: what a
// route that "takes over" must still say (the peer node's address, as
// BIRD's route said), not only who wrote it.
func (m *ClusterRouteMatcher) Gateway(gw netip.Addr) *ClusterRouteMatcher { m.gateway = gw; return m }

// Onlink requires every next hop to be onlink (a tunnel route via a node
// address the tunnel device has no connected route to).
func (m *ClusterRouteMatcher) Onlink() *ClusterRouteMatcher { m.onlink = true; return m }

// Only makes the match exclusive: the node has exactly one route to the
// prefix (any protocol, any metric) and it is the one described. A route
// of the old owner left beside the new owner's fails it.
func (m *ClusterRouteMatcher) Only() *ClusterRouteMatcher { m.exclusive = true; return m }

// Best makes the match about the route the kernel forwards by: the
// described route has the lowest metric of the node's routes to the
// prefix and no other route shares that metric. Routes at a higher
// metric may sit beside it (count them apart where they matter: a BIRD
// that restarts with another kernel metric leaves its predecessor's
// routes in place, see the round trip's downgrade leg).
func (m *ClusterRouteMatcher) Best() *ClusterRouteMatcher { m.best = true; return m }

// WithProgrammerProtocol says which protocol ProgrammedBy(ByProgrammer)
// means: the cluster's deviceRouteProtocol, when the scenario set one
// (Calico's default, kroute.ProtoCalicoDefault, otherwise).
func (m *ClusterRouteMatcher) WithProgrammerProtocol(p kroute.Protocol) *ClusterRouteMatcher {
	m.protocol = p
	return m
}

// Match reads the node's routes; a read error is an error (so neither To
// nor NotTo passes on a node whose routes could not be read; Eventually
// keeps polling and shows it).
func (m *ClusterRouteMatcher) Match(actual any) (bool, error) {
	src, ok := actual.(RouteSource)
	if !ok {
		return false, fmt.Errorf("HaveClusterRoute expects a *harness.Node (a RouteSource), got %T", actual)
	}
	m.actual, m.readErr = src.Routes(m.prefix)
	if m.readErr != nil {
		return false, fmt.Errorf("%s: could not read routes to %s: %w", nodeName(actual), m.prefix, m.readErr)
	}
	return m.matchRoutes(m.actual), nil
}

// matchRoutes is the verdict on a node's routes to (and inside) the prefix.
func (m *ClusterRouteMatcher) matchRoutes(rs []kroute.Route) bool {
	exact, found := 0, false
	lowest, atLowest, lowestMatches := 0, 0, false
	for _, r := range rs {
		if r.Dst != m.prefix {
			continue
		}
		ok := m.routeMatches(r)
		switch {
		case exact == 0 || r.Metric < lowest:
			lowest, atLowest, lowestMatches = r.Metric, 1, ok
		case r.Metric == lowest:
			atLowest++
		}
		exact++
		found = found || ok
	}
	if m.exclusive {
		return found && exact == 1
	}
	if m.best {
		return lowestMatches && atLowest == 1
	}
	return found
}

// ownerOf is who a route's protocol says wrote it: the programmer writes
// at the matcher's protocol (Calico's 80 unless told otherwise).
func (m *ClusterRouteMatcher) ownerOf(p kroute.Protocol) Owner {
	switch kroute.OwnerOf(p, m.protocol) {
	case kroute.OwnerProgrammer:
		return ByProgrammer
	case kroute.OwnerBIRD:
		return ByBIRD
	}
	return Nobody
}

func (m *ClusterRouteMatcher) routeMatches(r kroute.Route) bool {
	if !r.Forwards() {
		return false
	}
	if m.owner != Nobody && !m.owner.Has(m.ownerOf(r.Protocol)) {
		return false
	}
	if m.gateway.IsValid() || m.onlink {
		if len(r.NextHops) == 0 {
			return false
		}
		for _, h := range r.NextHops {
			if (m.gateway.IsValid() && h.Gateway != m.gateway) || (m.onlink && !h.Onlink) {
				return false
			}
		}
	}
	if m.device == "" {
		return true
	}
	devs := r.Devices()
	if len(devs) == 0 {
		return false
	}
	for _, d := range devs {
		if d != m.device {
			return false
		}
	}
	return true
}

func (m *ClusterRouteMatcher) want() string { return m.wantTo(m.prefix.String()) }

// wantTo describes the route wanted to dst (a prefix, or words for many).
func (m *ClusterRouteMatcher) wantTo(dst string) string {
	by := m.owner.String()
	switch m.owner {
	case Nobody, Both:
		by = "anyone"
	case ByProgrammer:
		by += fmt.Sprintf(" (proto %s)", m.protocol)
	case ByBIRD:
		by += fmt.Sprintf(" (proto %s)", kroute.ProtoBIRD)
	}
	s := fmt.Sprintf("a forwarding route to %s programmed by %s", dst, by)
	if m.exclusive {
		s = fmt.Sprintf("exactly one route to %s, forwarding, programmed by %s", dst, by)
	}
	if m.best && !m.exclusive {
		s = fmt.Sprintf("as its best route to %s (lowest metric, alone at it) a forwarding route programmed by %s", dst, by)
	}
	if m.gateway.IsValid() {
		s += " via gateway " + m.gateway.String()
	}
	if m.device != "" {
		s += " via " + m.device
	}
	if m.onlink {
		s += " onlink"
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
	if n, ok := actual.(interface{ NodeName() string }); ok {
		return "node " + n.NodeName()
	}
	return fmt.Sprint(actual)
}

var _ types.GomegaMatcher = (*ClusterRouteMatcher)(nil)

// GapMatcher matches probe flows that saw no gap in their sequence.
type GapMatcher struct {
	through  *report.Report
	platform *PlatformLoss
}

// HaveNoGap matches a flow (report.GapReport) or every flow of a
// *report.Report whose probes arrived without a hole, as the BPF tracker
// at the destination saw them: some probe arrived, the first to arrive was
// probe 1, no sequence number below the highest one seen is missing, and
// no send was refused by an error from the network (an ICMP error turned
// into ECONNREFUSED, EHOSTUNREACH...; EAGAIN, the sender's own socket
// buffer, is not the network's and is only shown).
//
// It does not judge Lost = Sent - Received: after the last arrival the
// tracker cannot tell a probe in flight from a lost one. Through says
// which probes the claim covers, so that tail is judged too.
func HaveNoGap() *GapMatcher { return &GapMatcher{} }

// Through also requires every probe each flow had sent when snapshot was
// taken (probes.Report() at the end of the claim's window) to have
// arrived.
func (m *GapMatcher) Through(snapshot *report.Report) *GapMatcher { m.through = snapshot; return m }

// BeyondPlatform judges the flow's holes against the platform's own loss
// (platformloss.go): where the platform lost nothing, exactly HaveNoGap;
// otherwise the flow may lose no more probes than the worst control flow
// did. Refused sends are judged strictly either way.
func (m *GapMatcher) BeyondPlatform(p PlatformLoss) *GapMatcher { m.platform = &p; return m }

// gapProblems is what is wrong with one flow, empty when nothing is; an
// error when there is nothing to judge (so NotTo cannot pass on it either).
func (m *GapMatcher) gapProblems(f report.GapReport) ([]string, error) {
	var out, holes []string
	if f.Sent == 0 {
		return nil, fmt.Errorf("flow %s sent no probe: nothing to judge", f.Flow)
	}
	if f.Sent > 0 && f.Received == 0 {
		holes = append(holes, fmt.Sprintf("none of %d probes arrived", f.Sent))
	}
	// A probe before the first arrival that came later still is counted
	// late (not told apart from late probes filling holes above): only
	// more head probes than late ones is surely a gap.
	if f.Received > 0 && f.FirstSeq > 1 && f.FirstSeq-1 > f.Late {
		holes = append(holes, fmt.Sprintf("probes 1..%d never arrived (the first to arrive was %d)", f.FirstSeq-1, f.FirstSeq))
	}
	if f.Missing > 0 {
		holes = append(holes, fmt.Sprintf("%d probes missing below the highest seen (%d)", f.Missing, f.HighestSeq))
	}
	for errno, n := range f.SendErrors {
		if errno != "EAGAIN" && n > 0 {
			out = append(out, fmt.Sprintf("%d sends refused with %s", n, errno))
		}
	}
	if m.through != nil {
		snap := flowIn(m.through, f.Flow)
		switch {
		case snap == nil:
			return nil, fmt.Errorf("flow %s is not in the snapshot given to Through", f.Flow)
		case snap.Sent == 0:
			return nil, fmt.Errorf("flow %s had sent nothing when the snapshot was taken: nothing to judge", f.Flow)
		case f.HighestSeq < snap.Sent:
			holes = append(holes, fmt.Sprintf("probes %d..%d, sent before the snapshot, have not arrived", f.HighestSeq+1, snap.Sent))
		}
	}
	if m.platform != nil && !m.platform.Strict() && len(holes) > 0 {
		h := FlowHoles{Flow: f.Flow, Holes: sessionHoles(f, flowIn(m.through, f.Flow)), LongestMs: f.LongestGapMs}
		if WithinPlatform(h, *m.platform) {
			return out, nil
		}
		holes = append(holes, fmt.Sprintf("%d probes lost in all, longest gap %.1f ms: more than the platform: %s", h.Holes, h.LongestMs, m.platform))
	}
	return append(out, holes...), nil
}

func flowsOf(actual any) ([]report.GapReport, error) {
	switch a := actual.(type) {
	case report.GapReport:
		return []report.GapReport{a}, nil
	case *report.GapReport:
		if a == nil {
			return nil, fmt.Errorf("HaveNoGap got a nil *report.GapReport")
		}
		return []report.GapReport{*a}, nil
	case *report.Report:
		if a == nil || len(a.Flows) == 0 {
			return nil, fmt.Errorf("HaveNoGap got a report with no flow (nothing to judge)")
		}
		return a.Flows, nil
	}
	return nil, fmt.Errorf("HaveNoGap expects a report.GapReport or *report.Report, got %T", actual)
}

func (m *GapMatcher) Match(actual any) (bool, error) {
	flows, err := flowsOf(actual)
	if err != nil {
		return false, err
	}
	ok := true
	for _, f := range flows {
		p, err := m.gapProblems(f)
		if err != nil {
			return false, err
		}
		ok = ok && len(p) == 0
	}
	return ok, nil
}

func (m *GapMatcher) describe(actual any) string {
	flows, err := flowsOf(actual)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, f := range flows {
		fmt.Fprintf(&b, "\n    flow %s: sent %d, received %d, first %d, highest %d, missing %d, longest gap %.1f ms (%s)", f.Flow, f.Sent, f.Received, f.FirstSeq, f.HighestSeq, f.Missing, f.LongestGapMs, gapWhere(f.Gap))
		if len(f.SendErrors) > 0 {
			fmt.Fprintf(&b, ", send errors %v", f.SendErrors)
		}
		if p, err := m.gapProblems(f); err != nil {
			b.WriteString(": " + err.Error())
		} else if len(p) > 0 {
			b.WriteString(": " + strings.Join(p, "; "))
		}
	}
	if m.platform != nil {
		b.WriteString("\n    " + m.platform.String())
	}
	return b.String()
}

func gapWhere(g report.Gap) string {
	if g.Mark == "" {
		return "no mark"
	}
	return fmt.Sprintf("began %+.1f ms after %s", g.SinceMarkMs, g.Mark)
}

func (m *GapMatcher) FailureMessage(actual any) string {
	return "expected no gap in the probe sequence:" + m.describe(actual)
}

func (m *GapMatcher) NegatedFailureMessage(actual any) string {
	return "expected a gap in the probe sequence:" + m.describe(actual)
}

var _ types.GomegaMatcher = (*GapMatcher)(nil)

// ExportSource is what BeExportedTo reads: a *harness.Node, or anything
// else that knows a node's BGP peers and the prefixes its BIRD exports to
// one protocol.
type ExportSource interface {
	Peers() []confd.Peer
	ExportedPrefixes(ctx context.Context, protocol string) ([]netip.Prefix, error)
}

// ExportMatcher matches a node whose BIRD exports a prefix to one BGP peer.
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
//	Expect(c.Node("node-1")).NotTo(judge.BeExportedTo(node3Block, node2Addr))
//
// A node without a session to peer, or a birdc that fails, is an error:
// neither To nor NotTo passes (Eventually keeps polling and shows it).
func BeExportedTo(prefix netip.Prefix, peer netip.Addr) *ExportMatcher {
	return &ExportMatcher{prefix: prefix, peer: peer}
}

func (m *ExportMatcher) Match(actual any) (bool, error) {
	n, ok := actual.(ExportSource)
	if !ok {
		return false, fmt.Errorf("BeExportedTo expects a *harness.Node (an ExportSource), got %T", actual)
	}
	m.protocol, m.exported, m.err = "", nil, nil
	for _, p := range n.Peers() {
		if p.Address == m.peer {
			m.protocol = p.Protocol
		}
	}
	if m.protocol == "" {
		m.err = fmt.Errorf("%s has no BGP session to %s (its peers: %v)", nodeName(actual), m.peer, n.Peers())
		return false, m.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ps, err := n.ExportedPrefixes(ctx, m.protocol)
	if err != nil {
		m.err = fmt.Errorf("%s: birdc show route export %s: %w", nodeName(actual), m.protocol, err)
		return false, m.err
	}
	found := false
	for _, p := range ps {
		m.exported = append(m.exported, p.String())
		if p == m.prefix {
			found = true
		}
	}
	return found, nil
}

func (m *ExportMatcher) describe(actual any) string {
	if m.err != nil {
		return m.err.Error()
	}
	return fmt.Sprintf("%s exports to %s (%s): %v", nodeName(actual), m.peer, m.protocol, m.exported)
}

func (m *ExportMatcher) FailureMessage(actual any) string {
	return fmt.Sprintf("expected %s to be exported; %s", m.prefix, m.describe(actual))
}

func (m *ExportMatcher) NegatedFailureMessage(actual any) string {
	return fmt.Sprintf("expected %s not to be exported; %s", m.prefix, m.describe(actual))
}

// BlockRouteSource is what HaveRemoteBlockRoutes reads: a
// *harness.Cluster, or anything else that names its nodes, lists each
// one's main-table routes and knows the blocks of every other node.
type BlockRouteSource interface {
	NodeNames() []string
	// NodeRoutes is all of node's main-table routes (both families).
	NodeRoutes(node string) ([]kroute.Route, error)
	RemoteBlocks(node string) []netip.Prefix
}

// RemoteBlockRoutesMatcher matches a cluster on which every node has the
// described route to every other node's blocks: the check scenarios make
// before and after every change.
type RemoteBlockRoutesMatcher struct {
	route    ClusterRouteMatcher // the template (prefix unset)
	checked  int
	failures []string
}

// HaveRemoteBlockRoutes matches a cluster where, for every node and every
// block of every other node, the node has a route as described (the same
// builder as HaveClusterRoute):
//
//	Eventually(c).Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(judge.ByProgrammer).Only())
//
// A cluster with no remote block at all is an error, not a pass.
func HaveRemoteBlockRoutes() *RemoteBlockRoutesMatcher {
	return &RemoteBlockRoutesMatcher{route: ClusterRouteMatcher{protocol: kroute.ProtoCalicoDefault}}
}

// ProgrammedBy requires every route's protocol to be the owner's.
func (m *RemoteBlockRoutesMatcher) ProgrammedBy(o Owner) *RemoteBlockRoutesMatcher {
	m.route.owner = o
	return m
}

// Via requires every route to leave through device.
func (m *RemoteBlockRoutesMatcher) Via(device string) *RemoteBlockRoutesMatcher {
	m.route.device = device
	return m
}

// Only makes every match exclusive (ClusterRouteMatcher.Only).
func (m *RemoteBlockRoutesMatcher) Only() *RemoteBlockRoutesMatcher {
	m.route.exclusive = true
	return m
}

// WithProgrammerProtocol is ClusterRouteMatcher.WithProgrammerProtocol.
func (m *RemoteBlockRoutesMatcher) WithProgrammerProtocol(p kroute.Protocol) *RemoteBlockRoutesMatcher {
	m.route.protocol = p
	return m
}

// Match checks every (node, remote block) pair; a node whose routes cannot
// be read is an error.
func (m *RemoteBlockRoutesMatcher) Match(actual any) (bool, error) {
	c, ok := actual.(BlockRouteSource)
	if !ok {
		return false, fmt.Errorf("HaveRemoteBlockRoutes expects a *harness.Cluster (a BlockRouteSource), got %T", actual)
	}
	m.checked, m.failures = 0, nil
	for _, name := range c.NodeNames() {
		// One dump per node, not one per block: at 20 nodes a poll is 20
		// dumps instead of 380.
		all, err := c.NodeRoutes(name)
		if err != nil {
			return false, fmt.Errorf("node %s: could not read routes: %w", name, err)
		}
		for _, b := range c.RemoteBlocks(name) {
			one := m.route
			one.prefix = b
			for _, r := range all {
				if kroute.Within(b, r.Dst) {
					one.actual = append(one.actual, r)
				}
			}
			m.checked++
			if !one.matchRoutes(one.actual) {
				m.failures = append(m.failures, fmt.Sprintf("node %s: %s", name, one.seen()))
			}
		}
	}
	if m.checked == 0 {
		return false, fmt.Errorf("HaveRemoteBlockRoutes: the cluster has no node with a remote block; nothing to check")
	}
	return len(m.failures) == 0, nil
}

func (m *RemoteBlockRoutesMatcher) want() string { return m.route.wantTo("each remote block") }

func (m *RemoteBlockRoutesMatcher) FailureMessage(any) string {
	return fmt.Sprintf("expected every node to have %s; %d of %d (node, block) pairs do not:\n  %s",
		m.want(), len(m.failures), m.checked, strings.Join(m.failures, "\n  "))
}

func (m *RemoteBlockRoutesMatcher) NegatedFailureMessage(any) string {
	return fmt.Sprintf("expected some node not to have %s; all %d (node, block) pairs do", m.want(), m.checked)
}

var _ types.GomegaMatcher = (*RemoteBlockRoutesMatcher)(nil)
