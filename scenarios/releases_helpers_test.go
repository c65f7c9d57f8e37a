package scenarios_test

// Helpers for the per-BIRD-release scenarios (releases_*_test.go): finding a
// release or skipping naming it, starting a cluster on one release, the
// guards they share, BIRD's kernel exports whatever the release names its
// kernel protocols, and reading the route timeline as owner sequences.

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/dataplane/bird/birdtest"
	"github.com/birdcage/birdcage/dataplane/bird/release"
	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/topo"
)

// programmerProto is the design's programmer protocol as a kernel route
// protocol.
const programmerProto = designProgrammerProtocol

// releasesFullEnv runs the whole cross-release family; without it CI runs
// the reduced form (one claim per release, the persisted-routes claim's
// with one signal: persistSignals).
var releasesFullEnv = env.Set(env.Depth, env.DepthReleases)

func releasesFull() bool { return cfg.Full(env.DepthReleases) }

// needFull skips a spec of the full cross-release family unless
// $BIRDCAGE_DEPTH=releases, saying so.
func needFull(what string) {
	GinkgoHelper()
	if !releasesFull() {
		Skip(fmt.Sprintf("%s: part of the full cross-release family; set %s to run it (CI runs the reduced form)", what, releasesFullEnv))
	}
}

// needRelease finds a BIRD release for the running spec, or skips naming
// it (fails where BIRDCAGE_REQUIRE promised bird-<release>).
func needRelease(name release.Name) bird.Release {
	GinkgoHelper()
	return birdtest.NeedRelease(GinkgoT(), string(name))
}

// releaseLabel is the per-release label of the cross-release specs.
func releaseLabel(name release.Name) string { return name.Feature() }

// builtinTopology is a built-in topology, to vary before starting it.
func builtinTopology(name string) *topo.Topology {
	GinkgoHelper()
	t, err := topo.Builtin(name)
	Expect(err).NotTo(HaveOccurred(), "built-in topology %s", name)
	return t
}

// releaseCluster starts t with every node on BIRD release rel (skipping,
// naming it, where rel is not prepared) and the 3.33 programmer unless o
// names another release, and checks that every node's BIRD says it is
// rel. Routers (the dual-ToR fabric's ToRs) run the host's BIRD 2.0
// whatever rel is: the node's release is the variable.
func releaseCluster(ctx context.Context, rel release.Name, t *topo.Topology, o harness.Options) *harness.Cluster {
	GinkgoHelper()
	needRelease(rel)
	o.BIRD = string(rel)
	if o.Release == "" {
		o.Release = config.R333
	}
	c := startClusterOn(ctx, t, o)
	for _, n := range c.Nodes() {
		Expect(birdStatusLine(ctx, n.BIRD)).To(HavePrefix("BIRD "+string(rel)+"."), "guard: %s runs BIRD %s", n.Name, rel)
	}
	return c
}

// quickTimers gives o a 1 s programmer resync and a 1 s BIRD scan where it
// sets neither, so the settle windows of a spec (a few resyncs and scans)
// stay short.
func quickTimers(o harness.Options) harness.Options {
	if o.RouteRefreshInterval == 0 {
		o.RouteRefreshInterval = time.Second
	}
	if o.Timers.ScanTime == 0 {
		o.Timers = confd.Timers{ScanTime: 1}
	}
	return o
}

// expectBIRDPrograms waits until n's only route to each of blocks is
// BIRD's.
func expectBIRDPrograms(ctx context.Context, n *harness.Node, blocks []netip.Prefix, what string) {
	GinkgoHelper()
	for _, b := range blocks {
		Eventually(n).WithContext(ctx).WithTimeout(machine.Wait(30*time.Second)).WithPolling(50*time.Millisecond).
			Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByBIRD).Only(), "%s: BIRD programs %s on %s", what, b, n.Name)
	}
}

// expectNoEncapOwner waits until the no-encap class on c is want's on
// every remote block (noEncapOwner).
func expectNoEncapOwner(ctx context.Context, c *harness.Cluster, want judge.Owner, what string) {
	GinkgoHelper()
	Eventually(func() (judge.Owner, error) { o, _, err := noEncapOwner(ctx, c); return o, err }).WithContext(ctx).WithTimeout(machine.Wait(60*time.Second)).
		WithPolling(100*time.Millisecond).Should(Equal(want), what)
}

