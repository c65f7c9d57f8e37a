package scenarios_test

// Known gap without passive peering (design "Releases and upgrades": a
// connection collision during recovery drops the stale routes, which is
// why Calico's mesh is unidirectional). What Calico's `passive on` buys,
// as a figure.
//
// Calico's reason (projectcalico/calico 1183be5e13, "Use unidirectional
// BGP connections in the node-to-node mesh", 2018, merged as node PR #79,
// b6c369019343; the template comment beside `passive on` is still there
// on release-v3.31 3cdeae8f7ace, and 3.32/3.33's Go renderer keeps the
// rule with a one-line "avoid race conditions" note, processMeshPeers in
// confd/pkg/backends/calico/bgp_processor.go @ de60d98e97a7 and
// 6609dea54713): when a node's BIRD is
// gracefully restarting and its peer opens a connection of its own before
// the restart has completed, the restart is aborted and the routes flap.
// So each mesh session is opened by one end only: the end whose IP is the
// greater string connects, the other is `passive on`.
//
// The mechanism in BIRD 2.0.12 (proto/bgp/bgp.c, packets.c, nest/proto.c
// at tag v2.0.12), read for this spec:
//
//   - a restarted BIRD (-R) defers every export until each graceful-
//     restart-capable peer has sent End-of-RIB (nest/proto.c "graceful
//     restart recovery": BGP sets gr_wait and a channel lock), so until
//     then its peers hold its routes only as stale (the receiving side's
//     refresh cycle, begun in bgp_handle_graceful_restart);
//   - with both ends connecting, the pair has two connections at once,
//     and two ways to lose:
//   - late accept (the one a VM run's BIRD logs showed, docs/scenarios.md):
//     a BIRD that accepts a connection from a peer whose session it has
//     Established, graceful-restart-capable, takes it for that peer
//     restarting (bgp_incoming_connection) and closes the session. The
//     peer, its help for the restarted node still pending, sees its
//     session close and handles a second restart inside the first
//     ("already pending": end the refresh cycle, begin another): every
//     stale route the restarted node has not announced again is flushed
//     — all of them, since it announces nothing until its recovery ends;
//   - OpenConfirm race: bgp_rx_open resolves a collision against a
//     connection in OpenConfirm by keeping the one opened by the higher
//     router id and closing the other with a Cease, "connection collision
//     resolution" (6/7). The ends decide on their own views: if the
//     lower-id end (N) took its own connection to Established while the
//     higher-id end (D) still had it in OpenConfirm, D's Cease reaches N
//     on an Established session — leaving Established stops the protocol
//     (bgp_conn_leave_established_state → bgp_stop), a hard reset, no
//     graceful restart: N flushes every route D sent it. If D is the
//     restarted node its peer drops the restarted node's routes; if N is,
//     it drops its peer's, the flush releases its own recovery lock for
//     that peer, and when recovery ends its kernel protocol prunes the
//     persisted routes to the peer's blocks.
//
// Who wins is a race between packets on a node; the spec stages each way
// deterministically with an nftables table in the restarted node's
// namespace (Cluster.HoldBGP, instrument/bgphold), every step waiting for BIRD's protocol
// state, never a sleep:
//
//   - late accept: the restarted node's SYN is held until the peer has
//     connected (its BIRD in OpenSent, the handshake half-open in the
//     node's kernel, the rest of it held); then the node's own connection
//     goes through to Established at both ends, the peer's UPDATEs on it
//     held (in a real mesh the node's recovery lasts until every peer's
//     End-of-RIB; here that one peer's is held instead); then the peer's
//     handshake completes;
//   - OpenConfirm race: every OPEN between the pair is held until both
//     connections exist, then the OPENs of N's connection go through with
//     N's KEEPALIVE held (N Established, D in OpenConfirm), then N's OPEN
//     on D's connection.
//
// With passive on the passive end never connects, so there is never a
// second connection: the spec holds the active end's OPENs (keeping the
// restarted node in recovery), watches one full connect cycle of the
// passive end (connect delay + connect retry, the release's timers) for
// a second connection, and counts the passive end's SYNs.
//
// Guard (vacuity): the peer held the restarted node's routes as stale
// (its BIRD says "Neighbor graceful restart active") and the restarted
// BIRD was still in recovery when the second connection came; with
// passive off the session reset was the collision's (the last error BIRD
// records: "Graceful restart" at the restarted node for the late accept,
// "Connection collision resolution" at N for the race); with passive on
// the active end's connection came. Positive control: passive off aborts
// the restart — a no-route window, from the route timeline — or the spec
// fails, saying the gap closed. CI runs Calico's case (the restarted node
// greater, the late accept and its passive control);
// BIRDCAGE_DEPTH=collision runs the OpenConfirm race both ways and the
// other passive direction. The same late accept on a ToR session, where
// Calico renders no passive, is the second Describe below.

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/instrument/timeline"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

