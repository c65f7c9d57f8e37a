package scenarios_test

// The design's no-encap claims, per BIRD release (1.6, the fork's base;
// 2.0, the default; 2.17; 3.1). Each claim is a spec per release with the
// release's label (bird-1.6, ...), judged against the design's text; the
// suite prints one table of claim × release (holds / differs / not
// expressible) at its end.
//
//   - ownership (§1): on the no-encap class, the four supported pairs, a
//     double-programming pair and an unprogramming pair, set live: each
//     gives the owner the design's tables give (reduced from the 36-pair
//     matrix of matrix_test.go);
//   - live change (§4, "Changing the configuration on a running cluster"):
//     BIRD → programmer and back, picked up live: BIRD withdraws its own
//     routes, the programmer takes them (and back), every flow delivers
//     afterwards; the gap per direction is reported;
//   - re-advertisement (§5, the known gap): with the programmer owning
//     no-encap, once a block's owner withdraws it, some node exports the
//     block to an iBGP peer from the programmer's kernel route;
//   - persisted routes (§4 steps 1 and 3): a node's BIRD SIGKILLed or
//     SIGTERMed leaves its routes in the kernel (persist), and restarted
//     with -R it takes them back with no moment without a route.
//
// CI runs the reduced form: the persisted-routes claim on every release.
// The rest of the family runs with BIRDCAGE_DEPTH=releases.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/dataplane/bird/release"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

// Verdicts of the cross-release claims, for the table at the suite's end.
const (
	verdictHolds   = "holds"
	verdictDiffers = "differs"
	// verdictNotExpressible: the release cannot say what the claim needs
	// (confd refuses the render with ErrNotExpressible); the detail says why.
	verdictNotExpressible = "not expressible"
)

// The claims' names in the table.
const (
	claimOwnership   = "ownership (§1), no-encap, 6 pairs"
	claimLive        = "live change both ways (§4)"
	claimReadvertise = "re-advertisement known gap (§5)"
	claimPersist     = "persisted routes, SIGKILL/SIGTERM, -R (§4)"
)

var (
	claimVerdictsMu sync.Mutex
	claimVerdicts   = map[[2]string]string{} // {claim, release} -> verdict (and detail)
)

// recordFailedUnlessDone records the claim as failed on rel for the spec
// that is running, to be overwritten by its verdict when it gets that far;
// a spec that skips (its release or topology not here) is "not run" with
// the reason instead, not a failure.
func recordFailedUnlessDone(claim string, rel release.Name) {
	recordVerdict(claim, rel, verdictDiffers, "the spec failed: see its row")
	DeferCleanup(func() {
		if r := CurrentSpecReport(); r.State.Is(types.SpecStateSkipped) {
			recordVerdict(claim, rel, "not run", "skipped: "+r.Failure.Message)
		}
	})
}

func recordVerdict(claim string, rel release.Name, verdict, detail string) {
	claimVerdictsMu.Lock()
	defer claimVerdictsMu.Unlock()
	v := verdict
	if detail != "" {
		v += " (" + detail + ")"
	}
	claimVerdicts[[2]string{claim, string(rel)}] = v
}

var _ = ReportAfterSuite("cross-release claims table", func(Report) {
	claimVerdictsMu.Lock()
	defer claimVerdictsMu.Unlock()
	if len(claimVerdicts) == 0 {
		return
	}
	var claims []string
	seen := map[string]bool{}
	for k := range claimVerdicts {
		if !seen[k[0]] {
			seen[k[0]] = true
			claims = append(claims, k[0])
		}
	}
	sort.Strings(claims)
	cols := []string{"claim"}
	for _, r := range release.All {
		cols = append(cols, "BIRD "+string(r))
	}
	tab := results.NewTable(cols...)
	for _, cl := range claims {
		row := []any{cl}
		for _, r := range release.All {
			v, ok := claimVerdicts[[2]string{cl, string(r)}]
			if !ok {
				v = "not run"
			}
			row = append(row, v)
		}
		tab.Add(row...)
	}
	for _, l := range strings.Split(strings.TrimRight("== cross-release claims (claim × BIRD release)\n"+tab.String(), "\n"), "\n") {
		fmt.Println("[birdcage] " + l)
	}
})

// claimsCluster starts the noencap topology (3 nodes, one workload each)
// on BIRD release rel with short scan and refresh times.
func claimsCluster(ctx context.Context, rel release.Name, o harness.Options) *harness.Cluster {
	GinkgoHelper()
	return releaseCluster(ctx, rel, builtinTopology("noencap"), quickTimers(o))
}

