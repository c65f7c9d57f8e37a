package programmer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/birdcage/birdcage/dataplane/calc"
	"github.com/birdcage/birdcage/dataplane/routetable"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrConfigChanged is returned by Run when a restart-relevant field changed.
var ErrConfigChanged = errors.New("restart-relevant configuration changed")

// Options configures one programmer.
type Options struct {
	Node         string
	DatastoreDir string
	Release      config.Release
	StatusFile   string // optional
	Log          *slog.Logger
	// TunnelDevice is the IPIP device (calc.DefaultTunnelDevice when empty).
	TunnelDevice string
	// NoEncapMultipathViaGateways is NOT Felix's behaviour; see calc.Options.
	NoEncapMultipathViaGateways bool
	// RetryMin and RetryMax bound the backoff after a failed pass
	// (100ms and 10s when zero).
	RetryMin, RetryMax time.Duration
	// Restart profile: the first programming pass does not begin before
	// StartupDelay + ResyncDelayPerRoute × (desired routes) has passed
	// since StartedMono. It models what a real Felix does between process
	// start and its first dataplane write — load its config, connect to
	// the datastore, take a full snapshot and wait until it is in sync —
	// which this programmer, reading a local directory, does in
	// milliseconds. Work done meanwhile (reading the datastore, computing
	// routes) counts towards the delay, so the process's start-to-first-
	// program time is max(natural, delay). Zero: no delay (the fastest
	// possible restart). See RestartProfile.
	Restart RestartProfile
	// StartedMono is when the process started (CLOCK_MONOTONIC ns), the
	// anchor of the restart profile; 0 means when Run is called.
	StartedMono int64
	// Emulation knobs; the zero value is the release's own behaviour.
	Knobs Knobs
}

// Knobs turn single emulation choices of the route table away from what
// the release does, so a scenario can show what each one changes.
type Knobs struct {
	// WriteOrder overrides the release's write order ("" keeps it:
	// delete-first in 3.31-3.33); "replace-first" is birdcage's old order.
	WriteOrder string
	// DeleteNamesProtocol makes deletes name the route's protocol instead
	// of Felix's wildcard protocol 0.
	DeleteNamesProtocol bool
	// NoTunnelMTU writes no MTU on IPIP tunnel routes (Felix writes host
	// MTU - 20).
	NoTunnelMTU bool
	// WriteWindow overrides the requests in flight at once (0 keeps the
	// release's: 1, as Felix); e.g. 256 pipelines a pass.
	WriteWindow int
	// TakeoverGap is fault injection, not an emulation choice: the
	// programmer deletes a route it takes over and writes its own this
	// long after (routetable.Options.TakeoverGap), so a spec can show the
	// gate catches a window. 0: off.
	TakeoverGap time.Duration
	// NoBIRDCleanup is fault injection, not an emulation choice: the
	// programmer never claims BIRD's persisted routes via the tunnel
	// device (routetable.OwnershipPolicy.ClaimBIRDTunnelRoutes), so it never
	// cleans them up, whatever the release's rule says. false: off.
	NoBIRDCleanup bool
	// IPv4Metric is the metric of the IPv4 routes the programmer writes (its
	// route key's priority). 0 is Felix as released; Calico PR #13856
	// proposes 1024, BIRD's metric from 3.32 on. A what-if, not a release.
	IPv4Metric int
}

// Env is the knobs as the environment variables the command reads (only
// those that are set), for a supervisor to pass.
func (k Knobs) Env() []string {
	var vars []string
	if k.WriteOrder != "" {
		vars = append(vars, env.ProgrammerWriteOrder+"="+k.WriteOrder)
	}
	if k.DeleteNamesProtocol {
		vars = append(vars, env.ProgrammerDeleteNamesProtocol+"=1")
	}
	if k.NoTunnelMTU {
		vars = append(vars, env.ProgrammerNoTunnelMTU+"=1")
	}
	if k.WriteWindow > 0 {
		vars = append(vars, fmt.Sprintf("%s=%d", env.ProgrammerWriteWindow, k.WriteWindow))
	}
	if k.TakeoverGap > 0 {
		vars = append(vars, env.ProgrammerTakeoverGap+"="+k.TakeoverGap.String())
	}
	if k.IPv4Metric > 0 {
		vars = append(vars, fmt.Sprintf("%s=%d", env.ProgrammerIPv4Metric, k.IPv4Metric))
	}
	if k.NoBIRDCleanup {
		vars = append(vars, env.ProgrammerNoBIRDCleanup+"=1")
	}
	return vars
}