// collisionRace is which way the staged collision goes (see the top).
type collisionRace string

const (
	raceNone collisionRace = ""
	// raceLateAccept: the restarted BIRD accepts the peer's connection
	// after its own session to the peer is Established.
	raceLateAccept collisionRace = "late accept"
	// raceOpenConfirm: the lower-id end is Established on its own
	// connection while the higher-id end resolves the collision in
	// OpenConfirm against it.
	raceOpenConfirm collisionRace = "OpenConfirm race"
)

// The full form ($BIRDCAGE_DEPTH=collision, or full) runs every entry; CI
// runs Calico's case (node-3 restarted, the late accept without passive and
// its passive control): collisionInCI.
func collisionInCI(race collisionRace, restarted string, passive bool) bool {
	return restarted == "node-3" && (passive || race == raceLateAccept)
}

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

// birdLogCount counts the lines of n's BIRD log that contain substr.
func birdLogCount(n *harness.Node, substr string) int {
	GinkgoHelper()
	b, err := os.ReadFile(n.BIRD.LogPath())
	Expect(err).NotTo(HaveOccurred())
	return strings.Count(string(b), substr)
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
		func(ctx SpecContext, race collisionRace, restartedName, peerName string, passive bool) {
			if !scenariotest.Config.Full(env.DepthCollision) && !collisionInCI(race, restartedName, passive) {
				Skip("part of the collision spec's full form; set " + env.Set(env.Depth, env.DepthCollision))
			}
			By("1. a no-encap mesh on 3.33 (BIRD owns the routes), with the release's passive peering or without it")
			s := startCollisionPair(ctx, restartedName, peerName, passive)
			By("2. the restarted node's BIRD is SIGKILLed (a pod deletion); the peer keeps its routes as stale")
			s.killRestarted(ctx)
			By("3. hold what the race needs in the restarted node, then start its new BIRD with -R")
			s.holdAndRestart(ctx, race)
			switch {
			case !passive && race == raceOpenConfirm:
				By("4-6. the OpenConfirm race: both connections, N Established and D in OpenConfirm, then D's Cease")
				s.stageOpenConfirm(ctx)
			case !passive && race == raceLateAccept:
				By("4-6. the late accept: the peer half-open, the node's own session Established, then the peer's handshake")
				s.stageLateAccept(ctx)
			default:
				By("4. passive: only the active end connects; watch one full connect cycle of the passive end")
				s.watchPassiveEnd(ctx)
			}
			s.noteSessionStates(ctx)
			By("8. lift every hold; the sessions come up as BIRD makes them")
			s.liftHolds(ctx)
			By("9. the restarted BIRD's recovery ends, the cluster converges, every route of the pair is back")
			s.waitRecovered(ctx)
			By("10. the figures: route windows at both ends, deletes of persisted routes, lost probes between the pair")
			s.recordFigures(race)
			if !passive {
				By("11. the gap: the reset flushed routes, the restart aborted")
				s.expectRoutesFlushed(race)
				return
			}
			By("11. passive on: no second connection, no reset, no window")
			s.expectNoCollision(ctx)
		},
		Entry("no passive, late accept: node-3's BIRD takes node-2's second connection for node-2 restarting, and node-2 flushes node-3's stale routes", raceLateAccept, "node-3", "node-2", false),
		Entry("passive on (Calico): node-2 never connects to node-3, no second connection, the restart completes", raceNone, "node-3", "node-2", true),
		Entry("no passive, OpenConfirm race, the restarted node has the higher router id: node-2's Established session gets the collision's Cease and it flushes node-3's stale routes", raceOpenConfirm, "node-3", "node-2", false),
		Entry("no passive, OpenConfirm race, the restarted node has the lower router id: node-1's own session gets the Cease and its persisted routes to node-2 are pruned", raceOpenConfirm, "node-1", "node-2", false),
		Entry("passive on (Calico): node-1 never connects to node-2, no second connection, the restart completes", raceNone, "node-1", "node-2", true),
	)
})

