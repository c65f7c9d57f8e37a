package scenarios_test

// Claim (design, opening and §1): a cluster route is usually to a remote
// node's IPAM block, but when a workload's address is borrowed from another
// node's block it is to that one /32 (/128). Ownership is per pool class,
// not per route shape, so the borrowed /32 has the owner its pool's class
// has, exactly as the block it sits in: with the 3.33 defaults on a no-encap
// pool BIRD programs it (learned over BGP from the node that hosts the
// workload), and with FelixConfiguration Enabled / BGPConfiguration
// Disabled the programmer does (from the datastore), BIRD not at all. In
// both, the route leads to the node hosting the workload, not to the node
// whose block the address came from.
//
// Scenario, natively on no-encap at 3.33: node-3's first workload is given
// a second address, borrowed from node-2's block (an address no workload
// holds). Entries: the defaults (unset, unset) and Enabled/Disabled, set
// when the cluster starts.
//
// Guards: the address is inside node-2's block and outside node-3's, so
// without a /32 route node-1 would send it to node-2 (whose block route
// node-1 has); before the workload document changes no node has a route to
// the /32 (the route that appears is the borrowed address's); node-3's own
// route to it is the programmer's local workload route via the workload's
// interface; node-3's BIRD exports the /32 to its peers and node-1's and
// node-2's BIRDs learn it over BGP (so "BIRD does not program it" is a
// decision of the kernel filter, not an advertisement that never came).
// The claim, on node-1 and node-2: the only route to the /32 is the
// expected owner's, via node-3; and BIRD's kernel export of the /32 matches
// its ownership (exported with the defaults, not with BGP Disabled). The
// two entries are each other's control.
//
// Fails when: the programmer stops computing borrowed /32 routes, or sends
// them to the block's node (the Enabled/Disabled entry); BIRD programs a
// /32 in a class it does not own, or stops programming one it does (either
// entry's owner); node-3's BIRD stops advertising its borrowed workload
// address (the learned-over-BGP guard).

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

