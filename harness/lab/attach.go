package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/instrument/timeline"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/machine"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/topo"
)

// AttachedNode is a lab node as resolved at attach time.
type AttachedNode struct {
	Name      string
	Netns     string // path of its network namespace
	Blocks    []netip.Prefix
	Workloads []probe.Endpoint
	spec      *Node
}

// Lab is a manifest attached to: its namespaces resolved, a route timeline
// per node running, the namespaces' state before anything was attached,
// and whatever probe sessions were started since. Detach removes all of it
// and says what differs from the state found.
type Lab struct {
	M     *Manifest
	Nodes []*AttachedNode
	log   *slog.Logger

	mu        sync.Mutex
	events    []results.Event
	sessions  []*probe.Session
	timelines map[string]*timeline.Monitor
	before    []Snapshot
	detached  bool
	tunnel    string // how the nodes' tunl0 is made, as found (tunnelOf)
	machine   machine.Profile
}

// AttachOptions shape an attach.
type AttachOptions struct {
	// Log receives events; nil: slog.Default().
	Log *slog.Logger
	// Machine is the machine profile the lab's waits and probe sessions
	// honour (the run's, from its environment); zero: native speed.
	Machine machine.Profile
}

// Attach resolves every node's and workload's namespace, snapshots them,
// and starts a route timeline in each node's namespace. It changes nothing
// in the lab. On error everything it started is stopped.
func Attach(ctx context.Context, m *Manifest, o AttachOptions) (_ *Lab, err error) {
	l := &Lab{M: m, log: o.Log, timelines: map[string]*timeline.Monitor{}, machine: o.Machine}
	if l.log == nil {
		l.log = slog.Default()
	}
	l.log = l.log.With("lab", m.Name)
	defer func() {
		if err != nil {
			_, _ = l.Detach()
		}
	}()
	l.Mark("Attach")
	var blocks map[string][]netip.Prefix
	if m.Datastore != nil {
		if blocks, err = readBlocks(ctx, m.Datastore.Dir); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for i := range m.Nodes {
		spec := &m.Nodes[i]
		an := &AttachedNode{Name: spec.Name, spec: spec}
		if an.Netns, err = m.Resolve(ctx, spec.Netns); err != nil {
			return nil, fmt.Errorf("lab %s: node %s: %w", m.Name, spec.Name, err)
		}
		for _, b := range spec.Blocks {
			an.Blocks = append(an.Blocks, netip.MustParsePrefix(b))
		}
		for _, b := range blocks[spec.Name] {
			if !slices.Contains(an.Blocks, b) {
				an.Blocks = append(an.Blocks, b)
			}
		}
		paths := []string{an.Netns}
		for _, w := range spec.Workloads {
			p, err := m.Resolve(ctx, w.Netns)
			if err != nil {
				return nil, fmt.Errorf("lab %s: node %s: workload %s: %w", m.Name, spec.Name, w.Name, err)
			}
			an.Workloads = append(an.Workloads, probe.Endpoint{Name: spec.Name + "/" + w.Name, Netns: p, Iface: w.Interface, Addr: netip.MustParseAddr(w.Address)})
			paths = append(paths, p)
		}
		for _, p := range paths {
			if seen[p] {
				continue
			}
			seen[p] = true
			s, err := TakeSnapshot(p)
			if err != nil {
				return nil, fmt.Errorf("lab %s: node %s: %w", m.Name, spec.Name, err)
			}
			l.before = append(l.before, s)
			if p == an.Netns && l.tunnel == "" {
				l.tunnel = tunnelOf(s)
			}
		}
		l.Nodes = append(l.Nodes, an)
	}
	for _, an := range l.Nodes {
		mon, err := timeline.Start(timeline.Options{Name: an.Name, Netns: an.Netns})
		if err != nil {
			return nil, fmt.Errorf("lab %s: route timeline of %s: %w", m.Name, an.Name, err)
		}
		l.mu.Lock()
		l.timelines[an.Name] = mon
		l.mu.Unlock()
	}
	return l, nil
}

// tunnelOf says how a node's tunl0 is made from its snapshot's links: the
// ipip module's device (topo.TunnelKernel), a veth (birdcage's eBPF
// emulation, topo.TunnelEBPF), or "" where the node has no tunl0.
func tunnelOf(s Snapshot) string {
	for _, l := range s.Parts["links"] {
		switch {
		case strings.HasPrefix(l, topo.TunnelDevice+" type ipip "):
			return topo.TunnelKernel
		case strings.HasPrefix(l, topo.TunnelDevice+" type veth "):
			return topo.TunnelEBPF
		}
	}
	return ""
}

// readBlocks reads block affinities from a datastore directory without
// writing to it (OpenDir would create missing kind directories).
func readBlocks(ctx context.Context, dir string) (map[string][]netip.Prefix, error) {
	c, err := (&datastore.DirStore{Dir: dir}).Read(ctx)
	if err != nil {
		return nil, fmt.Errorf("lab datastore %s: %w", dir, err)
	}
	out := map[string][]netip.Prefix{}
	for _, b := range c.Blocks {
		p, err := netip.ParsePrefix(b.CIDR)
		if err != nil {
			return nil, fmt.Errorf("lab datastore %s: block affinity %s: %w", dir, b.CIDR, err)
		}
		out[b.Node] = append(out[b.Node], p)
	}
	return out, nil
}

// Node returns the named attached node (nil if there is none).
func (l *Lab) Node(name string) *AttachedNode {
	for _, n := range l.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// RemoteBlocks are the other nodes' blocks.
func (l *Lab) RemoteBlocks(node string) []netip.Prefix {
	var out []netip.Prefix
	for _, n := range l.Nodes {
		if n.Name != node {
			out = append(out, n.Blocks...)
		}
	}
	return out
}

// Timeline is the route monitor of a node, running since Attach.
func (l *Lab) Timeline(node string) *timeline.Monitor {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.timelines[node]
}

// ownerName names who wrote a route by its protocol: BIRD (12), the lab's
// programmer (its deviceRouteProtocol), or anything else by number.
func (l *Lab) ownerName(protocol kroute.Protocol) string {
	switch kroute.OwnerOf(protocol, l.M.RouteProtocol()) {
	case kroute.OwnerBIRD:
		return judge.ByBIRD.String()
	case kroute.OwnerProgrammer:
		return judge.ByProgrammer.String()
	}
	return fmt.Sprintf("proto %d", protocol)
}

// ClusterRoutes are a node's main-table routes to prefix now, as its
// timeline holds them.
func (l *Lab) ClusterRoutes(node string, prefix netip.Prefix) []kroute.Route {
	var out []kroute.Route
	for _, r := range l.Timeline(node).RoutesTo(prefix) {
		if r.Dst == prefix {
			out = append(out, r)
		}
	}
	return out
}

// OwnedOnlyBy checks that a node has exactly one route to prefix, written
// with protocol: the new owner's route and no other beside it.
func (l *Lab) OwnedOnlyBy(node string, prefix netip.Prefix, protocol kroute.Protocol) error {
	rs := l.ClusterRoutes(node, prefix)
	if len(rs) == 1 && rs[0].Protocol == protocol {
		return nil
	}
	var have []string
	for _, r := range rs {
		have = append(have, l.ownerName(r.Protocol)+": "+r.String())
	}
	return fmt.Errorf("%s: want exactly one route to %s, %s's; have %d [%s]", node, prefix, l.ownerName(protocol), len(rs), strings.Join(have, "; "))
}

// WaitOwnedOnlyBy waits (on the node's route timeline, not by sleeping)
// until OwnedOnlyBy holds, or ctx ends; the error then says what the node
// has instead.
func (l *Lab) WaitOwnedOnlyBy(ctx context.Context, node string, prefix netip.Prefix, protocol kroute.Protocol) error {
	m := l.Timeline(node)
	if m == nil {
		return fmt.Errorf("lab %s: no node %q", l.M.Name, node)
	}
	if _, err := m.WaitFor(ctx, func(event.Event) bool { return l.OwnedOnlyBy(node, prefix, protocol) == nil }); err != nil {
		return fmt.Errorf("%w (%v)", l.OwnedOnlyBy(node, prefix, protocol), err)
	}
	return nil
}

// Mark records a named instant on the monotonic clock the probes, BPF
// counters and route timelines use, and marks it in every probe session,
// once every node's route timeline has recorded the route changes made
// before the call (timeline.Sync: a netlink message to the monitor's own
// socket; nothing in the lab sees it).
func (l *Lab) Mark(name string) results.Event {
	if err := l.SyncTimelines(); err != nil {
		l.log.Warn("mark taken with the route timelines unsynced", "name", name, "err", err)
	}
	e := results.Event{Name: name, Mono: monoclock.Now()}
	l.markAt(e)
	return e
}

// SyncTimelines returns once every node's route timeline has recorded every
// route change made before the call (timeline.Sync); as for a built cluster,
// a monitor that does not answer within the machine's wait of a second is
// an error.
func (l *Lab) SyncTimelines() error {
	l.mu.Lock()
	ms := slices.Collect(maps.Values(l.timelines))
	l.mu.Unlock()
	return timeline.SyncWithin(l.machine.Wait(time.Second), ms...)
}

func (l *Lab) markAt(e results.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	for _, s := range l.sessions {
		s.MarkAt(e.Name, e.Mono)
	}
	l.mu.Unlock()
	l.log.Info("event", "name", e.Name)
}

// Events lists what was done to the lab, in order.
func (l *Lab) Events() []results.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]results.Event(nil), l.events...)
}