// pathsOverTime is how long, within [from, to], the forwarding BIRD route
// to b on tl had fewer than want next hops (0 when it had want all along;
// the state before from is taken as want, which the caller's guard holds).
func lessPathsMs(tl *timeline.Monitor, b netip.Prefix, want int, from, to int64) float64 {
	GinkgoHelper()
	paths, since, total := want, from, 0.0
	for _, e := range tl.EventsFor(b, from, to) {
		Expect(e.Kind).NotTo(Equal(event.GapKind), "%s: the route timeline missed events for %s", tl.Name(), b)
		if e.Route.Protocol != kroute.ProtoBIRD {
			continue
		}
		n := len(e.Route.NextHops)
		if e.Kind == event.Delete || !e.Route.Forwards() {
			n = 0
		}
		if paths < want && n >= want {
			total += float64(e.At-since) / 1e6
		}
		if paths >= want && n < want {
			since = e.At
		}
		paths = n
	}
	if paths < want {
		total += float64(to-since) / 1e6
	}
	return total
}

// The same late accept on a ToR session. Calico renders no `passive` on a
// BGPPeer that is not a Calico node (buildPeer @ de60d98e97a7,
// 6609dea54713; T31's node-specific peers), and birdcage's ToRs connect
// too, so both ends of a node's ToR session connect, as shipped. Staged as
// in the mesh's late accept (node-1's SYN held until tor-1a connected; its
// own connection Established with tor-1a's UPDATEs held; then tor-1a's
// handshake completes): tor-1a, still helping node-1's graceful restart,
// flushes node-1's routes, so the other rack loses plane A to node-1's
// block until node-1's recovery ends. Guard: node-3 has both planes to
// node-1's block before, and tor-1a helps the restart (stale routes kept).
var _ = Describe("Connection collision on a ToR session during a restarted BIRD's recovery (known gap: Calico sets no passive toward a ToR)", Label("knowngap", "dualtor", "ecmp", "collision", "restart", "timing"), func() {
	DescribeTable("node-1 restarted, tor-1a's second connection accepted late",
		func(ctx SpecContext, duringRecovery bool) {
			By("a dual-ToR cluster on 3.33: node-1's session to tor-1a connects from both ends, node-3 on both planes to node-1's block")
			s := startTorCollision(ctx)
			By("node-1's BIRD SIGKILLed; tor-1a helps its graceful restart")
			s.killNode(ctx)
			By("node-1's SYN held until tor-1a connected, its own connection Established with tor-1a's UPDATEs held")
			s.establishNodeConnection(ctx)
			if !duringRecovery {
				By("control: tor-1a's routes and End-of-RIB through first, so node-1's recovery ends before the second connection")
				s.endRecoveryFirst(ctx)
			}
			By("tor-1a's handshake completes: node-1 takes the new connection for tor-1a restarting")
			s.acceptLate(ctx, duringRecovery)
			By("the figures: tor-1a's and node-3's windows to node-1's block, lost probes toward node-1")
			f := s.recordFigures(duringRecovery)
			Expect(f.noRouteMs).To(BeZero(), "node-3 always had plane B to node-1's block")
			if !duringRecovery {
				// A session bounce after recovery is not free either: BIRD
				// sets a family's Forwarding flag only while it recovers
				// (packets.c bgp_prepare_capabilities), so the helper ends
				// its help when the new session opens and its routes come
				// back as node-1 sends them again — a re-send, not a
				// recovery long.
				Expect(f.inRecovery).To(BeZero(), "control: tor-1a lost no route to node-1's block while node-1 was in recovery")
				return
			}
			Expect(f.inRecovery).To(BeNumerically(">", 0),
				"known gap closed: the late accept on node-1's ToR session during its recovery left tor-1a with its route to node-1's block. Update the design (a connection collision during recovery) for ToR sessions")
		},
		Entry("during node-1's recovery: tor-1a flushes node-1's stale routes, the other rack loses plane A to node-1's block", true),
		Entry("control, after node-1's recovery: tor-1a's help is done; its routes drop only for the new session's re-send", false),
	)
})
