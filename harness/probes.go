package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/harness/encap"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/internal/machine"
	"github.com/birdcage/birdcage/topo"
)

// Endpoint is a workload as a probe endpoint.
func Endpoint(wl *topo.Workload) probe.Endpoint {
	return probe.Endpoint{Name: wl.Name, Netns: wl.Path, Iface: wl.Iface, Addr: wl.IPv4}
}

// FirstWorkloads returns each node's first workload as an endpoint, in
// node order.
func FirstWorkloads(net *topo.Network) []probe.Endpoint {
	var out []probe.Endpoint
	for _, nd := range net.Nodes {
		if len(nd.Workloads) > 0 {
			out = append(out, Endpoint(nd.Workloads[0]))
		}
	}
	return out
}

// EveryNodePair is one flow each way between the first workloads of every
// pair of nodes.
func EveryNodePair(net *topo.Network) []probe.Flow { return probe.AllPairs(FirstWorkloads(net)...) }

// ProbeOptions shape a probe session; Flows default to EveryNodePair.
type ProbeOptions struct {
	// Rate is probes per second per flow; 0 means the machine's
	// (Machine.Rate: $BIRDCAGE_PROBE_RATE, else 1000).
	Rate  int
	Flows []probe.Flow
	// NoHops leaves the per-hop counters (uplinks, tunl0) off.
	NoHops bool
	// MayNotFlow returns at once instead of waiting for every flow to
	// deliver, for scenarios in which "no traffic gets through" is an
	// answer to measure rather than a failed guard.
	MayNotFlow bool
}

// ProbeSession is what a target (a built cluster, an attached lab) gives
// StartProbeSession beside the options: where its counters go and how a
// session joins it.
type ProbeSession struct {
	ProbeOptions
	// Hops are the per-hop counters (ignored with NoHops).
	Hops []probe.Hop
	// Prepare, if set, runs with the session's options just before it
	// starts (the cluster's packet captures).
	Prepare func(probe.Options) error
	// Register adds the started session to its target, which marks its
	// events so far in it and stops it when the target goes.
	Register func(*probe.Session)
	// Explain, if set, is asked why flows never delivered, with the
	// session's report at that moment; its error joins the failure (the
	// built cluster's names IPIP flows that crossed the underlay bare).
	Explain func(*probe.Report) error
	// Machine gives the default rate and stretches the wait for every flow
	// to deliver; nil is a machine at native speed.
	Machine *machine.Profile
}

// StartProbeSession starts probe traffic over the flows (which the caller
// has defaulted; none is an error), at the rate asked or the default, with
// the counters, registers it, and returns once every flow is delivering
// probes — a guard against judging a handover on traffic that never
// flowed — unless MayNotFlow is set. It is the one probe-session builder:
// the built-in cluster's Probes and a lab's (harness/lab) both use it.
func StartProbeSession(ctx context.Context, s ProbeSession) (*probe.Session, error) {
	if len(s.Flows) == 0 {
		return nil, fmt.Errorf("probes: no workload pairs to probe")
	}
	var m machine.Profile // nil: a machine at native speed
	if s.Machine != nil {
		m = *s.Machine
	}
	if s.Rate == 0 {
		s.Rate = m.Rate()
	}
	po := probe.Options{Rate: s.Rate, Flows: s.Flows}
	if !s.NoHops {
		po.Hops = s.Hops
	}
	if s.Prepare != nil {
		if err := s.Prepare(po); err != nil {
			return nil, err
		}
	}
	ps, err := probe.Start(ctx, po)
	if err != nil {
		return nil, err
	}
	if s.Register != nil {
		s.Register(ps)
	}
	if s.MayNotFlow {
		return ps, nil
	}
	wait := m.Wait(flowingTimeout)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := ps.WaitFlowing(wctx); err != nil {
		err = fmt.Errorf("probes never flowed within %s (a handover judged on no traffic proves nothing): %w", wait, err)
		if s.Explain != nil {
			if rep, rerr := ps.Report(); rerr == nil {
				err = errors.Join(err, s.Explain(rep))
			}
		}
		ps.Stop()
		return nil, err
	}
	return ps, nil
}

// flowingTimeout bounds how long a session may take to get every flow
// delivering on a machine at native speed (a converged cluster's flows
// deliver within milliseconds); Machine.Wait stretches it. A topology whose
// packets go nowhere (a tunnel that does not encapsulate) fails here
// instead of hanging.
const flowingTimeout = 30 * time.Second

// Probes starts probe traffic (StartProbeSession), with counters at every
// node's uplinks and tunl0 so reports say where probes vanished. Harness
// events are marked in the session too.
func (c *Cluster) Probes(ctx context.Context, o ProbeOptions) (*probe.Session, error) {
	if o.Flows == nil {
		o.Flows = EveryNodePair(c.Net)
	}
	if len(o.Flows) == 0 {
		return nil, fmt.Errorf("probes: topology %s has no workload pairs", c.Net.Topology.Name)
	}
	return StartProbeSession(ctx, ProbeSession{ProbeOptions: o, Machine: &c.Machine, Hops: NetworkHops(c.Net), Prepare: c.Captures().start, Explain: func(rep *probe.Report) error { return encap.ExplainNotFlowing(c.Net, rep) },
		Register: func(s *probe.Session) {
			c.Run.DeferLocal("probe session", s.Close)
			c.mu.Lock()
			c.sessions = append(c.sessions, s)
			for _, e := range c.events {
				s.MarkAt(e.Name, e.Mono)
			}
			c.mu.Unlock()
		}})
}

// NetworkHops are the per-hop counters of a built network: both directions
// of every node interface and of its tunl0, named "node/iface direction".
func NetworkHops(net *topo.Network) []probe.Hop {
	var hs []probe.Hop
	for _, nd := range net.Nodes {
		ifs := []string{}
		for _, ifc := range nd.Spec.Interfaces {
			ifs = append(ifs, ifc.Name)
		}
		if nd.Tunnel {
			ifs = append(ifs, topo.TunnelDevice)
		}
		for _, ifn := range ifs {
			hs = append(hs,
				probe.Hop{Name: nd.Name + "/" + ifn + " egress", Netns: nd.Path, Iface: ifn, Direction: bpf.Egress},
				probe.Hop{Name: nd.Name + "/" + ifn + " ingress", Netns: nd.Path, Iface: ifn, Direction: bpf.Ingress})
		}
	}
	return hs
}
