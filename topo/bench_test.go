package topo

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/internal/testenv"
)

// BenchmarkBuildTeardown measures one build plus teardown of each built-in
// topology and of generated noencap clusters; up and down are reported
// separately (ms/up, ms/down). Run with -benchtime=1x for big sizes.
func BenchmarkBuildTeardown(b *testing.B) {
	requireRoot(b)
	cases := []struct {
		name string
		t    func() (*Topology, error)
	}{
		{"noencap", func() (*Topology, error) { return Builtin("noencap") }},
		{"ipip", func() (*Topology, error) { return Builtin("ipip") }},
		{"dualtor", func() (*Topology, error) { return Builtin("dualtor") }},
		{"noencap-nodes=20", func() (*Topology, error) { return NoEncap(20, 2), nil }},
		{"noencap-nodes=100", func() (*Topology, error) { return NoEncap(100, 2), nil }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var up, down time.Duration
			for range b.N {
				tp, err := c.t()
				if err != nil {
					b.Fatal(err)
				}
				r, err := run.New()
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				_, err = Build(context.Background(), tp, r, Options{})
				if err != nil {
					r.Close()
					testenv.SkipIfMissing(b, err, "topology "+c.name)
					b.Fatal(err)
				}
				mid := time.Now()
				if err := r.Close(); err != nil {
					b.Fatal(err)
				}
				up += mid.Sub(start)
				down += time.Since(mid)
			}
			b.ReportMetric(float64(up.Milliseconds())/float64(b.N), "ms/up")
			b.ReportMetric(float64(down.Milliseconds())/float64(b.N), "ms/down")
		})
	}
}

// BenchmarkIPCommandBaseline makes the same namespaces, bridge and veths as
// NoEncap(nodes, 2) with one `ip` command per operation, the way a shell
// script would: the yardstick for BenchmarkBuildTeardown.
func BenchmarkIPCommandBaseline(b *testing.B) {
	requireRoot(b)
	for _, nodes := range []int{20, 100} {
		b.Run(fmt.Sprintf("noencap-nodes=%d", nodes), func(b *testing.B) {
			var up, down time.Duration
			for range b.N {
				r, err := run.New()
				if err != nil {
					b.Fatal(err)
				}
				u, d, err := testenv.IPCommandBaseline(r, nodes, 2)
				r.Close()
				if err != nil {
					b.Fatal(err)
				}
				up, down = up+u, down+d
			}
			b.ReportMetric(float64(up.Milliseconds())/float64(b.N), "ms/up")
			b.ReportMetric(float64(down.Milliseconds())/float64(b.N), "ms/down")
		})
	}
}
