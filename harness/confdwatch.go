package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/procfs"
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

// confdLoop is birdcage's confd: for each node it renders the BIRD config
// of the node's release from the datastore, and on every change re-renders
// and reconfigures BIRD in place where the text changed.
type confdLoop struct{ c *Cluster }

// watch plays confd. With timing.Model.ConfdConcurrent (the real
// arrangement: a confd in every calico/node container) each node has its
// own goroutine, so every node reacts ConfdLatency after the change,
// independently. Without it a single confd reacts for every node in turn,
// so node N's BIRD lags by N × (latency + render + configure). Either way a
// node's confd re-renders its config and, where the text changed,
// reconfigures BIRD in place; every render is counted (with its
// deprecation warnings) on its node.
//
// One datastore watch serves them all: each change is handed to every
// group at once (coalesced, as the watch itself coalesces, while a group is
// still busy with the last one). A watch per node would take an inotify
// instance per node, and fs.inotify.max_user_instances (128 by default) is
// one budget for every process of the user: with the programmers' own
// watches a 100-node cluster would not start.
func (l confdLoop) watch(ctx context.Context) error {
	var model []*Node // a calico node runs Calico's own confd
	for _, n := range l.c.nodes {
		if n.Calico == nil {
			model = append(model, n)
		}
	}
	groups := [][]*Node{model}
	if l.c.timing.ConfdConcurrent {
		groups = nil
		for _, n := range model {
			groups = append(groups, []*Node{n})
		}
	}
	ch, err := l.c.Store.Watch(ctx)
	if err != nil {
		return inotifyHint(err, len(l.c.nodes))
	}
	fan := make([]chan struct{}, len(groups))
	for i, nodes := range groups {
		fan[i] = make(chan struct{}, 1)
		l.c.wg.Add(1)
		go func(ch <-chan struct{}) {
			defer l.c.wg.Done()
			for range ch {
				seen := monoclock.Now()
				for _, n := range nodes {
					if !l.react(ctx, n, seen) {
						return
					}
				}
			}
		}(fan[i])
	}
	l.c.wg.Add(1)
	go func() {
		defer l.c.wg.Done()
		defer func() {
			for _, f := range fan {
				close(f)
			}
		}()
		for range ch {
			for _, f := range fan {
				select {
				case f <- struct{}{}:
				default: // a change is already pending there
				}
			}
		}
	}()
	return nil
}

// inotifyHint adds to a failed datastore watch what to do when the cause is
// the per-user inotify instance limit.
func inotifyHint(err error, nodes int) error {
	if !errors.Is(err, syscall.EMFILE) && !strings.Contains(err.Error(), "too many open files") {
		return err
	}
	limit, _ := procfs.SysctlInt("fs.inotify.max_user_instances")
	return fmt.Errorf("%w (each programmer watches the datastore with an inotify instance: %d nodes need about %d, "+
		"and fs.inotify.max_user_instances=%d is shared by every process of the user; raise it, e.g. sysctl fs.inotify.max_user_instances=%d)",
		err, nodes, nodes+1, limit, 2*(nodes+1)+128)
}

// react is one node's confd handling one change: its react-and-render
// latency (the model's, a real delay of this goroutine), then read, render
// and configure. It returns false when ctx ended.
func (l confdLoop) react(ctx context.Context, n *Node, seen int64) bool {
	if d := l.c.timing.ConfdLatency; d > 0 {
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
	cl, err := l.c.Store.Read(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		l.c.log.Warn("confd: datastore unreadable; keeping the last config", "node", n.Name, "err", err)
		return true
	}
	changed, err := l.render(n, cl)
	if err != nil {
		l.c.log.Warn("confd: render failed", "node", n.Name, "err", err)
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
		l.c.log.Warn("confd: birdc configure failed", "node", n.Name, "err", err)
		a.Error = err.Error()
	}
	a.ConfiguredMono = monoclock.Now()
	n.mu.Lock()
	n.confd = append(n.confd, a)
	n.mu.Unlock()
	return true
}