// tableOptions is the route table's options for release rel with knobs k
// on a host of MTU hostMTU.
func tableOptions(rel config.Release, k Knobs, hostMTU int) (routetable.Options, error) {
	o := routetable.OptionsFor(rel, hostMTU)
	if k.WriteOrder != "" {
		wo, ok := config.ParseWriteOrder(k.WriteOrder)
		if !ok {
			return o, fmt.Errorf("write order %q: valid orders are delete-first, replace-first", k.WriteOrder)
		}
		o.WriteOrder = wo
	}
	o.DeleteNamesProtocol = k.DeleteNamesProtocol
	if k.WriteWindow < 0 {
		return o, fmt.Errorf("write window %d: must not be negative", k.WriteWindow)
	}
	if k.WriteWindow > 0 {
		o.WriteWindow = k.WriteWindow
	}
	if k.NoTunnelMTU {
		o.TunnelMTU = 0
	}
	if k.TakeoverGap < 0 {
		return o, fmt.Errorf("takeover gap %s: must not be negative", k.TakeoverGap)
	}
	o.TakeoverGap = k.TakeoverGap
	if k.IPv4Metric < 0 || k.IPv4Metric > 1<<32-1 {
		return o, fmt.Errorf("IPv4 metric %d: must be 0..4294967295 (0 as Felix releases it, 1024 as Calico PR #13856 proposes)", k.IPv4Metric)
	}
	o.IPv4Metric = k.IPv4Metric
	return o, nil
}

// RestartProfile is the programmer's modelled start-to-first-program delay.
type RestartProfile struct {
	// StartupDelay is the fixed part: process start, config load,
	// datastore connection.
	StartupDelay time.Duration
	// ResyncDelayPerRoute is the part that grows with the cluster: a full
	// datastore resync, per desired route.
	ResyncDelayPerRoute time.Duration
}

// Delay is the profile's start-to-first-program delay for routes desired
// routes.
func (p RestartProfile) Delay(routes int) time.Duration {
	return p.StartupDelay + time.Duration(routes)*p.ResyncDelayPerRoute
}

// restartKey is what the programmer reads only at start: when it changes,
// the process exits with ExitConfigChanged and is restarted, as Felix is.
type restartKey struct {
	ProgramClusterRoutes config.ProgramClusterRoutes
	DeviceRouteProtocol  int
	// IPIPPools mirrors Felix's "IPIP enabled": any IPIP pool exists,
	// whoever owns its routes (the IPIP manager always runs).
	IPIPPools bool
	// NoEncapNeeded mirrors Felix's NoEncapNeeded: no-encap pools exist
	// and the programmer owns their routes (3.33; 3.31 and 3.32 do not
	// restart on it).
	NoEncapNeeded bool
	// RouteRefreshInterval is in the key where the release restarts on any
	// FelixConfiguration change (all three Calico releases); else it is
	// applied live.
	RouteRefreshInterval time.Duration
}

