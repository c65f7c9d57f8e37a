package harness

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/dataplane/bird/release"
	"github.com/birdcage/birdcage/dataplane/caliconode"
	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/dataplane/programmer"
	"github.com/birdcage/birdcage/dataplane/supervisor"
	"github.com/birdcage/birdcage/dataplane/timing"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/instrument/timeline"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/kroute/nlroute"
	"github.com/birdcage/birdcage/internal/machine"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/poll"
	"github.com/birdcage/birdcage/internal/procfs"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/topo"
)

// Options shape a cluster's start.
type Options struct {
	// Release every node starts on (default 3.33); an alias ("pre-3.33")
	// is recorded as the release it names.
	Release config.Release
	// Felix and BGP are the initial FelixConfiguration and
	// BGPConfiguration documents.
	Felix datastore.FelixConfiguration
	BGP   datastore.BGPConfiguration
	// RouteRefreshInterval is written into FelixConfiguration when it does
	// not set one (default 5s: scenarios want drift fixed quickly).
	RouteRefreshInterval time.Duration
	// Timers tune BIRD; zero fields take confd.DefaultTimers (a zero
	// HoldTime/KeepaliveTime leaves BIRD's own 240/80 s). Every node's and
	// every router's (ToRs, external routers) BGP sessions get the same
	// values.
	Timers confd.Timers
	// Log receives harness events; nil: slog.Default().
	Log *slog.Logger
	// ConvergeTimeout bounds the wait for convergence (default 60 s on the
	// machine: Machine.Wait).
	ConvergeTimeout time.Duration
	// Machine is the machine profile every wait of the cluster honours (its
	// convergence, BIRD's and the supervisor's stops, probe sessions'
	// first deliveries) and the default probe rate; nil is a machine at
	// native speed (the zero profile). WithEnv sets the run's.
	Machine *machine.Profile
	// KernelImportFilter renders the candidate re-advertisement fix into
	// every node's BIRD config (confd.Options.KernelImportFilter); not
	// Calico's behaviour.
	KernelImportFilter bool
	// Knobs depart from the release's rendered BIRD config (no passive
	// mesh, direct ToR sessions, ...); zero renders the release exactly.
	// Result rows list every departure. WithEnv adds $BIRDCAGE_RENDER_KNOBS's
	// (comma-separated: no-passive, direct-peers), so a spec can be re-run
	// with a departure without editing it.
	Knobs confd.Knobs
	// RaiseNeighbourLimits lets the run raise the host-wide neighbour
	// table limits (net.ipv{4,6}.neigh.default.gc_thresh2/3) when the
	// topology needs more entries than they allow, restoring them when the
	// run ends (or at `birdcage clean`). Off by default: the host's own
	// settings are not the harness's to change. WithEnv sets it from
	// $BIRDCAGE_RAISE_NEIGH_LIMITS.
	RaiseNeighbourLimits bool
	// Timing is the timing model (programmer restart profile, confd
	// latency and concurrency, BIRD scan time); nil: timing.Realistic().
	// WithEnv sets the one the environment asks for.
	Timing *timing.Model
	// BIRD is the BIRD release every node runs ("" is the host's bird2,
	// 2.0); NodeBIRD overrides it per node (harness/birdrelease.go).
	BIRD     string
	NodeBIRD map[string]string
	// ProgrammerKnobs turn single emulation choices of every node's
	// programmer away from its release (write order, delete protocol,
	// tunnel MTU, write window); the zero value is the release's own. They
	// reach the programmer by environment (programmer.Knobs.Env).
	ProgrammerKnobs programmer.Knobs
	// Tunnel overrides how tunl0 is made (topo.Options.Tunnel): "" as
	// detected (or as the process forced it: topo.ForceTunnel).
	Tunnel string
	// Programmer is the route programmer binary every node runs: "" builds
	// cmd/birdcage-programmer into the run's temp dir. WithEnv sets
	// $BIRDCAGE_PROGRAMMER.
	Programmer string
	// BIRDCache is where prepared BIRD releases are (bird.CacheDir): ""
	// is bird.DefaultCache. WithEnv sets $BIRDCAGE_BIRD_CACHE.
	BIRDCache string
	// Calico, when set, is the `calico` flavour for every node: a
	// directory laid out like the calico/node image's root filesystem
	// whose Felix, confd and BIRD run on the node (dataplane/caliconode)
	// against Calico's etcdv3 datastore; "" runs the model (FlavourModel).
	// NodeCalico overrides it per node ("" there runs the model on that
	// node).
	Calico     string
	NodeCalico map[string]string
}

