package scenarios_test

// Question (design §2–§3 on krt_tunnel and retiring the BIRD fork; the
// seeds' bird-ipip-ecmp-issue.txt; platform notes "Tunnel routes without the
// fork" and "ECMP"): does an IPIP cluster route compose with ECMP?
//
// Calico's BIRD 1.6 fork sets the tunnel only on single-path routes, so a
// block learnt over two equal paths is programmed as a plain multipath route
// that does not go through tunl0 at all (the issue). With upstream BIRD 2
// the fork's krt_tunnel is replaced by `onlink = true; ifname = "tunl0";
// gw = bgp_next_hop;` in the kernel export filter; the platform notes saw
// that filter run per path before `merge paths on` merges them, so both
// nexthops become `dev tunl0 onlink`. The route programmer, for its part,
// programs one path to the remote node's own address: `via <node> dev tunl0
// onlink`, whatever the fabric offers.
//
// This family is a measurement on the dual-ToR fabric with an IPIP pool
// added. It asserts what the design and the platform notes claim — the
// owner programs every remote IPIP block via tunl0, and the programmer's
// route has its documented shape — and reports the rest: the shape of
// BIRD's route (paths, gateways, onlink), and whether probes between IPIP
// workloads get across, with per-hop counts of where they went.
//
// Workload addressing: topo gives a node's workloads addresses from its
// first IPv4 block, and blocks follow the order of the pools. The IPIP pool
// is therefore put first, so the workloads (and the probes) are IPIP ones;
// with it appended they would stay in the no-encap pool.

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
	"github.com/birdcage/birdcage/topo"
)

var ipipECMPPool = topo.Pool{Name: "ipip-pool", CIDR: "10.247.0.0/16", IPIPMode: "Always"}

var _ = Describe("IPIP with ECMP on the dual-ToR fabric", Label("dualtor", "ipip", "ecmp"), func() {
	DescribeTable("the tunnel route to every remote IPIP block, its shape, and whether probes cross it",
		func(ctx SpecContext, own ownership) {
			By("1. the dual-ToR fabric with an IPIP pool first, owned as the entry says")
			e := startIPIPECMP(ctx, own)
			By("2. guards: probes between IPIP workloads, two ToR sessions per node, a remote IPIP block per other node")
			e.guard()
			By("3. the claims: the owner programs every remote IPIP block via tunl0; the programmer's is one onlink path to the node")
			e.expectTunnelRoutes()
			By("4. the shape, from the route timeline: paths, gateways, onlink")
			shapes := e.shapes()
			By("5. probes between every pair of IPIP workloads (not flowing is a possible answer)")
			rep := e.probe(ctx)
			By("6. figures and the report")
			e.recordFigures(ctx, shapes, rep)
		},
		Entry("BIRD owns IPIP (FelixConfiguration Disabled, BGPConfiguration Enabled): upstream BIRD 2's onlink/ifname/gw filter", ipipByBIRD),
		Entry("the programmer owns IPIP (3.33 defaults)", ipipByProgrammer),
	)
})

// ipipRoute is n's route to b with protocol proto (zero when none).
func ipipRoute(n *harness.Node, b netip.Prefix, proto kroute.Protocol) kroute.Route {
	rs, _ := n.Routes(b)
	for _, r := range rs {
		if r.Dst == b && r.Protocol == proto {
			return r
		}
	}
	return kroute.Route{}
}

// timelineRoute is the route to b with protocol proto that node's route
// timeline holds now.
func timelineRoute(c *harness.Cluster, node string, b netip.Prefix, proto kroute.Protocol) (kroute.Route, bool) {
	for _, r := range c.Timeline(node).Routes() {
		if r.Table == kroute.MainTable && r.Dst == b && r.Protocol == proto {
			return r, true
		}
	}
	return kroute.Route{}, false
}

// nodeAddrOfBlock is the address of the node a block is affine to.
func nodeAddrOfBlock(c *harness.Cluster, b netip.Prefix) netip.Addr {
	if nd := c.Net.NodeOfBlock(b); nd != nil {
		return nd.Address.Addr()
	}
	return netip.Addr{}
}

func isNodeAddr(c *harness.Cluster, a netip.Addr) bool { return c.Net.NodeByAddress(a) != nil }

