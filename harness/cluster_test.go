package harness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/poll"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/topo"
)

func startOrSkip(t *testing.T, name string, opts Options) *Cluster {
	t.Helper()
	testenv.NeedRoot(t)
	tp, err := topo.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := Start(ctx, tp, withTestEnv(opts))
	testenv.SkipIfMissing(t, err, "topology "+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster %s (%s) converged in %s", name, c.Run.ID, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		prefix := c.Run.Prefix
		stop := time.Now()
		if err := c.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		// ci/testsummary names a failed test by its last message: a
		// failed test's error stays last.
		if !t.Failed() {
			t.Logf("cluster %s stopped in %s", name, time.Since(stop).Round(time.Millisecond))
		}
		names, _ := nsutil.List()
		for _, n := range names {
			if strings.HasPrefix(n, prefix) {
				t.Errorf("namespace %s left after Stop", n)
			}
		}
	})
	return c
}

// A cluster on each topology converges, and probes between every pair of
// nodes flow without loss once it has.
func TestClusterConvergesAndProbesFlow(t *testing.T) {
	for _, name := range []string{"noencap", "ipip", "dualtor"} {
		t.Run(name, func(t *testing.T) {
			c := startOrSkip(t, name, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rep := probeUntil(ctx, t, c, 300)
			t.Logf("\n%s", results.GapTable(rep))
			if rep.Total.Lost != 0 {
				t.Errorf("a converged %s cluster lost %d probes", name, rep.Total.Lost)
			}
			// On IPIP every probe leaves its node through tunl0, and the
			// counter there (the L3 program) sees it.
			if name == "ipip" {
				for _, f := range rep.Flows {
					src := strings.SplitN(f.Flow, "-w", 2)[0]
					var at uint64
					for _, h := range f.Hops {
						if h.Hop == src+"/tunl0 egress" {
							at = h.Packets + h.Inner
						}
					}
					if at == 0 {
						t.Errorf("flow %s: no packet counted at %s/tunl0 egress (hops %+v)", f.Flow, src, f.Hops)
					}
				}
			}
		})
	}
}

// In the dual-ToR topology BIRD owns the no-encap routes, and each is
// multipath with one nexthop per ToR plane.
func TestDualToRRoutesAreMultipath(t *testing.T) {
	c := startOrSkip(t, "dualtor", Options{})
	for _, n := range c.Nodes() {
		for _, b := range c.RemoteBlocks(n.Name) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			var rs []kroute.Route
			err := poll.Until(ctx, 50*time.Millisecond, func() bool {
				rs, _ = n.Routes(b)
				return len(rs) == 1 && rs[0].Protocol == kroute.ProtoBIRD && len(rs[0].NextHops) == 2
			})
			cancel()
			if err != nil {
				t.Errorf("%s: want one proto bird route to %s with two nexthops (one per ToR), have %v", n.Name, b, rs)
			}
		}
	}
	// The cluster-wide matcher (one route dump per node) agrees, and its
	// control: the same routes are not the programmer's.
	bird := judge.HaveRemoteBlockRoutes().ProgrammedBy(judge.ByBIRD).Only()
	if ok, err := bird.Match(c); err != nil || !ok {
		t.Errorf("HaveRemoteBlockRoutes: %v %s", err, bird.FailureMessage(c))
	}
	prog := judge.HaveRemoteBlockRoutes().ProgrammedBy(judge.ByProgrammer)
	if ok, err := prog.Match(c); err != nil || ok {
		t.Errorf("control: BIRD's routes matched as the programmer's (err %v)", err)
	} else if !strings.Contains(prog.FailureMessage(c), "node-1: ") {
		t.Errorf("control: the failure names no (node, block) pair: %s", prog.FailureMessage(c))
	}
}

