package harness

import (
	"fmt"
	"net/netip"
	"sync"
	"syscall"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/internal/kroute"
)

// RouteTrace is a netlink route trace of one node: every RTM_NEWROUTE /
// RTM_DELROUTE request the processes in the node's namespace (its BIRD,
// its programmer, a hand-made `ip -n`) send the kernel, with the errno the
// kernel acked it with. It shows what a component *asked*, which the route
// timeline cannot when the kernel refuses: a refused delete or add changes
// no route and raises no notification.
type RouteTrace struct {
	Node    string
	Started Event

	mu      sync.Mutex
	t       *bpf.RouteTracer
	stopped bool
}

// TraceRoutes starts a route trace of node's namespace. It runs until Stop
// or the cluster's cleanup. Where the kernel cannot run it the error is a
// testenv.FeatureError (*bpf.RouteTraceError).
func (c *Cluster) TraceRoutes(node string) (*RouteTrace, error) {
	n := c.Node(node)
	t, err := bpf.TraceRoutes(n.NS.Path)
	if err != nil {
		return nil, fmt.Errorf("route trace of %s: %w", node, err)
	}
	rt := &RouteTrace{Node: node, t: t, Started: c.Mark("route trace of " + node + " started")}
	c.Run.DeferLocal("route trace of "+node, rt.Stop)
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
func (rt *RouteTrace) Requests() (RouteRequests, error) {
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
	return RouteRequests(evs), nil
}

// RouteRequests is a list of traced route requests, with filters.
type RouteRequests []bpf.RouteRequest

func (rs RouteRequests) filter(keep func(bpf.RouteRequest) bool) RouteRequests {
	var out RouteRequests
	for _, r := range rs {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// To keeps the requests for destination p.
func (rs RouteRequests) To(p netip.Prefix) RouteRequests {
	return rs.filter(func(r bpf.RouteRequest) bool { return r.Dst == p })
}

// Deletes keeps the RTM_DELROUTE requests; Adds the RTM_NEWROUTE ones.
func (rs RouteRequests) Deletes() RouteRequests {
	return rs.filter(func(r bpf.RouteRequest) bool { return r.Op() == "del" })
}

func (rs RouteRequests) Adds() RouteRequests {
	return rs.filter(func(r bpf.RouteRequest) bool { return r.Op() == "add" })
}

// From keeps the requests sent by host pid pid.
func (rs RouteRequests) From(pid int) RouteRequests {
	return rs.filter(func(r bpf.RouteRequest) bool { return r.PID == pid })
}

// Between keeps the requests sent in [from, to) (monotonic ns; to 0: no end).
func (rs RouteRequests) Between(from, to int64) RouteRequests {
	return rs.filter(func(r bpf.RouteRequest) bool { return r.At >= from && (to == 0 || r.At < to) })
}

// WithProtocol keeps the requests that name protocol p.
func (rs RouteRequests) WithProtocol(p kroute.Protocol) RouteRequests {
	return rs.filter(func(r bpf.RouteRequest) bool { return kroute.Protocol(r.Protocol) == p })
}

// Answered keeps the requests whose ack the sender received with errno e
// (0: accepted).
func (rs RouteRequests) Answered(e syscall.Errno) RouteRequests {
	return rs.filter(func(r bpf.RouteRequest) bool { return r.Answered && r.Errno == e })
}

// Unanswered keeps the requests whose ack the trace has not seen (yet).
func (rs RouteRequests) Unanswered() RouteRequests {
	return rs.filter(func(r bpf.RouteRequest) bool { return !r.Answered })
}

// Strings is one line per request, for failure messages and notes.
func (rs RouteRequests) Strings() []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}
