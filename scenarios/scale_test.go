package scenarios_test

// Scale (issue 16): a rolling pre-3.33 → 3.33 upgrade of every node of a
// generated cluster, node after node as an operator's rollout does, with
// probes throughout; and the consecutive-restart hazard.
//
// Claim (design §4): upgrading a node leaves no window in which a
// destination has no route; so a rollout of every node, one at a time, loses
// no probe on the upgraded node's way out at any step. On no-encap (the only
// pool this kernel can carry natively) BIRD owns the cluster routes in both
// releases: each step is BIRD SIGKILLed (persist keeps its routes, peers keep
// them as stale under graceful restart), the programmer replaced, the new
// BIRD started with -R. On IPIP (in the VM: this kernel has no ipip) the
// step is the handover of §4: BIRD owns the tunl0 routes on pre-3.33, the
// 3.33 programmer takes each with one replace; the routes' owner is checked
// before and after every step.
//
// Judged against the platform's own loss (harness/judge/platformloss.go): the
// sampled flows cross no route the step changes, so what they lose is the
// machine's (under QEMU TCG every flow stalls ~100 ms at once while a
// container starts); where they lose nothing — natively — the claim is
// exactly "no hole". The upgraded node's own routes are judged strictly
// from its route timeline at every step (keptRoutes): no window, no delete,
// one route at every instant, via the block's node (dev tunl0 onlink on
// IPIP); a step the route monitor did not see whole fails as unjudgeable.
//
// Flow plan per step (judge.PlanFlows): every flow to and from the node
// being upgraded, plus a seeded sample of the flows among the others — the
// control, which the change must not touch. One probe session per step,
// started before the node's upgrade and stopped after the cluster has
// converged again, so every instant of every upgrade is probed.
//
// The hazard: graceful restart protects one restart. A node restarted again
// while its peers are still inside the first restart's graceful-restart
// window (its new BIRD still in recovery, so no End-of-RIB yet, and its
// routes held as stale) is shown next to the same two restarts spaced until
// the window has closed (the control). The window does not close when the
// sessions are Established again: it closes when the restarted BIRD's
// recovery is done (a first run that spaced by convergence only lost ~2 s
// inbound in the "control").
// The hazard's figures are reported, not asserted: the design does not speak
// of it.
//
// Size: BIRDCAGE_SCALE_NODES nodes (default 8 no-encap, 5 IPIP: what CI
// runs; 20+ for the full figure, e.g. in the VM
// BIRDCAGE_SCALE_NODES=20 ... -ginkgo.label-filter='scale && ipip'). Probe rate: BIRDCAGE_PROBE_RATE, else 250 per second per
// flow (at 20 nodes a step carries 54 flows).

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/procfs"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
	"github.com/birdcage/birdcage/topo"
)

// scaleNodes is the cluster size: $BIRDCAGE_SCALE_NODES, else 8 for
// no-encap (natively) and 5 for IPIP (in the VM, where TCG makes every
// node cost several times what it does natively).
func scaleNodes(pool string) int {
	if s := scenariotest.Config.ScaleNodes; len(s) > 0 && s[0] >= 3 {
		return s[0]
	}
	if pool == "ipip" {
		return 5
	}
	return 8
}

// scaleVia is the device the cluster routes of pool go through ("" for
// any).
func scaleVia(pool string) string {
	if pool == "ipip" {
		return topo.TunnelDevice
	}
	return ""
}

// ownedBy waits until n's route to every remote block is owner's, via via,
// and the only one.
func ownedBy(c *harness.Cluster, n *harness.Node, owner judge.Owner, via string) {
	GinkgoHelper()
	for _, b := range c.RemoteBlocks(n.Name) {
		Eventually(n).WithPolling(20*time.Millisecond).
			Should(judge.HaveClusterRoute(b).ProgrammedBy(owner).Via(via).Only(), "%s's route to %s should be %s's", n.Name, b, owner)
	}
}

// birdRecovered waits until n's BIRD has ended its graceful-restart
// recovery (`birdc show status`): a restarted BIRD (-R) writes its kernel
// routes only then.
func birdRecovered(ctx context.Context, n *harness.Node) {
	GinkgoHelper()
	Eventually(func() (bool, error) { return birdInRecovery(ctx, n) }).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
		Should(BeFalse(), "%s's BIRD should end its graceful-restart recovery", n.Name)
}

// birdInRecovery says whether n's BIRD is in graceful-restart recovery.
func birdInRecovery(ctx context.Context, n *harness.Node) (bool, error) {
	r, err := n.BIRD.Client().Run(ctx, "show status")
	if err != nil {
		return false, err
	}
	return strings.Contains(r.Text(), "Graceful restart recovery in progress"), nil
}

// scaleHop is how a node's route to a block of the node o leaves, as the
// design writes it: on IPIP via o's address, dev tunl0, onlink (DESIGN.md,
// the tunnel routes BIRD's filter sets: onlink, ifname tunl0, the BGP next
// hop); on no-encap via o's address on the generated topology's one
// shared segment, dev eth0 (topo.Generate: every node's eth0 on "lan").
func scaleHop(pool string, o *topo.NodeNS) kroute.NextHop {
	if pool == "ipip" {
		return kroute.NextHop{Gateway: o.Address.Addr(), Device: topo.TunnelDevice, Onlink: true}
	}
	return kroute.NextHop{Gateway: o.Address.Addr(), Device: "eth0"}
}