func restartKeyOf(c *datastore.Cluster, rel config.Release, log *slog.Logger) restartKey {
	k := restartKey{
		ProgramClusterRoutes: config.Resolve(c.Felix.ProgramClusterRoutes, rel, config.Programmer, log),
		DeviceRouteProtocol:  config.EffectiveDeviceRouteProtocol(c.Felix.DeviceRouteProtocol),
	}
	noEncapPools := false
	for _, p := range c.Pools {
		k.IPIPPools = k.IPIPPools || p.IsIPIP()
		noEncapPools = noEncapPools || p.IsNoEncap()
	}
	k.NoEncapNeeded = noEncapPools && k.ProgramClusterRoutes.ProgramNoEncapClusterRoutes() && rel.RestartsOnNoEncapNeeded()
	if rel.RestartsOnAnyFelixConfigChange() {
		if d, err := config.EffectiveRouteRefreshInterval(c.Felix.RouteRefreshInterval); err == nil {
			k.RouteRefreshInterval = d
		}
	}
	return k
}

type daemon struct {
	o       Options
	log     *slog.Logger
	store   *datastore.DirStore
	table   *routetable.Table
	h       *netlink.Handle
	key     restartKey
	refresh time.Duration
	status  Status
	cluster *datastore.Cluster
}

// Run runs the programmer until ctx ends (nil error: exit 0), a
// restart-relevant field changes (ErrConfigChanged: exit 129) or a fatal
// error. ExitCode maps the result to the process exit code.
func Run(ctx context.Context, o Options) error {
	if o.Node == "" || o.DatastoreDir == "" {
		return errors.New("programmer: node and datastore dir are required")
	}
	if _, err := config.ParseRelease(string(o.Release)); err != nil {
		return fmt.Errorf("programmer: %w", err)
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.TunnelDevice == "" {
		o.TunnelDevice = calc.DefaultTunnelDevice
	}
	if o.RetryMin <= 0 {
		o.RetryMin = 100 * time.Millisecond
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 10 * time.Second
	}
	if o.StartedMono == 0 {
		o.StartedMono = monoclock.Now()
	}
	if _, err := tableOptions(o.Release, o.Knobs, 0); err != nil {
		return fmt.Errorf("programmer: %w", err)
	}
	if o.Restart.StartupDelay < 0 || o.Restart.ResyncDelayPerRoute < 0 {
		return fmt.Errorf("programmer: restart profile %+v: delays must not be negative", o.Restart)
	}
	d := &daemon{o: o, log: o.Log.With("node", o.Node)}
	if fi, err := os.Stat(o.DatastoreDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("programmer: datastore %s: not a directory (%v)", o.DatastoreDir, err)
	}
	store, err := datastore.OpenDir(o.DatastoreDir)
	if err != nil {
		return fmt.Errorf("programmer: %w", err)
	}
	store.Log = d.log
	d.store = store
	// Everything runs in the calling thread's network namespace: the
	// process is started inside the node's.
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("programmer: netlink handle: %w", err)
	}
	defer h.Close()
	d.h = h
	d.status = Status{Node: o.Node, Release: string(o.Release), PID: os.Getpid(), State: StateStarting,
		StartedMonotonicNano: o.StartedMono}
	if err := writeStatus(o.StatusFile, d.status); err != nil {
		return fmt.Errorf("programmer: %w", err)
	}
	return d.run(ctx)
}

// ExitCode maps Run's result to the process exit code.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrConfigChanged):
		return ExitConfigChanged
	}
	return ExitError
}

