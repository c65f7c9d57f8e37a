package scenarios_test

// Claim (design §1, "The two configuration fields" and "Who sets the
// fields"; the §1 review notes): a cluster in which nothing writes
// programClusterRoutes gets the release defaults — from 3.33 Felix
// EnabledIPIPOnly and BIRD EnabledNoEncapOnly, before 3.33 Felix Disabled
// and BIRD Enabled — and a value a component does not recognise acts as
// that same default on both sides.
//
// The defaults are the design's, literal (designDefaults in matrix_test.go),
// never read from internal/calico/config. A cluster is started with both fields
// unset (or both set to a value nobody knows) on each release, and judged:
// every remote block's one route is the owner's that the literal default
// gives its class, BIRD exports to its kernel protocol exactly the blocks
// of the classes it owns, and every programmer reports the literal value as
// the one it runs with. Guards: the datastore really holds the fields unset
// (or unknown), and the topology has remote blocks of the judged class.
// No-encap entries run natively; the IPIP entries (where the releases
// differ in owner) need tunl0 and run under ci/vm/run.

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
	"github.com/birdcage/birdcage/topo"
)

var _ = Describe("Release defaults with programClusterRoutes unset or unknown", Label("defaults", "claim12"), func() {
	DescribeTable("a cluster whose fields are unset or unknown gets the design's default owner for every class",
		func(ctx SpecContext, topology string, rel config.Release, raw string) {
			c := scenariotest.StartCluster(ctx, topology, harness.Options{
				Release: rel,
				Felix:   datastore.FelixConfiguration{ProgramClusterRoutes: raw},
				BGP:     datastore.BGPConfiguration{ProgramClusterRoutes: raw},
			})
			// Guard: the datastore holds the fields as the entry says.
			cl, err := c.Datastore().Read(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(cl.Felix.ProgramClusterRoutes).To(Equal(raw), "guard: FelixConfiguration.programClusterRoutes is %s", rawName(raw))
			Expect(cl.BGP.ProgramClusterRoutes).To(Equal(raw), "guard: BGPConfiguration.programClusterRoutes is %s", rawName(raw))

			def := designDefaults[rel]
			exp := expectedOwners(raw, raw, rel)
			// The design's default pair is one of its supported pairs: one
			// owner per class, never both or none.
			Expect(designSupportedPairs).To(HaveKey([2]string{def.felix, def.bgp}))

			// Every programmer runs with the literal Felix default.
			for _, n := range c.Nodes() {
				Eventually(func() string {
					st, err := n.Programmer.Status()
					if err != nil {
						return err.Error()
					}
					return st.ProgramClusterRoutes
				}).WithPolling(50*time.Millisecond).Should(Equal(def.felix),
					"%s's programmer on %s with the field %s should run with the design's default %s", n.Name, rel, rawName(raw), def.felix)
			}

			// Every remote block: exactly one route, the owner's by the
			// design's default; BIRD exports it to its kernel protocol
			// exactly when BIRD owns the class.
			classes := map[poolClass]int{}
			for _, n := range c.Nodes() {
				for _, nd := range c.Net.Nodes {
					if nd.Name == n.Name {
						continue
					}
					for _, b := range nd.Blocks {
						cls := classOf(b.Pool)
						classes[cls]++
						owner := judge.ByProgrammer
						if exp[cls] == judge.ByBIRD {
							owner = judge.ByBIRD
						}
						Expect(exp[cls]).To(BeElementOf(judge.ByProgrammer, judge.ByBIRD), "design data: %s's default owns %s", rel, cls)
						m := judge.HaveClusterRoute(b.CIDR).ProgrammedBy(owner).Only()
						if cls == classIPIP {
							m = m.Via(topo.TunnelDevice)
						}
						Eventually(n).WithPolling(50*time.Millisecond).Should(m,
							"%s on %s, field %s: %s's %s block %s belongs to %s alone", n.Name, rel, rawName(raw), nd.Name, cls, b.CIDR, owner)
						// Guard: BIRD has the block over BGP, so "exports
						// nothing to its kernel" is its filter's doing, not
						// a route not yet learned.
						Eventually(func() bool { return learnedOverBGP(ctx, n, b.CIDR) }).WithPolling(100*time.Millisecond).
							Should(BeTrue(), "guard: %s's BIRD learns %s's block %s over BGP", n.Name, nd.Name, b.CIDR)
						Eventually(func() (bool, error) { return birdExportsToKernel(ctx, n, b.CIDR) }).
							WithPolling(100*time.Millisecond).Should(Equal(exp[cls] == judge.ByBIRD),
							"%s on %s: BIRD exports %s (%s) to its kernel protocol exactly when the default gives BIRD that class", n.Name, rel, b.CIDR, cls)
					}
				}
			}
			Expect(classes).NotTo(BeEmpty(), "guard: the topology has remote blocks")

			res := c.Result(fmt.Sprintf("release defaults, %s, fields %s, on %s", rel, rawName(raw), topology), nil)
			for cls, k := range classes {
				res.Figure("remoteBlocks "+string(cls), float64(k), results.KindSize)
			}
			res.Notes = append(res.Notes, fmt.Sprintf("design default for %s: Felix %s, BGP %s; owners %v", rel, def.felix, def.bgp, exp))
			scenariotest.Record(fmt.Sprintf("release defaults on %s, %s, fields %s", topology, rel, rawName(raw)),
				fmt.Sprintf("expected owners %v (Felix %s, BGP %s)\n", exp, def.felix, def.bgp), res)
		},
		Entry("3.33, unset, no-encap", Label("noencap"), "noencap", config.R333, ""),
		Entry("3.33, unknown value, no-encap", Label("noencap"), "noencap", config.R333, unknownValue),
		Entry("pre-3.33, unset, no-encap", Label("noencap"), "noencap", config.Pre333, ""),
		Entry("pre-3.33, unknown value, no-encap", Label("noencap"), "noencap", config.Pre333, unknownValue),
		Entry("3.31, unset, no-encap", Label("noencap"), "noencap", config.R331, ""),
		Entry("3.31, unknown value, no-encap", Label("noencap"), "noencap", config.R331, unknownValue),
		Entry("3.33, unset, IPIP", Label("ipip"), "ipip", config.R333, ""),
		Entry("3.33, unknown value, IPIP", Label("ipip"), "ipip", config.R333, unknownValue),
		Entry("pre-3.33, unset, IPIP", Label("ipip"), "ipip", config.Pre333, ""),
		Entry("pre-3.33, unknown value, IPIP", Label("ipip"), "ipip", config.Pre333, unknownValue),
		Entry("3.31, unset, IPIP", Label("ipip"), "ipip", config.R331, ""),
		Entry("3.31, unknown value, IPIP", Label("ipip"), "ipip", config.R331, unknownValue),
	)
})

// birdExportsToKernel reports whether n's BIRD exports exactly p to its
// kernel protocol for p's address family (written or refused); a birdc
// error is an error.
func birdExportsToKernel(ctx context.Context, n *harness.Node, p netip.Prefix) (bool, error) {
	proto := "kernel4"
	if p.Addr().Is6() {
		proto = "kernel6"
	}
	rs, err := n.ExportedRoutes(ctx, proto)
	if err != nil {
		return false, fmt.Errorf("%s: birdc show route export %s: %w", n.Name, proto, err)
	}
	for _, r := range rs {
		if r.Prefix == p {
			return true, nil
		}
	}
	return false, nil
}