// FirstWorkloads is each node's first workload, in manifest order.
func (l *Lab) FirstWorkloads() []probe.Endpoint {
	var out []probe.Endpoint
	for _, n := range l.Nodes {
		if len(n.Workloads) > 0 {
			out = append(out, n.Workloads[0])
		}
	}
	return out
}

// Probes starts probe traffic between the lab's workloads
// (harness.StartProbeSession), with counters at the nodes' listed
// interfaces, and returns once every flow delivers (unless MayNotFlow).
// Detach stops it if the caller has not.
func (l *Lab) Probes(ctx context.Context, o harness.ProbeOptions) (*probe.Session, error) {
	if o.Flows == nil {
		o.Flows = probe.AllPairs(l.FirstWorkloads()...)
	}
	if len(o.Flows) == 0 {
		return nil, fmt.Errorf("lab %s: no workload pairs to probe (give nodes workloads)", l.M.Name)
	}
	var hops []probe.Hop
	for _, n := range l.Nodes {
		for _, ifn := range n.spec.Interfaces {
			hops = append(hops,
				probe.Hop{Name: n.Name + "/" + ifn + " egress", Netns: n.Netns, Iface: ifn, Direction: bpf.Egress},
				probe.Hop{Name: n.Name + "/" + ifn + " ingress", Netns: n.Netns, Iface: ifn, Direction: bpf.Ingress})
		}
	}
	s, err := harness.StartProbeSession(ctx, harness.ProbeSession{ProbeOptions: o, Hops: hops, Machine: &l.machine,
		Register: func(s *probe.Session) {
			l.mu.Lock()
			l.sessions = append(l.sessions, s)
			for _, e := range l.events {
				s.MarkAt(e.Name, e.Mono)
			}
			l.mu.Unlock()
		}})
	if err != nil {
		return nil, fmt.Errorf("lab %s: %w", l.M.Name, err)
	}
	return s, nil
}