func (d *daemon) run(ctx context.Context) error {
	watch, err := d.store.Watch(ctx)
	if err != nil {
		return fmt.Errorf("programmer: %w", err)
	}
	// 1. First valid read: it fixes the configuration for this process.
	backoff := d.o.RetryMin
	for {
		c, err := d.store.Read(ctx)
		if err == nil {
			d.cluster = c
			break
		}
		d.syncError(fmt.Errorf("read datastore: %w", err))
		select {
		case <-ctx.Done():
			return d.stop()
		case <-watch:
		case <-time.After(backoff):
			backoff = min(2*backoff, d.o.RetryMax)
		}
	}
	d.key = restartKeyOf(d.cluster, d.o.Release, d.log)
	d.refresh = d.refreshInterval(d.cluster)
	owner := d.key.ProgramClusterRoutes
	policy := routetable.NewOwnershipPolicy(d.key.DeviceRouteProtocol, d.o.TunnelDevice, nil, owner, d.o.Release)
	if d.o.Knobs.NoBIRDCleanup && policy.ClaimBIRDTunnelRoutes {
		policy.ClaimBIRDTunnelRoutes = false
		d.log.Warn("FAULT INJECTION: not claiming BIRD's persisted tunnel routes (--no-bird-cleanup): they stay in the kernel")
	}
	d.table, err = routetable.Open(netns.None(), policy, d.log)
	if err != nil {
		return fmt.Errorf("programmer: %w", err)
	}
	defer d.table.Close()
	d.status.ProgramClusterRoutes = string(owner)
	d.status.ProgramIPIPClusterRoutes = owner.ProgramIPIPClusterRoutes()
	d.status.ProgramNoEncapClusterRoutes = owner.ProgramNoEncapClusterRoutes()
	d.status.ClaimsBIRDTunnelRoutes = policy.ClaimBIRDTunnelRoutes
	d.status.DeviceRouteProtocol = d.key.DeviceRouteProtocol
	d.log.Info("programmer started", "release", d.o.Release, "programClusterRoutes", owner,
		"programIPIPClusterRoutes", owner.ProgramIPIPClusterRoutes(),
		"programNoEncapClusterRoutes", owner.ProgramNoEncapClusterRoutes(),
		"claimsBIRDTunnelRoutes", policy.ClaimBIRDTunnelRoutes,
		"deviceRouteProtocol", d.key.DeviceRouteProtocol, "routeRefreshInterval", d.refresh.String())

	// Link events: a device that appears or comes up (a workload veth made
	// after its datastore document) is retried at once instead of after
	// backoff.
	var links chan netlink.LinkUpdate
	{
		links = make(chan netlink.LinkUpdate, 64)
		done := make(chan struct{})
		defer close(done)
		if err := netlink.LinkSubscribeWithOptions(links, done, netlink.LinkSubscribeOptions{
			ErrorCallback: func(err error) { d.log.Warn("link monitor", "err", err) }}); err != nil {
			d.log.Warn("no link monitor; missing devices are retried with backoff only", "err", err)
			links = nil
		}
	}

	// 2. The restart profile: nothing is programmed before it has passed.
	d.recompute()
	if err := d.startupDelay(ctx); err != nil {
		return d.stop()
	}
	d.status.State = StateRunning

	// 3. Full resync, then react to changes, refresh timer and retries.
	d.status.FirstProgramMonotonicNano = monoclock.Now()
	ok := d.sync(true)
	refresh := newTimer(d.refresh)
	retry := newTimer(0)
	backoff = d.o.RetryMin
	if !ok {
		retry.Reset(backoff)
	}
	for {
		full := false
		select {
		case <-ctx.Done():
			return d.stop()
		case _, open := <-watch:
			if !open {
				if ctx.Err() != nil {
					return d.stop()
				}
				return errors.New("programmer: datastore watch ended")
			}
			c, err := d.store.Read(ctx)
			if err != nil {
				d.syncError(fmt.Errorf("read datastore (keeping the last good state): %w", err))
				d.writeStatus()
				continue
			}
			if k := restartKeyOf(c, d.o.Release, nil); k != d.key {
				d.log.Info("restart-relevant configuration changed; exiting so the supervisor restarts the programmer",
					"old", fmt.Sprintf("%+v", d.key), "new", fmt.Sprintf("%+v", k), "exitCode", ExitConfigChanged)
				d.status.State = StateConfigChanged
				d.writeStatus()
				return ErrConfigChanged
			}
			d.cluster = c
			if r := d.refreshInterval(c); r != d.refresh {
				d.log.Info("route refresh interval changed", "old", d.refresh.String(), "new", r.String())
				d.refresh = r
				refresh.Reset(r)
			}
			d.recompute()
		case <-refresh.C():
			refresh.Fired()
			full = true
			refresh.Reset(d.refresh)
		case u, open := <-links:
			if !open {
				links = nil
				continue
			}
			if !retry.Armed() || u.Header.Type != unix.RTM_NEWLINK {
				continue // nothing is waiting for a device
			}
			d.log.Debug("link changed; retrying failed routes", "link", u.Attrs().Name)
		case <-retry.C():
			retry.Fired()
			// Apply retries whatever failed; it re-reads the kernel itself
			// if no resync has succeeded yet.
		}
		if d.sync(full) {
			backoff = d.o.RetryMin
			retry.Stop()
		} else {
			retry.Reset(backoff)
			backoff = min(2*backoff, d.o.RetryMax)
		}
	}
}