// keptRoutes is the claim on the upgraded node's own routes over its step,
// from its route timeline: for every block of every other node, at no
// instant without a route, never deleted (on IPIP the owner changes with
// one replace), exactly one route at every instant, and that route via the
// block's node as scaleHop says. A span the route monitor did not see whole
// is unjudgeable: the matcher errs, the step fails.
func (st *scaleStep) keptRoutes(c *harness.Cluster, pool string) {
	GinkgoHelper()
	tl := c.Timeline(st.node)
	checked := 0
	for _, o := range c.Net.Nodes {
		if o.Name == st.node {
			continue
		}
		for _, blk := range o.Blocks {
			checked++
			Expect(tl).To(judge.KeepRouteThroughout(blk.CIDR, st.beginMono, st.endMono).Shaped(scaleHop(pool, o)),
				"step %s: its route to %s's block %s over the upgrade", st.node, o.Name, blk.CIDR)
		}
	}
	Expect(checked).To(BeNumerically(">", 0), "guard: step %s has remote blocks to check", st.node)
}

// platformMayStall says whether this run is under QEMU TCG, where the
// whole guest stalls for ~100 ms now and then (a process or container
// starting) and every flow loses probes at once.
func platformMayStall() bool { return scenariotest.Machine.Stalls() }

// scaleRate is the probe rate of the scale scenarios.
func scaleRate() int {
	if scenariotest.Machine.ProbeRateSet {
		return scenariotest.Machine.Rate()
	}
	return 250
}

// scaleSample is how many flows among the other nodes each step samples.
func scaleSample(n int) int { return min(16, (n-1)*(n-2)) }

// scaleStep is one node's upgrade, probed.
type scaleStep struct {
	node                  string
	plan                  judge.FlowPlan
	lostOut, lostIn       int64 // the upgraded node's flows
	lostSample            int64 // the sampled flows among the others
	platform              judge.PlatformLoss
	longestOutMs          float64 // the upgraded node's outbound flows
	longestGapMs          float64
	longestGapFlow        string
	upgradeS, convergedS  float64 // UpgradeNode's own time; until converged again
	cpuPerS               float64 // harness CPU-s per second over the session
	mapBytes, counters    int64
	atBegin, atEnd, final *report.Report
	bpfCountersAttachedMs float64
	// softnetDropped is how many packets the kernel dropped from its
	// per-CPU input backlogs during the step (/proc/net/softnet_stat, all
	// CPUs; -1 when unreadable): a drop there loses a probe that left its
	// sender with its route in place.
	softnetDropped int64
	// outHolesSinceChange is the probes the upgraded node's outbound flows
	// lost after the change began (what the rollout's claim judges).
	outHolesSinceChange uint64
	// The inbound side read from the routes, not the probes: how many other
	// nodes were, during the session, without a route to the upgraded
	// node's blocks, the longest such window and whose it was; and, for
	// each of them, both ends of its BGP session to the node as they stood
	// once the step had converged, with BIRD's log of it since the change.
	peersNoRoute     int
	peerNoRouteMs    float64
	peerNoRouteWorst string
	peerSessions     []string
	changeWall       time.Time // when the change began, by the wall clock BIRD reports in
	// The step's span on the monotonic clock: from the change to the
	// cluster converged again (what the route-timeline claim covers).
	beginMono, endMono int64
}

// probedChange runs change under a probe session carrying plan: the session
// starts (and every flow delivers) before change, and stops once change has
// returned and the cluster has converged again.
func probedChange(ctx SpecContext, c *harness.Cluster, plan judge.FlowPlan, change func() error, recovered ...func()) scaleStep {
	GinkgoHelper()
	st := scaleStep{plan: plan}
	cpu0, err := harness.ProcessCPU()
	Expect(err).NotTo(HaveOccurred())
	t0 := time.Now()
	probes, err := c.Probes(ctx, harness.ProbeOptions{Rate: scaleRate(), Flows: plan.Flows})
	Expect(err).NotTo(HaveOccurred())
	st.bpfCountersAttachedMs = float64(time.Since(t0).Microseconds()) / 1000
	b, n, err := probes.MapBytes()
	Expect(err).NotTo(HaveOccurred())
	st.mapBytes, st.counters = b, int64(n)
	drops0, drops0Err := procfs.SoftnetDropped()
	st.atBegin, err = probes.Report()
	Expect(err).NotTo(HaveOccurred())
	// The step's times run from here, after the snapshot (which takes
	// ~2.5 s for 54 flows under TCG), not from before it.
	begin := c.Mark("change begins")
	tp := time.Now()
	st.changeWall = tp
	Expect(change()).To(Succeed())
	st.upgradeS = time.Since(tp).Seconds()
	Expect(c.WaitConverged(ctx)).To(Succeed())
	// Converged is also what the change's own recovery waits for (an
	// upgraded BIRD's graceful restart, after which it writes its routes),
	// so the step's checks see those writes.
	for _, r := range recovered {
		r()
	}
	// Converged is also every node routing every remote block again:
	// sessions up and programmers synced is not enough — a 20-node IPIP
	// run had three peers without a route to the upgraded node's block for
	// 2.5 s after both held.
	Eventually(c).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(60 * time.Second)).WithPolling(50 * time.Millisecond).Should(judge.HaveRemoteBlockRoutes())
	end := c.Mark("step converged")
	st.beginMono, st.endMono = begin.Mono, end.Mono
	st.convergedS = float64(end.Mono-begin.Mono) / 1e9
	st.atEnd, err = probes.Report()
	Expect(err).NotTo(HaveOccurred())
	if drops1, err := procfs.SoftnetDropped(); drops0Err == nil && err == nil {
		st.softnetDropped = drops1 - drops0
	} else {
		st.softnetDropped = -1
	}
	st.final, err = probes.Stop()
	Expect(err).NotTo(HaveOccurred())
	cpu1, err := harness.ProcessCPU()
	Expect(err).NotTo(HaveOccurred())
	st.cpuPerS = (cpu1 - cpu0).Seconds() / time.Since(t0).Seconds()
	return st
}