// birdStatusLine is the first line of `birdc show status` from b ("BIRD
// 2.0.12"): the release the daemon says it is, not the one the harness
// meant to start.
func birdStatusLine(ctx context.Context, b *bird.Instance) string {
	r, err := b.Client().Run(ctx, "show status")
	if err != nil || len(r.Lines) == 0 {
		return fmt.Sprintf("error: %v", err)
	}
	return strings.TrimSpace(r.Lines[0].Text)
}

// kernelExports is what n's BIRD exports to its kernel protocols (whatever
// the release calls them: kernel4/kernel6 as confd names them on 2.x and
// 3.x, kernel1 on 1.6's unnamed one), by prefix: true when the kernel
// refused the write. On 1.x it asks the IPv4 daemon.
func kernelExports(ctx context.Context, n *harness.Node) (map[netip.Prefix]bool, error) {
	ps, err := n.BIRD.Client().Protocols(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: birdc show protocols: %w", n.Name, err)
	}
	out := map[netip.Prefix]bool{}
	seen := 0
	for _, p := range ps {
		if p.Proto != "Kernel" {
			continue
		}
		seen++
		rs, err := n.BIRD.Client().Routes(ctx, "export "+p.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: birdc show route export %s: %w", n.Name, p.Name, err)
		}
		for _, r := range rs {
			out[r.Prefix] = out[r.Prefix] || r.Refused
		}
	}
	if seen == 0 {
		return nil, fmt.Errorf("%s: BIRD %s has no kernel protocol", n.Name, n.BIRDRelease().Name)
	}
	return out, nil
}

// birdBestVia is the next hops of n's BIRD's best route to p (none: no
// route). The best route is flagged `*`, or `!` when the kernel refused
// BIRD's write of it.
func birdBestVia(ctx context.Context, n *harness.Node, p netip.Prefix) ([]netip.Addr, string, error) {
	rs, err := n.BIRD.Client().Routes(ctx, p.String())
	if err != nil {
		return nil, "", err
	}
	for _, r := range rs {
		if r.Prefix == p && (r.Primary || r.Refused) {
			var out []netip.Addr
			for _, nh := range r.Nexthops {
				out = append(out, nh.Gateway)
			}
			return out, r.Protocol, nil
		}
	}
	return nil, "", nil
}

// kernelVia is the gateways of n's forwarding kernel routes to exactly p,
// with their protocols.
func kernelVia(n *harness.Node, p netip.Prefix) (map[netip.Addr]kroute.Protocol, error) {
	rs, err := n.Routes(p)
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]kroute.Protocol{}
	for _, r := range rs {
		if r.Dst != p || !r.Forwards() {
			continue
		}
		for _, g := range r.Gateways() {
			out[g] = r.Protocol
		}
	}
	return out, nil
}

// componentSwitches counts, in an owner sequence from the timeline
// (protocols, 0 = no forwarding route), the times the prefix's route went
// straight from one component's to the other's (programmer 80 ↔ BIRD 12,
// one replacing the other): the fight the design calls a flap. A route
// that goes and comes back, by the same component or the other (the
// handover on a block's new owner: the programmer's route deleted, BIRD's
// stale one written, then withdrawn), passes through a moment with no
// route and is counted as a no-route window instead.
func componentSwitches(owners []kroute.Protocol) int {
	n := 0
	for i := 1; i < len(owners); i++ {
		a, b := owners[i-1], owners[i]
		if (a == programmerProto && b == kroute.ProtoBIRD) || (a == kroute.ProtoBIRD && b == programmerProto) {
			n++
		}
	}
	return n
}

// ownerNames spells an owner sequence: prog, BIRD, none, or the protocol.
func ownerNames(owners []kroute.Protocol) string {
	var s []string
	for _, o := range owners {
		switch o {
		case programmerProto:
			s = append(s, "prog")
		case kroute.ProtoBIRD:
			s = append(s, "BIRD")
		case kroute.ProtoUnspec:
			s = append(s, "none")
		default:
			s = append(s, fmt.Sprint(o))
		}
	}
	return strings.Join(s, "→")
}

// lastPoolEvent is the time of the last route event for any of ps on any
// node (0: none since from).
func lastPoolEvent(c *harness.Cluster, ps []netip.Prefix, from int64) int64 {
	last := int64(0)
	for _, n := range c.Nodes() {
		for _, e := range c.Timeline(n.Name).Events() {
			if e.At >= from && e.Route.Table == kroute.MainTable && slices.Contains(ps, e.Route.Dst) {
				last = max(last, e.At)
			}
		}
	}
	return last
}

// sinceMs is the time from mono to now in ms.
func sinceMs(mono int64) float64 { return monoclock.Ms(monoclock.Now() - mono) }