// UpgradeNode from pre-3.33 to 3.33 on IPIP ends with the node's IPIP
// cluster routes at the programmer's protocol and no BIRD route left.
func TestUpgradeNodeEndState(t *testing.T) {
	c := startOrSkip(t, "ipip", Options{Release: config.Pre333})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.UpgradeNode(ctx, "node-2", config.R333, UpgradeOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	n := c.Node("node-2")
	for _, b := range c.RemoteBlocks("node-2") {
		m := judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer).Via(topo.TunnelDevice)
		if err := poll.Until(ctx, 50*time.Millisecond, func() bool { ok, _ := m.Match(n); return ok }); err != nil {
			t.Error(m.FailureMessage(n))
		}
		noBird := func() bool {
			rs, _ := n.Routes(b)
			for _, r := range rs {
				if r.Protocol == kroute.ProtoBIRD {
					return false
				}
			}
			return true
		}
		if err := poll.Until(ctx, 100*time.Millisecond, noBird); err != nil {
			rs, _ := n.Routes(b)
			t.Errorf("node-2 still has a proto bird route to %s after recovery: %v", b, rs)
		}
	}
}

// A corrupt datastore document is reported with its file and field, and
// no component restarts over it.
func TestCorruptDocumentNamesFileAndFieldAndRestartsNothing(t *testing.T) {
	c := startOrSkip(t, "noencap", Options{})
	path := filepath.Join(c.Store.Dir, string(datastore.KindFelixConfiguration), datastore.SingletonName+".json")
	if err := os.WriteFile(path, []byte(`{"programClusterRoutes": "Enabled", "deviceRouteProtocol": "eighty"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Store.Read(ctx)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "deviceRouteProtocol") {
		t.Fatalf("reading a corrupt FelixConfiguration: error %v does not name %s and field deviceRouteProtocol", err, path)
	}
	// Every programmer has seen it (a sync error), and none restarted.
	for _, n := range c.Nodes() {
		if err := poll.Until(ctx, 20*time.Millisecond, func() bool { st, err := n.Programmer.Status(); return err == nil && st.SyncErrors > 0 }); err != nil {
			st, _ := n.Programmer.Status()
			t.Errorf("%s: programmer never reported the corrupt document: %+v", n.Name, st)
		}
		if rs := n.Programmer.Restarts(); len(rs) != 0 {
			t.Errorf("%s: programmer restarted over a corrupt document: %+v", n.Name, rs)
		}
	}
}

// BeExportedTo: a node exports its own block to its iBGP peers (positive
// control) and, with BIRD owning no-encap, not another node's block.
func TestExportMatcher(t *testing.T) {
	c := startOrSkip(t, "noencap", Options{})
	n1, n2, n3 := c.Net.Nodes[0], c.Net.Nodes[1], c.Net.Nodes[2]
	peer := n2.Address.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	own := judge.BeExportedTo(n1.Blocks[0].CIDR, peer)
	if err := poll.Until(ctx, 50*time.Millisecond, func() bool { ok, _ := own.Match(c.Node(n1.Name)); return ok }); err != nil {
		t.Fatal(own.FailureMessage(c.Node(n1.Name)))
	}
	other := judge.BeExportedTo(n3.Blocks[0].CIDR, peer)
	if ok, err := other.Match(c.Node(n1.Name)); err != nil || ok {
		t.Errorf("%v: %s", err, other.NegatedFailureMessage(c.Node(n1.Name)))
	}
	if _, err := judge.BeExportedTo(n1.Blocks[0].CIDR, n1.Address.Addr()).Match(c.Node(n1.Name)); err == nil {
		t.Error("a peer the node has no session to must be an error, not a mismatch")
	}
}

// probeUntil probes every node pair until perFlow probes per flow arrived
// (observed on the counters) and returns the stopped session's report.
func probeUntil(ctx context.Context, t *testing.T, c *Cluster, perFlow uint64) *probe.Report {
	t.Helper()
	s, err := c.Probes(ctx, ProbeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := poll.Until(ctx, 10*time.Millisecond, func() bool {
		rep, err := s.Report()
		return err == nil && rep.Total.Received >= perFlow*uint64(len(rep.Flows))
	}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