// book fills the step's loss figures for node, and measures the platform's
// own loss on the flows that do not involve it (the sample).
func (st *scaleStep) book(ctx context.Context, c *harness.Cluster, node string) {
	GinkgoHelper()
	st.node = node
	n := c.Node(node)
	controls, err := judge.Holes(st.final, judge.SinceSnapshot(st.atBegin, st.atEnd), judge.NotInvolving(n))
	Expect(err).NotTo(HaveOccurred())
	st.platform, err = judge.PlatformLossOf(controls, scenariotest.Machine.Stalls())
	Expect(err).NotTo(HaveOccurred(), "guard: the sample measures the platform's own loss")
	out, err := judge.Holes(st.final, judge.SinceSnapshot(st.atBegin, st.atEnd), func(f report.GapReport) bool { return isFrom(n, f.SrcAddr) })
	Expect(err).NotTo(HaveOccurred())
	for _, h := range out {
		st.outHolesSinceChange += h.Holes
	}
	st.readPeersNoRoute(ctx, c, n)
	for _, f := range st.final.Flows {
		switch {
		case isFrom(n, f.SrcAddr):
			st.lostOut += f.Lost
			st.longestOutMs = max(st.longestOutMs, f.LongestGapMs)
		case isFrom(n, f.DstAddr):
			st.lostIn += f.Lost
		default:
			st.lostSample += f.Lost
		}
		if f.LongestGapMs > st.longestGapMs {
			st.longestGapMs, st.longestGapFlow = f.LongestGapMs, f.Flow
		}
	}
}

// readPeersNoRoute fills the step's inbound route figures for the node n
// from every other node's route timeline over the probe session, and the
// BGP session each such peer has to n (from its BIRD, now).
func (st *scaleStep) readPeersNoRoute(ctx context.Context, c *harness.Cluster, n *harness.Node) {
	GinkgoHelper()
	Expect(n.NS.Blocks).NotTo(BeEmpty(), "guard: %s has a block its peers route to", n.Name)
	for _, nd := range c.Net.Nodes {
		if nd.Name == n.Name {
			continue
		}
		hit := false
		for _, blk := range n.NS.Blocks {
			for _, win := range c.Timeline(nd.Name).NoRouteWindows(blk.CIDR, st.final.StartNs, st.final.EndNs) {
				hit = true
				if ms := win.Ms(); ms > st.peerNoRouteMs {
					st.peerNoRouteMs, st.peerNoRouteWorst = ms, nd.Name
				}
			}
		}
		if !hit {
			continue
		}
		st.peersNoRoute++
		st.peerSessions = append(st.peerSessions, nd.Name+": "+sessionTo(ctx, c, nd.Name, n.NS.Address.Addr(), st.changeWall)+"\n    "+
			n.Name+": "+sessionTo(ctx, c, n.Name, nd.Address.Addr(), st.changeWall))
	}
}

// sessionTo describes node's BGP session to the neighbour at to: its
// state, when it last changed (from t0), its last error if BIRD still
// shows one, and what node's BIRD logged of the session since t0 (its
// state changes and errors: the config logs states).
func sessionTo(ctx context.Context, c *harness.Cluster, node string, to netip.Addr, t0 time.Time) string {
	addr := to.String()
	bird := c.Node(node).BIRD
	ps, err := bird.Client().Protocols(ctx)
	if err != nil {
		return "birdc: " + err.Error()
	}
	for _, p := range ps {
		if p.Proto != "BGP" || p.Details["Neighbor address"] != addr {
			continue
		}
		out := fmt.Sprintf("%s %s since %+.0f ms", p.Name, p.BGPState, float64(p.Since.Sub(t0).Microseconds())/1000)
		if last := p.Details["Last error"]; last != "" {
			out += ", last error: " + last
		}
		for _, l := range birdLogSince(bird.LogPath(), p.Name, t0, 12) {
			out += "\n      " + l
		}
		return out
	}
	return "no BGP session to " + addr
}

