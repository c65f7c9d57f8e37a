package judge

// The matchers' logic on constructed inputs: each one's pass, fail and
// error paths, the exclusive route form, and that an error is never a pass
// for NotTo. (The same matchers against real clusters are in
// cluster_test.go.)

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/internal/kroute"
)

type fakeNode struct {
	name    string
	routes  []kroute.Route
	err     error
	peers   []confd.Peer
	exports []netip.Prefix
}

func (f *fakeNode) NodeName() string { return f.name }
func (f *fakeNode) Routes(netip.Prefix) ([]kroute.Route, error) {
	return f.routes, f.err
}
func (f *fakeNode) Peers() []confd.Peer { return f.peers }
func (f *fakeNode) ExportedPrefixes(context.Context, string) ([]netip.Prefix, error) {
	return f.exports, f.err
}

var (
	block  = netip.MustParsePrefix("10.244.2.0/26")
	inside = netip.MustParsePrefix("10.244.2.5/32")
	peerIP = netip.MustParseAddr("172.18.0.12")
)

// Calico's default deviceRouteProtocol, 80, and BIRD's RTPROT_BIRD, 12,
// as numbers: the matcher must agree with the kernel's and Calico's, not
// with a constant of its own.
const (
	calicoProto kroute.Protocol = 80
	birdProto   kroute.Protocol = 12
)

func dev(d string) []kroute.NextHop { return []kroute.NextHop{{Device: d}} }

func progRoute(d string) kroute.Route {
	return kroute.Route{Dst: block, Type: kroute.Unicast, Protocol: calicoProto, NextHops: dev(d)}
}
func birdRoute(d string, metric int) kroute.Route {
	return kroute.Route{Dst: block, Type: kroute.Unicast, Protocol: birdProto, NextHops: dev(d), Metric: metric}
}
func tunnelRoute(p kroute.Protocol, gw netip.Addr, onlink bool) kroute.Route {
	return kroute.Route{Dst: block, Type: kroute.Unicast, Protocol: p, NextHops: []kroute.NextHop{{Gateway: gw, Device: "tunl0", Onlink: onlink}}}
}
func multipath(devs ...string) kroute.Route {
	r := kroute.Route{Dst: block, Type: kroute.Unicast, Protocol: birdProto}
	for i, d := range devs {
		r.NextHops = append(r.NextHops, kroute.NextHop{Gateway: netip.AddrFrom4([4]byte{1, 1, byte(i), 1}), Device: d, Weight: 1})
	}
	return r
}

// match runs m on actual as Expect(...).To and .NotTo would: pass (To
// passes), fail (NotTo passes), or err (neither).
func match(t *testing.T, m interface {
	Match(any) (bool, error)
}, actual any) string {
	t.Helper()
	ok, err := m.Match(actual)
	switch {
	case err != nil:
		return "error"
	case ok:
		return "pass"
	}
	return "fail"
}

