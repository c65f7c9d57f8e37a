package harness

import (
	"fmt"
	"sync"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/report/results"
)

// RouteTrace is a netlink route trace of one node: every RTM_NEWROUTE /
// RTM_DELROUTE request the processes in the node's namespace (its BIRD,
// its programmer, a hand-made `ip -n`) send the kernel, with the errno the
// kernel acked it with. It shows what a component *asked*, which the route
// timeline cannot when the kernel refuses: a refused delete or add changes
// no route and raises no notification.
type RouteTrace struct {
	Node    string
	Started results.Event

	mu      sync.Mutex
	t       *bpf.RouteTracer
	stopped bool
}

// TraceRoutes starts a route trace of node's namespace. It runs until Stop
// or the cluster's cleanup. Where the kernel cannot run it the error is a
// testenv.FeatureError (*bpf.RouteTraceError).
func (m *Measure) TraceRoutes(node string) (*RouteTrace, error) {
	n := m.c.Node(node)
	t, err := bpf.TraceRoutes(n.NS.Path)
	if err != nil {
		return nil, fmt.Errorf("route trace of %s: %w", node, err)
	}
	rt := &RouteTrace{Node: node, t: t, Started: m.c.Mark("route trace of " + node + " started")}
	m.c.Run.DeferLocal("route trace of "+node, rt.Stop)
	return rt, nil
}

// NetNS is the inode number of the traced namespace (RouteRequest.NetNS).
func (rt *RouteTrace) NetNS() uint64 { return rt.t.NetNS() }

// Stop detaches the trace's programs; Requests still answers with what was
// recorded. Safe to call twice.
func (rt *RouteTrace) Stop() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.stopped {
		return nil
	}
	rt.stopped = true
	return rt.t.Close()
}

// Requests is every route request recorded so far, oldest first. It fails
// when the trace dropped records (it would be incomplete).
func (rt *RouteTrace) Requests() (bpf.RouteRequests, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if !rt.stopped {
		if d, err := rt.t.Dropped(); err != nil {
			return nil, err
		} else if d > 0 {
			return nil, fmt.Errorf("route trace of %s dropped %d records: incomplete", rt.Node, d)
		}
	}
	evs, err := rt.t.Events()
	if err != nil {
		return nil, fmt.Errorf("route trace of %s: %w", rt.Node, err)
	}
	return bpf.RouteRequests(evs), nil
}
