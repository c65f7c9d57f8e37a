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
		c := startClusterOn(ctx, dualStackNoEncap(), harness.Options{
			Release:              rel,
			RouteRefreshInterval: time.Second,
			Timers:               confd.Timers{ScanTime: 1},
		})
		type blk struct {
			node *harness.Node
			cidr netip.Prefix
		}
		var blocks []blk
		v4, v6 := 0, 0
		for _, n := range c.Nodes() {
			for _, b := range c.RemoteBlocks(n.Name) {
				blocks = append(blocks, blk{n, b})
				if b.Addr().Is6() {
					v6++
				} else {
					v4++
				}
			}
		}
		Expect(v4).To(Equal(6), "guard: six remote IPv4 blocks")
		Expect(v6).To(Equal(6), "guard: six remote IPv6 blocks")
		Expect(c.WaitConverged(ctx)).To(Succeed())

		// view reads what each component tries for every block, the
		// programmer's log from offsets on.
		view := func(offsets map[string]int64) (map[blk]componentView, error) {
			tried := map[string]map[netip.Prefix]string{}
			for _, n := range c.Nodes() {
				t, _, err := programmerTried(n, offsets[n.Name])
				if err != nil {
					return nil, err
				}
				tried[n.Name] = t
			}
			out := map[blk]componentView{}
			for _, b := range blocks {
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
		offsets := func() map[string]int64 {
			out := map[string]int64{}
			for _, n := range c.Nodes() {
				_, size, err := programmerTried(n, 0)
				Expect(err).NotTo(HaveOccurred())
				out[n.Name] = size
			}
			return out
		}
		expectAll := func(state string, from map[string]int64, bird, programmer bool) map[blk]componentView {
			GinkgoHelper()
			var got map[blk]componentView
			Eventually(func() error {
				var err error
				got, err = view(from)
				if err != nil {
					return err
				}
				var wrong []string
				for _, b := range blocks {
					v := got[b]
					if v.bird != bird || v.programmer != programmer {
						wrong = append(wrong, fmt.Sprintf("%s %s: BIRD tries %v, programmer tries %v (kernel routes %d, %s)", b.node.Name, b.cidr, v.bird, v.programmer, v.kernelRoutes, v.survivor))
					}
				}
				if len(wrong) > 0 {
					return fmt.Errorf("%s: want BIRD tries %v and programmer tries %v for every remote block:\n  %s", state, bird, programmer, strings.Join(wrong, "\n  "))
				}
				return nil
			}).WithContext(ctx).WithTimeout(machine.Wait(60 * time.Second)).WithPolling(200 * time.Millisecond).Should(Succeed())
			return got
		}

		table := results.NewTable("state", "family", "blocks", "BIRD tries", "programmer tries", "kernel routes per block (max)", "survivors")
		row := func(state string, got map[blk]componentView) {
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
				table.Add(state, fam, nb, nbird, nprog, maxRoutes, surv)
			}
		}

		// 1. Control: the release's default pair, BIRD alone tries (3.33:
		// EnabledIPIPOnly / EnabledNoEncapOnly; 3.32: Disabled / unset,
		// i.e. Enabled); the programmer's whole log so far has no attempt at
		// a remote block.
		start := map[string]int64{}
		def := expectAll(fmt.Sprintf("%s defaults (%s / %s)", rel, designDefaults[rel].felix, designDefaults[rel].bgp), start, true, false)
		row("defaults", def)

		// 2. Both own no-encap: both must be seen trying, for every block
		// of both families, whatever route survived.
		traces := traceRoutes(c)
		from := offsets()
		setPairLive(ctx, c, "Enabled", "Enabled", true, rel)
		both := expectAll("Enabled / Enabled", from, true, true)
		row("Enabled/Enabled", both)
		// The same from the kernel's side (routetrace_test.go): a netlink
		// trace shows both processes send an add for every remote block, and
		// what the kernel answered each.
		var birdAdds, progAdds bpf.RouteRequests
		Eventually(func() error {
			birdAdds, progAdds = nil, nil
			var missing []string
			for _, b := range blocks {
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
		}).WithContext(ctx).WithTimeout(machine.Wait(60 * time.Second)).WithPolling(200 * time.Millisecond).Should(Succeed())
		hidden := 0
		for _, v := range both {
			if v.kernelRoutes == 1 {
				hidden++
			}
		}

		// 3. Control: the programmer alone tries; BIRD exports none of the
		// blocks to its kernel protocols. The programmer's effective value
		// does not change, so it does not restart and need not log its
		// standing routes again: its tries are read from the log since
		// step 2, and its route must now be the only one.
		setPairLive(ctx, c, "Enabled", "Disabled", true, rel)
		prog := expectAll("Enabled / Disabled", from, false, true)
		for _, b := range blocks {
			Eventually(b.node).WithContext(ctx).WithTimeout(machine.Wait(30*time.Second)).WithPolling(100*time.Millisecond).
				Should(judge.HaveClusterRoute(b.cidr).ProgrammedBy(judge.ByProgrammer).Only(), "control: the programmer alone programs %s on %s", b.cidr, b.node.Name)
		}
		row("Enabled/Disabled", prog)

		res := c.Result(fmt.Sprintf("double programming judged per component, IPv4 and IPv6, %s", rel), nil)
		res.Figures["remoteBlocksIPv4"] = float64(v4)
		res.Figures["remoteBlocksIPv6"] = float64(v6)
		res.Figures["doubleProgrammedBlocksWithOneKernelRoute"] = float64(hidden)
		res.Figures["traceBIRDAddsEnabledEnabled"] = float64(len(birdAdds))
		res.Figures["traceProgrammerAddsEnabledEnabled"] = float64(len(progAdds))
		res.Notes = append(res.Notes, "netlink trace, Enabled/Enabled: BIRD's adds answered "+errnoCounts(birdAdds)+"; the programmer's "+errnoCounts(progAdds))
		res.Notes = append(res.Notes, "a double-programmed block with one kernel route is the hiding the claim is about: the surviving route alone looks like one owner's")
		report(fmt.Sprintf("double programming per component on %s (BIRD's kernel export per family, the programmer's own log)", rel), table.String(), res)
	},
		// From 3.32 BIRD writes IPv4 at krt_metric 1024 beside the
		// programmer's 0 (two kernel routes per double-programmed block);
		// IPv6 sits at 1024 on both sides (one route, a refused write).
		Entry("3.32 (two values per resource; BIRD at 1024)", config.R332),
		Entry("3.33 (the four-valued enum)", config.R333),
	)
})
