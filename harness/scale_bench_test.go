package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/poll"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/topo"
)

// scaleSizes are the cluster sizes BenchmarkClusterScale runs: the run's
// $BIRDCAGE_SCALE_NODES (default 10,50; 100 and more are opt-in:
// BIRDCAGE_SCALE_NODES=10,50,100).
func scaleSizes(b *testing.B) []int {
	if s := testenv.Env().ScaleNodes; len(s) > 0 {
		return s
	}
	return []int{10, 50}
}

// BenchmarkClusterScale: a whole cluster — topology, datastore, a
// programmer and a BIRD container per node — at N nodes, as an iBGP full
// mesh and with two route reflectors, from Start to converged and stopped:
//
//	ms/topology  namespaces, links and addresses built
//	ms/up        Start returned: every BGP session Established and every
//	             programmer synced once
//	ms/routes    every node has a route to every other node's block
//	ms/down      Stop returned (processes stopped, namespaces deleted)
//	MB/bird, MB/programmer, MB/harness  resident memory when converged
//	routes/node  the remote-block routes each node ends with
//
// and, in the same run, the same node namespaces built by one `ip` command
// per operation (ms/ip-up, ms/ip-down) as the yardstick. Run as root with
// -benchtime=1x; sizes from BIRDCAGE_SCALE_NODES.
func BenchmarkClusterScale(b *testing.B) {
	testenv.NeedRoot(b)
	for _, n := range scaleSizes(b) {
		for _, shape := range []string{"mesh", "rr=2"} {
			spec := fmt.Sprintf("nodes=%d", n)
			if shape != "mesh" {
				spec += "," + shape
			}
			b.Run(spec, func(b *testing.B) {
				var m scaleMetrics
				for range b.N {
					m.add(scaleOnce(b, spec))
				}
				m.report(b)
			})
		}
		b.Run(fmt.Sprintf("nodes=%d,iproute2", n), func(b *testing.B) {
			var up, down time.Duration
			for range b.N {
				r, err := run.New()
				if err != nil {
					b.Fatal(err)
				}
				u, d, err := testenv.IPCommandBaseline(r, n, 1)
				r.Close()
				if err != nil {
					b.Fatal(err)
				}
				up, down = up+u, down+d
			}
			b.ReportMetric(monoclock.Ms(up)/float64(b.N), "ms/ip-up")
			b.ReportMetric(monoclock.Ms(down)/float64(b.N), "ms/ip-down")
		})
	}
}

type scaleMetrics struct {
	n                                  int
	topology, up, routes, down         time.Duration
	bird, programmer, harness, perNode float64
}

func (m *scaleMetrics) add(o scaleMetrics) {
	m.n++
	m.topology += o.topology
	m.up += o.up
	m.routes += o.routes
	m.down += o.down
	m.bird += o.bird
	m.programmer += o.programmer
	m.harness += o.harness
	m.perNode += o.perNode
}

func (m *scaleMetrics) report(b *testing.B) {
	k := float64(m.n)
	b.ReportMetric(monoclock.Ms(m.topology)/k, "ms/topology")
	b.ReportMetric(monoclock.Ms(m.up)/k, "ms/up")
	b.ReportMetric(monoclock.Ms(m.routes)/k, "ms/routes")
	b.ReportMetric(monoclock.Ms(m.down)/k, "ms/down")
	b.ReportMetric(m.bird/k, "MB/bird")
	b.ReportMetric(m.programmer/k, "MB/programmer")
	b.ReportMetric(m.harness/k, "MB/harness")
	b.ReportMetric(m.perNode/k, "routes/node")
}

func scaleOnce(b *testing.B, spec string) scaleMetrics {
	b.Helper()
	tp, err := topo.Resolve(topo.GeneratedPrefix + spec)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := Start(ctx, tp, withTestEnv(Options{ConvergeTimeout: 8 * time.Minute}))
	if err != nil {
		b.Fatal(err)
	}
	var m scaleMetrics
	m.up = time.Since(start)
	for _, ev := range c.Events() {
		if ev.Name == "TopologyBuilt" {
			m.topology = time.Duration(ev.Mono - c.Events()[0].Mono)
		}
	}
	total := 0
	for _, n := range c.Nodes() {
		blocks := c.RemoteBlocks(n.Name)
		if err := poll.Until(ctx, 50*time.Millisecond, func() bool {
			for _, p := range blocks {
				if rs, _ := n.Routes(p); len(rs) == 0 {
					return false
				}
			}
			return true
		}); err != nil {
			b.Fatalf("%s: not every remote block routed: %v", n.Name, err)
		}
		total += len(blocks)
	}
	m.routes = time.Since(start)
	m.perNode = float64(total) / float64(len(c.Nodes()))
	f, err := c.Measure().Footprint()
	if err != nil {
		b.Fatal(err)
	}
	m.bird, m.programmer, m.harness = mb(f.BIRDBytes), mb(f.ProgrammerBytes), mb(f.HarnessBytes)
	for _, w := range c.Warnings() {
		b.Logf("%s: warning: %s", spec, w)
	}
	stop := time.Now()
	if err := c.Stop(); err != nil {
		b.Fatal(err)
	}
	m.down = time.Since(stop)
	b.Logf("%s: topology %.0f ms, up %.0f ms, routes %.0f ms, down %.0f ms; RSS bird %.0f MB (%d), programmers %.0f MB (%d), harness %.0f MB",
		spec, monoclock.Ms(m.topology), monoclock.Ms(m.up), monoclock.Ms(m.routes), monoclock.Ms(m.down), m.bird, f.BIRDs, m.programmer, f.Programmers, m.harness)
	return m
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }
