package confd

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"strings"
	"text/template"

	"github.com/birdcage/birdcage/dataplane/bird/release"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
)

// TunnelDevice is the IPIP device BIRD sends tunnel routes out of, as
// Calico's fork did through krt_tunnel.
const TunnelDevice = "tunl0"

// ErrUnknownNode is returned (wrapped) when the node to render is not in the
// cluster.
var ErrUnknownNode = errors.New("node not in cluster")

// Options are the knobs of a render that are not in the datastore.
type Options struct {
	// Log receives the deprecation warning and unknown-value warnings.
	// Nil means slog.Default().
	Log *slog.Logger
	// Timers tune BGP and scan timers; zero fields take DefaultTimers.
	Timers Timers
	// RouteReflectorClusterID is the cluster id a reflector node puts on
	// reflected routes. Empty means the reflector's router id.
	RouteReflectorClusterID string
	// KernelImportFilter is NOT Calico's behaviour: it renders the
	// candidate fix for re-advertisement (design §5), a kernel import
	// filter that keeps the programmer's remote routes (its protocol, with
	// a next hop) out of BIRD's table, while its local workload routes
	// (no next hop) are still learned.
	KernelImportFilter bool
	// BIRD is the BIRD release to render for ("" is release.Default, 2.0):
	// 2.x and 3.x get one config with a channel per address family, 1.x
	// one config per daemon (Rendered.Config for bird, Config6 for bird6).
	BIRD release.Name
	// Knobs turn off one emulation choice each; the zero value renders the
	// Calico release exactly. The kernel metric knob is the datastore's
	// BGPConfiguration.kernelMetric (see RouteMetric).
	Knobs Knobs
}

// Knobs are departures from the release's render, one per emulation choice,
// so a scenario can show what each changes. Zero is the release.
type Knobs struct {
	// NoPassive renders no `passive on`: both ends of every mesh session
	// connect (birdcage before issue 25).
	NoPassive bool
	// DirectPeers renders a BGPPeer on one of the node's uplink subnets as
	// a direct session with `gateway direct` (birdcage before issue 25),
	// instead of Calico's `ttl security off; multihop;` and
	// `gateway recursive`.
	DirectPeers bool
	// PeerDebug replaces the sessions' debug option (e.g. "{ states }");
	// "" is the release's (config.Release.PeerDebug).
	PeerDebug string
}

// Departures lists the knobs set in k, for results ("none" when none is).
func (k Knobs) Departures() []string {
	var out []string
	if k.NoPassive {
		out = append(out, "no passive mesh")
	}
	if k.DirectPeers {
		out = append(out, "direct BGPPeer sessions")
	}
	if k.PeerDebug != "" {
		out = append(out, "peer debug "+k.PeerDebug)
	}
	return out
}

// ErrNotExpressible is wrapped when the BIRD release cannot express what
// the datastore asks of it (BIRD-programmed IPIP routes on 1.6 and 3.1).
var ErrNotExpressible = errors.New("not expressible in this BIRD release")

// ErrInvalidTimers is wrapped when Timers asks for BGP timers BIRD would
// refuse or that cannot work (a hold time under BIRD's minimum of 3 s, a
// keepalive not shorter than the hold time).
var ErrInvalidTimers = errors.New("invalid BGP timers")

// Timers are BIRD's protocol timers, in seconds. The defaults are Calico's
// (every release's bgp_template: connect delay 2, connect retry 5, error
// wait 5,30, kernel and device scan 2; no hold or keepalive time), so
// sessions come up in 2–3 s and a failed session retries after 5 s, then
// backs off to 30 s. A scenario may set lower ones; they are a departure
// from the release (Timers.Departures).
type Timers struct {
	ConnectDelay int // BGP "connect delay time"; BIRD default 5
	ConnectRetry int // BGP "connect retry time"; BIRD default 120
	ErrorWaitMin int // BGP "error wait time" min; BIRD default 60
	ErrorWaitMax int // BGP "error wait time" max; BIRD default 300
	ScanTime     int // kernel and device "scan time"; Calico uses 2
	// HoldTime is BGP "hold time": how long a session stays up without a
	// message from the peer. 0 renders nothing, leaving BIRD's default
	// (BIRDHoldTime); otherwise at least 3 (BIRD's minimum). Both sides
	// use the smaller of their two values, so nodes and routers get the
	// same one. BIRD starts the hold timer (as every BGP timer) up to 25%
	// short, as RFC 4271 §10 suggests for jitter: a silent peer is dropped
	// 0.75–1 × the hold time after its last message (BIRD 2.0.12,
	// proto/bgp/bgp.c bgp_start_timer).
	HoldTime int
	// KeepaliveTime is BGP "keepalive time", the interval between
	// keepalives; it must be shorter than the hold time in use. 0 renders
	// nothing: BIRD then sends one every third of the hold time.
	KeepaliveTime int
}