func TestHaveClusterRoute(t *testing.T) {
	for _, c := range []struct {
		name   string
		m      *ClusterRouteMatcher
		routes []kroute.Route
		want   string
	}{
		{"the programmer's route", HaveClusterRoute(block).ProgrammedBy(ByProgrammer).Via("tunl0"), []kroute.Route{progRoute("tunl0")}, "pass"},
		{"BIRD's route is not the programmer's", HaveClusterRoute(block).ProgrammedBy(ByProgrammer), []kroute.Route{birdRoute("tunl0", 0)}, "fail"},
		{"wrong device", HaveClusterRoute(block).ProgrammedBy(ByProgrammer).Via("tunl0"), []kroute.Route{progRoute("eth0")}, "fail"},
		{"a route inside the prefix is not to it", HaveClusterRoute(block), []kroute.Route{{Dst: inside, Type: kroute.Unicast, Protocol: calicoProto}}, "fail"},
		{"no route", HaveClusterRoute(block), nil, "fail"},
		{"old owner's route beside the new: the plain form passes", HaveClusterRoute(block).ProgrammedBy(ByProgrammer),
			[]kroute.Route{progRoute("tunl0"), birdRoute("tunl0", 32)}, "pass"},
		{"old owner's route beside the new: Only fails", HaveClusterRoute(block).ProgrammedBy(ByProgrammer).Only(),
			[]kroute.Route{progRoute("tunl0"), birdRoute("tunl0", 32)}, "fail"},
		{"two routes by the same owner at two metrics: Only fails", HaveClusterRoute(block).ProgrammedBy(ByBIRD).Only(),
			[]kroute.Route{birdRoute("eth0", 0), birdRoute("eth0", 32)}, "fail"},
		{"Only: the one route, by the owner", HaveClusterRoute(block).ProgrammedBy(ByBIRD).Via("tunl0").Only(), []kroute.Route{birdRoute("tunl0", 0)}, "pass"},
		{"Only: a more specific route inside is not another route to the prefix", HaveClusterRoute(block).ProgrammedBy(ByProgrammer).Only(),
			[]kroute.Route{progRoute("tunl0"), {Dst: inside, Type: kroute.Unicast, Protocol: 2, NextHops: dev("cali1")}}, "pass"},
		{"Only: the one route is the wrong owner's", HaveClusterRoute(block).ProgrammedBy(ByProgrammer).Only(), []kroute.Route{birdRoute("tunl0", 0)}, "fail"},
		{"another programmer protocol", HaveClusterRoute(block).ProgrammedBy(ByProgrammer).WithProgrammerProtocol(99),
			[]kroute.Route{{Dst: block, Type: kroute.Unicast, Protocol: 99, NextHops: dev("eth0")}}, "pass"},
		{"another programmer protocol: 80 is not the programmer's then", HaveClusterRoute(block).ProgrammedBy(ByProgrammer).WithProgrammerProtocol(99),
			[]kroute.Route{progRoute("eth0")}, "fail"},
		{"multipath: every nexthop via the device", HaveClusterRoute(block).Via("eth0"),
			[]kroute.Route{multipath("eth0", "eth0")}, "pass"},
		{"multipath: one nexthop elsewhere", HaveClusterRoute(block).Via("eth0"),
			[]kroute.Route{multipath("eth0", "eth1")}, "fail"},
		{"a device named like the wanted one's suffix is another device", HaveClusterRoute(block).Via("eth0"),
			[]kroute.Route{multipath("veth0", "veth0")}, "fail"},
		{"a blackhole to the prefix is no cluster route", HaveClusterRoute(block),
			[]kroute.Route{{Dst: block, Protocol: birdProto, Type: kroute.Blackhole}}, "fail"},
		{"an unreachable route by the programmer is no cluster route", HaveClusterRoute(block).ProgrammedBy(ByProgrammer),
			[]kroute.Route{{Dst: block, Protocol: calicoProto, Type: kroute.Unreachable, NextHops: dev("lo")}}, "fail"},
		{"a device route (no gateway) counts", HaveClusterRoute(block).ProgrammedBy(ByProgrammer).Via("eth0"),
			[]kroute.Route{progRoute("eth0")}, "pass"},
		{"tunnel route: the owner's gateway, onlink", HaveClusterRoute(block).ProgrammedBy(ByProgrammer).Via("tunl0").Gateway(peerIP).Onlink(),
			[]kroute.Route{tunnelRoute(calicoProto, peerIP, true)}, "pass"},
		{"tunnel route via another node's address", HaveClusterRoute(block).ProgrammedBy(ByProgrammer).Via("tunl0").Gateway(peerIP).Onlink(),
			[]kroute.Route{tunnelRoute(calicoProto, netip.MustParseAddr("172.18.0.13"), true)}, "fail"},
		{"tunnel route not onlink", HaveClusterRoute(block).ProgrammedBy(ByProgrammer).Via("tunl0").Gateway(peerIP).Onlink(),
			[]kroute.Route{tunnelRoute(calicoProto, peerIP, false)}, "fail"},
		{"a device route has no gateway to match", HaveClusterRoute(block).Gateway(peerIP),
			[]kroute.Route{progRoute("tunl0")}, "fail"},
		{"Best: the owner's route at the lowest metric, a leftover above it", HaveClusterRoute(block).ProgrammedBy(ByBIRD).Best(),
			[]kroute.Route{birdRoute("eth0", 2147483547), birdRoute("eth0", 0)}, "pass"},
		{"Best: the wanted route sits above another", HaveClusterRoute(block).ProgrammedBy(ByProgrammer).Best(),
			[]kroute.Route{{Dst: block, Type: kroute.Unicast, Protocol: calicoProto, NextHops: dev("eth0"), Metric: 1024}, birdRoute("eth0", 0)}, "fail"},
		{"Best: two routes share the lowest metric", HaveClusterRoute(block).ProgrammedBy(ByBIRD).Best(),
			[]kroute.Route{birdRoute("eth0", 0), progRoute("eth0")}, "fail"},
		{"Best: the lowest-metric route does not forward", HaveClusterRoute(block).Best(),
			[]kroute.Route{{Dst: block, Protocol: birdProto, Type: kroute.Blackhole}, birdRoute("eth0", 32)}, "fail"},
		{"Best: no route", HaveClusterRoute(block).Best(), nil, "fail"},
		{"Best: a route inside the prefix does not compete", HaveClusterRoute(block).ProgrammedBy(ByBIRD).Best(),
			[]kroute.Route{birdRoute("eth0", 32), {Dst: inside, Type: kroute.Unicast, Protocol: calicoProto, Metric: 0}}, "pass"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := &fakeNode{name: "node-2", routes: c.routes}
			if got := match(t, c.m, n); got != c.want {
				t.Errorf("%s, want %s: %s", got, c.want, c.m.FailureMessage(n))
			}
		})
	}
	t.Run("a read error is an error, never a pass for NotTo", func(t *testing.T) {
		n := &fakeNode{name: "node-2", err: errors.New("netns gone")}
		m := HaveClusterRoute(block).ProgrammedBy(ByProgrammer).Only()
		if got := match(t, m, n); got != "error" {
			t.Errorf("%s, want error", got)
		}
		g := gomega.NewGomega(func(msg string, _ ...int) {})
		if g.Expect(n).NotTo(HaveClusterRoute(block)) {
			t.Error("NotTo(HaveClusterRoute) passed on a node whose routes could not be read")
		}
		if !strings.Contains(m.FailureMessage(n), "netns gone") {
			t.Errorf("the message hides the error: %s", m.FailureMessage(n))
		}
	})
	t.Run("not a node", func(t *testing.T) {
		if got := match(t, HaveClusterRoute(block), "node-2"); got != "error" {
			t.Errorf("%s, want error", got)
		}
	})
	t.Run("the exclusive message names the extra route", func(t *testing.T) {
		n := &fakeNode{name: "node-2", routes: []kroute.Route{progRoute("tunl0"), birdRoute("tunl0", 32)}}
		m := HaveClusterRoute(block).ProgrammedBy(ByProgrammer).Only()
		m.Match(n)
		msg := m.FailureMessage(n)
		if !strings.Contains(msg, "exactly one route") || !strings.Contains(msg, "proto bird") {
			t.Errorf("message: %s", msg)
		}
	})
}

