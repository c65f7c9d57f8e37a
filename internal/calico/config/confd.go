package config

// What each release's confd renders for BIRD, beyond programClusterRoutes.
// The facts are read from Calico's release branches; the file and commit of
// each is beside it, and docs/conformance.md tables them against birdcage's
// renderer (dataplane/confd). The programmer's side is in felix.go.

// NormalRoutePriority is the kernel metric confd gives BGP routes from 3.32
// on when BGPConfiguration.ipv4NormalRoutePriority / ipv6NormalRoutePriority
// are unset (bgp_processor.go getBGPConfig "default 1024" @ de60d98e97a7 and
// 6609dea54713).
const NormalRoutePriority = 1024

// BIRDIntMax is the largest BIRD filter integer; confd carries a route's
// priority in bgp_local_pref as BIRDIntMax - metric
// (confd/pkg/resource/template/template_funcs.go BirdIntMaxValue @
// de60d98e97a7).
const BIRDIntMax = 2147483647

// BGPRouteMetric is the kernel metric confd's calico_kernel_programming
// filter gives a BGP-learned route that carries no priority of its own:
// 0 in 3.31 (no krt_metric is set, so the fork writes metric 0:
// bird_ipam.cfg.template @ 3cdeae8f7ace), NormalRoutePriority from 3.32
// (SetMetricForBGPRoutes in bgp_processor.go @ de60d98e97a7, 6609dea54713).
// From 3.32 a route whose bgp_local_pref is set gets BIRDIntMax -
// bgp_local_pref instead, and every export sets bgp_local_pref to
// BIRDIntMax - krt_metric (1024 when unset), so across the mesh the metric
// round-trips to 1024; both families.
func (r Release) BGPRouteMetric() int {
	if r == R331 {
		return 0
	}
	return NormalRoutePriority
}

// CarriesPriorityInLocalPref reports whether the release's BGP export
// filters set bgp_local_pref from krt_metric and its import/kernel filters
// derive krt_metric (and preference 200 above normal priority) back from it
// (buildExportFilter/buildImportFilter in bgp_processor.go, from 3.32).
func (r Release) CarriesPriorityInLocalPref() bool { return r != R331 }

// PassiveMesh reports whether the release renders `passive on` on the mesh
// session toward every peer whose IP is greater, compared as strings, than
// the node's own, and on a global BGPPeer that is a Calico node under the
// same rule; never on node-specific peers. Every release here does
// (bird.cfg.template mesh and global peers @ 3cdeae8f7ace; processMeshPeers
// and buildPeer in bgp_processor.go @ de60d98e97a7, 6609dea54713).
func (r Release) PassiveMesh() bool { return true }

// RejectsTunl0WhenFelixOwnsIPIP reports whether the release's iBGP export
// filter also rejects routes via tunl0 when BIRD does not program IPIP
// pools (Felix does): 3.33 only (IBGPExportFilterForTunnelRoutes in
// bgp_processor.go processIPPools @ 6609dea54713; 3.31 and 3.32 reject only
// "*.cali" and "*.calico": bird_ipam.cfg.template reject_tunnel_routes @
// 3cdeae8f7ace, de60d98e97a7).
func (r Release) RejectsTunl0WhenFelixOwnsIPIP() bool { return r == R333 }

// MeshTTLSecurityOff reports whether the release renders `ttl security off;
// multihop;` on mesh sessions: 3.33 ("Mesh peers always use ttl security off
// with multihop", processMeshPeers @ 6609dea54713). 3.31 and 3.32 render
// neither on a mesh session (BIRD's iBGP default is multihop anyway).
// Every release renders both on BGPPeers without ttlSecurity.
func (r Release) MeshTTLSecurityOff() bool { return r == R333 }

// PeerDebug is the debug option of the release's BGP sessions at the
// default log level: `{ states }` to 3.32, `{ states, routes, filters,
// events }` in 3.33 (PeerDebugMode in bgp_processor.go @ 6609dea54713).
func (r Release) PeerDebug() string {
	if r == R333 {
		return "{ states, routes, filters, events }"
	}
	return "{ states }"
}

// BGP session timers every release renders in its bgp_template
// (bird.cfg.template @ 3cdeae8f7ace, de60d98e97a7, 6609dea54713): no hold
// or keepalive time unless a BGPPeer sets keepaliveTime, and `add paths
// on`, `gateway recursive`, `graceful restart`.
const (
	ConnectDelayTime = 2
	ConnectRetryTime = 5
	ErrorWaitMin     = 5
	ErrorWaitMax     = 30
	KernelScanTime   = 2
)