var _ = Describe("Borrowed /32 workload routes", Label("noencap", "borrowed"), func() {
	DescribeTable("a workload address borrowed from another node's block gets a /32 cluster route from its pool's owner, to the node hosting it",
		func(ctx SpecContext, felix, bgp string, owner judge.Owner) {
			c := scenariotest.StartCluster(ctx, "noencap", harness.Options{Release: config.R333, RouteRefreshInterval: time.Second,
				Felix: datastore.FelixConfiguration{ProgramClusterRoutes: felix}, BGP: datastore.BGPConfiguration{ProgramClusterRoutes: bgp},
				Timers: confd.Timers{ScanTime: 1}})
			n1, n2, n3 := c.Node("node-1"), c.Node("node-2"), c.Node("node-3")
			nd2, _ := c.Net.Node("node-2")
			nd3, _ := c.Net.Node("node-3")
			lender := blockOf(nd2, "noencap-pool")
			own3 := blockOf(nd3, "noencap-pool")

			// 1. An address of node-2's block no workload holds: its last
			// host address.
			cl, err := c.Datastore().Read(ctx)
			Expect(err).NotTo(HaveOccurred())
			held := map[netip.Addr]bool{}
			for _, w := range cl.Workloads {
				for _, a := range w.Addresses {
					if p, err := netip.ParsePrefix(a); err == nil {
						held[p.Addr()] = true
					}
				}
			}
			last := lender.Addr()
			for a := lender.Addr(); lender.Contains(a); a = a.Next() {
				last = a
			}
			addr := last.Prev()
			borrowed := netip.PrefixFrom(addr, 32)
			Expect(lender.Contains(addr) && !own3.Contains(addr) && !held[addr]).To(BeTrue(),
				"guard: %s is in node-2's block %s, outside node-3's %s, held by no workload", addr, lender, own3)
			Eventually(n1).WithPolling(100*time.Millisecond).
				Should(judge.HaveClusterRoute(lender).Gateway(nd2.Address.Addr()), "guard: node-1's route to node-2's block %s leads to node-2", lender)
			Expect(c.Net.NodeOfBlock(lender)).To(Equal(nd2), "guard: %s is node-2's block", lender)
			for _, n := range c.Nodes() {
				Expect(routesExactly(n, borrowed)).To(BeEmpty(), "guard: before the workload borrows it, %s has no route to %s", n.Name, borrowed)
			}

			// 2. node-3's first workload takes the borrowed address too.
			var w datastore.Workload
			for _, x := range cl.Workloads {
				if x.Node == "node-3" {
					w = x
					break
				}
			}
			Expect(w.Name).NotTo(BeEmpty(), "guard: node-3 has a workload")
			w.Addresses = append(slices.Clone(w.Addresses), borrowed.String())
			scenariotest.Act(c.Datastore().PutWorkload(ctx, w))

			// 3. Guards on node-3: the programmer's local route via the
			// workload's interface, and BIRD advertises it to its peers;
			// the others' BIRDs learn it over BGP.
			Eventually(func() ([]kroute.Route, error) { return routesExactly(n3, borrowed) }).WithPolling(100*time.Millisecond).
				Should(ContainElement(SatisfyAll(HaveField("Protocol", designProgrammerProtocol), WithTransform(kroute.Route.Devices, ConsistOf(w.Interface)))),
					"guard: node-3's route to its workload's borrowed %s is the programmer's, via %s", borrowed, w.Interface)
			for _, n := range []*harness.Node{n1, n2} {
				nd, _ := c.Net.Node(n.Name)
				Eventually(n3).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(30*time.Second)).WithPolling(100*time.Millisecond).
					Should(judge.BeExportedTo(borrowed, nd.Address.Addr()), "guard: node-3's BIRD advertises %s to %s", borrowed, n.Name)
				Eventually(func() bool { return learnedOverBGP(ctx, n, borrowed) }).WithPolling(100*time.Millisecond).
					Should(BeTrue(), "guard: %s's BIRD learns %s over BGP", n.Name, borrowed)
			}

			// 4. The claim on node-1 and node-2: one route to the /32, the
			// owner's, to node-3; BIRD exports it to its kernel exactly when
			// it owns the class.
			var table strings.Builder
			for _, n := range []*harness.Node{n1, n2} {
				Eventually(n).WithPolling(100*time.Millisecond).
					Should(judge.HaveClusterRoute(borrowed).ProgrammedBy(owner).WithProgrammerProtocol(designProgrammerProtocol).Gateway(nd3.Address.Addr()).Only(),
						"%s's route to the borrowed %s should be %s's, to node-3", n.Name, borrowed, owner)
				Expect(exportedToKernel(ctx, n, borrowed)).To(Equal(owner == judge.ByBIRD),
					"%s's BIRD exports %s to its kernel: want %v (BIRD owns no-encap: %v)", n.Name, borrowed, owner == judge.ByBIRD, owner == judge.ByBIRD)
				rs, err := routesExactly(n, borrowed)
				Expect(err).NotTo(HaveOccurred())
				fmt.Fprintf(&table, "%s: %v (BIRD exports to kernel: %v)\n", n.Name, rs, exportedToKernel(ctx, n, borrowed))
			}
			// It holds across two resyncs (neither side takes it later).
			waitFullResyncs(n1, 2)
			for _, n := range []*harness.Node{n1, n2} {
				Expect(n).To(judge.HaveClusterRoute(borrowed).ProgrammedBy(owner).WithProgrammerProtocol(designProgrammerProtocol).Gateway(nd3.Address.Addr()).Only(),
					"after two resyncs %s's route to %s is still %s's alone", n.Name, borrowed, owner)
			}
			res := c.Result(fmt.Sprintf("borrowed /32 route (Felix=%s, BGP=%s)", rawName(felix), rawName(bgp)), nil)
			res.Figure("nodesRoutingTheBorrowedAddress", 2, results.KindSize)
			scenariotest.Record(fmt.Sprintf("borrowed %s (node-2's block, on node-3), Felix=%s BGP=%s: owner %s", borrowed, rawName(felix), rawName(bgp), owner), table.String(), res)
		},
		Entry("3.33 defaults: BIRD owns no-encap, so BIRD programs the /32", "", "", judge.ByBIRD),
		Entry("Felix Enabled, BGP Disabled: the programmer programs the /32", "Enabled", "Disabled", judge.ByProgrammer),
	)
})