// Do runs one of the manifest's actions. Its event, named like the
// built-in cluster's (e.g. "UpgradeNode(node-2→3.33)"), is stamped when
// the command starts; a second event marks when the command returned.
func (l *Lab) Do(ctx context.Context, act Action, name string, vars map[string]string) (results.Event, error) {
	line, err := l.M.Command(act, vars)
	if err != nil {
		return results.Event{}, err
	}
	l.log.Info("lab action", "action", act, "command", line)
	r, err := l.M.Run(ctx, act, vars)
	e := results.Event{Name: name, Mono: r.BeginMono}
	if r.BeginMono != 0 {
		l.markAt(e)
		l.markAt(results.Event{Name: name + " returned", Mono: r.EndMono})
	}
	return e, err
}

// SetProgramClusterRoutes sets both programClusterRoutes fields at once.
func (l *Lab) SetProgramClusterRoutes(ctx context.Context, felix, bgp config.ProgramClusterRoutes) (results.Event, error) {
	return l.Do(ctx, ActionSetProgramClusterRoutes, fmt.Sprintf("SetProgramClusterRoutes(felix=%s, bgp=%s)", felix, bgp),
		map[string]string{"felix": string(felix), "bgp": string(bgp)})
}

// UpgradeNode moves a node to a release by the manifest's upgrade action,
// its old BIRD going with o.Signal (SIGKILL when unset, as on a built
// cluster). A lab's command decides what it runs, so o.BIRD and
// o.Programmer are refused, naming the field.
func (l *Lab) UpgradeNode(ctx context.Context, node string, rel config.Release, o harness.UpgradeOptions) (results.Event, error) {
	if l.Node(node) == nil {
		return results.Event{}, fmt.Errorf("lab %s: no node %q (nodes: %s)", l.M.Name, node, strings.Join(l.M.NodeNames(), ", "))
	}
	switch {
	case o.BIRD != "":
		return results.Event{}, fmt.Errorf("lab %s: upgrade %s: field BIRD (%q): a lab's upgrade action picks its own BIRD; leave it empty", l.M.Name, node, o.BIRD)
	case o.Programmer != "":
		return results.Event{}, fmt.Errorf("lab %s: upgrade %s: field Programmer (%q): a lab's upgrade action picks its own programmer; leave it empty", l.M.Name, node, o.Programmer)
	}
	if o.Signal == 0 {
		o.Signal = syscall.SIGKILL
	}
	return l.Do(ctx, ActionUpgrade, fmt.Sprintf("UpgradeNode(%s→%s)", node, rel),
		map[string]string{"node": node, "release": string(rel), "signal": signalName(o.Signal)})
}

