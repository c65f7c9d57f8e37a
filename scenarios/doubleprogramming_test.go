package scenarios_test

// Claim (design §1: any pair other than the four supported ones either
// double-programs a class — both components fight over the same CIDRs — or
// leaves it unprogrammed). Double programming hides in the kernel: when both
// the programmer and BIRD program a class, the kernel keeps one route per
// prefix and refuses the other's add, so the route that survives looks like
// a single owner's. So the judgement here is per component, per address
// family, not by the surviving route:
//   - BIRD tries to program a block when its kernel protocol for the block's
//     family (kernel4 / kernel6) exports it (`birdc show route export`,
//     written or refused);
//   - the programmer tries to program a block when it says so itself: its
//     log since the change records an add, a replace or a refused add for
//     exactly that destination.
//
// On the dual-stack no-encap topology (IPv4 and IPv6 pools), three pairs set
// live: the 3.33 default (BIRD alone tries — control), Enabled/Enabled (both
// try, for every remote IPv4 and IPv6 block: the double programming), and
// Enabled/Disabled (the programmer alone — control). Guards: six remote
// blocks of each family; each component is seen trying in some state, so
// "does not try" is not an unreadable log or a dead birdc.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

// programmerTried lists the destinations n's programmer tried to program
// (added, replaced, or refused and retried) in its log from byte offset
// `from` on, and the log's length.
func programmerTried(n *harness.Node, from int64) (map[netip.Prefix]string, int64, error) {
	b, err := os.ReadFile(n.Programmer.LogPath())
	if err != nil {
		return nil, 0, err
	}
	if int64(len(b)) < from {
		return nil, int64(len(b)), fmt.Errorf("%s's programmer log shrank (%d < %d)", n.Name, len(b), from)
	}
	out := map[netip.Prefix]string{}
	sc := bufio.NewScanner(bytes.NewReader(b[from:]))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			Msg string `json:"msg"`
			Dst string `json:"dst"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Dst == "" {
			continue
		}
		switch l.Msg {
		case "route added", "route replaced", "route not programmed; will retry":
			if p, err := netip.ParsePrefix(l.Dst); err == nil {
				out[p] = l.Msg
			}
		}
	}
	return out, int64(len(b)), sc.Err()
}

// componentView is who tries to program one remote block.
type componentView struct {
	bird, programmer bool
	kernelRoutes     int
	survivor         string
}

var _ = Describe("Double programming judged per component", Label("noencap", "ipv6", "doubleprogramming", "claim11"), func() {
	DescribeTable("sees both components try to program every remote IPv4 and IPv6 block when both own no-encap, and one alone in the controls", func(ctx SpecContext, rel config.Release) {
		By("the dual-stack no-encap cluster; guard: six remote blocks of each family")
		dp := startDoubleProgramming(ctx, rel)
		// 1. Control: the release's default pair, BIRD alone tries (3.33:
		// EnabledIPIPOnly / EnabledNoEncapOnly; 3.32: Disabled / unset,
		// i.e. Enabled); the programmer's whole log so far has no attempt
		// at a remote block.
		By("1. control: the release's default pair, BIRD alone tries")
		def := dp.expectAll(ctx, fmt.Sprintf("%s defaults (%s / %s)", rel, designDefaults[rel].felix, designDefaults[rel].bgp), map[string]int64{}, true, false)
		dp.row("defaults", def)

		// 2. Both own no-encap: both must be seen trying, for every block
		// of both families, whatever route survived.
		By("2. both own no-encap: both seen trying for every block of both families, in their own words and in the netlink trace")
		traces := traceRoutes(dp.c)
		from := dp.offsets()
		setPairLive(ctx, dp.c, "Enabled", "Enabled", true, rel)
		both := dp.expectAll(ctx, "Enabled / Enabled", from, true, true)
		dp.row("Enabled/Enabled", both)
		birdAdds, progAdds := dp.expectBothAddInTrace(ctx, traces)
		// 3. Control: the programmer alone tries; BIRD exports none of the
		// blocks to its kernel protocols. The programmer's effective value
		// does not change, so it does not restart and need not log its
		// standing routes again: its tries are read from the log since
		// step 2, and its route must now be the only one.
		By("3. control: the programmer alone tries, and its route is the only one")
		setPairLive(ctx, dp.c, "Enabled", "Disabled", true, rel)
		prog := dp.expectAll(ctx, "Enabled / Disabled", from, false, true)
		for _, b := range dp.blocks {
			Eventually(b.node).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(30*time.Second)).WithPolling(100*time.Millisecond).
				Should(judge.HaveClusterRoute(b.cidr).ProgrammedBy(judge.ByProgrammer).Only(), "control: the programmer alone programs %s on %s", b.cidr, b.node.Name)
		}
		dp.row("Enabled/Disabled", prog)

		dp.recordFigures(rel, both, birdAdds, progAdds)
	},
		// From 3.32 BIRD writes IPv4 at krt_metric 1024 beside the
		// programmer's 0 (two kernel routes per double-programmed block);
		// IPv6 sits at 1024 on both sides (one route, a refused write).
		Entry("3.32 (two values per resource; BIRD at 1024)", config.R332),
		Entry("3.33 (the four-valued enum)", config.R333),
	)
})

// remoteBlock is a node's remote block, as the double-programming spec
// judges it.
type remoteBlock struct {
	node *harness.Node
	cidr netip.Prefix
}

// doubleProgramming is one run of the double-programming spec.
type doubleProgramming struct {
	c      *harness.Cluster
	blocks []remoteBlock
	v4, v6 int
	table  *results.Table
}

func startDoubleProgramming(ctx SpecContext, rel config.Release) *doubleProgramming {
	GinkgoHelper()
	dp := &doubleProgramming{}
	dp.c = scenariotest.StartClusterOn(ctx, dualStackNoEncap(), harness.Options{
		Release:              rel,
		RouteRefreshInterval: time.Second,
		Timers:               confd.Timers{ScanTime: 1},
	})
	for _, n := range dp.c.Nodes() {
		for _, b := range dp.c.RemoteBlocks(n.Name) {
			dp.blocks = append(dp.blocks, remoteBlock{n, b})
			if b.Addr().Is6() {
				dp.v6++
			} else {
				dp.v4++
			}
		}
	}
	Expect(dp.v4).To(Equal(6), "guard: six remote IPv4 blocks")
	Expect(dp.v6).To(Equal(6), "guard: six remote IPv6 blocks")
	Expect(dp.c.WaitConverged(ctx)).To(Succeed())
	dp.table = results.NewTable("state", "family", "blocks", "BIRD tries", "programmer tries", "kernel routes per block (max)", "survivors")
	return dp
}

// view reads what each component tries for every block, the programmer's
// log from offsets on.
func (dp *doubleProgramming) view(ctx SpecContext, offsets map[string]int64) (map[remoteBlock]componentView, error) {
	tried := map[string]map[netip.Prefix]string{}
	for _, n := range dp.c.Nodes() {
		t, _, err := programmerTried(n, offsets[n.Name])
		if err != nil {
			return nil, err
		}
		tried[n.Name] = t
	}
	out := map[remoteBlock]componentView{}
	for _, b := range dp.blocks {
		exp, err := birdExportsToKernel(ctx, b.node, b.cidr)
		if err != nil {
			return nil, err
		}
		v := componentView{bird: exp}
		_, v.programmer = tried[b.node.Name][b.cidr]
		rs, err := b.node.Routes(b.cidr)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			if r.Dst == b.cidr {
				v.kernelRoutes++
				v.survivor = fmt.Sprintf("proto %d", r.Protocol)
			}
		}
		out[b] = v
	}
	return out, nil
}

// offsets is each node's programmer log length now.
func (dp *doubleProgramming) offsets() map[string]int64 {
	GinkgoHelper()
	out := map[string]int64{}
	for _, n := range dp.c.Nodes() {
		_, size, err := programmerTried(n, 0)
		Expect(err).NotTo(HaveOccurred())
		out[n.Name] = size
	}
	return out
}

// expectAll waits for every remote block to be tried by BIRD and by the
// programmer exactly as said.
func (dp *doubleProgramming) expectAll(ctx SpecContext, state string, from map[string]int64, bird, programmer bool) map[remoteBlock]componentView {
	GinkgoHelper()
	var got map[remoteBlock]componentView
	Eventually(func() error {
		var err error
		got, err = dp.view(ctx, from)
		if err != nil {
			return err
		}
		var wrong []string
		for _, b := range dp.blocks {
			v := got[b]
			if v.bird != bird || v.programmer != programmer {
				wrong = append(wrong, fmt.Sprintf("%s %s: BIRD tries %v, programmer tries %v (kernel routes %d, %s)", b.node.Name, b.cidr, v.bird, v.programmer, v.kernelRoutes, v.survivor))
			}
		}
		if len(wrong) > 0 {
			return fmt.Errorf("%s: want BIRD tries %v and programmer tries %v for every remote block:\n  %s", state, bird, programmer, strings.Join(wrong, "\n  "))
		}
		return nil
	}).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(60 * time.Second)).WithPolling(200 * time.Millisecond).Should(Succeed())
	return got
}

// row adds a state's per-family counts to the table.
func (dp *doubleProgramming) row(state string, got map[remoteBlock]componentView) {
	for _, fam := range []string{"IPv4", "IPv6"} {
		nb, nbird, nprog, maxRoutes := 0, 0, 0, 0
		surv := map[string]int{}
		for b, v := range got {
			if b.cidr.Addr().Is6() != (fam == "IPv6") {
				continue
			}
			nb++
			if v.bird {
				nbird++
			}
			if v.programmer {
				nprog++
			}
			maxRoutes = max(maxRoutes, v.kernelRoutes)
			surv[v.survivor]++
		}
		dp.table.Add(state, fam, nb, nbird, nprog, maxRoutes, surv)
	}
}

// expectBothAddInTrace is the same from the kernel's side
// (routetrace_test.go): a netlink trace shows both processes send an add
// for every remote block, and what the kernel answered each.
func (dp *doubleProgramming) expectBothAddInTrace(ctx SpecContext, traces map[string]*harness.RouteTrace) (birdAdds, progAdds bpf.RouteRequests) {
	GinkgoHelper()
	Eventually(func() error {
		birdAdds, progAdds = nil, nil
		var missing []string
		for _, b := range dp.blocks {
			reqs, err := traces[b.node.Name].Requests()
			if err != nil {
				return err
			}
			ba, pa := addsBy(b.node, reqs, b.cidr)
			if len(ba) == 0 || len(pa) == 0 {
				missing = append(missing, fmt.Sprintf("%s %s: BIRD sent %d adds, the programmer %d", b.node.Name, b.cidr, len(ba), len(pa)))
			}
			birdAdds, progAdds = append(birdAdds, ba...), append(progAdds, pa...)
		}
		if len(missing) > 0 {
			return fmt.Errorf("trace: both components should send an add for every remote block:\n  %s", strings.Join(missing, "\n  "))
		}
		return nil
	}).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(60 * time.Second)).WithPolling(200 * time.Millisecond).Should(Succeed())
	return birdAdds, progAdds
}

// recordFigures registers the run's figures: the blocks, how many
// double-programmed blocks hid behind one kernel route, and the trace's adds.
func (dp *doubleProgramming) recordFigures(rel config.Release, both map[remoteBlock]componentView, birdAdds, progAdds bpf.RouteRequests) {
	GinkgoHelper()
	hidden := 0
	for _, v := range both {
		if v.kernelRoutes == 1 {
			hidden++
		}
	}
	res := dp.c.Result(fmt.Sprintf("double programming judged per component, IPv4 and IPv6, %s", rel), nil)
	res.Figure("remoteBlocksIPv4", float64(dp.v4), results.KindSize)
	res.Figure("remoteBlocksIPv6", float64(dp.v6), results.KindSize)
	res.Figure("doubleProgrammedBlocksWithOneKernelRoute", float64(hidden), results.KindSize)
	res.Figure("traceBIRDAddsEnabledEnabled", float64(len(birdAdds)), results.KindSize)
	res.Figure("traceProgrammerAddsEnabledEnabled", float64(len(progAdds)), results.KindSize)
	res.Notes = append(res.Notes, "netlink trace, Enabled/Enabled: BIRD's adds answered "+errnoCounts(birdAdds)+"; the programmer's "+errnoCounts(progAdds))
	res.Notes = append(res.Notes, "a double-programmed block with one kernel route is the hiding the claim is about: the surviving route alone looks like one owner's")
	scenariotest.Record(fmt.Sprintf("double programming per component on %s (BIRD's kernel export per family, the programmer's own log)", rel), dp.table.String(), res)
}