// startupDelay waits out the restart profile (Options.Restart), measured
// from the process's start; it returns ctx's error if the process is
// stopped meanwhile. Datastore changes that arrive meanwhile stay queued on
// the watch channel and are handled after the first sync.
func (d *daemon) startupDelay(ctx context.Context) error {
	delay := d.o.Restart.Delay(d.status.RoutesDesired)
	d.status.StartupDelayNano = int64(delay)
	if delay <= 0 {
		return nil
	}
	wait := time.Duration(d.o.StartedMono + int64(delay) - monoclock.Now())
	d.log.Info("restart profile: first programming pass delayed", "delay", delay.String(),
		"fixed", d.o.Restart.StartupDelay.String(), "perRoute", d.o.Restart.ResyncDelayPerRoute.String(),
		"routes", d.status.RoutesDesired, "remaining", wait.String())
	d.writeStatus()
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (d *daemon) refreshInterval(c *datastore.Cluster) time.Duration {
	r, err := config.EffectiveRouteRefreshInterval(c.Felix.RouteRefreshInterval)
	if err != nil { // validated by the datastore; be safe anyway
		return config.DefaultRouteRefreshInterval
	}
	d.status.RouteRefreshInterval = r.String()
	return r
}

// uplinks returns this node's uplinks: the node document's, or else the
// kernel interfaces holding the node's addresses.
func (d *daemon) uplinks(n datastore.Node) []datastore.Uplink {
	if len(n.Uplinks) > 0 {
		return n.Uplinks
	}
	var out []datastore.Uplink
	for _, s := range []string{n.IPv4Address, n.IPv6Address} {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			continue
		}
		fam := netlink.FAMILY_V4
		if p.Addr().Is6() {
			fam = netlink.FAMILY_V6
		}
		addrs, err := nsutil.Addrs(d.h, nil, fam)
		if err != nil {
			d.log.Warn("list addresses to find the uplink", "err", err)
			continue
		}
		for _, a := range addrs {
			ip, _ := netip.AddrFromSlice(a.IP)
			if ip.Unmap() != p.Addr() {
				continue
			}
			l, err := d.h.LinkByIndex(a.LinkIndex)
			if err != nil {
				continue
			}
			out = append(out, datastore.Uplink{Interface: l.Attrs().Name, Address: s})
		}
	}
	return out
}