func TestBeExportedTo(t *testing.T) {
	peers := []confd.Peer{{Protocol: "mesh_node_2", Address: peerIP}}
	other := netip.MustParsePrefix("10.244.3.0/26")
	for _, c := range []struct {
		name string
		node *fakeNode
		want string
	}{
		{"exported", &fakeNode{peers: peers, exports: []netip.Prefix{other, block}}, "pass"},
		{"not exported", &fakeNode{peers: peers, exports: []netip.Prefix{other}}, "fail"},
		{"nothing exported", &fakeNode{peers: peers}, "fail"},
		{"birdc fails: an error, not 'not exported'", &fakeNode{peers: peers, err: errors.New("connect: no such file")}, "error"},
		{"no session to the peer", &fakeNode{exports: []netip.Prefix{block}}, "error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.node.name = "node-1"
			m := BeExportedTo(block, peerIP)
			if got := match(t, m, c.node); got != c.want {
				t.Errorf("%s, want %s: %s", got, c.want, m.FailureMessage(c.node))
			}
		})
	}
	t.Run("NotTo fails when birdc fails", func(t *testing.T) {
		n := &fakeNode{name: "node-1", peers: peers, err: errors.New("BIRD is down")}
		var failure string
		g := gomega.NewGomega(func(msg string, _ ...int) { failure = msg })
		if g.Expect(n).NotTo(BeExportedTo(block, peerIP)) {
			t.Error("NotTo(BeExportedTo) passed with BIRD unreachable")
		}
		if !strings.Contains(failure, "BIRD is down") {
			t.Errorf("the failure hides birdc's error: %q", failure)
		}
	})
}