// KillBIRD sends sig to a node's BIRD.
func (l *Lab) KillBIRD(ctx context.Context, node string, sig syscall.Signal) (results.Event, error) {
	return l.Do(ctx, ActionKillBIRD, fmt.Sprintf("KillBIRD(%s, %s)", node, signalName(sig)),
		map[string]string{"node": node, "signal": signalName(sig)})
}

// StartBIRD starts a node's BIRD (with graceful-restart recovery, -R,
// when o.Recovery is set).
func (l *Lab) StartBIRD(ctx context.Context, node string, o harness.StartBIRDOptions) (results.Event, error) {
	return l.Do(ctx, ActionStartBIRD, fmt.Sprintf("StartBIRD(%s, recovery=%v)", node, o.Recovery),
		map[string]string{"node": node, "recovery": fmt.Sprint(o.Recovery)})
}

// BGPSessions asks a node's BIRD (the manifest's birdc action, `show
// protocols`) for its BGP sessions: how many, and how many Established.
func (l *Lab) BGPSessions(ctx context.Context, node string) (total, established int, _ error) {
	r, err := l.M.Run(ctx, ActionBirdc, map[string]string{"node": node, "command": "show protocols"})
	if err != nil {
		return 0, 0, err
	}
	// birdc's table: name, proto, table, state, since, info.
	for _, line := range strings.Split(r.Output, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[1] != "BGP" {
			continue
		}
		total++
		if f[3] == "up" && f[len(f)-1] == "Established" {
			established++
		}
	}
	return total, established, nil
}

// WaitBGPEstablished polls a node's BIRD (every 200 ms, by the birdc
// action) until it has BGP sessions and all of them are Established.
func (l *Lab) WaitBGPEstablished(ctx context.Context, node string) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		total, up, err := l.BGPSessions(ctx, node)
		if err == nil && total > 0 && up == total {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lab %s: %s: BGP sessions %d of %d Established (%v): %w", l.M.Name, node, up, total, err, ctx.Err())
		case <-t.C:
		}
	}
}

// signalName is KILL, TERM, ... as kill(1) and pkill take it.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "KILL"
	case syscall.SIGTERM:
		return "TERM"
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGHUP:
		return "HUP"
	}
	return fmt.Sprint(int(sig))
}

// Detach stops every probe session and route timeline and then compares
// every namespace it snapshotted with its state now. It returns the
// namespaces that differ (none: the lab is as found). Safe to call twice.
func (l *Lab) Detach() ([]Diff, error) {
	l.mu.Lock()
	if l.detached {
		l.mu.Unlock()
		return nil, nil
	}
	l.detached = true
	sessions, timelines := l.sessions, l.timelines
	l.sessions, l.timelines = nil, nil
	l.mu.Unlock()
	var errs []error
	for _, s := range sessions {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, m := range timelines {
		if err := m.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	var diffs []Diff
	for _, b := range l.before {
		a, err := TakeSnapshot(b.Netns)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if d := Compare(b, a); !d.Empty() {
			diffs = append(diffs, d)
		}
	}
	return diffs, errors.Join(errs...)
}

// Snapshots are the namespaces' states as found at attach.
func (l *Lab) Snapshots() []Snapshot { return append([]Snapshot(nil), l.before...) }

// maxRouteEventsPerNode bounds RouteEvents per node, as the built-in
// target's results do.
const maxRouteEventsPerNode = 4000

// RouteEvents is each node's timeline of cluster routes (main table,
// inside the manifest's pools), for the results' route swimlanes.
func (l *Lab) RouteEvents() map[string][]event.Event {
	pools := l.M.PoolPrefixes()
	out := map[string][]event.Event{}
	for _, n := range l.Nodes {
		m := l.Timeline(n.Name)
		if m == nil {
			continue
		}
		var evs []event.Event
		for _, e := range m.Events() {
			if e.Route.Table == kroute.MainTable && insideAny(e.Route.Dst, pools) && len(evs) < maxRouteEventsPerNode {
				evs = append(evs, e)
			}
		}
		out[n.Name] = evs
	}
	return out
}
