package harness

import (
	"context"
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/timing"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/poll"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/topo"
)

// BenchmarkLiveChangeRepeat is the cost of one repeat of the live-change
// scenario (what BIRDCAGE_REPEAT and the sweep multiply): a no-encap
// cluster started with BIRD owning the no-encap routes, probes on every
// pair, the change to programmer ownership, every programmer restarted and
// the cluster converged again, probes stopped, the cluster stopped. Per
// timing model, as ms/repeat with its parts (ms/start, ms/change, ms/stop).
// Run with -benchtime=3x under the heavy lock.
func BenchmarkLiveChangeRepeat(b *testing.B) {
	zero, realistic := timing.Zero(), timing.Realistic()
	for _, m := range []timing.Model{zero, realistic} {
		b.Run(m.Name, func(b *testing.B) {
			testenv.NeedRoot(b)
			var start, change, stop time.Duration
			for range b.N {
				tp, err := topo.Builtin("noencap")
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				t0 := time.Now()
				c, err := Start(ctx, tp, withTestEnv(Options{Timing: &m,
					Felix: datastore.FelixConfiguration{ProgramClusterRoutes: string(config.EnabledIPIPOnly)},
					BGP:   datastore.BGPConfiguration{ProgramClusterRoutes: string(config.EnabledNoEncapOnly)}}))
				if err != nil {
					cancel()
					b.Fatal(err)
				}
				t1 := time.Now()
				err = liveChangeOnce(ctx, c)
				t2 := time.Now()
				cancel()
				if serr := c.Stop(); err == nil {
					err = serr
				}
				if err != nil {
					b.Fatal(err)
				}
				start += t1.Sub(t0)
				change += t2.Sub(t1)
				stop += time.Since(t2)
			}
			per := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(b.N) }
			b.ReportMetric(per(start+change+stop), "ms/repeat")
			b.ReportMetric(per(start), "ms/start")
			b.ReportMetric(per(change), "ms/change")
			b.ReportMetric(per(stop), "ms/stop")
		})
	}
}

// liveChangeOnce is the scenario's middle: probes, the change, every
// programmer back from its config-change restart, converged, probes
// stopped.
func liveChangeOnce(ctx context.Context, c *Cluster) error {
	s, err := c.Probes(ctx, ProbeOptions{})
	if err != nil {
		return err
	}
	change, err := c.SetProgramClusterRoutes(ctx, config.Enabled, config.Disabled)
	if err != nil {
		return err
	}
	for _, n := range c.Nodes() {
		if err := poll.Until(ctx, 20*time.Millisecond, func() bool {
			for _, r := range n.Programmer.Restarts() {
				if r.ExitMono >= change.Mono && r.SyncedMono != 0 {
					return true
				}
			}
			return false
		}); err != nil {
			return err
		}
	}
	if err := c.WaitConverged(ctx); err != nil {
		return err
	}
	_, err = s.Stop()
	return err
}