func (d *daemon) recompute() {
	node, found := d.cluster.Node(d.o.Node)
	if !found {
		d.log.Warn("this node is not in the datastore; only destinations that need no local facts can be computed", "datastore", d.o.DatastoreDir)
	}
	ups := d.uplinks(node)
	if ups == nil {
		ups = []datastore.Uplink{}
	}
	res := calc.DesiredRoutes(d.cluster, d.o.Node, d.key.ProgramClusterRoutes, calc.Options{
		TunnelDevice: d.o.TunnelDevice, Uplinks: ups, NoEncapMultipathViaGateways: d.o.NoEncapMultipathViaGateways,
		NoEncapIPv4OnlyWithoutIPIP: d.o.Release.NoEncapIPv4NeedsNoIPIP()})
	for _, s := range res.Skipped {
		d.log.Debug("destination not programmed", "dst", s.Dst.String(), "reason", s.Reason)
	}
	pol := d.table.Policy()
	pol.Uplinks = pol.Uplinks[:0]
	hostMTU := 0
	for _, u := range ups {
		pol.Uplinks = append(pol.Uplinks, u.Interface)
		// Felix's host MTU is the smallest of its host interfaces'; the
		// uplinks are this node's.
		if l, err := d.h.LinkByName(u.Interface); err == nil && (hostMTU == 0 || l.Attrs().MTU < hostMTU) {
			hostMTU = l.Attrs().MTU
		}
	}
	d.table.SetPolicy(pol)
	opts, _ := tableOptions(d.o.Release, d.o.Knobs, hostMTU) // validated in Run
	if opts != d.table.Options() {
		d.log.Info("route table options", "writeOrder", opts.WriteOrder.String(),
			"deleteNamesProtocol", opts.DeleteNamesProtocol, "tunnelMTU", opts.TunnelMTU, "hostMTU", hostMTU,
			"writeWindow", opts.WriteWindow, "ipv4Metric", opts.IPv4Metric)
		d.table.SetOptions(opts)
	}
	d.status.WriteOrder, d.status.DeleteNamesProtocol, d.status.TunnelMTU = opts.WriteOrder.String(), opts.DeleteNamesProtocol, opts.TunnelMTU
	d.status.WriteWindow, d.status.IPv4Metric = opts.WriteWindow, opts.IPv4Metric
	d.table.SetDesired(res.Routes)
	d.status.RoutesDesired = len(res.Routes)
	d.log.Info("desired routes computed", "desired", len(res.Routes), "notProgrammed", len(res.Skipped))
}

// sync runs one pass and reports whether it was clean.
func (d *daemon) sync(full bool) bool {
	var st routetable.Stats
	var err error
	if full {
		st, err = d.table.Resync()
	} else {
		st, err = d.table.Apply()
	}
	if err != nil {
		d.syncError(err)
		d.writeStatus()
		return false
	}
	d.status.RoutesOwned = st.Owned
	if full {
		d.status.LastResyncUnixNano = time.Now().UnixNano()
	}
	if st.Failed > 0 {
		d.syncError(fmt.Errorf("%d route operations failed, first: %w", st.Failed, st.Errors[0]))
		d.writeStatus()
		return false
	}
	d.status.LastSyncUnixNano = time.Now().UnixNano()
	d.status.LastSyncMonotonicNano = monoclock.Now()
	if d.status.FirstSyncMonotonicNano == 0 {
		d.status.FirstSyncMonotonicNano = d.status.LastSyncMonotonicNano
	}
	d.log.Info("sync done", "full", full, "added", st.Added, "replaced", st.Replaced, "deleted", st.Deleted,
		"unchanged", st.Unchanged, "owned", st.Owned)
	d.writeStatus()
	return true
}

func (d *daemon) syncError(err error) {
	d.status.SyncErrors++
	d.status.LastError = err.Error()
	d.log.Error("sync error; will retry", "err", err, "syncErrors", d.status.SyncErrors)
}

func (d *daemon) writeStatus() {
	if err := writeStatus(d.o.StatusFile, d.status); err != nil {
		d.log.Error("status file not written", "path", d.o.StatusFile, "err", err)
	}
}

func (d *daemon) stop() error {
	d.log.Info("stopping; routes stay in the kernel")
	d.status.State = StateStopped
	d.writeStatus()
	return nil
}

// timer is a stoppable timer whose zero duration means "never".
type timer struct {
	t     *time.Timer
	armed bool
}

// Armed reports whether the timer is set and has not fired or been stopped.
func (t *timer) Armed() bool { return t.armed }

func newTimer(d time.Duration) *timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	tm := &timer{t: t}
	tm.Reset(d)
	return tm
}

func (t *timer) Reset(d time.Duration) {
	t.t.Stop()
	t.armed = d > 0
	if d > 0 {
		t.t.Reset(d)
	}
}

func (t *timer) Stop() { t.t.Stop(); t.armed = false }

// C is the timer's channel; the caller that receives from it must call
// Fired.
func (t *timer) C() <-chan time.Time { return t.t.C }

// Fired records that the timer's channel was received from.
func (t *timer) Fired() { t.armed = false }
