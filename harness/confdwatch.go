package harness

import (
	"context"
	"time"

	"github.com/birdcage/birdcage/internal/monoclock"
)

// ConfdAction is one reaction of a node's confd to a datastore change that
// changed its BIRD config: when the change reached it, and when
// `birdc configure` had returned (both CLOCK_MONOTONIC ns).
type ConfdAction struct {
	SeenMono       int64  `json:"seenMono"`
	ConfiguredMono int64  `json:"configuredMono"`
	Error          string `json:"error,omitempty"`
}

// ConfdActions lists the node's confd reactions that reconfigured BIRD.
func (n *Node) ConfdActions() []ConfdAction {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]ConfdAction(nil), n.confd...)
}

// watchDatastore plays confd. With TimingModel.ConfdConcurrent (the real
// arrangement: a confd in every calico/node container) each node has its
// own datastore watch and goroutine, so every node reacts ConfdLatency after
// the change, independently. Without it a single confd reacts for every
// node in turn, so node N's BIRD lags by N × (latency + render + configure).
// Either way a node's confd re-renders its config and, where the text
// changed, reconfigures BIRD in place; every render is counted (with its
// deprecation warnings) on its node.
func (c *Cluster) watchDatastore(ctx context.Context) error {
	groups := [][]*Node{c.nodes}
	if c.timing.ConfdConcurrent {
		groups = nil
		for _, n := range c.nodes {
			groups = append(groups, []*Node{n})
		}
	}
	for _, nodes := range groups {
		ch, err := c.Store.Watch(ctx)
		if err != nil {
			return err
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for range ch {
				seen := monoclock.Now()
				for _, n := range nodes {
					if !c.confdReact(ctx, n, seen) {
						return
					}
				}
			}
		}()
	}
	return nil
}

// confdReact is one node's confd handling one change: its react-and-render
// latency (the model's, a real delay of this goroutine), then read, render
// and configure. It returns false when ctx ended.
func (c *Cluster) confdReact(ctx context.Context, n *Node, seen int64) bool {
	if d := c.timing.ConfdLatency; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
	if !n.BIRD.Running() {
		return true
	}
	cl, err := c.Store.Read(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		c.log.Warn("confd: datastore unreadable; keeping the last config", "node", n.Name, "err", err)
		return true
	}
	changed, err := c.render(n, cl)
	if err != nil {
		c.log.Warn("confd: render failed", "node", n.Name, "err", err)
		return true
	}
	if !changed {
		return true
	}
	n.mu.Lock()
	conf := n.config
	n.mu.Unlock()
	a := ConfdAction{SeenMono: seen}
	if err := n.BIRD.Configure(ctx, conf); err != nil {
		if ctx.Err() != nil {
			return false
		}
		c.log.Warn("confd: birdc configure failed", "node", n.Name, "err", err)
		a.Error = err.Error()
	}
	a.ConfiguredMono = monoclock.Now()
	n.mu.Lock()
	n.confd = append(n.confd, a)
	n.mu.Unlock()
	return true
}

// Timing is the timing model the cluster runs under.
func (c *Cluster) Timing() TimingModel { return c.timing }

// resolveTiming settles the model for a start: Options.Timing, else the
// environment's, with BIRD's scan time agreeing with the renderer's timers
// (an explicit Options.Timers.ScanTime wins; otherwise the model's is
// rendered).
func resolveTiming(opts *Options) (TimingModel, error) {
	var m TimingModel
	if opts.Timing != nil {
		m = *opts.Timing
	} else {
		var err error
		if m, err = TimingFromEnv(); err != nil {
			return m, err
		}
	}
	if err := m.Validate(); err != nil {
		return m, err
	}
	switch {
	case opts.Timers.ScanTime > 0:
		m.BIRDScanTime = time.Duration(opts.Timers.ScanTime) * time.Second
	case m.BIRDScanTime > 0:
		opts.Timers.ScanTime = int(m.BIRDScanTime / time.Second)
	default:
		m.BIRDScanTime = RealisticTiming().BIRDScanTime
	}
	return m, nil
}