// BIRD's own BGP timer defaults, in force when HoldTime and KeepaliveTime
// are 0 (nothing rendered).
const (
	BIRDHoldTime      = 240
	BIRDKeepaliveTime = BIRDHoldTime / 3
)

// maxBGPTimer is the largest hold or keepalive time BIRD accepts (the OPEN
// message's 16-bit field).
const maxBGPTimer = 65535

// DefaultTimers are used for any zero field of Options.Timers, except
// HoldTime and KeepaliveTime, whose 0 leaves BIRD's own defaults.
var DefaultTimers = Timers{ConnectDelay: config.ConnectDelayTime, ConnectRetry: config.ConnectRetryTime,
	ErrorWaitMin: config.ErrorWaitMin, ErrorWaitMax: config.ErrorWaitMax, ScanTime: config.KernelScanTime}

// Departures lists the timers t renders that differ from Calico's (none for
// the zero value).
func (t Timers) Departures() []string {
	d, w := t.withDefaults(), DefaultTimers.withDefaults()
	var out []string
	add := func(name string, got, want int) {
		if got != want {
			out = append(out, fmt.Sprintf("%s %d (Calico %d)", name, got, want))
		}
	}
	add("connect delay time", d.ConnectDelay, w.ConnectDelay)
	add("connect retry time", d.ConnectRetry, w.ConnectRetry)
	add("error wait time min", d.ErrorWaitMin, w.ErrorWaitMin)
	add("error wait time max", d.ErrorWaitMax, w.ErrorWaitMax)
	add("scan time", d.ScanTime, w.ScanTime)
	if d.HoldTime != 0 {
		out = append(out, fmt.Sprintf("hold time %d (Calico renders none)", d.HoldTime))
	}
	if d.KeepaliveTime != 0 {
		out = append(out, fmt.Sprintf("keepalive time %d (Calico renders none)", d.KeepaliveTime))
	}
	return out
}

func (t Timers) withDefaults() Timers {
	d := DefaultTimers
	if t.ConnectDelay > 0 {
		d.ConnectDelay = t.ConnectDelay
	}
	if t.ConnectRetry > 0 {
		d.ConnectRetry = t.ConnectRetry
	}
	if t.ErrorWaitMin > 0 {
		d.ErrorWaitMin = t.ErrorWaitMin
	}
	if t.ErrorWaitMax > 0 {
		d.ErrorWaitMax = t.ErrorWaitMax
	}
	if d.ErrorWaitMax < d.ErrorWaitMin {
		d.ErrorWaitMax = d.ErrorWaitMin
	}
	if t.ScanTime > 0 {
		d.ScanTime = t.ScanTime
	}
	// 0 is meaningful here (BIRD's own default, nothing rendered).
	d.HoldTime, d.KeepaliveTime = t.HoldTime, t.KeepaliveTime
	return d
}

// EffectiveHold is the BGP hold time BIRD runs with under t (whole
// seconds): t.HoldTime, or BIRD's default when it is 0.
func (t Timers) EffectiveHold() int {
	if t.HoldTime > 0 {
		return t.HoldTime
	}
	return BIRDHoldTime
}

// EffectiveKeepalive is the keepalive interval BIRD runs with under t:
// t.KeepaliveTime, or a third of the hold time when it is 0 (BIRD's rule).
func (t Timers) EffectiveKeepalive() int {
	if t.KeepaliveTime > 0 {
		return t.KeepaliveTime
	}
	return max(1, t.EffectiveHold()/3)
}

