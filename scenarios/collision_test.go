package scenarios_test

// Known gap without passive peering (design "Releases and upgrades": a
// connection collision during recovery drops the stale routes, which is
// why Calico's mesh is unidirectional). What Calico's `passive on` buys,
// as a figure.
//
// Calico's reason (projectcalico/calico 1183be5e13, "Use unidirectional
// BGP connections in the node-to-node mesh", 2018, merged as node PR #79,
// b6c369019343; the comment beside `passive on` in bird.cfg.template is
// still there on release-v3.31 3cdeae8f7ace): when a node's BIRD is
// gracefully restarting and its peer opens a connection of its own before
// the restart has completed, the restart is aborted and the routes flap.
// So each mesh session is opened by one end only: the end whose IP is the
// greater string connects, the other is `passive on`.
//
// The mechanism in BIRD 2.0.12 (proto/bgp/bgp.c, packets.c at tag
// v2.0.12), read for this spec:
//
//   - a restarted BIRD (-R) defers every export until each graceful-
//     restart-capable peer has sent End-of-RIB (nest/proto.c graceful
//     restart recovery; BGP sets gr_wait and a channel lock), so until
//     then its peers hold its routes only as stale (the receiving side's
//     refresh cycle, bgp_handle_graceful_restart);
//   - with both ends connecting, each BIRD has two connections to the
//     other at once. bgp_rx_open resolves the collision when the other
//     connection is in OpenConfirm: the connection opened by the router
//     with the higher router id is kept, the other closed with a Cease,
//     "connection collision resolution" (6/7); one already Established
//     is kept and the new one closed;
//   - the two ends decide on their own views. If the lower-id end (N)
//     already took its own connection to Established while the higher-id
//     end (D) still had it in OpenConfirm when D read the OPEN on D's own
//     connection, D closes N's connection with the Cease — and N receives
//     a Cease on an Established session (bgp_rx_notification: code 6 is
//     no error, but leaving Established stops the protocol: bgp_stop,
//     not bgp_handle_graceful_restart). A hard session reset: N flushes
//     every route D sent it, stale or not, graceful restart or not.
//   - so if D is the restarted node, its peer N drops the restarted
//     node's routes until D's recovery ends and it exports again
//     (Calico's case: "routes flushed on the peer"); if N is the
//     restarted node, it drops its peer's routes, the flush releases its
//     own recovery lock for that peer, and when recovery ends its kernel
//     protocol prunes the persisted routes to the peer's blocks.
//
// Whether N gets there first is a race between packets on a node; the
// spec stages it deterministically: an nftables table in the restarted
// node's namespace (harness.HoldBGP) holds every OPEN between the pair
// until both connections exist, then lets through the OPENs of N's
// connection while holding N's KEEPALIVE on it (N reaches Established, D
// stays in OpenConfirm), then N's OPEN on D's connection — the order of
// the race BIRD loses. Each step waits for BIRD's protocol state, never a
// sleep. With passive on the passive end never connects, so there is
// never a second connection: the spec watches for one through one full
// connect cycle of the passive end (connect delay + connect retry, the
// release's timers) and counts its SYNs.
//
// Guard (vacuity): the peer held the restarted node's routes as stale
// (its BIRD says "Neighbor graceful restart active") and the restarted
// BIRD was still in recovery when the collision was set up; with passive
// off both connections existed at once and the session reset was the
// collision's Cease; with passive on the active end's connection came.
// Positive control: passive off aborts the restart — a route window at N
// for D's blocks — or the spec fails, saying the gap closed.

import (
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/bird"
	"github.com/birdcage/birdcage/harness/confd"
	"github.com/birdcage/birdcage/harness/timeline"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/testenv"
)

// peerToward is n's rendered session to the node at addr.
func peerToward(n *harness.Node, addr netip.Addr) confd.Peer {
	GinkgoHelper()
	for _, p := range n.Peers() {
		if p.Address == addr {
			return p
		}
	}
	Fail(fmt.Sprintf("%s renders no session to %s (peers %v)", n.Name, addr, n.Peers()))
	return confd.Peer{}
}