// noEncapOwner is who writes the no-encap class on c now, by every remote
// block: the kernel route's protocol and whether BIRD exports the block
// to its kernel protocol. Blocks that disagree are an error.
func noEncapOwner(ctx context.Context, c *harness.Cluster) (judge.Owner, string, error) {
	var owner judge.Owner
	seen := false
	var views []string
	for _, n := range c.Nodes() {
		ex, err := kernelExports(ctx, n)
		if err != nil {
			return 0, "", err
		}
		for _, b := range c.RemoteBlocks(n.Name) {
			via, err := kernelVia(n, b)
			if err != nil {
				return 0, "", err
			}
			prog, birdW := false, false
			_, birdW = ex[b]
			for _, p := range via {
				switch p {
				case programmerProto:
					prog = true
				case kroute.ProtoBIRD:
					birdW = true
				}
			}
			if len(via) > 1 {
				return 0, "", fmt.Errorf("%s: %d routes to %s", n.Name, len(via), b)
			}
			o := judge.OwnerOf(prog, birdW)
			views = append(views, fmt.Sprintf("%s %s: %s (kernel %v, BIRD exports %v)", n.Name, b, o, via, birdW))
			if seen && o != owner {
				return 0, strings.Join(views, "; "), fmt.Errorf("blocks disagree: %s", strings.Join(views, "; "))
			}
			owner, seen = o, true
		}
	}
	return owner, strings.Join(views, "; "), nil
}

func persistLabels(rel release.Name) Labels {
	if persistGap[rel] {
		return Labels{releaseLabel(rel), "persist", "knowngap"}
	}
	return Labels{releaseLabel(rel), "persist"}
}

// persistSignals are the signals the persisted-routes spec of the i-th
// release (release.All) kills BIRD with: both, one after the other, in the
// full family ($BIRDCAGE_DEPTH=releases); one in the reduced form,
// SIGKILL and SIGTERM alternating in release order, so every release keeps
// its claim and each signal is held on two of the four. What the signal
// changes is the peers' side (a Cease: they withdraw node-2's block until
// -R), not node-2's: with both on every release (CI, 2026-12-04) each
// release kept node-2's routes and showed the same no-route windows after
// -R under either signal (none on 1.6, 2.0, 2.17; two on 3.1).
func persistSignals(i int) []syscall.Signal {
	both := []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM}
	if releasesFull() {
		return both
	}
	return both[i%2 : i%2+1]
}

// persistGap: the releases on which the persisted-routes claim does not
// hold, as measured: BIRD 3.1's kernel protocol, at its first scan after
// graceful recovery, deletes each persisted route and adds it again
// (0.86 ms without a route in the first run), where 1.6, 2.0 and 2.17
// leave it in place.
var persistGap = map[release.Name]bool{release.BIRD31: true}