// torAddrs are the ToRs' addresses on the nodes' switches.
func torAddrs(c *harness.Cluster) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for _, a := range c.Net.Topology.RouterSwitchAddrs() {
		out[a] = true
	}
	return out
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// torRoutesToNodeAddrs counts the (ToR, node address) pairs for which the
// ToR's kernel has a route: the fabric must carry the outer packet of a
// tunnel that ends at a node's own address. A kernel fact, read directly.
func torRoutesToNodeAddrs(c *harness.Cluster) (routable, pairs int) {
	for _, r := range c.Fabric().Routers() {
		h, err := r.NS.Handle()
		if err != nil {
			continue
		}
		for _, nd := range c.Net.Nodes {
			pairs++
			if rs, err := h.RouteGet(nd.Address.Addr().AsSlice()); err == nil && len(rs) > 0 {
				routable++
			}
		}
		h.Close()
	}
	return routable, pairs
}

// birdRefusedIPIP counts, over every node, the IPIP-pool routes BIRD's
// kernel protocol marks `!` (the kernel refused them).
func birdRefusedIPIP(ctx SpecContext, c *harness.Cluster, pool netip.Prefix) int {
	n := 0
	for _, nd := range c.Nodes() {
		rs, err := nd.BIRD.Client().Routes(ctx, "export kernel4")
		if err != nil {
			continue
		}
		for _, r := range rs {
			if r.Refused && pool.Contains(r.Prefix.Addr()) {
				n++
			}
		}
	}
	return n
}

// shapeTable lists every node's route to every remote IPIP block.
func shapeTable(shapes map[string]kroute.Route) string {
	keys := make([]string, 0, len(shapes))
	for k := range shapes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t := results.NewTable("node", "route to the remote IPIP block")
	for _, k := range keys {
		node, _, _ := strings.Cut(k, " ")
		t.Add(node, shapes[k])
	}
	return t.String()
}

// ipipHopTable shows, per flow, its packets at the source's tunl0 and
// uplinks (egress, inner packets counted) and the destination's tunl0
// (ingress).
func ipipHopTable(c *harness.Cluster, rep *report.Report) string {
	return c.Fabric().HopTable(rep, []judge.HopColumn{
		{Title: "src tunl0 out", Interface: "tunl0", Direction: "egress"},
		{Title: "src eth0 out", Interface: "eth0", Direction: "egress"},
		{Title: "src eth1 out", Interface: "eth1", Direction: "egress"},
		{Title: "dst eth0 in", Dst: true, Interface: "eth0", Direction: "ingress"},
		{Title: "dst eth1 in", Dst: true, Interface: "eth1", Direction: "ingress"},
		{Title: "dst tunl0 in", Dst: true, Interface: "tunl0", Direction: "ingress"},
	})
}

// ipipECMPNotes says what the figures mean for a person reading the report.
func ipipECMPNotes(viaToR, viaNode, delivering, flows int) []string {
	var out []string
	if viaToR > 0 {
		out = append(out, fmt.Sprintf("%d tunnel nexthops point at a ToR address: the ToRs advertise with next hop self, so bgp_next_hop (the filter's gw) is the ToR, and the tunnel would end at a router that does not decapsulate", viaToR))
	}
	if viaNode > 0 {
		out = append(out, fmt.Sprintf("%d tunnel nexthops point at a node's own address (its loopback on dual-ToR): the outer packet needs the fabric to route node loopbacks", viaNode))
	}
	out = append(out, fmt.Sprintf("%d of %d flows delivered probes", delivering, flows))
	return out
}

// ipipECMP is one entry of the IPIP-with-ECMP measurement.
type ipipECMP struct {
	c          *harness.Cluster
	own        ownership
	pool       netip.Prefix
	proto      kroute.Protocol
	ipipBlocks map[string][]netip.Prefix // each node's remote IPIP blocks
	rate       int
}