func flow(name string, sent, received, first, highest, missing uint64) probe.GapReport {
	return probe.GapReport{Flow: name, Sent: sent, Received: received, Lost: int64(sent) - int64(received),
		FirstSeq: first, HighestSeq: highest, Missing: missing}
}

func TestHaveNoGap(t *testing.T) {
	snap := &probe.Report{Flows: []probe.GapReport{flow("a->b", 900, 890, 1, 890, 0)}}
	withErr := flow("a->b", 1000, 1000, 1, 1000, 0)
	withErr.SendErrors = map[string]uint64{"EHOSTUNREACH": 3}
	withEAGAIN := flow("a->b", 1000, 1000, 1, 1000, 0)
	withEAGAIN.SendErrors = map[string]uint64{"EAGAIN": 3}
	for _, c := range []struct {
		name string
		m    *GapMatcher
		in   any
		want string
	}{
		{"everything arrived", HaveNoGap(), flow("a->b", 1000, 1000, 1, 1000, 0), "pass"},
		{"a tail in flight is not a gap (Lost > 0)", HaveNoGap(), flow("a->b", 1000, 990, 1, 990, 0), "pass"},
		{"holes in the sequence", HaveNoGap(), flow("a->b", 1000, 995, 1, 1000, 5), "fail"},
		{"the first probes never arrived", HaveNoGap(), flow("a->b", 1000, 900, 101, 1000, 0), "fail"},
		{"nothing arrived", HaveNoGap(), flow("a->b", 1000, 0, 0, 0, 0), "fail"},
		{"refused sends (the network answered with an error)", HaveNoGap(), withErr, "fail"},
		{"EAGAIN is the sender's, not a gap", HaveNoGap(), withEAGAIN, "pass"},
		{"Through: every probe sent by the snapshot arrived", HaveNoGap().Through(snap), flow("a->b", 1000, 950, 1, 950, 0), "pass"},
		{"Through: the tail after the last arrival began before the snapshot", HaveNoGap().Through(snap), flow("a->b", 1000, 800, 1, 800, 0), "fail"},
		{"Through: a flow the snapshot lacks", HaveNoGap().Through(snap), flow("c->d", 1000, 1000, 1, 1000, 0), "error"},
		{"sent nothing: nothing to judge", HaveNoGap(), flow("a->b", 0, 0, 0, 0, 0), "error"},
		{"a whole report, every flow clean", HaveNoGap(), &probe.Report{Flows: []probe.GapReport{flow("a->b", 10, 10, 1, 10, 0), flow("b->a", 10, 10, 1, 10, 0)}}, "pass"},
		{"a whole report, one flow with a hole", HaveNoGap(), &probe.Report{Flows: []probe.GapReport{flow("a->b", 10, 10, 1, 10, 0), flow("b->a", 10, 9, 1, 10, 1)}}, "fail"},
		{"a report without flows", HaveNoGap(), &probe.Report{}, "error"},
		{"a pointer to a flow", HaveNoGap(), ptr(flow("a->b", 10, 10, 1, 10, 0)), "pass"},
		{"not a probe report", HaveNoGap(), 42, "error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := match(t, c.m, c.in); got != c.want {
				t.Errorf("%s, want %s: %s", got, c.want, c.m.FailureMessage(c.in))
			}
		})
	}
	t.Run("the message says what the hole is", func(t *testing.T) {
		msg := HaveNoGap().FailureMessage(flow("a->b", 1000, 995, 1, 1000, 5))
		if !strings.Contains(msg, "5 probes missing") {
			t.Errorf("message: %s", msg)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// fakeBlocks is a cluster as HaveRemoteBlockRoutes reads it: each node's
// routes, and the blocks of the others it must have routes to.
type fakeBlocks struct {
	names  []string
	routes map[string][]kroute.Route
	blocks map[string][]netip.Prefix
	err    error
}

func (f fakeBlocks) NodeNames() []string { return f.names }
func (f fakeBlocks) NodeRoutes(n string) ([]kroute.Route, error) {
	return f.routes[n], f.err
}
func (f fakeBlocks) RemoteBlocks(n string) []netip.Prefix { return f.blocks[n] }

// Every (node, remote block) pair is judged: a pass where each node has
// the route (the positive control), a fail where one node lacks it, an
// error where a node's routes cannot be read.
func TestHaveRemoteBlockRoutes(t *testing.T) {
	otherBlock := netip.MustParsePrefix("10.244.1.0/26")
	toOther := kroute.Route{Dst: otherBlock, Type: kroute.Unicast, Protocol: birdProto, NextHops: dev("tunl0")}
	both := fakeBlocks{
		names:  []string{"node-1", "node-2"},
		routes: map[string][]kroute.Route{"node-1": {birdRoute("tunl0", 32)}, "node-2": {toOther}},
		blocks: map[string][]netip.Prefix{"node-1": {block}, "node-2": {otherBlock}},
	}
	m := HaveRemoteBlockRoutes().ProgrammedBy(ByBIRD).Via("tunl0").Only()
	if got := match(t, m, both); got != "pass" {
		t.Errorf("every node has BIRD's route to the other's block: %s, want pass: %s", got, m.FailureMessage(both))
	}
	missing := both
	missing.routes = map[string][]kroute.Route{"node-1": {birdRoute("tunl0", 32)}}
	if got := match(t, m, missing); got != "fail" {
		t.Errorf("node-2 has no route to node-1's block: %s, want fail", got)
	} else if msg := m.FailureMessage(missing); !strings.Contains(msg, "node node-2") || !strings.Contains(msg, "1 of 2") {
		t.Errorf("failure message should name node-2 and count 1 of 2 pairs: %s", msg)
	}
	unread := both
	unread.err = errors.New("netns gone")
	if got := match(t, m, unread); got != "error" {
		t.Errorf("routes unreadable: %s, want error", got)
	}
}

// Its refusal to pass on nothing and on a non-cluster.
func TestHaveRemoteBlockRoutesRefusesNothing(t *testing.T) {
	if ok, err := HaveRemoteBlockRoutes().Match(fakeBlocks{}); ok || err == nil {
		t.Errorf("a cluster with no nodes: ok=%v err=%v, want an error", ok, err)
	}
	if ok, err := HaveRemoteBlockRoutes().Match("cluster"); ok || err == nil {
		t.Errorf("not a cluster: ok=%v err=%v, want an error", ok, err)
	}
}
