package harness

import (
	"fmt"
	"net/netip"
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

// Record adds the requests sent in [from, to) to destinations keep admits
// to res.RouteRequests under the trace's node, so that the results file
// says in what order the node's components asked the kernel for what
// (report: `birdcage conformance`).
func (rt *RouteTrace) Record(res *results.ScenarioResult, from, to int64, keep func(netip.Prefix) bool) error {
	rs, err := rt.Requests()
	if err != nil {
		return err
	}
	if res.RouteRequests == nil {
		res.RouteRequests = map[string][]results.KernelRequest{}
	}
	if res.RouteRequests[rt.Node] == nil {
		res.RouteRequests[rt.Node] = []results.KernelRequest{} // traced, whatever it found
	}
	for _, r := range rs.Between(from, to) {
		if keep != nil && !keep(r.Dst) {
			continue
		}
		res.RouteRequests[rt.Node] = append(res.RouteRequests[rt.Node], results.KernelRequest{
			At: r.At, Op: r.Op(), Dst: r.Dst, Protocol: int(r.Protocol), Metric: int(r.Metric), HasMetric: r.HasMetric,
			Flags: r.Flags, Errno: int(r.Errno), Answered: r.Answered, Comm: r.Comm,
		})
	}
	return nil
}
