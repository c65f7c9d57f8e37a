package harness

import (
	"context"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/topo"
)

// BenchmarkClusterStartStop measures a whole cluster's start (topology,
// datastore, programmers, BIRD containers, until converged) and stop, per
// built-in topology, as ms/start and ms/stop. Run with -benchtime=3x.
func BenchmarkClusterStartStop(b *testing.B) {
	testenv.NeedRoot(b)
	for _, name := range []string{"noencap", "dualtor", "ipip"} {
		b.Run(name, func(b *testing.B) {
			var up, down time.Duration
			for range b.N {
				tp, err := topo.Builtin(name)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				start := time.Now()
				c, err := Start(ctx, tp, withTestEnv(Options{}))
				cancel()
				testenv.SkipIfMissing(b, err, "topology ipip")
				if err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := c.Stop(); err != nil {
					b.Fatal(err)
				}
				up += mid.Sub(start)
				down += time.Since(mid)
			}
			b.ReportMetric(float64(up.Milliseconds())/float64(b.N), "ms/start")
			b.ReportMetric(float64(down.Milliseconds())/float64(b.N), "ms/stop")
		})
	}
}

// BenchmarkMark is what a mark costs on a running cluster: syncing every
// node's route timeline (timeline.Sync: a scan of the process's descriptors,
// a token per node through its monitor) and the stamp. Per built-in
// topology (3-4 nodes, their BIRDs, programmers and probes' sockets open).
func BenchmarkMark(b *testing.B) {
	testenv.NeedRoot(b)
	for _, name := range []string{"noencap", "dualtor"} {
		b.Run(name, func(b *testing.B) {
			tp, err := topo.Builtin(name)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			c, err := Start(ctx, tp, withTestEnv(Options{}))
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			defer c.Stop()
			for b.Loop() {
				c.Mark("bench")
			}
		})
	}
}