// bgpProtocol is n's BIRD's `show protocols all NAME`, parsed, and its text.
func bgpProtocol(ctx SpecContext, n *harness.Node, name string) (bird.Protocol, string) {
	GinkgoHelper()
	r, err := n.BIRD.Client().Run(ctx, "show protocols all "+name)
	Expect(err).NotTo(HaveOccurred())
	ps, err := bird.ParseProtocols(r)
	Expect(err).NotTo(HaveOccurred())
	Expect(ps).To(HaveLen(1), "%s: show protocols all %s", n.Name, name)
	return ps[0], r.Text()
}

func inGracefulRestartRecovery(ctx SpecContext, n *harness.Node) bool {
	GinkgoHelper()
	r, err := n.BIRD.Client().Run(ctx, "show status")
	Expect(err).NotTo(HaveOccurred())
	return strings.Contains(r.Text(), "Graceful restart recovery in progress")
}

// windowsMs sums the no-route windows tl saw for blocks in [from, to],
// failing on a span the timeline cannot judge.
func windowsMs(tl *timeline.Monitor, blocks []netip.Prefix, from, to int64) (float64, []string) {
	GinkgoHelper()
	total := 0.0
	var lines []string
	for _, b := range blocks {
		for _, w := range tl.NoRouteWindows(b, from, to) {
			Expect(w.Unjudgeable).To(BeEmpty(), "%s: %s", tl.Name(), b)
			total += w.Ms()
			lines = append(lines, fmt.Sprintf("%s: no route to %s for %.1f ms", tl.Name(), b, w.Ms()))
		}
	}
	return total, lines
}

func blocksOf(n *harness.Node) []netip.Prefix {
	var out []netip.Prefix
	for _, b := range n.NS.Blocks {
		out = append(out, b.CIDR)
	}
	return out
}