// Validate checks the BGP timers (the others take defaults and cannot be
// wrong): a hold time of 0 (BIRD's default) or 3..65535 s, a keepalive of
// 0 (a third of the hold time) or 1..65535 s and shorter than the hold time
// in use. Errors wrap ErrInvalidTimers.
func (t Timers) Validate() error {
	switch {
	case t.HoldTime < 0 || t.HoldTime > maxBGPTimer || (t.HoldTime > 0 && t.HoldTime < 3):
		return fmt.Errorf("%w: hold time %d s: want 0 (BIRD's default, %d s) or 3..%d s (BIRD's minimum is 3)", ErrInvalidTimers, t.HoldTime, BIRDHoldTime, maxBGPTimer)
	case t.KeepaliveTime < 0 || t.KeepaliveTime > maxBGPTimer:
		return fmt.Errorf("%w: keepalive time %d s: want 0 (a third of the hold time) or 1..%d s", ErrInvalidTimers, t.KeepaliveTime, maxBGPTimer)
	case t.KeepaliveTime > 0 && t.KeepaliveTime >= t.EffectiveHold():
		return fmt.Errorf("%w: keepalive time %d s is not shorter than the hold time %d s%s; keepalives must arrive within the hold time (a third of it is usual)",
			ErrInvalidTimers, t.KeepaliveTime, t.EffectiveHold(), map[bool]string{true: "", false: " (BIRD's default)"}[t.HoldTime > 0])
	}
	return nil
}

// Rendered is one node's BIRD configuration and what the render decided.
type Rendered struct {
	// Config is bird.conf: one BIRD 2 or 3 instance with IPv4 and IPv6
	// channels, rendered from one ownership policy; for BIRD 1.x it is the
	// IPv4 daemon's (bird) config.
	Config []byte
	// Config6 is BIRD 1.x's bird6.conf, the IPv6 daemon's config from the
	// same policy; nil for 2.x and 3.x.
	Config6 []byte
	// BIRD is the release rendered for.
	BIRD release.Name
	// Warnings holds the lines also logged during this render; the
	// deprecation warning appears once in every render in which BIRD
	// programs at least one IPIP pool's routes.
	Warnings []string
	// Policy is the resolved ownership the config encodes.
	Policy Policy
	// Peers are the BGP sessions in Config, in the order rendered.
	Peers []Peer
	// Departures are the knobs and timers of this render that differ from
	// the Calico release (none by default), for results.
	Departures []string
}

// Policy is BGPConfiguration.programClusterRoutes resolved for BIRD.
type Policy struct {
	Release config.Release
	// Raw is the field as stored ("" when unset).
	Raw string
	// Effective is the value after config.Resolve.
	Effective config.ProgramClusterRoutes
	// KernelMetric is the metric BIRD writes BGP-learned routes at in the
	// kernel (RouteMetric): the release's, or the kernelMetric knob.
	KernelMetric int
}

// BIRDOwns reports whether BIRD programs the cluster routes of pool p.
// VXLAN pools always belong to the programmer.
func (p Policy) BIRDOwns(pool datastore.IPPool) bool {
	switch {
	case pool.IsIPIP():
		return p.Effective.ProgramIPIPClusterRoutes()
	case pool.IsNoEncap():
		return p.Effective.ProgramNoEncapClusterRoutes()
	default:
		return false
	}
}

// ProgrammerOwnsIPIP reports whether the other side (the programmer) owns
// IPIP cluster routes, which is exactly when BIRD does not. It decides the
// tunl0 arm of the iBGP tunnel-route reject.
func (p Policy) ProgrammerOwnsIPIP() bool { return !p.Effective.ProgramIPIPClusterRoutes() }

// Peer is one rendered BGP session.
type Peer struct {
	// Protocol is the BIRD protocol name (`birdc show protocols`).
	Protocol string
	Address  netip.Addr
	AS       int
	// Internal is true for iBGP (same AS), which is when the export filter
	// is called with internal_peer = true.
	Internal bool
	// Kind is "mesh", "reflector" (a session to a route reflector),
	// "client" (a reflector's session to its client) or "peer" (an
	// explicit BGPPeer).
	Kind string
	// Passive is true when the session waits for the peer to connect
	// (`passive on`).
	Passive bool
}

// KernelMetric returns the kernel protocol's `metric`: the
// BGPConfiguration.kernelMetric knob, or 0 when unset (then every route
// gets its own krt_metric, as the fork's routes do). It is not the metric
// of BGP routes from 3.32 on; use RouteMetric for that. BIRD 2's own
// default is 32.
func KernelMetric(b datastore.BGPConfiguration) int {
	if b.KernelMetric == nil {
		return 0
	}
	return *b.KernelMetric
}

