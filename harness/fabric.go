package harness

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"syscall"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/topo"
)

// Fabric is the cluster's network fabric: the BGP-speaking routers (the
// ToRs of a dual-ToR topology), the actions on them, and the planes and
// uplinks a hop table reads (it is the cluster's judge.Fabric).
type Fabric struct{ c *Cluster }

// Fabric is the cluster's fabric.
func (c *Cluster) Fabric() *Fabric { return &Fabric{c} }

// Planes are the topology's uplink planes.
func (f *Fabric) Planes() []string { return f.c.Net.Topology.Planes() }

// Uplink is node's interface in plane ("" when it has none there).
func (f *Fabric) Uplink(node, plane string) string {
	for _, u := range f.c.Net.Topology.Uplinks(node) {
		if u.Plane == plane {
			return u.Interface
		}
	}
	return ""
}

// WorkloadNode is the node whose workload has address a.
func (f *Fabric) WorkloadNode(a netip.Addr) string { return f.c.WorkloadNode(a) }

// StopRouterBIRD stops the BIRD of a BGP-speaking router (a ToR) with sig;
// the router's links stay up.
func (f *Fabric) StopRouterBIRD(ctx context.Context, name string, sig syscall.Signal) (results.Event, error) {
	r := f.Router(name)
	e := f.c.Mark(fmt.Sprintf("StopRouterBIRD(%s,%s)", name, sig))
	return e, r.BIRD.Stop(ctx, sig)
}

// FailRouterLinks takes every interface of a router down, as when a ToR
// loses power: its point-to-point peers lose carrier and its switches lose
// its port, but nothing tells BGP — its BIRD keeps running, cut off, and
// its peers notice only by their own means (hold timer, link state). The
// returned event is the moment the first link went down.
func (f *Fabric) FailRouterLinks(ctx context.Context, name string) (results.Event, error) {
	r := f.Router(name)
	h, err := r.NS.Handle()
	if err != nil {
		return results.Event{}, fmt.Errorf("fail router %s: %w", name, err)
	}
	defer h.Close()
	e := f.c.Mark(fmt.Sprintf("FailRouterLinks(%s)", name))
	for _, ifc := range r.NS.Spec.Interfaces {
		if err := ctx.Err(); err != nil {
			return e, fmt.Errorf("fail router %s: %w", name, err)
		}
		l, err := h.LinkByName(ifc.Name)
		if err != nil {
			return e, fmt.Errorf("fail router %s: interface %s: %w", name, ifc.Name, err)
		}
		if err := h.LinkSetDown(l); err != nil {
			return e, fmt.Errorf("fail router %s: interface %s down: %w", name, ifc.Name, err)
		}
	}
	return e, nil
}

// Router returns the named BGP-speaking router; it panics on a name the
// cluster does not run BIRD on, which is a bug in the scenario.
func (f *Fabric) Router(name string) *Router {
	for _, r := range f.c.routers {
		if r.Name == name {
			return r
		}
	}
	panic(fmt.Sprintf("harness: no BGP-speaking router %q in topology %s", name, f.c.Net.Topology.Name))
}

// Routers lists the BIRD-running routers.
func (f *Fabric) Routers() []*Router { return f.c.routers }

// PlaneOfFlow is judge.PlaneOfFlow on the cluster's fabric.
func (f *Fabric) PlaneOfFlow(g probe.GapReport) string { return judge.PlaneOfFlow(f, g) }

// FlowsPerPlane is judge.FlowsPerPlane on the cluster's fabric.
func (f *Fabric) FlowsPerPlane(rep *probe.Report) map[string]int {
	return judge.FlowsPerPlane(f, rep)
}

// HopTable is judge.HopTable on the cluster's fabric.
func (f *Fabric) HopTable(rep *probe.Report, cols []judge.HopColumn, extra ...func(probe.GapReport) (title, value string)) string {
	return judge.HopTable(f, rep, cols, extra...)
}

// PlaneTable is judge.PlaneTable on the cluster's fabric.
func (f *Fabric) PlaneTable(rep *probe.Report) string { return judge.PlaneTable(f, rep) }

// start runs BIRD on a BGP-speaking router of the topology, peering with
// its neighbours, and adds it to the fabric.
func (f *Fabric) start(ctx context.Context, rt *topo.RouterNS) error {
	nbrs, err := routerNeighbours(f.c.Net, rt)
	if err != nil {
		return err
	}
	spec := confd.Router{Name: rt.Name, RouterID: rt.Spec.RouterID, AS: rt.Spec.ASNumber, Timers: f.c.opts.Timers, AnnounceConnected: true}
	if spec.RouterID == "" && len(rt.Spec.Interfaces) > 0 {
		spec.RouterID = strings.Split(rt.Spec.Interfaces[0].Address, "/")[0]
	}
	for _, nb := range nbrs {
		spec.Neighbors = append(spec.Neighbors, confd.Neighbor{Name: nb.name, Address: nb.addr, AS: nb.as, Source: nb.source})
	}
	conf, err := confd.RenderRouter(spec)
	if err != nil {
		return err
	}
	b, err := bird.New(f.c.Run, bird.Options{Name: rt.Name, NetNS: rt.NetNS, Log: f.c.log, Machine: f.c.Machine})
	if err != nil {
		return err
	}
	if err := b.WriteConfig(conf); err != nil {
		return err
	}
	if err := b.Start(ctx); err != nil {
		return err
	}
	f.c.routers = append(f.c.routers, &Router{Name: rt.Name, NS: rt, BIRD: b})
	return nil
}