// startIPIPECMP is step 1: the dual-ToR fabric with an IPIP pool first
// (see the top comment), owned as the entry says.
func startIPIPECMP(ctx SpecContext, own ownership) *ipipECMP {
	GinkgoHelper()
	t, err := topo.Builtin("dualtor")
	Expect(err).NotTo(HaveOccurred())
	t.Pools = append([]topo.Pool{ipipECMPPool}, t.Pools...)
	e := &ipipECMP{own: own, pool: netip.MustParsePrefix(ipipECMPPool.CIDR), proto: designProgrammerProtocol}
	e.c = scenariotest.StartClusterOn(ctx, t, harness.Options{
		Felix: datastore.FelixConfiguration{ProgramClusterRoutes: string(own.felix)},
		BGP:   datastore.BGPConfiguration{ProgramClusterRoutes: string(own.bgp)},
	})
	if own.owner == judge.ByBIRD {
		e.proto = kroute.ProtoBIRD
	}
	return e
}

// guard is step 2.
func (e *ipipECMP) guard() {
	GinkgoHelper()
	c, pool := e.c, e.pool
	for _, wl := range c.Net.Workloads() {
		Expect(pool.Contains(wl.IPv4)).To(BeTrue(), "guard: workload %s (%s) is in the IPIP pool %s", wl.Name, wl.IPv4, pool)
	}
	e.ipipBlocks = map[string][]netip.Prefix{}
	for _, n := range c.Nodes() {
		Expect(n.Peers()).To(HaveLen(2), "guard: %s peers with one ToR per plane", n.Name)
		for _, b := range c.RemoteBlocks(n.Name) {
			if pool.Contains(b.Addr()) {
				e.ipipBlocks[n.Name] = append(e.ipipBlocks[n.Name], b)
			}
		}
		Expect(e.ipipBlocks[n.Name]).To(HaveLen(len(c.Nodes())-1), "guard: %s has a remote IPIP block per other node", n.Name)
	}
}

// expectTunnelRoutes is step 3: the owner programs every remote IPIP block,
// every path via tunl0 (the platform notes: BIRD 2's filter runs per path,
// so each merged nexthop is dev tunl0), and the programmer's is one path to
// the node's own address, onlink.
func (e *ipipECMP) expectTunnelRoutes() {
	GinkgoHelper()
	c, own, proto := e.c, e.own, e.proto
	for _, n := range c.Nodes() {
		for _, b := range e.ipipBlocks[n.Name] {
			Eventually(n).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(100*time.Millisecond).
				Should(judge.HaveClusterRoute(b).ProgrammedBy(own.owner).Via(topo.TunnelDevice).Only(), "%s programs IPIP block %s on %s", own.owner, b, n.Name)
		}
	}
	// ...and the programmer's is one path to the node's own address,
	// onlink.
	if own.owner == judge.ByProgrammer {
		for _, n := range c.Nodes() {
			for _, b := range e.ipipBlocks[n.Name] {
				r := ipipRoute(n, b, proto)
				want := []kroute.NextHop{{Gateway: nodeAddrOfBlock(c, b), Device: topo.TunnelDevice, Onlink: true}}
				Expect(r).To(SatisfyAll(HaveField("Dst", b), HaveField("Protocol", proto), HaveField("Type", kroute.Unicast), HaveField("NextHops", Equal(want))),
					"%s: the programmer's route to %s is `via <node> dev tunl0 onlink`: expected %v, seen %s", n.Name, b, want, r)
			}
		}
	}
}

// shapes is step 4: each route's shape from the route timeline (it keeps
// each nexthop's flags).
func (e *ipipECMP) shapes() map[string]kroute.Route {
	GinkgoHelper()
	c, proto := e.c, e.proto
	shapes := map[string]kroute.Route{}
	for _, n := range c.Nodes() {
		for _, b := range e.ipipBlocks[n.Name] {
			var r kroute.Route
			Eventually(func() bool {
				var ok bool
				r, ok = timelineRoute(c, n.Name, b, proto)
				return ok
			}).WithTimeout(scenariotest.Machine.Wait(10*time.Second)).WithPolling(50*time.Millisecond).Should(BeTrue(), "the route timeline of %s shows the route to %s", n.Name, b)
			shapes[n.Name+" "+b.String()] = r
		}
	}
	return shapes
}