// RouteMetric returns the metric BIRD writes BGP-learned cluster routes at
// in release rel: the kernelMetric knob when set (the kernel protocol then
// writes every route at it), else the release's (config.Release
// BGPRouteMetric: 0 in 3.31, 1024 from 3.32). BIRD 2 writes per-route
// krt_metric only when its kernel protocol's metric is 0, and then manages
// (re-adds, deletes, takes over after a restart) its routes at whatever
// metric each carries — measured with BIRD 2.0.12 (docs/conformance.md).
func RouteMetric(b datastore.BGPConfiguration, rel config.Release) int {
	if b.KernelMetric != nil {
		return *b.KernelMetric
	}
	return rel.BGPRouteMetric()
}

// ASNumber returns the AS a node speaks: its own, else the cluster's, else
// 64512.
func ASNumber(c *datastore.Cluster, n datastore.Node) int {
	switch {
	case n.ASNumber != 0:
		return n.ASNumber
	case c.BGP.ASNumber != 0:
		return c.BGP.ASNumber
	default:
		return datastore.DefaultASNumber
	}
}

// Render renders node's BIRD 2 configuration for release rel.
//
// BIRD runs only when BGPConfiguration.bgpEnabled is not false; Render
// renders regardless and leaves that decision to the caller.
func Render(c *datastore.Cluster, node string, rel config.Release, opts Options) (Rendered, error) {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	if c == nil {
		return Rendered{}, errors.New("render: nil cluster")
	}
	if _, err := config.ParseRelease(string(rel)); err != nil {
		return Rendered{}, fmt.Errorf("render node %q: %w", node, err)
	}
	br, err := release.Parse(string(opts.BIRD))
	if err != nil {
		return Rendered{}, fmt.Errorf("render node %q: %w", node, err)
	}
	self, ok := c.Node(node)
	if !ok {
		return Rendered{}, fmt.Errorf("render node %q: %w (nodes: %s)", node, ErrUnknownNode, nodeNames(c))
	}
	if err := opts.Timers.Validate(); err != nil {
		return Rendered{}, fmt.Errorf("render node %q: %w", node, err)
	}
	if c.BGP.KernelMetric != nil && (*c.BGP.KernelMetric < 0 || *c.BGP.KernelMetric > 1<<31-1) {
		return Rendered{}, fmt.Errorf("bgpconfiguration %q: kernelMetric %d: must be 0..2147483647", datastore.SingletonName, *c.BGP.KernelMetric)
	}

	rel, _ = config.ParseRelease(string(rel)) // an alias renders as its release
	pol := Policy{
		Release:      rel,
		Raw:          c.BGP.ProgramClusterRoutes,
		Effective:    config.Resolve(c.BGP.ProgramClusterRoutes, rel, config.BIRD, log),
		KernelMetric: RouteMetric(c.BGP, rel),
	}

	v := view{
		Node:         self.Name,
		Release:      string(rel),
		Raw:          pol.Raw,
		Effective:    string(pol.Effective),
		KernelMetric: KernelMetric(c.BGP),
		RouteMetric:  pol.KernelMetric,
		Timers:       opts.Timers.withDefaults(),
		PeerDebug:    rel.PeerDebug(),
		BIRDIntMax:   config.BIRDIntMax,

		KernelImportFilter: opts.KernelImportFilter,
		ProgrammerProtocol: config.EffectiveDeviceRouteProtocol(c.Felix.DeviceRouteProtocol),
		RejectTunl0:        rel.RejectsTunl0WhenFelixOwnsIPIP() && pol.ProgrammerOwnsIPIP(),
		TunnelDevice:       TunnelDevice,
		LocalAS:            ASNumber(c, self),
		RRClusterID:        opts.RouteReflectorClusterID,
		IsReflector:        self.RouteReflector,
		MeshOn:             c.BGP.MeshEnabled(),
		BGPEnabled:         c.BGP.Enabled(),
		BIRD:               string(br),
	}
	if br != release.Default {
		v.BIRDNote = string(br)
	}
	if opts.Knobs.PeerDebug != "" {
		v.PeerDebug = opts.Knobs.PeerDebug
	}
	// From 3.32 a BGP route's kernel metric is 1024, carried between nodes
	// in bgp_local_pref; the kernelMetric knob writes every route at one
	// metric instead (no per-route krt_metric).
	if c.BGP.KernelMetric == nil && rel.CarriesPriorityInLocalPref() {
		v.PriorityFromLocalPref = true
		v.NormalPriority = rel.BGPRouteMetric()
		v.LocalPrefFloor = config.BIRDIntMax - rel.BGPRouteMetric()
	}
	v.Departures = opts.Knobs.Departures()
	if c.BGP.KernelMetric != nil {
		v.Departures = append(v.Departures, fmt.Sprintf("kernel metric %d for every route", *c.BGP.KernelMetric))
	}
	v.Departures = append(v.Departures, opts.Timers.Departures()...)
	switch {
	case v.Raw == "":
		v.RawNote = "unset"
	case !config.ProgramClusterRoutes(v.Raw).Valid():
		v.RawNote = fmt.Sprintf("unknown value %q", v.Raw)
	default:
		v.RawNote = fmt.Sprintf("%q", v.Raw)
	}

	selfV4, selfV6, err := nodeAddrs(self)
	if err != nil {
		return Rendered{}, err
	}
	v.SourceV4, v.SourceV6 = addrString(selfV4.Addr()), addrString(selfV6.Addr())
	v.RouterID = self.RouterID
	if v.RouterID == "" {
		if !selfV4.IsValid() {
			return Rendered{}, fmt.Errorf("node %q: routerID: needed when the node has no ipv4Address (BIRD requires an IPv4-format router id)", self.Name)
		}
		v.RouterID = selfV4.Addr().String()
	} else if a, err := netip.ParseAddr(v.RouterID); err != nil || !a.Is4() {
		return Rendered{}, fmt.Errorf("node %q: routerID %q: must be an IPv4 address", self.Name, v.RouterID)
	}
	if v.RRClusterID == "" {
		v.RRClusterID = v.RouterID
	}

	// Pools: one ownership decision per pool, keyed on ipipMode.
	var ipipBIRD, tunnelBIRD []string
	for _, p := range c.Pools {
		pfx, err := netip.ParsePrefix(p.CIDR)
		if err != nil {
			return Rendered{}, fmt.Errorf("ippool %q: cidr %q: %v", p.Name, p.CIDR, err)
		}
		pv := poolView{Name: p.Name, CIDR: pfx.Masked().String(), Mode: poolMode(p), BIRDOwns: pol.BIRDOwns(p)}
		switch {
		case p.IsIPIP():
			pv.Class = "ipip"
			// Only an IPv4 pool takes the tunnel arm. confd sets krt_tunnel
			// for IPv4 alone (bgp_processor.go processIPPool, `forProgrammingKernel
			// && ipVersion == 4`, release-v3.33 6609dea5) and the 3.31 IPv6
			// template (bird6_ipam.cfg.template, 3cdeae8f) has no tunnel at
			// all: an IPv6 pool with ipipMode set, which Calico's API refuses,
			// is accepted like no-encap and leaves by the uplink.
			pv.Tunnel = pv.BIRDOwns && pfx.Addr().Is4()
			if pv.BIRDOwns {
				ipipBIRD = append(ipipBIRD, p.Name)
			}
			if pv.Tunnel {
				tunnelBIRD = append(tunnelBIRD, p.Name)
			}
			if pv.Tunnel && p.IPIPMode == datastore.EncapCrossSubnet && selfV4.IsValid() {
				// Same-subnet next hops go direct, as the real template does.
				pv.CrossSubnet = selfV4.Masked().String()
			}
		case p.IsNoEncap():
			pv.Class = "no-encap"
		default:
			pv.Class = "vxlan"
		}
		v.Pools = append(v.Pools, pv)
	}

	if ok, why := br.TunnelRoutes(); !ok && len(tunnelBIRD) > 0 {
		return Rendered{}, fmt.Errorf("render node %q for BIRD %s: BGPConfiguration.programClusterRoutes %s gives BIRD the cluster routes of IPIP pool(s) %s: %w: %s",
			node, br, v.RawNote, strings.Join(tunnelBIRD, ", "), ErrNotExpressible, why)
	}

	// Own blocks: a blackhole each, exported as the aggregate.
	for _, b := range c.Blocks {
		if b.Node != self.Name {
			continue
		}
		pfx, err := netip.ParsePrefix(b.CIDR)
		if err != nil {
			return Rendered{}, fmt.Errorf("block affinity %q (node %q): cidr: %v", b.CIDR, b.Node, err)
		}
		s := pfx.Masked().String()
		v.Blocks = append(v.Blocks, s)
		if pfx.Addr().Is4() {
			v.Blocks4 = append(v.Blocks4, s)
		} else {
			v.Blocks6 = append(v.Blocks6, s)
		}
	}
	sort.Strings(v.Blocks)
	sort.Strings(v.Blocks4)
	sort.Strings(v.Blocks6)

	peers, err := sessions(c, self, selfV4, selfV6, v.LocalAS, rel, opts.Knobs)
	if err != nil {
		return Rendered{}, err
	}
	v.Peers = peers
	var out []Peer
	for _, p := range peers {
		out = append(out, Peer{Protocol: p.Name, Address: p.addr, AS: p.AS, Internal: p.Internal, Kind: p.Kind, Passive: p.Passive})
		if p.Family == "ipv4" {
			v.HasV4 = true
		} else {
			v.HasV6 = true
		}
	}

	var warnings []string
	if len(ipipBIRD) > 0 && rel.WarnsOnBIRDIPIP() {
		w := fmt.Sprintf("DEPRECATED: BIRD is programming the cluster routes of IPIP pool(s) %s (BGPConfiguration.programClusterRoutes %s resolves to %s in release %s); BIRD-programmed IPIP cluster routes are deprecated and will be removed; the supported replacement is FelixConfiguration.programClusterRoutes EnabledIPIPOnly with BGPConfiguration.programClusterRoutes EnabledNoEncapOnly",
			strings.Join(ipipBIRD, ", "), v.RawNote, pol.Effective, rel)
		log.Warn(w, "node", self.Name)
		warnings = append(warnings, w)
	}
	v.Warnings = warnings

	if br.TwoDaemons() {
		c4, c6, err := renderTwoDaemons(v)
		if err != nil {
			return Rendered{}, fmt.Errorf("render node %q: %w", node, err)
		}
		return Rendered{Config: c4, Config6: c6, BIRD: br, Warnings: warnings, Policy: pol, Peers: out, Departures: v.Departures}, nil
	}
	var buf bytes.Buffer
	if err := nodeTemplate.Execute(&buf, v); err != nil {
		return Rendered{}, fmt.Errorf("render node %q: %w", node, err)
	}
	return Rendered{Config: buf.Bytes(), BIRD: br, Warnings: warnings, Policy: pol, Peers: out, Departures: v.Departures}, nil
}

