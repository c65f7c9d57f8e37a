package harness

import (
	"context"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/poll"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/topo"
)

// startGenerated starts a cluster on a generated topology spec.
func startGenerated(t *testing.T, spec string, opts Options) *Cluster {
	t.Helper()
	testenv.NeedRoot(t)
	tp, err := topo.Resolve(topo.GeneratedPrefix + spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := Start(ctx, tp, withTestEnv(opts))
	testenv.SkipIfMissing(t, err, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster %s (%d nodes) converged in %s", spec, len(c.Nodes()), time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return c
}

// A generated dual-ToR fabric of three racks joined by a spine per plane:
// every remote block is one BIRD route with a nexthop per plane (the spine
// carries the other racks' blocks), and probes between nodes of different
// racks flow without loss. A generated L2 cluster with route reflectors
// instead of the mesh converges and carries probes too.
func TestGeneratedClustersConvergeAndCarryProbes(t *testing.T) {
	for _, spec := range []string{"nodes=6,fabric=dualtor,racks=3", "nodes=6,rr=2"} {
		t.Run(spec, func(t *testing.T) {
			c := startGenerated(t, spec, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			planes := 1
			if len(c.Fabric().Routers()) > 0 {
				planes = 2
			}
			for _, n := range c.Nodes() {
				for _, b := range c.RemoteBlocks(n.Name) {
					var rs []kroute.Route
					err := poll.Until(ctx, 50*time.Millisecond, func() bool {
						rs, _ = n.Routes(b)
						if len(rs) != 1 || rs[0].Protocol != kroute.ProtoBIRD {
							return false
						}
						return planes == 1 || len(rs[0].NextHops) == planes
					})
					if err != nil {
						t.Errorf("%s: want one proto bird route to %s with %d nexthop(s), have %v", n.Name, b, planes, rs)
					}
				}
			}
			s, err := c.Probes(ctx, ProbeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := poll.Until(ctx, 10*time.Millisecond, func() bool {
				rep, err := s.Report()
				return err == nil && rep.Total.Received >= uint64(200*len(rep.Flows))
			}); err != nil {
				t.Fatalf("probes did not flow: %v", err)
			}
			rep, err := s.Stop()
			if err != nil {
				t.Fatal(err)
			}
			if rep.Total.Lost != 0 {
				t.Errorf("a converged %s cluster lost %d probes:\n%s", spec, rep.Total.Lost, results.GapTable(rep))
			}
		})
	}
}