// probe is step 5: probes between every pair of IPIP workloads, with
// counters at every uplink and tunl0.
func (e *ipipECMP) probe(ctx SpecContext) *report.Report {
	GinkgoHelper()
	c := e.c
	rate := c.Machine.Rate()
	e.rate = rate
	s, err := c.Probes(ctx, harness.ProbeOptions{Rate: rate, MayNotFlow: true})
	Expect(err).NotTo(HaveOccurred())
	// The window: until every flow has delivered ten probes, or has
	// sent three seconds' worth without that.
	Eventually(func() error {
		rep, err := s.Report()
		if err != nil {
			return err
		}
		for _, g := range rep.Flows {
			if g.Received < 10 && g.Sent < uint64(3*rate) {
				return fmt.Errorf("flow %s: sent %d, received %d", g.Flow, g.Sent, g.Received)
			}
		}
		return nil
	}).WithTimeout(scenariotest.Machine.Wait(120 * time.Second)).WithPolling(100 * time.Millisecond).Should(Succeed())
	rep, err := s.Stop()
	Expect(err).NotTo(HaveOccurred())
	return rep
}

// recordFigures is step 6.
func (e *ipipECMP) recordFigures(ctx SpecContext, shapes map[string]kroute.Route, rep *report.Report) {
	GinkgoHelper()
	c, own, pool, rate := e.c, e.own, e.pool, e.rate
	res := c.Result("IPIP with ECMP on dual-ToR: "+own.owner.String(), rep)
	var multipath, singlePath, onlinkPaths, paths, viaToR, viaNode int
	tors := torAddrs(c)
	for _, r := range shapes {
		if len(r.NextHops) > 1 {
			multipath++
		} else {
			singlePath++
		}
		for _, nh := range r.NextHops {
			paths++
			if nh.Onlink {
				onlinkPaths++
			}
			if tors[nh.Gateway] {
				viaToR++
			} else if isNodeAddr(c, nh.Gateway) {
				viaNode++
			}
		}
	}
	delivering := 0
	for _, g := range rep.Flows {
		if g.Received > 0 {
			delivering++
		}
	}
	res.Figure("remoteIPIPBlockRoutes", float64(len(shapes)), results.KindSize)
	res.Figure("multipathRoutes", float64(multipath), results.KindSize)
	res.Figure("singlePathRoutes", float64(singlePath), results.KindSize)
	res.Figure("nexthops", float64(paths), results.KindSize)
	res.Figure("nexthopsOnlink", float64(onlinkPaths), results.KindSize)
	res.Figure("nexthopsViaToRAddress", float64(viaToR), results.KindSize)
	res.Figure("nexthopsViaNodeAddress", float64(viaNode), results.KindSize)
	res.Figure("flows", float64(len(rep.Flows)), results.KindSize)
	res.Figure("flowsDelivering", float64(delivering), results.KindSize)
	res.Figure("lostProbes", float64(rep.Total.Lost), results.KindLoss)
	res.Figure("probeRate", float64(rate), results.KindSize)
	routable, pairs := torRoutesToNodeAddrs(c)
	res.Figure("torRoutesToNodeAddresses", float64(routable), results.KindSize)
	res.Figure("torNodeAddressPairs", float64(pairs), results.KindSize)
	if own.owner == judge.ByBIRD {
		refused := birdRefusedIPIP(ctx, c, pool)
		res.Figure("kernelRefusedBIRDRoutes", float64(refused), results.KindCount)
		res.DependsOnUpstreamBIRD(upstreamTunnelPerPath)
	}
	res.Notes = append(res.Notes, ipipECMPNotes(viaToR, viaNode, delivering, len(rep.Flows))...)
	res.Notes = append(res.Notes, fmt.Sprintf("the ToRs have a route to %d of %d (ToR, node address) pairs", routable, pairs))
	scenariotest.Record(fmt.Sprintf("IPIP with ECMP on dual-ToR, %s: %d of %d routes multipath, %d of %d nexthops onlink; %d of %d flows delivering",
		own.owner, multipath, len(shapes), onlinkPaths, paths, delivering, len(rep.Flows)),
		shapeTable(shapes)+"\n"+results.GapTable(rep)+"\n"+ipipHopTable(c, rep)+
			fmt.Sprintf("\nToR routes to node addresses (tunnel endpoints): %d of %d (ToR, node) pairs\n", routable, pairs), res)
}