// Cluster is one cluster's life: its topology, datastore, and per node a
// supervised route programmer and a BIRD container.
type Cluster struct {
	Run   *run.Run
	Net   *topo.Network
	Store *datastore.DirStore
	// Machine is the profile the cluster was started on (Options.Machine):
	// a scenario's waits take their limits from it.
	Machine machine.Profile

	opts    Options
	timing  timing.Model
	log     *slog.Logger
	binary  string
	nodes   []*Node
	routers []*Router
	confd   confdLoop

	mu        sync.Mutex
	events    []results.Event
	sessions  []*probe.Session
	timelines map[string]*timeline.Monitor
	stop      context.CancelFunc
	wg        sync.WaitGroup

	// warnings are about the run's validity (a host limit the topology
	// exceeds), for the results; neighFullsAtStart is the host's
	// neighbour-table overflow count when the cluster started.
	warnings          []string
	neighFullsAtStart uint64
}

// Warnings lists what makes this run's figures doubtful (a host-wide limit
// the emulated topology exceeds), for the log and the results.
func (c *Cluster) Warnings() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]string(nil), c.warnings...)
	out = append(out, c.timelineGapsLocked()...)
	if n := c.Measure().NeighbourTableOverflows(); n > 0 {
		out = append(out, fmt.Sprintf("the host's shared neighbour table overflowed %d times during this run (ARP/ND resolutions lost): figures may measure the emulator; see %s", n, env.RaiseNeighLimits))
	}
	return out
}

// Node is one cluster node and the two route programmers on it.
type Node struct {
	Name       string
	NS         *topo.NodeNS
	Programmer *supervisor.Programmer
	BIRD       *bird.Instance
	// Calico is the node's calico/node pod when its flavour is calico;
	// Programmer and BIRD are nil then.
	Calico         *caliconode.Node
	calicoVersions caliconode.Versions

	mu      sync.Mutex
	release config.Release
	// departures: the last render's departures from the release.
	departures []string
	config     []byte
	renders    int
	warnings   []string
	peers      []confd.Peer
	confd      []ConfdAction
}

// Router is a BGP-speaking router (a ToR) running BIRD.
type Router struct {
	Name string
	NS   *topo.RouterNS
	BIRD *bird.Instance
}