// sessions lists the node's BGP sessions: the full iBGP mesh, or
// reflector/client sessions when the mesh is off and some nodes reflect,
// plus explicit BGPPeers for all nodes or for this node.
//
// Session shape per release (Calico: bird.cfg.template @ 3cdeae8f7ace;
// bgp_processor.go processMeshPeers/buildPeer @ de60d98e97a7,
// 6609dea54713): a mesh session is passive when the peer's IP is greater,
// as a string, than the node's own; so is a global BGPPeer whose IP is a
// Calico node's; node-specific peers and reflector sessions never are.
// Every BGPPeer without ttlSecurity is `ttl security off; multihop;` with
// the template's `gateway recursive`; mesh sessions are too in 3.33, and
// carry neither line before (BIRD's iBGP default is multihop).
func sessions(c *datastore.Cluster, self datastore.Node, selfV4, selfV6 netip.Prefix, localAS int, rel config.Release, knobs Knobs) ([]peerView, error) {
	var out []peerView
	seen := map[string]string{}
	add := func(p peerView) error {
		if prev, dup := seen[p.Name]; dup {
			return fmt.Errorf("node %q: BGP session %s to %s is rendered twice (%s and %s); peer addresses must be unique", self.Name, p.Name, p.Neighbor, prev, p.Origin)
		}
		seen[p.Name] = p.Origin
		out = append(out, p)
		return nil
	}
	anyRR := false
	for _, n := range c.Nodes {
		if n.RouteReflector {
			anyRR = true
		}
	}
	meshOn := c.BGP.MeshEnabled()
	for _, n := range c.Nodes {
		if n.Name == self.Name {
			continue
		}
		var kind string
		switch {
		case meshOn:
			kind = "mesh"
		case !anyRR:
			continue
		case self.RouteReflector && n.RouteReflector:
			kind = "mesh" // reflectors mesh among themselves
		case self.RouteReflector:
			kind = "client"
		case n.RouteReflector:
			kind = "reflector"
		default:
			continue
		}
		v4, v6, err := nodeAddrs(n)
		if err != nil {
			return nil, err
		}
		as := ASNumber(c, n)
		for _, fam := range []struct {
			peer, src netip.Prefix
			name      string
		}{{v4, selfV4, "ipv4"}, {v6, selfV6, "ipv6"}} {
			if !fam.peer.IsValid() || !fam.src.IsValid() {
				continue
			}
			base := map[string]string{"mesh": "Mesh", "client": "RRClient", "reflector": "RR"}[kind]
			pv := peerView{
				Name: protoName(base, fam.peer.Addr()), Family: fam.name, addr: fam.peer.Addr(),
				Neighbor: fam.peer.Addr().String(), AS: as, Source: fam.src.Addr().String(),
				Internal: as == localAS, Recursive: true, RRClient: kind == "client",
				Kind: kind, Origin: "node " + n.Name,
			}
			switch {
			case kind != "mesh" || rel.MeshTTLSecurityOff():
				// Reflector sessions are BGPPeers in Calico.
				pv.Multihop, pv.TTLOff = true, true
			}
			if kind == "mesh" && rel.PassiveMesh() && !knobs.NoPassive && pv.Neighbor > pv.Source {
				pv.Passive = true
			}
			if err := add(pv); err != nil {
				return nil, err
			}
		}
	}
	peers := append([]datastore.BGPPeer(nil), c.Peers...)
	sort.SliceStable(peers, func(i, j int) bool { return peers[i].Name < peers[j].Name })
	for _, bp := range peers {
		if bp.Node != "" && bp.Node != self.Name {
			continue
		}
		a, err := netip.ParseAddr(bp.PeerIP)
		if err != nil {
			return nil, fmt.Errorf("bgppeer %q: peerIP %q: %v", bp.Name, bp.PeerIP, err)
		}
		if bp.ASNumber <= 0 {
			return nil, fmt.Errorf("bgppeer %q: asNumber %d: must be a positive AS number", bp.Name, bp.ASNumber)
		}
		src := selfV4
		fam := "ipv4"
		if a.Is6() {
			src, fam = selfV6, "ipv6"
		}
		pv := peerView{
			Name: protoName(map[bool]string{true: "Global", false: "Node"}[bp.Node == ""], a), Family: fam, addr: a,
			Neighbor: a.String(), AS: bp.ASNumber, Internal: bp.ASNumber == localAS, Kind: "peer",
			Origin: "bgppeer " + bp.Name, Description: bp.Name,
			Multihop: true, TTLOff: true, Recursive: true,
		}
		// An uplink on the peer's subnet: the session leaves from that
		// uplink's address (birdcage's ToR fabric peers per link; Calico's
		// default sourceAddress UseNodeIP would use the node's address).
		if up, ok := uplinkFor(self, a); ok {
			pv.Source = up.Addr().String()
			if knobs.DirectPeers && !pv.Internal {
				pv.Multihop, pv.TTLOff, pv.Recursive = false, false, false
			}
		} else if src.IsValid() {
			pv.Source = src.Addr().String()
		}
		// A global peer that is a Calico node peers one way, as the mesh.
		if bp.Node == "" && rel.PassiveMesh() && !knobs.NoPassive && isNodeIP(c, a) && pv.Source != "" && pv.Neighbor > nodeIPString(self, a) {
			pv.Passive = true
		}
		if err := add(pv); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// isNodeIP reports whether a is some node's BGP address (Calico's
// calico_node flag on a BGPPeer with a peerIP: client.go @ de60d98e97a7).
func isNodeIP(c *datastore.Cluster, a netip.Addr) bool {
	for _, n := range c.Nodes {
		v4, v6, err := nodeAddrs(n)
		if err == nil && (v4.IsValid() && v4.Addr() == a || v6.IsValid() && v6.Addr() == a) {
			return true
		}
	}
	return false
}

// nodeIPString is the node's own BGP address of a's family, as a string
// (Calico compares the peer's IP with it as strings).
func nodeIPString(n datastore.Node, a netip.Addr) string {
	v4, v6, _ := nodeAddrs(n)
	p := v4
	if a.Is6() {
		p = v6
	}
	if !p.IsValid() {
		return ""
	}
	return p.Addr().String()
}

// nodeAddrs parses a node's BGP addresses; either may be absent.
func nodeAddrs(n datastore.Node) (v4, v6 netip.Prefix, err error) {
	if n.IPv4Address != "" {
		if v4, err = parseHostPrefix(n.IPv4Address); err != nil || !v4.Addr().Is4() {
			return v4, v6, fmt.Errorf("node %q: ipv4Address %q: want an IPv4 address with its subnet, like 10.0.1.11/24", n.Name, n.IPv4Address)
		}
	}
	if n.IPv6Address != "" {
		if v6, err = parseHostPrefix(n.IPv6Address); err != nil || !v6.Addr().Is6() {
			return v4, v6, fmt.Errorf("node %q: ipv6Address %q: want an IPv6 address with its subnet, like fd00:1::11/64", n.Name, n.IPv6Address)
		}
	}
	if !v4.IsValid() && !v6.IsValid() {
		return v4, v6, fmt.Errorf("node %q: has neither ipv4Address nor ipv6Address; BIRD needs one to peer from", n.Name)
	}
	return v4, v6, nil
}

// parseHostPrefix accepts "10.0.1.11/24" or a bare address (a host route).
func parseHostPrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// uplinkFor returns the node's uplink address whose subnet holds peer.
func uplinkFor(n datastore.Node, peer netip.Addr) (netip.Prefix, bool) {
	for _, u := range n.Uplinks {
		if u.Address == "" {
			continue
		}
		p, err := netip.ParsePrefix(u.Address)
		if err == nil && p.Contains(peer) && p.Bits() < p.Addr().BitLen() {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// protoName makes a BIRD protocol name from an address, as Calico does
// (Mesh_10_0_0_2, Node_fd00__1).
func protoName(base string, a netip.Addr) string {
	r := strings.NewReplacer(".", "_", ":", "_")
	return base + "_" + r.Replace(a.String())
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

func poolMode(p datastore.IPPool) string {
	s := "ipipMode " + orNever(p.IPIPMode)
	if p.VXLANMode != "" {
		s += ", vxlanMode " + p.VXLANMode
	}
	if p.Disabled {
		s += ", disabled"
	}
	return s
}

func orNever(s string) string {
	if s == "" {
		return datastore.EncapNever
	}
	return s
}

func nodeNames(c *datastore.Cluster) string {
	var s []string
	for _, n := range c.Nodes {
		s = append(s, n.Name)
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// view is what bird.conf.tmpl sees.
type view struct {
	Node, Release, Raw, RawNote, Effective string
	// KernelMetric is the kernel protocol's metric; RouteMetric the
	// metric of BGP routes in the kernel.
	KernelMetric, RouteMetric int
	// PriorityFromLocalPref (3.32 on): BGP routes get krt_metric
	// NormalPriority in the kernel, carried between nodes as
	// bgp_local_pref = BIRDIntMax - krt_metric; a route above normal
	// priority (bgp_local_pref > LocalPrefFloor) gets preference 200.
	PriorityFromLocalPref           bool
	NormalPriority, LocalPrefFloor  int
	BIRDIntMax                      int
	PeerDebug                       string
	Departures                      []string
	KernelImportFilter              bool
	ProgrammerProtocol              int
	Timers                          Timers
	RejectTunl0                     bool
	TunnelDevice                    string
	LocalAS                         int
	RouterID, SourceV4, SourceV6    string
	RRClusterID                     string
	IsReflector, MeshOn, BGPEnabled bool
	HasV4, HasV6                    bool
	Pools                           []poolView
	Blocks, Blocks4, Blocks6        []string
	Peers                           []peerView
	Warnings                        []string
	// BIRD is the BIRD release; BIRDNote is set (to it) when it is not the
	// default, so default renders stay byte-identical.
	BIRD, BIRDNote string
	// 1.x only: the daemon (bird or bird6), its family and the family's
	// unspecified address.
	Daemon, Family, Unspecified string
}

type poolView struct {
	Name, CIDR, Mode, Class string
	BIRDOwns, Tunnel        bool
	CrossSubnet             string // the node's own subnet for CrossSubnet IPIP
}

type peerView struct {
	Name, Family, Neighbor, Source, Kind, Origin, Description string
	AS                                                        int
	Internal, Multihop, RRClient                              bool
	// TTLOff renders `ttl security off`; Recursive `gateway recursive`
	// (else direct); Passive `passive on`.
	TTLOff, Recursive, Passive bool
	addr                       netip.Addr
}

//go:embed bird.conf.tmpl
var nodeTemplateText string

var nodeTemplate = template.Must(template.New("bird.conf").Parse(nodeTemplateText))