// birdLogSince is up to limit lines of a BIRD log (timestamped "2006-01-02
// 15:04:05.000", local time) that name proto and were logged at or after
// t0, each with its time from t0; the last limit when there are more.
func birdLogSince(path, proto string, t0 time.Time, limit int) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return []string{"log: " + err.Error()}
	}
	const layout = "2006-01-02 15:04:05.000"
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if len(l) <= len(layout) || !strings.Contains(l, proto+":") {
			continue
		}
		at, err := time.ParseInLocation(layout, l[:len(layout)], time.Local)
		if err != nil || at.Before(t0.Truncate(time.Millisecond)) {
			continue
		}
		out = append(out, fmt.Sprintf("%+8.0f ms%s", float64(at.Sub(t0).Microseconds())/1000, l[len(layout):]))
	}
	return out[len(out)-min(len(out), limit):]
}

// meminfo is a /proc/meminfo field in bytes (0 when unreadable).
func meminfo(field string) int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == field {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// judge asserts the claim on the step's flows that keep selects: natively,
// where the platform lost nothing, exactly no hole over the session;
// otherwise (and always under TCG) no more lost since the change began
// than the platform lost — none where the controls lost none since then —
// and no refused send. Under TCG a session's first probes can be lost
// while its senders start, before the change, on every flow alike: a
// 20-node run lost ~30 per flow there on the judged and the control flows,
// with no control losing one after the change began.
func (st *scaleStep) judge(keep func(report.GapReport) bool, what string) {
	GinkgoHelper()
	if st.platform.Strict() && !platformMayStall() {
		for _, f := range st.final.Flows {
			if keep(f) {
				Expect(f).To(judge.HaveNoGap().Through(st.atEnd), "%s: %s lost probes", what, f.Flow)
			}
		}
		return
	}
	hs, err := judge.Holes(st.final, judge.SinceSnapshot(st.atBegin, st.atEnd), keep)
	Expect(err).NotTo(HaveOccurred())
	Expect(hs).To(judge.BeWithinPlatformLoss(st.platform), what)
	for _, f := range st.final.Flows {
		for errno, n := range f.SendErrors {
			if keep(f) && errno != "EAGAIN" {
				Expect(n).To(BeZero(), "%s: %s had sends refused with %s", what, f.Flow, errno)
			}
		}
	}
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	return s[len(s)/2]
}

var _ = Describe("Rolling upgrade at scale", Label("scale", "upgrade", "timing"), func() {
	DescribeTable("upgrades every node pre-3.33 → 3.33, one after another, and no upgraded node loses an outbound probe", func(ctx SpecContext, pool string) {
		n := scaleNodes(pool)
		via := scaleVia(pool)
		tp, err := topo.Generate(topo.GenSpec{Nodes: n, Pool: pool})
		Expect(err).NotTo(HaveOccurred())
		c := scenariotest.StartClusterOn(ctx, tp, scaleRolloutOptions(pool))
		start := c.Mark("rollout begins")
		var steps []scaleStep
		for i, nd := range c.Net.Nodes {
			By("upgrading " + nd.Name + " with probes (guards: the flow plan, the owner before and after, a new BIRD)")
			steps = append(steps, scaleUpgradeStep(ctx, c, nd.Name, i, n, pool, via))
		}
		end := c.Mark("rollout done")
		By("figures: per node and for the whole rollout, memory")
		recordScaleRollout(c, steps, n, pool, start, end)
		By("the claim at every step: nothing lost on the upgraded node's way out beyond the platform's own loss")
		// The claim, at every step: nothing lost on the upgraded node's way
		// out while it was being upgraded — beyond what the sample (no
		// route of its changes) lost at the same time, the platform's own
		// loss; where the sample lost nothing, exactly nothing.
		for _, st := range steps {
			up := c.Node(st.node)
			st.judge(func(f report.GapReport) bool { return isFrom(up, f.SrcAddr) }, st.node+" lost probes on its way out during its upgrade")
			// The same claim on the upgraded node's routes, strictly
			// (no platform allowance: a route does not stall).
			st.keptRoutes(c, pool)
		}
	},
		Entry("no-encap, natively", "noencap"),
		// The full form: BIRDCAGE_SCALE_NODES=20 (docs/scale.md).
		Entry("IPIP, on tunl0 (the kernel's or the eBPF emulation)", Label("ipip"), "ipip"),
	)

	DescribeTable("shows the consecutive-restart hazard: a node restarted twice inside the graceful-restart window, against the same restarts spaced", func(ctx SpecContext, pool string) {
		n := min(scaleNodes(pool), 8)
		tp, err := topo.Generate(topo.GenSpec{Nodes: n, Pool: pool})
		Expect(err).NotTo(HaveOccurred())
		c := scenariotest.StartClusterOn(ctx, tp, harness.Options{Release: config.R333})
		const victim = "node-2"
		plan, err := harness.PlanFlows(c.Net, []string{victim}, scaleSample(n), 7)
		Expect(err).NotTo(HaveOccurred())
		restart := func() error {
			_, err := c.UpgradeNode(ctx, victim, config.R333, harness.UpgradeOptions{Signal: syscall.SIGKILL})
			return err
		}
		peersWithout := func() int { return peersWithoutSessionTo(ctx, c, victim) }
		inRecovery := func() bool { return victimInRecovery(ctx, c, victim) }

		// Control: two restarts, the second once the window has closed
		// (converged, and the victim's recovery done).
		var atSecondSpaced int
		var recoveringSpaced bool
		spaced := probedChange(ctx, c, plan, func() error {
			if err := restart(); err != nil {
				return err
			}
			if err := c.WaitConverged(ctx); err != nil {
				return err
			}
			Eventually(inRecovery).WithTimeout(scenariotest.Machine.Wait(60 * time.Second)).WithPolling(50 * time.Millisecond).Should(BeFalse())
			atSecondSpaced, recoveringSpaced = peersWithout(), inRecovery()
			return restart()
		})
		spaced.book(ctx, c, victim)

		// The hazard: the second restart as soon as the first one's
		// programmer has synced, while the peers still wait for the new
		// BIRD.
		var atSecond int
		var recoveringQuick bool
		quick := probedChange(ctx, c, plan, func() error {
			if err := restart(); err != nil {
				return err
			}
			atSecond, recoveringQuick = peersWithout(), inRecovery()
			return restart()
		})
		quick.book(ctx, c, victim)

		By("figures: the peers' view (book) of each pair of restarts")
		recordConsecutiveRestart(c, victim, n, pool, plan, spaced, quick, consecutiveKills{atSecondSpaced, recoveringSpaced, atSecond, recoveringQuick})
		// Guards: the quick second kill did land inside the window (peers
		// without their session to the victim), the spaced one outside it.
		Expect(atSecond).To(BeNumerically(">", 0), "the second restart came after the peers' sessions were back: not inside the window")
		Expect(recoveringQuick).To(BeTrue(), "the victim had finished its recovery before the second restart: not inside the window")
		Expect(atSecondSpaced).To(Equal(0), "the control's second restart came before convergence")
		Expect(recoveringSpaced).To(BeFalse(), "the control's second restart came during the victim's recovery")
		// The control: restarts spaced beyond the window lose nothing
		// either way (each one is an ordinary graceful restart) beyond the
		// platform's own loss (the sample's), and nothing among the others
		// — except under TCG, where the sample's loss is the platform's
		// stall and is what the victim's flows are judged against.
		sample := judge.NotInvolving(c.Node(victim))
		spaced.judge(func(f report.GapReport) bool { return !sample(f) }, "spaced restarts: the victim's flows lost probes")
		if !platformMayStall() {
			Expect(spaced.lostSample+quick.lostSample).To(BeZero(), "flows away from the victim lost probes")
		}
	},
		Entry("no-encap, natively", "noencap"),
		Entry("IPIP, on tunl0 (the kernel's or the eBPF emulation)", Label("ipip"), "ipip"),
	)
})

// scaleRolloutOptions is the rollout's start: from 3.31 (headlineFrom,
// see upgrade_test.go: BIRD at the programmer's metric 0; 3.32 → 3.33 is
// upgrade_window_test.go's gap).
func scaleRolloutOptions(pool string) harness.Options {
	opts := harness.Options{Release: headlineFrom}
	if pool == "noencap" {
		// On no-encap BIRD keeps the routes across the upgrade, and
		// 3.33's BIRD writes at krt_metric 1024 (2147483547 for a 3.31
		// peer's block) where 3.31's wrote at 0. Upstream BIRD 2.0, the
		// fork's stand-in here, adds its route beside the old one and
		// never removes the old one (docs/conformance.md row 17's
		// artifact; CI 2026-12-02: every upgraded node kept its old
		// BIRD's metric-0 route). kernelMetric 0, a recorded departure,
		// keeps BIRD on one key, so each step measures the upgrade, not
		// the stand-in.
		zero := 0
		opts.BGP = datastore.BGPConfiguration{KernelMetric: &zero}
	}
	return opts
}

// scaleUpgradeStep upgrades node (the i-th of n) with probes on its flow
// plan, guarded before and after.
func scaleUpgradeStep(ctx SpecContext, c *harness.Cluster, node string, i, n int, pool, via string) scaleStep {
	GinkgoHelper()
	plan, err := harness.PlanFlows(c.Net, []string{node}, scaleSample(n), uint64(i+1))
	Expect(err).NotTo(HaveOccurred())
	// Guard: the plan probes the node under change both ways and
	// has a control among the others.
	Expect(plan.FocusFlows).To(Equal(2*(n-1)), plan.String())
	Expect(plan.Sampled).To(BeNumerically(">", 0), plan.String())
	// Guard: before its upgrade the node's remote-block routes are
	// the old release's owner's (BIRD's, via tunl0 on IPIP).
	ownedBy(c, c.Node(node), roundTripOwner[pool][headlineFrom], via)
	oldPid := c.Node(node).BIRD.Pid()
	st := probedChange(ctx, c, plan, func() error {
		_, err := c.UpgradeNode(ctx, node, config.R333, harness.UpgradeOptions{Signal: syscall.SIGKILL})
		return err
	}, func() { birdRecovered(ctx, c.Node(node)) })
	st.book(ctx, c, node)
	// Guard: the upgrade happened (new release, new BIRD), and the
	// routes went to the new release's owner (on IPIP the
	// programmer: the handover the claim is about took place).
	Expect(c.Node(node).Release()).To(Equal(config.R333))
	Expect(c.Node(node).BIRD.Pid()).NotTo(Equal(oldPid))
	ownedBy(c, c.Node(node), roundTripOwner[pool][config.R333], via)
	return st
}

// recordScaleRollout registers the rollout's figures, per node and for the
// whole rollout, and its tables for people.
func recordScaleRollout(c *harness.Cluster, steps []scaleStep, n int, pool string, start, end results.Event) {
	GinkgoHelper()
	// Memory: what the cluster's processes hold, and what the machine
	// (the VM's guest, under ci/vm/run) still has.
	fp, err := c.Measure().Footprint()
	Expect(err).NotTo(HaveOccurred())
	memTotal, memAvail := meminfo("MemTotal"), meminfo("MemAvailable")

	// Figures: per node and for the whole rollout.
	res := c.Result(fmt.Sprintf("rolling upgrade, %d nodes, %s", n, pool), nil)
	var b strings.Builder
	tab := results.NewTable("node", "flows", "lost out", "lost in", "lost sample", "platform max", "platform longest ms", "longest out ms", "longest gap ms", "upgrade s", "to converged s", "peers without route", "longest no-route ms", "harness CPU-s/s", "BPF maps KiB").AlignRight()
	var per, gaps, cpus []float64
	var lostOut, lostIn, lostSample int64
	worst, worstFlow := 0.0, ""
	stepsNoRoute, worstNoRoute, worstNoRouteAt := 0, 0.0, "none"
	for _, st := range steps {
		tab.Add(st.node, len(st.plan.Flows), st.lostOut, st.lostIn, st.lostSample, st.platform.Max, results.Cellf("%.1f", st.platform.LongestMs), results.Cellf("%.1f", st.longestOutMs), results.Cellf("%.1f", st.longestGapMs), results.Cellf("%.2f", st.upgradeS), results.Cellf("%.2f", st.convergedS), st.peersNoRoute, results.Cellf("%.1f", st.peerNoRouteMs), results.Cellf("%.2f", st.cpuPerS), st.mapBytes/1024)
		pfx := "node." + st.node + "."
		res.Figure(pfx+"lostOut", float64(st.lostOut), results.KindLoss)
		res.Figure(pfx+"lostIn", float64(st.lostIn), results.KindLoss)
		res.Figure(pfx+"lostSample", float64(st.lostSample), results.KindLoss)
		res.Figure(pfx+"platformLostPerControlFlowMax", float64(st.platform.Max), results.KindMachine)
		res.Figure(pfx+"platformLongestOutageMs", st.platform.LongestMs, results.KindMachine)
		res.Figure(pfx+"longestGapOutboundMs", st.longestOutMs, results.KindGap)
		res.Figure(pfx+"longestGapMs", st.longestGapMs, results.KindGap)
		res.Figure(pfx+"secondsToConverged", st.convergedS, results.KindDuration)
		res.Figure(pfx+"softnetDropped", float64(st.softnetDropped), results.KindMachine)
		res.Figure(pfx+"peersWithoutRoute", float64(st.peersNoRoute), results.KindCount)
		res.Figure(pfx+"peerLongestNoRouteMs", st.peerNoRouteMs, results.KindGap)
		if st.peersNoRoute > 0 {
			stepsNoRoute++
		}
		if st.peerNoRouteMs > worstNoRoute {
			worstNoRoute, worstNoRouteAt = st.peerNoRouteMs, st.peerNoRouteWorst+"'s route to "+st.node
		}
		per = append(per, st.convergedS)
		gaps = append(gaps, st.longestGapMs)
		cpus = append(cpus, st.cpuPerS)
		lostOut, lostIn, lostSample = lostOut+st.lostOut, lostIn+st.lostIn, lostSample+st.lostSample
		if st.longestGapMs > worst {
			worst, worstFlow = st.longestGapMs, st.node+": "+st.longestGapFlow
		}
	}
	b.WriteString(tab.String())
	// A step whose upgraded node lost outbound probes: its whole probe
	// report (send errors, sender pauses, when each gap began) and the
	// kernel's backlog drops, so a failure can be told apart.
	for _, st := range steps {
		up := c.Node(st.node)
		if st.outHolesSinceChange > 0 {
			fmt.Fprintf(&b, "step %s: %d lost on its way out after the change began; kernel backlog drops during the step: %d\n%s", st.node, st.outHolesSinceChange, st.softnetDropped, results.GapTable(st.final))
			for _, f := range st.final.Flows {
				if isFrom(up, f.SrcAddr) && len(f.SendErrors) > 0 {
					fmt.Fprintf(&b, "  %s send errors: %v\n", f.Flow, f.SendErrors)
				}
			}
		}
	}
	// Inbound is reported, not judged: the design's claim is about the
	// destinations the upgraded node's programmer wants. A peer still
	// on pre-3.33 routes to the node's block by its own BIRD, which
	// graceful restart is meant to keep holding as stale across the
	// node's BIRD restart. In 5 of 80 steps at 20 nodes some did not:
	// both ends connected at once, the collision closed the first
	// session, and the peer took that for a second restart inside the
	// pending one, which flushes the stale routes (docs/scale.md).
	for _, st := range steps {
		if st.peersNoRoute > 0 {
			fmt.Fprintf(&b, "step %s: %d peers were without a route to its blocks, longest %.1f ms (%s); their sessions to it once converged (times from the change):\n  %s\n",
				st.node, st.peersNoRoute, st.peerNoRouteMs, st.peerNoRouteWorst, strings.Join(st.peerSessions, "\n  "))
		}
	}
	rollout := float64(end.Mono-start.Mono) / 1e9
	fmt.Fprintf(&b, "rollout: %d nodes in %.1f s (%.2f s per node median, %.2f max); lost out %d, in %d, sample %d; longest gap %.1f ms (%s)\n",
		n, rollout, medianOf(per), slices.Max(per), lostOut, lostIn, lostSample, worst, worstFlow)
	fmt.Fprintf(&b, "inbound routes: %d of %d steps had a peer without a route to the upgraded node's blocks; longest %.1f ms (%s)\n", stepsNoRoute, len(steps), worstNoRoute, worstNoRouteAt)
	fmt.Fprintf(&b, "flow plan per step: %s; %d probes/s per flow\n", steps[len(steps)-1].plan, scaleRate())
	fmt.Fprintf(&b, "harness CPU while probing: %.2f CPU-s/s median, %.2f max; BPF maps per session %d KiB in %d counters (%d B each)\n",
		medianOf(cpus), slices.Max(cpus), steps[0].mapBytes/1024, steps[0].counters, steps[0].mapBytes/max(1, steps[0].counters))
	fmt.Fprintf(&b, "memory: %d BIRDs %.1f MiB, %d programmers %.1f MiB, harness %.1f MiB (RSS); machine %.0f MiB, %.0f MiB available at the end\n",
		fp.BIRDs, mib(fp.BIRDBytes), fp.Programmers, mib(fp.ProgrammerBytes), mib(fp.HarnessBytes), mib(memTotal), mib(memAvail))
	res.Figure("rssBIRDBytes", float64(fp.BIRDBytes), results.KindMachine)
	res.Figure("rssProgrammerBytes", float64(fp.ProgrammerBytes), results.KindMachine)
	res.Figure("rssHarnessBytes", float64(fp.HarnessBytes), results.KindMachine)
	res.Figure("memAvailableBytesAtEnd", float64(memAvail), results.KindMachine)
	res.Figure("nodes", float64(n), results.KindSize)
	res.Figure("rolloutSeconds", rollout, results.KindDuration)
	res.Figure("secondsPerNodeMedian", medianOf(per), results.KindDuration)
	res.Figure("secondsPerNodeMax", slices.Max(per), results.KindDuration)
	res.Figure("lostOutboundUpgraded", float64(lostOut), results.KindLoss)
	res.Figure("lostInboundUpgraded", float64(lostIn), results.KindLoss)
	res.Figure("lostSample", float64(lostSample), results.KindLoss)
	res.Figure("longestProbeGapMs", worst, results.KindGap)
	res.Figure("longestGapMedianPerStepMs", medianOf(gaps), results.KindGap)
	res.Figure("stepsWithPeerWithoutRoute", float64(stepsNoRoute), results.KindCount)
	res.Figure("longestPeerNoRouteMs", worstNoRoute, results.KindGap)
	res.Figure("harnessCPUPerSecondMedian", medianOf(cpus), results.KindMachine)
	res.Figure("harnessCPUPerSecondMax", slices.Max(cpus), results.KindMachine)
	res.Figure("flowsPerStep", float64(len(steps[0].plan.Flows)), results.KindSize)
	res.Figure("probeRate", float64(scaleRate()), results.KindSize)
	res.Figure("bpfMapBytesPerSession", float64(steps[0].mapBytes), results.KindMachine)
	res.Figure("bpfCountersPerSession", float64(steps[0].counters), results.KindMachine)
	res.Notes = append(res.Notes, "flow plan per step: "+steps[0].plan.String())
	scenariotest.Record(fmt.Sprintf("rolling upgrade of %d nodes %s → 3.33 (%s, old BIRD SIGKILL)", n, headlineFrom, pool), b.String(), res)

}

// consecutiveKills is what the consecutive-restart spec saw at each second
// kill: peers without their session to the victim, the victim in recovery.
type consecutiveKills struct {
	atSecondSpaced   int
	recoveringSpaced bool
	atSecond         int
	recoveringQuick  bool
}

// recordConsecutiveRestart registers the consecutive-restart figures.
func recordConsecutiveRestart(c *harness.Cluster, victim string, n int, pool string, plan judge.FlowPlan, spaced, quick scaleStep, k consecutiveKills) {
	GinkgoHelper()
	// Peers' view (book): how long each was without a route to the
	// victim's blocks during each pair of restarts.
	var victimBlocks []string
	for _, blk := range c.Node(victim).NS.Blocks {
		victimBlocks = append(victimBlocks, blk.CIDR.String())
	}
	spacedNoRoute, spacedPeers := spaced.peerNoRouteMs, spaced.peersNoRoute
	quickNoRoute, quickPeers := quick.peerNoRouteMs, quick.peersNoRoute

	res := c.Result(fmt.Sprintf("consecutive restart, %d nodes, %s", n, pool), quick.final)
	var b strings.Builder
	tab := results.NewTable("second restart", "victim in GR recovery at 2nd kill", "peers without session at 2nd kill", "lost out", "lost in", "lost sample", "longest gap ms", "peers without route", "longest no-route ms").AlignRight()
	for _, r := range []struct {
		name            string
		recovering      bool
		st              scaleStep
		atSecond, peers int
		noRouteMs       float64
	}{{"after the window closed (control)", k.recoveringSpaced, spaced, k.atSecondSpaced, spacedPeers, spacedNoRoute},
		{"inside the GR window", k.recoveringQuick, quick, k.atSecond, quickPeers, quickNoRoute}} {
		tab.Add(r.name, r.recovering, r.atSecond, r.st.lostOut, r.st.lostIn, r.st.lostSample, results.Cellf("%.1f", r.st.longestGapMs), r.peers, results.Cellf("%.1f", r.noRouteMs))
	}
	b.WriteString(tab.String())
	fmt.Fprintf(&b, "victim %s blocks %s; flow plan: %s\n", victim, strings.Join(victimBlocks, ", "), plan)
	fmt.Fprintf(&b, "spaced: %s\nquick: %s\n", spaced.platform, quick.platform)
	for _, r := range []struct {
		name string
		st   scaleStep
	}{{"spaced", spaced}, {"quick", quick}} {
		if len(r.st.peerSessions) > 0 {
			fmt.Fprintf(&b, "%s: the peers without a route, their sessions to %s once converged (times from the first restart):\n  %s\n", r.name, victim, strings.Join(r.st.peerSessions, "\n  "))
		}
	}
	for _, r := range []struct {
		name       string
		st         scaleStep
		atSecond   int
		noRouteMs  float64
		peersNoRte int
	}{{"spaced", spaced, k.atSecondSpaced, spacedNoRoute, -1}, {"quick", quick, k.atSecond, quickNoRoute, quickPeers}} {
		res.Figure(r.name+".peersWithoutSessionAtSecondKill", float64(r.atSecond), results.KindSize) // the hazard's setup
		res.Figure(r.name+".lostIn", float64(r.st.lostIn), results.KindLoss)
		res.Figure(r.name+".lostOut", float64(r.st.lostOut), results.KindLoss)
		res.Figure(r.name+".longestGapMs", r.st.longestGapMs, results.KindGap)
		res.Figure(r.name+".longestNoRouteMs", r.noRouteMs, results.KindGap)
		res.Figure(r.name+".platformLostPerControlFlowMax", float64(r.st.platform.Max), results.KindMachine)
		if r.peersNoRte >= 0 {
			res.Figure(r.name+".peersWithoutRoute", float64(r.peersNoRte), results.KindCount)
		}
	}
	res.Figure("lostSample", float64(spaced.lostSample+quick.lostSample), results.KindLoss)
	scenariotest.Record(fmt.Sprintf("consecutive restart of %s (SIGKILL twice), %d nodes, %s", victim, n, pool), b.String(), res)

}

// peersWithoutSessionTo counts the other nodes whose BGP session to the
// victim is not Established: non-zero means they are inside its
// graceful-restart window (holding its routes as stale).
func peersWithoutSessionTo(ctx SpecContext, c *harness.Cluster, victim string) int {
	GinkgoHelper()
	down := 0
	for _, nd := range c.Net.Nodes {
		if nd.Name == victim {
			continue
		}
		ps, err := c.Node(nd.Name).BIRD.Client().Protocols(ctx)
		Expect(err).NotTo(HaveOccurred())
		for _, p := range ps {
			if p.Proto == "BGP" && p.BGPState != "Established" {
				down++
				break
			}
		}
	}
	return down
}

// victimInRecovery says whether the victim's BIRD is still in graceful-
// restart recovery: until it is done it has not sent End-of-RIB, so its
// peers still hold its routes as stale and the window is open — whether or
// not their sessions are Established again.
func victimInRecovery(ctx SpecContext, c *harness.Cluster, victim string) bool {
	GinkgoHelper()
	in, err := birdInRecovery(ctx, c.Node(victim))
	Expect(err).NotTo(HaveOccurred())
	return in
}