var _ = Describe("Connection collision during a restarted BIRD's graceful-restart recovery: what Calico's passive mesh buys (known gap without passive)", Label("knowngap", "noencap", "collision", "restart", "timing"), func() {
	DescribeTable("a second connection between a restarted node and its peer",
		func(ctx SpecContext, restartedName, peerName string, passive bool) {
			// 1. A no-encap mesh on 3.33 (BIRD owns the routes), with
			// the release's passive peering or without it.
			c := startCluster(ctx, "noencap", harness.Options{Release: config.R333, Knobs: confd.Knobs{NoPassive: !passive}})
			r, p := c.Node(restartedName), c.Node(peerName)
			rAddr, pAddr := r.NS.Address.Addr(), p.NS.Address.Addr()
			rSess, pSess := peerToward(r, pAddr), peerToward(p, rAddr)
			if passive {
				Expect(rSess.Passive).To(Equal(pAddr.String() > rAddr.String()), "guard: %s is passive toward %s exactly when %s is the greater string", r.Name, p.Name, pAddr)
				Expect(pSess.Passive).To(Equal(rAddr.String() > pAddr.String()), "guard: %s is passive toward %s exactly when %s is the greater string", p.Name, r.Name, rAddr)
			} else {
				Expect(rSess.Passive || pSess.Passive).To(BeFalse(), "guard: with no-passive both ends connect")
			}
			// BIRD's router id is the node's IPv4 address (render); the
			// higher one is dominant in collision resolution.
			dom, non := r, p
			if pAddr.Compare(rAddr) > 0 {
				dom, non = p, r
			}
			domSess, nonSess := peerToward(dom, non.NS.Address.Addr()), peerToward(non, dom.NS.Address.Addr())
			rBlocks, pBlocks := blocksOf(r), blocksOf(p)
			Expect(rBlocks).NotTo(BeEmpty())
			Expect(pBlocks).NotTo(BeEmpty())
			for _, b := range rBlocks {
				Eventually(p).WithTimeout(scaled(30*time.Second)).WithPolling(50*time.Millisecond).Should(harness.HaveClusterRoute(b).ProgrammedBy(harness.ByBIRD), "guard: %s has BIRD's route to %s's block %s", p.Name, r.Name, b)
			}
			for _, b := range pBlocks {
				Eventually(r).WithTimeout(scaled(30*time.Second)).WithPolling(50*time.Millisecond).Should(harness.HaveClusterRoute(b).ProgrammedBy(harness.ByBIRD), "guard: %s has BIRD's route to %s's block %s", r.Name, p.Name, b)
			}

			probes, err := c.Probes(ctx, harness.ProbeOptions{})
			Expect(err).NotTo(HaveOccurred())

			// 2. The restarted node's BIRD is SIGKILLed (a pod deletion);
			// the peer keeps its routes as stale.
			kill := act(c.KillBIRD(ctx, r.Name, syscall.SIGKILL))
			Eventually(func() string { _, t := bgpProtocol(ctx, p, pSess.Protocol); return t }).
				WithTimeout(scaled(30*time.Second)).WithPolling(20*time.Millisecond).
				Should(ContainSubstring("Neighbor graceful restart active"), "guard: %s helps %s's graceful restart (stale routes kept)", p.Name, r.Name)

			// 3. Before the new BIRD starts, hold every OPEN between the
			// pair, and N's KEEPALIVE on N's own connection. The rules sit
			// in the restarted node; conn names say who opened it.
			nConn, dConn, nToD := harness.PeerOpened, harness.NodeOpened, harness.FromPeer
			if non == r {
				nConn, dConn, nToD = harness.NodeOpened, harness.PeerOpened, harness.ToPeer
			}
			openOn := func(dir harness.BGPDir, conn harness.BGPConn) harness.BGPHoldRule {
				return harness.BGPHoldRule{Dir: dir, Conn: conn, Msg: harness.BGPOpen}
			}
			nKeepalive := harness.BGPHoldRule{Dir: nToD, Conn: nConn, Msg: harness.BGPKeepalive}
			hold, err := c.HoldBGP(ctx, r.Name, pAddr,
				openOn(harness.FromPeer, harness.PeerOpened), openOn(harness.ToPeer, harness.PeerOpened),
				openOn(harness.FromPeer, harness.NodeOpened), openOn(harness.ToPeer, harness.NodeOpened),
				nKeepalive)
			if err == harness.ErrNoNft {
				testenv.Missing(GinkgoT(), "nftables", "the collision is staged with an nftables table in the node's namespace: "+err.Error())
			}
			Expect(err).NotTo(HaveOccurred())

			// 4. The new BIRD starts with -R (graceful-restart recovery).
			start := act(c.StartBIRD(ctx, r.Name, harness.StartBIRDOptions{Recovery: true}))

			var notes []string
			bothConnections, sessionReset := false, false
			if !passive {
				// 5. Both ends connect: wait for both connections.
				Eventually(func() []int {
					a, b, err := hold.Connections(ctx)
					Expect(err).NotTo(HaveOccurred())
					return []int{a, b}
				}).
					WithTimeout(scaled(30*time.Second)).WithPolling(20*time.Millisecond).
					Should(Equal([]int{1, 1}), "both %s and %s open a connection to the other (OPENs held)", r.Name, p.Name)
				bothConnections = true
				Expect(inGracefulRestartRecovery(ctx, r)).To(BeTrue(), "guard: %s is still in graceful-restart recovery when the collision is set up", r.Name)
				c.Mark("collision set up: two connections")

				// 6. N's connection: OPENs through, N's KEEPALIVE held. N
				// reaches Established, D stays in OpenConfirm.
				Expect(hold.Release(ctx, openOn(harness.FromPeer, nConn), openOn(harness.ToPeer, nConn))).To(Succeed())
				Eventually(func() []string {
					np, _ := bgpProtocol(ctx, non, nonSess.Protocol)
					dp, _ := bgpProtocol(ctx, dom, domSess.Protocol)
					return []string{np.BGPState, dp.BGPState}
				}).WithTimeout(scaled(30*time.Second)).WithPolling(20*time.Millisecond).
					Should(Equal([]string{"Established", "OpenConfirm"}), "%s (lower router id) Established on its own connection, %s (higher) in OpenConfirm on it", non.Name, dom.Name)
				c.Mark(fmt.Sprintf("%s Established, %s OpenConfirm", non.Name, dom.Name))

				// 7. N's OPEN on D's connection through: D resolves the
				// collision in favour of its own connection and closes
				// N's with a Cease, which N receives on an Established
				// session.
				Expect(hold.Release(ctx, openOn(nToD, dConn))).To(Succeed())
				Eventually(func() string { np, _ := bgpProtocol(ctx, non, nonSess.Protocol); return np.Details["Last error"] }).
					WithTimeout(scaled(30*time.Second)).WithPolling(20*time.Millisecond).
					Should(ContainSubstring("collision"), "%s's session is reset by the collision's Cease", non.Name)
				sessionReset = true
				np, _ := bgpProtocol(ctx, non, nonSess.Protocol)
				notes = append(notes, fmt.Sprintf("%s after the collision: state %s, BGP state %s, last error %q", non.Name, np.State, np.BGPState, np.Details["Last error"]))
				c.Mark("collision: " + non.Name + " reset")
			} else {
				// 5. Only the active end connects: wait for its connection,
				// then watch one full connect cycle of the passive end.
				activeIsR := !rSess.Passive
				passiveEnd := r
				if activeIsR {
					passiveEnd = p
				}
				conns := func() []int {
					a, b, err := hold.Connections(ctx)
					Expect(err).NotTo(HaveOccurred())
					return []int{a, b}
				}
				want := []int{0, 1}
				if activeIsR {
					want = []int{1, 0}
				}
				Eventually(conns).WithTimeout(scaled(30*time.Second)).WithPolling(20*time.Millisecond).
					Should(Equal(want), "the active end's connection (node-opened, peer-opened)")
				Expect(inGracefulRestartRecovery(ctx, r)).To(BeTrue(), "guard: %s is still in graceful-restart recovery while the passive end could connect", r.Name)
				cycle := time.Duration(config.ConnectDelayTime+config.ConnectRetryTime) * time.Second
				Consistently(conns).WithTimeout(scaled(cycle)).WithPolling(50*time.Millisecond).
					Should(Equal(want), "%s is passive toward the other end: no second connection within one connect cycle (%s)", passiveEnd.Name, cycle)
				notes = append(notes, fmt.Sprintf("%s passive: watched %s with the active end's OPENs held, no second connection", passiveEnd.Name, scaled(cycle)))
			}

			// 8. Lift every hold; the sessions come up as BIRD makes them.
			counts, err := hold.Counts(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(hold.Close()).To(Succeed())
			lifted := c.Mark("BGP hold lifted")
			for rule, n := range counts.Dropped {
				notes = append(notes, fmt.Sprintf("held (still at the end of staging) %s: %d packets dropped", rule, n))
			}

			// 9. Wait for the restarted BIRD's recovery to end, the cluster
			// to converge and every route of the pair to be back.
			Eventually(func() bool { return inGracefulRestartRecovery(ctx, r) }).
				WithTimeout(scaled(60*time.Second)).WithPolling(20*time.Millisecond).Should(BeFalse(), "%s's graceful-restart recovery ends", r.Name)
			recoveredMs := sinceMs(start.Mono)
			Expect(c.WaitConverged(ctx)).To(Succeed())
			for _, b := range rBlocks {
				Eventually(p).WithTimeout(scaled(30*time.Second)).WithPolling(50*time.Millisecond).Should(harness.HaveClusterRoute(b).ProgrammedBy(harness.ByBIRD), "%s's route to %s back", p.Name, b)
			}
			for _, b := range pBlocks {
				Eventually(r).WithTimeout(scaled(30*time.Second)).WithPolling(50*time.Millisecond).Should(harness.HaveClusterRoute(b).ProgrammedBy(harness.ByBIRD), "%s's route to %s back", r.Name, b)
			}
			end := c.Mark("converged after the restart")
			rep, err := probes.Stop()
			Expect(err).NotTo(HaveOccurred())

			// 10. The figures: route windows at both ends of the pair from
			// the timelines, deletes of the restarted node's persisted
			// routes, lost probes between the pair.
			ptl, rtl := c.Timeline(p.Name), c.Timeline(r.Name)
			Expect(ptl.Judgeable(kill.Mono, end.Mono)).To(Succeed(), "%s's route timeline saw the whole restart", p.Name)
			Expect(rtl.Judgeable(kill.Mono, end.Mono)).To(Succeed(), "%s's route timeline saw the whole restart", r.Name)
			peerMs, peerLines := windowsMs(ptl, rBlocks, kill.Mono, end.Mono)
			nodeMs, nodeLines := windowsMs(rtl, pBlocks, kill.Mono, end.Mono)
			deleted := 0
			for _, b := range pBlocks {
				for _, e := range rtl.EventsFor(b, kill.Mono, end.Mono) {
					if e.Kind == timeline.Delete && e.Route.Protocol == kroute.ProtoBIRD {
						deleted++
					}
				}
			}
			var lostPR, lostRP int64
			for _, f := range rep.Flows {
				switch {
				case isFrom(p, f.SrcAddr) && isFrom(r, f.DstAddr):
					lostPR += f.Lost
				case isFrom(r, f.SrcAddr) && isFrom(p, f.DstAddr):
					lostRP += f.Lost
				}
			}
			mode := "passive on (Calico)"
			if !passive {
				mode = "no passive"
			}
			res := c.Result(fmt.Sprintf("collision during graceful-restart recovery, %s restarted, peer %s, %s", r.Name, p.Name, mode), rep)
			b2f := func(b bool) float64 {
				if b {
					return 1
				}
				return 0
			}
			res.Figures["collisionBothConnections"] = b2f(bothConnections)
			res.Figures["collisionSessionReset"] = b2f(sessionReset)
			res.Figures["peerConnectAttempts"] = float64(counts.PeerSYNs)
			res.Figures["restartedConnectAttempts"] = float64(counts.NodeSYNs)
			res.Figures["peerNoRouteToRestartedMs"] = peerMs
			res.Figures["restartedNoRouteToPeerMs"] = nodeMs
			res.Figures["restartedPersistedRoutesDeleted"] = float64(deleted)
			res.Figures["lostPeerToRestarted"] = float64(lostPR)
			res.Figures["lostRestartedToPeer"] = float64(lostRP)
			res.Figures["gracefulRestartRecoveryMs"] = recoveredMs
			notes = append(notes, peerLines...)
			notes = append(notes, nodeLines...)
			notes = append(notes, fmt.Sprintf("hold lifted %.0f ms after the new BIRD started", float64(lifted.Mono-start.Mono)/1e6))
			res.Notes = append(res.Notes, notes...)
			report(fmt.Sprintf("%s restarted (peer %s, %s): second connection %v, session reset by the collision %v; %s without a route to %s %.1f ms, %s without a route to %s %.1f ms, %d persisted routes deleted; lost %s→%s %d, %s→%s %d; SYNs peer %d, restarted %d",
				r.Name, p.Name, mode, bothConnections, sessionReset, p.Name, r.Name, peerMs, r.Name, p.Name, nodeMs, deleted,
				p.Name, r.Name, lostPR, r.Name, p.Name, lostRP, counts.PeerSYNs, counts.NodeSYNs),
				strings.Join(notes, "\n")+"\n"+harness.GapTable(rep), res)

			if !passive {
				// 11. The gap: the reset flushed the dominant end's routes
				// at the other end — the restart aborted.
				flushMs, at, of := peerMs, p.Name, r.Name
				if non == r {
					flushMs, at, of = nodeMs, r.Name, p.Name
				}
				Expect(flushMs).To(BeNumerically(">", 0),
					"known gap closed: the collision's reset during %s's recovery left %s with a route to %s's blocks throughout. "+
						"Update the design (\"Releases and upgrades\": a connection collision during recovery drops the stale routes) and turn this entry into a claim", r.Name, at, of)
				return
			}
			// 11. Passive on: no second connection, no reset, no window.
			passiveSYNs := counts.PeerSYNs
			if rSess.Passive {
				passiveSYNs = counts.NodeSYNs
			}
			Expect(passiveSYNs).To(BeZero(), "the passive end sent no SYN")
			np, _ := bgpProtocol(ctx, non, nonSess.Protocol)
			Expect(np.Details["Last error"]).NotTo(ContainSubstring("collision"), "no collision with passive peering")
			Expect(peerLines).To(BeEmpty(), "with passive peering %s never lost its route to %s's blocks", p.Name, r.Name)
			Expect(nodeLines).To(BeEmpty(), "with passive peering %s never lost its route to %s's blocks", r.Name, p.Name)
			Expect(deleted).To(BeZero(), "with passive peering %s deleted none of its persisted routes to %s's blocks", r.Name, p.Name)
		},
		Entry("no passive, the restarted node has the higher router id: the peer's session is reset and it flushes the restarted node's stale routes", "node-3", "node-2", false),
		Entry("passive on (Calico): node-2 never connects to node-3, no collision, the restart completes", "node-3", "node-2", true),
		Entry("no passive, the restarted node has the lower router id: its own session is reset, its persisted routes to the peer are pruned", "node-1", "node-2", false),
		Entry("passive on (Calico): node-1 never connects to node-2, no collision, the restart completes", "node-1", "node-2", true),
	)
})