// Start builds the topology and brings the cluster up: datastore, a route
// programmer and a BIRD container per node, BIRD on BGP-speaking routers.
// It returns once the cluster is converged: BGP sessions Established, every
// programmer synced. Stop (or closing the run) undoes everything.
func Start(ctx context.Context, t *topo.Topology, opts Options) (_ *Cluster, err error) {
	if opts.Release == "" {
		opts.Release = config.R333
	}
	if opts.Release, err = config.ParseRelease(string(opts.Release)); err != nil {
		return nil, err
	}
	if opts.RouteRefreshInterval == 0 {
		opts.RouteRefreshInterval = 5 * time.Second
	}
	if opts.Felix.RouteRefreshInterval == "" {
		opts.Felix.RouteRefreshInterval = opts.RouteRefreshInterval.String()
	}
	m := resolveMachine(opts)
	opts.Machine = &m
	opts.ConvergeTimeout = convergeTimeout(opts, m)
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	timing, err := resolveTiming(&opts)
	if err != nil {
		return nil, err
	}
	r, err := run.New()
	if err != nil {
		return nil, err
	}
	r.CloseOnSignal()
	defer func() {
		if err != nil {
			_ = r.Close()
		}
	}()
	c := &Cluster{Run: r, Machine: m, opts: opts, timing: timing, log: log.With("run", r.ID)}
	c.confd = confdLoop{c}
	c.log.Info("timing model", "model", timing.String())
	// Building the programmer (when Options.Programmer names none) is not
	// part of the cluster's start.
	if c.binary, err = programmerBinary(r, opts.Programmer); err != nil {
		return nil, err
	}
	c.Mark("Start")
	c.neighFullsAtStart = procfs.NeighbourTableFulls()
	warnings, raised, err := checkNeighbourTables(r, t, opts.RaiseNeighbourLimits)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		c.log.Warn(w)
	}
	c.warnings = append(c.warnings, warnings...)
	if raised {
		c.Mark("NeighbourLimitsRaised")
	}
	if c.Net, err = topo.Build(ctx, t, r, topo.Options{Tunnel: opts.Tunnel}); err != nil {
		return nil, err
	}
	c.Mark("TopologyBuilt")
	if err := c.startTimelines(); err != nil {
		return nil, err
	}
	if c.Store, err = datastore.OpenDir(r.Path("datastore")); err != nil {
		return nil, err
	}
	if err := seedDatastore(c.Store, c.Net, opts.Felix, opts.BGP); err != nil {
		return nil, fmt.Errorf("seed datastore: %w", err)
	}
	cl, err := c.Store.Read(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkNodeBIRD(opts, c.Net); err != nil {
		return nil, err
	}
	var nodeNames []string
	for _, nd := range c.Net.Nodes {
		nodeNames = append(nodeNames, nd.Name)
	}
	calicoSources, err := checkNodeCalico(opts, nodeNames)
	if err != nil {
		return nil, err
	}
	var calicoNodes []*Node
	for _, nd := range c.Net.Nodes {
		n := &Node{Name: nd.Name, NS: nd, release: opts.Release}
		if dir := calicoSource(opts, nd.Name); dir != "" {
			if n.Calico, err = caliconode.New(r, caliconode.Options{Name: nd.Name, NetNSPath: nd.Path, Machine: m, Log: c.log}); err != nil {
				return nil, err
			}
			c.nodes = append(c.nodes, n)
			calicoNodes = append(calicoNodes, n)
			continue
		}
		birdRel, err := nodeBIRD(opts, nd.Name)
		if err != nil {
			return nil, err
		}
		if n.Programmer, err = supervisor.New(r, supervisor.Config{Node: nd.Name, Netns: nd.Path, Binary: c.binary,
			Store: c.Store.Dir, Release: opts.Release, Env: append(programmerEnv(timing), opts.ProgrammerKnobs.Env()...), Log: c.log, Machine: m}); err != nil {
			return nil, err
		}
		if n.BIRD, err = bird.New(r, bird.Options{Name: nd.Name, NetNS: nd.NetNS, Log: c.log, Release: birdRel, Machine: m}); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	// BIRD on the fabric first, so nodes' sessions find their peers.
	for _, rt := range c.Net.Routers {
		if rt.Spec.ASNumber == 0 {
			continue
		}
		if err := c.Fabric().start(ctx, rt); err != nil {
			return nil, err
		}
	}
	if len(calicoNodes) > 0 {
		srv, err := c.startControlPlane(ctx)
		if err != nil {
			return nil, err
		}
		c.Mark("DatastoreServing")
		for _, n := range calicoNodes {
			if err := n.Calico.Start(ctx, calicoSources[calicoSource(opts, n.Name)], calicoEnv(srv)); err != nil {
				return nil, err
			}
			if err := n.readCalicoVersions(ctx); err != nil {
				return nil, err
			}
		}
	}
	for _, n := range c.nodes {
		if n.Calico != nil {
			continue
		}
		if err := n.Programmer.Start(n.release); err != nil {
			return nil, err
		}
		if cl.BGP.Enabled() {
			if err := c.confd.writeConfig(n, cl); err != nil {
				return nil, err
			}
			if !c.confd.birdRuns(n) {
				continue
			}
			if err := n.BIRD.Start(ctx); err != nil {
				return nil, err
			}
		}
	}
	wctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	r.DeferLocal("confd watch", func() error { stop(); c.wg.Wait(); return nil })
	if err := c.confd.watch(wctx); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, opts.ConvergeTimeout)
	defer cancel()
	if err := c.WaitConverged(cctx); err != nil {
		return nil, err
	}
	c.Mark("Converged")
	return c, nil
}

// writeConfig renders n's config from cl for n's release and writes it to
// BIRD's config dir; the caller starts BIRD.
func (l confdLoop) writeConfig(n *Node, cl *datastore.Cluster) error {
	_, err := l.render(n, cl)
	if err != nil {
		return err
	}
	n.mu.Lock()
	conf := n.config
	n.mu.Unlock()
	return n.BIRD.WriteConfig(conf)
}

// render renders n's config from cl for n's release and keeps it on n; changed
// says whether the text differs from the last render.
func (l confdLoop) render(n *Node, cl *datastore.Cluster) (changed bool, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var birdRelease release.Name // "": the host's bird2
	if n.BIRD != nil {
		birdRelease = n.BIRD.Release().Name
	}
	out, err := confd.Render(cl, n.Name, n.release, confd.Options{Log: l.c.log.With("confd", n.Name), Timers: l.c.opts.Timers,
		KernelImportFilter: l.c.opts.KernelImportFilter, BIRD: birdRelease, Knobs: l.c.opts.Knobs})
	if err != nil {
		return false, err
	}
	n.renders++
	n.warnings = append(n.warnings, out.Warnings...)
	n.peers = out.Peers
	n.departures = out.Departures
	changed = !bytes.Equal(out.Config, n.config)
	n.config = out.Daemons() // 1.x: bird.conf and bird6.conf
	return changed, nil
}

// Stop tears the cluster down: processes, containers, namespaces, dirs.
func (c *Cluster) Stop() error { return c.Run.Close() }

