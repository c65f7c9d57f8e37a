// Package confd is birdcage's confd equivalent: it renders one node's BIRD
// configuration from the cluster datastore, the way Calico's confd renders
// bird.cfg and bird_ipam.cfg from its templates, and it renders the plain
// eBGP configuration of a router (a ToR) that is not a cluster node.
//
// Who programs a pool's cluster routes comes only from
// BGPConfiguration.programClusterRoutes resolved through internal/calico/config
// (config.Resolve with config.BIRD), so the renderer and the route
// programmer share one enum, one default table and one unknown-value rule.
// Both address families are rendered into one BIRD 2 instance from that one
// policy, keyed on each pool's ipipMode, never on its IP version.
//
// Per BIRD release (Options.BIRD): 2.x and 3.x get one config with a
// channel per family (bird.conf.tmpl), 1.x two configs for two daemons,
// bird and bird6 (bird16.conf.tmpl), as Calico's node software runs them.
// Where a release cannot express the policy (BIRD-programmed IPIP tunnel
// routes need a filter-settable onlink: not in 1.6, not in 3.1) the render
// is refused with ErrNotExpressible naming the release and why.
//
// Per Calico release (config.Release: 3.31, 3.32, 3.33) it renders what
// that release's confd renders: mesh sessions passive toward peers whose
// address is a greater string, Calico's session timers and add paths,
// BGPPeers multihop with ttl security off and recursive gateways, BGP
// routes at kernel metric 1024 from 3.32 (carried between nodes in
// bgp_local_pref), the tunl0 arm of the iBGP export reject in 3.33 only.
// Options.Knobs depart from the release one emulation choice at a time;
// every departure is listed in Rendered.Departures and in the config's
// header. docs/conformance.md tables each fact against Calico's code.
//
// It writes text only: running BIRD is dataplane/bird's job, and it must not
// know about namespaces, containers or scenarios.
package confd