var _ = Describe("No-encap claims per BIRD release", Label("noencap", "releases", "timing"), func() {
	for i, rel := range release.All {
		It(fmt.Sprintf("BIRD %s: the ownership of the no-encap class follows the design's tables for the supported pairs, a double-programming and an unprogramming pair", rel),
			Label(releaseLabel(rel), "matrix"), func(ctx SpecContext) {
				needFull("ownership on BIRD " + string(rel))
				c := claimsCluster(ctx, rel, harness.Options{})
				recordFailedUnlessDone(claimOwnership, rel)
				pairs := [][2]string{
					{"EnabledIPIPOnly", "EnabledNoEncapOnly"},
					{"Enabled", "Disabled"},
					{"Disabled", "Enabled"},
					{"EnabledNoEncapOnly", "EnabledIPIPOnly"},
					{"Enabled", "Enabled"},
					{"Disabled", "Disabled"},
				}
				for p := range designSupportedPairs {
					Expect(pairs).To(ContainElement(p), "guard: every supported pair of the design is set")
				}
				tab := results.NewTable("Felix", "BGP", "expected (design)", "seen", "settled ms")
				prevBGP := ""
				res := c.Result(fmt.Sprintf("no-encap ownership, BIRD %s", rel), nil)
				for _, p := range pairs {
					want := expectedOwners(p[0], p[1], config.R333)[classNoEncap]
					// BIRD's reconfiguration is judged by confd's record of
					// `birdc configure` returning: 1.6's "Last
					// reconfiguration" has one-second resolution, so two
					// changes in one second look like none.
					configured := map[string]int{}
					for _, n := range c.Nodes() {
						configured[n.Name] = len(n.ConfdActions())
					}
					change, _, _ := setPairLive(ctx, c, p[0], p[1], false, config.R333)
					if p[1] != prevBGP {
						for _, n := range c.Nodes() {
							Eventually(func() int { return len(n.ConfdActions()) }).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(30*time.Second)).WithPolling(50*time.Millisecond).
								Should(BeNumerically(">", configured[n.Name]), "BIRD %s, Felix=%s BGP=%s: %s's confd reconfigures BIRD", rel, p[0], p[1], n.Name)
						}
					}
					prevBGP = p[1]
					var got judge.Owner
					var views string
					Eventually(func() error {
						var err error
						got, views, err = noEncapOwner(ctx, c)
						if err != nil {
							return err
						}
						if got != want {
							return fmt.Errorf("owner %s, want %s: %s", got, want, views)
						}
						return nil
					}).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(150*time.Millisecond).Should(Succeed(),
						"BIRD %s, Felix=%s BGP=%s: the design's tables give the no-encap class to %s", rel, p[0], p[1], want)
					ms := sinceMs(change.Mono)
					tab.Add(p[0], p[1], want, got, results.Cellf("%.0f", ms))
					res.Figure("settledMs "+p[0]+"/"+p[1], ms, results.KindDuration)
				}
				recordVerdict(claimOwnership, rel, verdictHolds, "")
				scenariotest.Record(fmt.Sprintf("no-encap ownership on BIRD %s", rel), tab.String(), res)
			})

		It(fmt.Sprintf("BIRD %s: a live programClusterRoutes change moves the no-encap routes BIRD → programmer and back, every flow delivering after each", rel),
			Label(releaseLabel(rel), "liveconfig"), func(ctx SpecContext) {
				needFull("live change on BIRD " + string(rel))
				c := claimsCluster(ctx, rel, harness.Options{})
				recordFailedUnlessDone(claimLive, rel)
				expectNoEncapOwner(ctx, c, judge.ByBIRD, "guard: BIRD owns no-encap on the defaults")
				probes, err := c.Probes(ctx, harness.ProbeOptions{Rate: c.Machine.RateAtMost(500)})
				Expect(err).NotTo(HaveOccurred())
				res := c.Result(fmt.Sprintf("live change both ways, BIRD %s", rel), nil)
				tab := results.NewTable("direction", "settled ms", "longest gap ms (any flow)", "lost", "no-route windows on the timeline", "longest ms")
				for _, step := range []struct {
					name, felix, bgp string
					want             judge.Owner
				}{
					{"BIRD → programmer", "Enabled", "Disabled", judge.ByProgrammer},
					{"programmer → BIRD", "EnabledIPIPOnly", "EnabledNoEncapOnly", judge.ByBIRD},
				} {
					before, err := probes.Report()
					Expect(err).NotTo(HaveOccurred())
					change, _, _ := setPairLive(ctx, c, step.felix, step.bgp, true, config.R333)
					expectNoEncapOwner(ctx, c, step.want, fmt.Sprintf("BIRD %s, %s: the no-encap routes move", rel, step.name))
					settledMs := sinceMs(change.Mono)
					// Past BIRD's next scan (a programmer → BIRD handover
					// ends at BIRD's re-add), every flow delivers.
					Eventually(flowsDelivering(probes)).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(30*time.Second)).WithPolling(50*time.Millisecond).
						Should(Succeed(), "BIRD %s, %s: every flow delivers after the change", rel, step.name)
					after, err := probes.Report()
					Expect(err).NotTo(HaveOccurred())
					lostBefore := map[string]int64{}
					for _, f := range before.Flows {
						lostBefore[f.Flow] = f.Lost
					}
					gap, lost := 0.0, int64(0)
					for _, f := range after.Flows {
						lost += f.Lost - lostBefore[f.Flow]
					}
					windows, longest := 0, 0.0
					for _, n := range c.Nodes() {
						Expect(c.Timeline(n.Name).Judgeable(change.Mono, 0)).To(Succeed(), "%s's route timeline since the change", n.Name)
						for _, bl := range c.RemoteBlocks(n.Name) {
							for _, win := range c.Timeline(n.Name).NoRouteWindows(bl, change.Mono, 0) {
								windows++
								longest = max(longest, win.Ms())
							}
						}
					}
					// The longest probe gap that began after the change.
					for _, f := range after.Flows {
						if f.Gap.StartNs >= change.Mono {
							gap = max(gap, f.LongestGapMs)
						}
					}
					tab.Add(step.name, results.Cellf("%.0f", settledMs), results.Cellf("%.1f", gap), lost, windows, results.Cellf("%.1f", longest))
					k := strings.ReplaceAll(step.name, " → ", "To")
					res.Figure(k+"SettledMs", settledMs, results.KindDuration)
					res.Figure(k+"LongestNoRouteMs", longest, results.KindGap)
					res.Figure(k+"Lost", float64(lost), results.KindLoss)
				}
				rep, err := probes.Stop()
				Expect(err).NotTo(HaveOccurred())
				res.Probes = rep
				recordVerdict(claimLive, rel, verdictHolds, "")
				scenariotest.Record(fmt.Sprintf("live change both ways on BIRD %s", rel), tab.String()+results.GapTable(rep), res)
			})

		It(fmt.Sprintf("BIRD %s: with the programmer owning no-encap, a node exports another node's block to iBGP peers once its owner withdrew it (the known gap of §5)", rel),
			Label(releaseLabel(rel), "readvertise", "knowngap"), func(ctx SpecContext) {
				needFull("re-advertisement on BIRD " + string(rel))
				c := claimsCluster(ctx, rel, harness.Options{})
				recordFailedUnlessDone(claimReadvertise, rel)
				setPairLive(ctx, c, "Enabled", "Disabled", true, config.R333)
				expectNoEncapOwner(ctx, c, judge.ByProgrammer, "guard: the programmer owns no-encap")
				Expect(c.WaitConverged(ctx)).To(Succeed())
				steady, err := readvertCount(ctx, c, c.Nodes())
				Expect(err).NotTo(HaveOccurred(), "positive control: every node exports its own block to every peer")
				owner := "node-3"
				remaining := readvertWithout(c, owner)
				Expect(c.KillBIRD(ctx, owner, syscall.SIGTERM)).Error().NotTo(HaveOccurred())
				var after readvertResult
				Eventually(func() ([]readvertisement, error) {
					var err error
					after, err = readvertCount(ctx, c, remaining)
					return after.readvertised, err
				}).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(100*time.Millisecond).ShouldNot(BeEmpty(),
					"known gap closed on BIRD %s: no node exported %s's block to an iBGP peer after it withdrew it", rel, owner)
				var srcs []string
				for _, r := range after.readvertised {
					if !slices.Contains(srcs, r.source) {
						srcs = append(srcs, r.source)
					}
				}
				res := c.Result(fmt.Sprintf("re-advertisement known gap, BIRD %s", rel), nil)
				res.Figure("readvertisementsSteady", float64(len(steady.readvertised)), results.KindCount)
				res.Figure("readvertisementsAfterWithdrawal", float64(len(after.readvertised)), results.KindCount)
				recordVerdict(claimReadvertise, rel, verdictHolds, fmt.Sprintf("gap present: %d exports from %s", len(after.readvertised), strings.Join(srcs, ",")))
				scenariotest.Record(fmt.Sprintf("re-advertisement on BIRD %s after %s withdrew", rel, owner), readvertTable(steady, after), res)
			})

		persistWhat := "takes them back with no moment without a route"
		if persistGap[rel] {
			persistWhat = "takes them back, but with a moment without a route (known gap: the design says -R holds them)"
		}
		sigs := persistSignals(i)
		var sigNames []string
		for _, sig := range sigs {
			sigNames = append(sigNames, unix.SignalName(sig))
		}
		It(fmt.Sprintf("BIRD %s: a node's BIRD killed (%s) leaves its routes in the kernel, and restarted with -R %s", rel, strings.Join(sigNames, ", "), persistWhat),
			persistLabels(rel), func(ctx SpecContext) {
				c := claimsCluster(ctx, rel, harness.Options{})
				recordFailedUnlessDone(claimPersist, rel)
				n := c.Node("node-2")
				remote := c.RemoteBlocks(n.Name)
				own := readvertOwnBlocks(c, n.Name)
				expectBIRDPrograms(ctx, n, remote, "guard, BIRD "+string(rel))
				res := c.Result(fmt.Sprintf("persisted routes and -R recovery, BIRD %s", rel), nil)
				tab := results.NewTable("signal", "node-2's routes kept (persist)", "no-route windows on node-2", "peers keep node-2's block", "peers' longest no-route ms", "-R to converged ms")
				allWindows, allLongest := 0, 0.0
				for _, sig := range sigs {
					kill := c.Mark(fmt.Sprintf("%s node-2's BIRD", sig))
					Expect(c.KillBIRD(ctx, n.Name, sig)).Error().NotTo(HaveOccurred())
					// Persist: past two of BIRD's scan periods and two
					// programmer resyncs with BIRD gone, node-2 still has
					// BIRD's routes.
					settle(ctx, c, append(slices.Clone(remote), own...), kill.Mono, fmt.Sprintf("%s, BIRD down", sig))
					for _, bl := range remote {
						Expect(n).To(judge.HaveClusterRoute(bl).ProgrammedBy(judge.ByBIRD).Only(), "design §4 step 1 (persist), BIRD %s, %s: node-2 keeps BIRD's route to %s", rel, sig, bl)
					}
					peersKeep := true
					peerGap := 0.0
					for _, o := range c.Nodes() {
						if o == n {
							continue
						}
						for _, bl := range own {
							via, err := kernelVia(o, bl)
							Expect(err).NotTo(HaveOccurred())
							if len(via) == 0 {
								peersKeep = false
							}
							for _, win := range c.Timeline(o.Name).NoRouteWindows(bl, kill.Mono, 0) {
								peerGap = max(peerGap, win.Ms())
							}
						}
					}
					start := c.Mark(fmt.Sprintf("StartBIRD(node-2, -R) after %s", sig))
					Expect(c.StartBIRD(ctx, n.Name, harness.StartBIRDOptions{Recovery: true})).Error().NotTo(HaveOccurred())
					Expect(c.WaitConverged(ctx)).To(Succeed())
					recovered := sinceMs(start.Mono)
					// Past BIRD's reconciliation (its first scans after
					// recovery), node-2 has BIRD's routes, and never had
					// none since the kill.
					settle(ctx, c, append(slices.Clone(remote), own...), start.Mono, fmt.Sprintf("%s, after -R", sig))
					windows, longest := 0, 0.0
					Expect(c.Timeline(n.Name).Judgeable(kill.Mono, 0)).To(Succeed(), "%s's route timeline since the kill", n.Name)
					for _, bl := range remote {
						Expect(n).To(judge.HaveClusterRoute(bl).ProgrammedBy(judge.ByBIRD).Only(), "design §4 step 3, BIRD %s, %s: after -R node-2 has BIRD's route to %s", rel, sig, bl)
						ws := c.Timeline(n.Name).NoRouteWindows(bl, kill.Mono, 0)
						windows += len(ws)
						for _, win := range ws {
							longest = max(longest, win.Ms())
						}
						if !persistGap[rel] {
							Expect(ws).To(BeEmpty(), "design §4 (persist, -R), BIRD %s, %s: node-2 was without a route to %s", rel, sig, bl)
						}
					}
					allWindows += windows
					allLongest = max(allLongest, longest)
					tab.Add(sig, true, results.Cellf("%d (longest %.2f ms)", windows, longest), peersKeep, results.Cellf("%.0f", peerGap), results.Cellf("%.0f", recovered))
					res.Figure(sig.String()+" noRouteWindowsNode2", float64(windows), results.KindCount)
					res.Figure(sig.String()+" longestNoRouteMsNode2", longest, results.KindGap)
					res.Figure(sig.String()+" peersLongestNoRouteMs", peerGap, results.KindGap)
					res.Figure(sig.String()+" recoveryToConvergedMs", recovered, results.KindDuration)
				}
				if persistGap[rel] {
					// Known gap: the design says -R holds the routes; this
					// release rewrites them at reconciliation (delete, then
					// add), so the node is without a route for a moment.
					recordVerdict(claimPersist, rel, verdictDiffers, fmt.Sprintf("-R reconciliation deletes and re-adds: %d no-route windows, longest %.2f ms", allWindows, allLongest))
					scenariotest.Record(fmt.Sprintf("persisted routes and -R recovery on BIRD %s", rel), tab.String(), res)
					Expect(allWindows).To(BeNumerically(">", 0), "known gap closed on BIRD %s: after -R node-2 was never without a route; make this release's persisted-routes claim hold", rel)
					return
				}
				recordVerdict(claimPersist, rel, verdictHolds, "")
				scenariotest.Record(fmt.Sprintf("persisted routes and -R recovery on BIRD %s", rel), tab.String(), res)
			})
	}
})