// Nodes lists the nodes in topology order.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns the named node; it panics on a name the topology lacks,
// which is a bug in the scenario.
func (c *Cluster) Node(name string) *Node {
	if n := c.lookup(name); n != nil {
		return n
	}
	panic(fmt.Sprintf("harness: no node %q in topology %s", name, c.Net.Topology.Name))
}

// Mark records an event on the shared monotonic clock, once every node's
// route timeline has recorded every route change made before the call
// (SyncTimelines): judged from the mark, no earlier change shows up late.
func (c *Cluster) Mark(name string) results.Event {
	if err := c.SyncTimelines(); err != nil && c.log != nil {
		c.log.Warn("mark taken with the route timelines unsynced", "name", name, "err", err)
	}
	e := results.Event{Name: name, Mono: monoclock.Now()}
	c.mu.Lock()
	c.events = append(c.events, e)
	for _, s := range c.sessions {
		s.MarkAt(name, e.Mono)
	}
	c.mu.Unlock()
	if c.log != nil {
		c.log.Info("event", "name", name)
	}
	return e
}

// SyncTimelines returns once every node's route timeline has recorded every
// route change the kernel made before the call (timeline.Sync), so an
// instant taken after it is later than all their stamps. A monitor that
// does not answer within the machine's wait of a second is an error.
func (c *Cluster) SyncTimelines() error {
	c.mu.Lock()
	ms := slices.Collect(maps.Values(c.timelines))
	c.mu.Unlock()
	return timeline.SyncWithin(c.Machine.Wait(time.Second), ms...)
}

// Events lists what the harness did, in order.
func (c *Cluster) Events() []results.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]results.Event(nil), c.events...)
}

// Release is the release the node currently runs.
func (n *Node) Release() config.Release {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.release
}

// Renders is how many times confd rendered this node's config.
func (n *Node) Renders() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.renders
}

// Peers are the BGP sessions of the node's current BIRD config.
func (n *Node) Peers() []confd.Peer {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]confd.Peer(nil), n.peers...)
}

// Warnings are the warning lines confd logged for this node, all renders.
func (n *Node) Warnings() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.warnings...)
}

// WaitConverged waits until every BIRD that runs has all its sessions
// Established and every programmer has synced since it started.
func (c *Cluster) WaitConverged(ctx context.Context) error {
	for _, rt := range c.routers {
		if err := rt.BIRD.WaitEstablished(ctx); err != nil {
			return fmt.Errorf("router %s: %w", rt.Name, err)
		}
	}
	for _, n := range c.nodes {
		if n.Calico != nil {
			if err := waitCalicoNode(ctx, n); err != nil {
				return err
			}
			continue
		}
		if n.BIRD.Running() {
			if err := n.BIRD.WaitEstablished(ctx); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
		if err := poll.Until(ctx, 20*time.Millisecond, func() bool { return n.Programmer.Synced(0) }); err != nil {
			st, serr := n.Programmer.Status()
			return fmt.Errorf("node %s: programmer not synced (status %+v, %v; log %s): %w", n.Name, st, serr, n.Programmer.LogPath(), err)
		}
	}
	return nil
}

// Routes reads a node's main-table routes (both families) to destinations
// inside dst (the zero prefix means all).
func (n *Node) Routes(dst netip.Prefix) ([]kroute.Route, error) {
	h, err := n.NS.Handle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	links, err := nsutil.Links(h)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	var out []kroute.Route
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := nsutil.Routes(h, fam, &netlink.Route{Table: syscall.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		for _, r := range rs {
			kr := nlroute.FromNetlink(r, nlroute.DevNames(names))
			if !kr.Dst.IsValid() {
				continue
			}
			if dst.IsValid() && !kroute.Within(dst, kr.Dst) {
				continue
			}
			out = append(out, kr)
		}
	}
	return out, nil
}

// RemoteBlocks lists the blocks of every other node.
func (c *Cluster) RemoteBlocks(node string) []netip.Prefix {
	var out []netip.Prefix
	for _, nd := range c.Net.Nodes {
		if nd.Name == node {
			continue
		}
		for _, b := range nd.Blocks {
			out = append(out, b.CIDR)
		}
	}
	return out
}

// ProgrammerProtocol is the route protocol the cluster's programmers write
// with: FelixConfiguration.deviceRouteProtocol, or Calico's default when it
// is unset (or the datastore cannot be read).
func (c *Cluster) ProgrammerProtocol(ctx context.Context) kroute.Protocol {
	if cl, err := c.Store.Read(ctx); err == nil && cl.Felix.DeviceRouteProtocol != 0 {
		return kroute.Protocol(cl.Felix.DeviceRouteProtocol)
	}
	return kroute.ProtoCalicoDefault
}
